package guard

// The guard's bytecode cache. Compiling the guard at start-up costs about
// 3 ms of CPU per run; loading its .pyc, a tenth of a millisecond. The
// sandbox's own Python compiles it once, in a helper run, and the result
// is kept in the caller's cache directory, trusted only while nobody else
// can write there: the bytecode runs in every guarded program.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"

	securejoin "github.com/cyphar/filepath-securejoin"

	"github.com/microbox/microbox/internal/policy/helper"
	"github.com/microbox/microbox/nsjail"
	"github.com/microbox/microbox/result"
)

// compileScript is run by the sandbox's Python (-I -S -c) with the
// guard's source on stdin. It prints the interpreter's cache tag and, in
// hex (the captured output is text), the guard compiled to an unchecked
// hash-based .pyc (PEP 552): Python loads that without reading the source
// again, and falls back to the source if its magic number is wrong.
var compileScript = `import sys, marshal
from importlib.util import MAGIC_NUMBER, source_hash
src = sys.stdin.buffer.read()
code = compile(src, "` + nsjail.RootFilesDir + "/" + moduleName + `.py", "exec", dont_inherit=True)
print(sys.implementation.cache_tag or "")
print((MAGIC_NUMBER + (1).to_bytes(4, "little") + source_hash(src) + marshal.dumps(code)).hex())
`

// bytecode returns the interpreter's cache tag and the guard's .pyc
// for the spec's Python: from the cache, or compiled now in a sandbox of
// its own and cached. It returns nil when there is nowhere safe to cache (then compiling in the sandbox each
// time would cost more than it saves) or compilation fails: the run then
// compiles the source.
func bytecode(ctx context.Context, base nsjail.Options, s *nsjail.Spec, cacheDir string) (string, []byte) {
	path, ok := cachePath(s, cacheDir)
	if !ok {
		return "", nil
	}
	if tag, pyc, ok := readCache(path); ok {
		return tag, pyc
	}
	if err := privateDir(filepath.Dir(path)); err != nil {
		return "", nil // compiled now, it could not be kept for next time
	}
	tag, pyc, err := compileModule(ctx, base)
	if err != nil {
		return "", nil
	}
	writeCache(path, tag, pyc) // best effort: the next run tries again
	return tag, pyc
}

// cachePath names the cached bytecode for the spec's interpreter:
// the key covers the guard's source and the interpreter binary itself
// (root, path, device, inode, size, mtime), so an upgraded Python or guard
// gets a fresh compilation.
func cachePath(s *nsjail.Spec, dir string) (string, bool) {
	if dir == "" || len(s.Argv) == 0 {
		return "", false
	}
	var bin string
	var err error
	if s.RootDir == "" {
		bin, err = filepath.EvalSymlinks(s.Argv[0])
	} else {
		bin, err = securejoin.SecureJoin(s.RootDir, s.Argv[0])
	}
	if err != nil {
		return "", false
	}
	fi, err := os.Stat(bin)
	if err != nil {
		return "", false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return "", false
	}
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00%s\x00%s\x00%d %d %d %d", module, compileScript, s.RootDir, s.Argv[0],
		st.Dev, st.Ino, st.Size, fi.ModTime().UnixNano())
	return filepath.Join(dir, "microbox", fmt.Sprintf("guard-%x.pyc", h.Sum(nil)[:12])), true
}

var cacheTag = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9_.-]+$`) })

// readCache reads a cache entry (the tag line, then the .pyc),
// trusting only a regular file and directory of our own that nobody else
// can write: the bytecode runs in every guarded program.
func readCache(path string) (string, []byte, bool) {
	if !ownedPrivately(filepath.Dir(path)) || !ownedPrivately(path) {
		return "", nil, false
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return "", nil, false
	}
	tag, pyc, ok := bytes.Cut(data, []byte("\n"))
	if !ok || !cacheTag().Match(tag) || len(pyc) <= 16 {
		return "", nil, false
	}
	return string(tag), pyc, true
}

// ownedPrivately reports whether path (not followed if a symlink) belongs
// to the effective user and is writable by no one else.
func ownedPrivately(path string) bool {
	fi, err := os.Lstat(path)
	if err != nil || fi.Mode()&os.ModeSymlink != 0 || fi.Mode().Perm()&0o022 != 0 {
		return false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && int(st.Uid) == os.Geteuid()
}

// writeCache stores an entry atomically (a whole file or none, also
// when runs race to fill it).
func writeCache(path, tag string, pyc []byte) error {
	dir := filepath.Dir(path)
	if err := privateDir(dir); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, ".guard-*") // mode 0600
	if err != nil {
		return err
	}
	defer os.Remove(f.Name()) // after a successful rename, a no-op
	_, err = f.Write(append([]byte(tag+"\n"), pyc...))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}

// privateDir makes sure dir exists, is ours and is writable by no one
// else.
func privateDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if !ownedPrivately(dir) {
		return fmt.Errorf("cache directory %s is not private", dir)
	}
	return nil
}

// compileModule has the Python of base's runs compile the guard in a
// sandbox.
func compileModule(ctx context.Context, base nsjail.Options) (string, []byte, error) {
	res, err := helper.Run(ctx, base, []byte(module), compileScript)
	if err != nil {
		return "", nil, err
	}
	if res.Status != result.StatusOK {
		return "", nil, fmt.Errorf("compile the module policy: %s", res.Status)
	}
	tag, hexPyc, _ := strings.Cut(strings.TrimSpace(res.Stdout), "\n")
	pyc, err := hex.DecodeString(strings.TrimSpace(hexPyc))
	if err != nil || !cacheTag().MatchString(tag) || len(pyc) <= 16 {
		return "", nil, fmt.Errorf("compile the module policy: unexpected output")
	}
	return tag, pyc, nil
}
