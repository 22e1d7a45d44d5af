package nsjail

// A zygote's template key: what runs forked from one template share, and
// the checks that a fork can run a spec as a cold run would.

import (
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/microbox/microbox/field"
)

// A ZygoteKey is what runs forked from one template share: the jail's
// shape (mounts, cgroup limits, root), the preloads, the interpreter and
// its options, and everything a child applies before its run is known
// (filter, rlimits).
type ZygoteKey struct {
	shape   Shape
	preload string
	argv0   string // the interpreter and its options, NUL-separated
	seccomp string
	rlimits Rlimits
	mode    string
}

// ZygoteKeyOf is the key of the template that runs s, whose program is
// python -c CODE or python FILE, with the preloads s.Zygote names; it
// refuses what a fork cannot give (zygoteCheck).
func ZygoteKeyOf(s *Spec) (ZygoteKey, error) {
	if err := zygoteCheck(s); err != nil {
		return ZygoteKey{}, err
	}
	sh, err := ShapeOf(withoutCodeFile(s))
	if err != nil {
		return ZygoteKey{}, err
	}
	a, _ := parseZygoteArgv(s)
	var preload []string
	if s.Zygote != nil {
		preload = s.Zygote.Preload
	}
	return ZygoteKey{shape: sh, preload: strings.Join(preload, ","), argv0: strings.Join(a.argv0, "\x00"),
		seccomp: string(s.Seccomp), rlimits: s.Rlimits.withDefaults(), mode: s.SeccompMode}, nil
}

// withoutCodeFile is s without the root file long code travels in
// (Options.longCode): the code is the run's, however long, and not the
// template's shape.
func withoutCodeFile(s *Spec) *Spec {
	c := *s
	c.RootFiles = slices.DeleteFunc(slices.Clone(s.RootFiles), func(f File) bool { return f.Path == CodeFile })
	return &c
}

// Equal reports whether runs of keys a and b fork from the same template.
func (a ZygoteKey) Equal(b ZygoteKey) bool {
	return a.shape.Equal(b.shape) && a.preload == b.preload && a.argv0 == b.argv0 &&
		a.seccomp == b.seccomp && a.rlimits == b.rlimits && a.mode == b.mode
}

// Preload is the key's preloaded modules.
func (a ZygoteKey) Preload() []string {
	if a.preload == "" {
		return nil
	}
	return strings.Split(a.preload, ",")
}

// zygoteFlags are the interpreter's options a template can start with
// for its runs: each only chooses how the interpreter sets itself up.
var zygoteFlags = map[string]bool{"-I": true, "-S": true, "-s": true, "-E": true, "-B": true, "-P": true, "-u": true}

// zygoteArgv is a run's command line as a zygote takes it.
type zygoteArgv struct {
	argv0 []string // the interpreter and its options: the template's
	code  *string  // -c CODE
	file  string   // or FILE
	argv  []string // sys.argv
}

// parseZygoteArgv splits s's command line: the interpreter and its
// options, then -c CODE or FILE, then the program's arguments. Code too
// long for the command line (Options.longCode) is the file's own.
func parseZygoteArgv(s *Spec) (zygoteArgv, error) {
	i := 1
	for i < len(s.Argv) && zygoteFlags[s.Argv[i]] {
		i++
	}
	a := zygoteArgv{argv0: s.Argv[:i]}
	switch {
	case i == len(s.Argv):
		return a, errors.New("a zygote run needs python -c CODE or python FILE")
	case s.Argv[i] == "-c" && i+1 < len(s.Argv):
		code := s.Argv[i+1]
		for _, f := range s.RootFiles {
			if f.Path == CodeFile {
				code = string(f.Data)
			}
		}
		a.code, a.argv = &code, append([]string{"-c"}, s.Argv[i+2:]...)
	case strings.HasPrefix(s.Argv[i], "-"):
		return a, fmt.Errorf("a zygote's template cannot start with the interpreter's option %s; it takes %s", s.Argv[i], strings.Join(slices.Sorted(maps.Keys(zygoteFlags)), " "))
	default:
		a.file, a.argv = s.Argv[i], s.Argv[i:]
	}
	return a, nil
}

// zygoteCheck refuses a spec a fork of a template cannot run as a cold run
// would: the interpreter's options and the variables it reads at its
// start were the template's, and the policy layers' files are read at
// that start too.
func zygoteCheck(s *Spec) error {
	if err := s.Validate(); err != nil {
		return err
	}
	return forkCheck(s)
}

// forkCheck is zygoteCheck of a spec already validated.
func forkCheck(s *Spec) error {
	if _, err := parseZygoteArgv(s); err != nil {
		return err
	}
	for _, f := range s.RootFiles {
		if f.Path != CodeFile {
			return errors.New("a zygote run cannot have the policy layers' files: its interpreter started before them")
		}
	}
	if err := startEnvCheck(s); err != nil {
		return err
	}
	if s.Zygote != nil {
		for _, m := range s.Zygote.Preload {
			if !moduleName.MatchString(m) {
				return field.Errorf("Preload", "{Preload}: %q is not a module name", m)
			}
		}
	}
	return nil
}

// startEnvCheck refuses a variable of s's environment, other than the
// base environment's (the template's), that is read only at the
// interpreter's start: by the dynamic loader and libc (LD_*, GLIBC_*,
// MALLOC_*), by Python for itself (PYTHON*), its locale (LANG, LC_ALL,
// LC_CTYPE: the encodings), and its user site (HOME, unless -s or -I
// turn it off). A fork's interpreter has started with the template's.
// (TZ and TMPDIR are read later, and zygote.py renews what they set.)
func startEnvCheck(s *Spec) error {
	base, _ := BaseEnv(nil)
	a, _ := parseZygoteArgv(s)
	userSite := !slices.Contains(a.argv0, "-s") && !slices.Contains(a.argv0, "-I")
	for _, e := range s.Env {
		k, _, _ := strings.Cut(e, "=")
		if contains(base, e) {
			continue
		}
		fix := "leave it out"
		switch {
		case k == "HOME" && userSite:
			fix += ", or pass the interpreter's -s"
		case strings.HasPrefix(k, "PYTHON"), strings.HasPrefix(k, "LD_"), strings.HasPrefix(k, "GLIBC_"), strings.HasPrefix(k, "MALLOC_"),
			k == "LANG", k == "LC_ALL", k == "LC_CTYPE":
		default:
			continue
		}
		return fmt.Errorf("environment variable %s cannot take effect in a zygote run: it is read at the interpreter's start, and a fork's interpreter started before it (%s)", k, fix)
	}
	return nil
}

// moduleName is a dotted Python module name.
var moduleName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$`)

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
