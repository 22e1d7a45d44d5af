package rootfs

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	securejoin "github.com/cyphar/filepath-securejoin"
	"github.com/microbox/microbox/field"
	"github.com/microbox/microbox/internal/lang"
)

// CheckLanguage verifies that the root (dir "" is the host-derived one)
// holds the executables a language's runs need (its compiler, its
// interpreter, and for a compiled one the shell and cat its compile step
// hands the binary out with), as CheckPython does for Python: a run in a
// root without them would end in a confusing exec failure, so it is
// refused first with the fix.
func CheckLanguage(dir string, l *lang.Language) error {
	if dir != "" {
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			return fmt.Errorf("rootfs %s is not a directory; build one with `microbox rootfs build --lang %s %s`", dir, l.Name, dir)
		}
		for _, d := range RequiredDirs {
			if err := CheckMountPoint(dir, d); err != nil {
				return err
			}
		}
	}
	for _, tool := range LanguageTools(l) {
		if err := checkTool(dir, tool); err != nil {
			return languageMissing(dir, l, tool, err)
		}
	}
	return nil
}

// LanguageTools are the executables a language's runs start in the
// sandbox.
func LanguageTools(l *lang.Language) []string {
	tools := l.Tools()
	if l.Compiled() {
		tools = append(tools, lang.CompileShell, lang.CompileCat)
	}
	return tools
}

// checkTool checks that tool is an executable inside the root; in the
// host-derived root, which holds only /usr and its merged directories,
// it must resolve under /usr.
func checkTool(dir, tool string) error {
	if dir != "" {
		resolved, err := securejoin.SecureJoin(dir, tool)
		if err != nil {
			return err
		}
		return isExecutable(resolved)
	}
	resolved, err := filepath.EvalSymlinks(tool)
	if err != nil {
		return err
	}
	if !strings.HasPrefix(resolved, "/usr/") {
		return fmt.Errorf("it resolves to %s, outside /usr, which is all the default root holds", resolved)
	}
	return isExecutable(resolved)
}

// languageMissing is the one-line error for a root without a language's
// tool, with the fix for that kind of root.
func languageMissing(dir string, l *lang.Language, tool string, err error) error {
	if dir == "" {
		return field.Errorf("Language", "{Language} %s needs %s, which the host's /usr lacks (%v): install %s (apt-get install %s) or give a {RootFS} built with --lang %s",
			l.Name, tool, err, strings.Join(l.Packages, " "), strings.Join(l.Packages, " "), l.Name)
	}
	return field.Errorf("Language", "{Language} %s needs %s, which rootfs %s lacks (%v): rebuild it with `microbox rootfs build --lang %s`",
		l.Name, tool, dir, err, l.Name)
}
