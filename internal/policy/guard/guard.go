// Package guard is the module policy (modules a program may or may not
// import) and the human-eval compatibility guard: an import hook installed
// at interpreter start by a read-only sitecustomize (sitecustomize.py)
// placed in the sandbox's root and put first on PYTHONPATH. A run that
// asks for neither gets no file, no mount and no variable.
//
// The hook is a policy layer inside the program's own interpreter, not a
// security boundary: the kernel's namespaces, cgroup and seccomp filter
// hold whatever a program does to it.
package guard

import (
	"context"
	_ "embed"
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/microbox/microbox/field"
	"github.com/microbox/microbox/nsjail"
)

// The hook: a small sitecustomize holding the run's configuration, and
// the module it imports, _microbox_guard, the same for every run.
var (
	//go:embed sitecustomize.py
	bootstrap string
	//go:embed guard.py
	module string
)

// moduleName is the guard's module name in the sandbox.
const moduleName = "_microbox_guard"

// Options are a run's module policy. Errors name these fields.
type Options struct {
	// DenyModules are modules (and their submodules) the program may not
	// import; AllowModules, if any, the only ones it may, which wins.
	DenyModules  []string
	AllowModules []string
	// Guard is a compatibility guard: HumanEval, or "" for none.
	Guard string
}

// HumanEval disables what human-eval's reliability_guard disables.
const HumanEval = "humaneval"

// on reports whether the run needs the hook at all.
func (o *Options) on() bool {
	return len(o.DenyModules) > 0 || len(o.AllowModules) > 0 || o.Guard != ""
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

// policyModules checks the list of module names in the named field
// (empty items, as from a trailing comma, are dropped) and returns it
// sorted, without duplicates.
func policyModules(name string, names []string) ([]string, error) {
	var out []string
	for _, n := range names {
		n = strings.TrimSpace(n)
		if n == "" {
			continue
		}
		if !moduleNameRE().MatchString(n) {
			return nil, field.Errorf(name, "{"+name+"} %q: not a module name (letters, digits, _ and dots, e.g. os.path)", n)
		}
		out = append(out, n)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// config is what the sitecustomize reads: Go's JSON for strings and
// lists of strings is also a Python literal, so no parser (and no import
// of json, which costs milliseconds) is needed at start-up.
type config struct {
	Allow    []string `json:"allow"`
	Deny     []string `json:"deny"`
	Guard    string   `json:"guard"`
	Writable []string `json:"writable"`
}

// config validates the options and builds the hook's configuration for a
// run whose working directory is workdir.
func (o *Options) config(workdir string) (*config, error) {
	allow, err := policyModules("AllowModules", o.AllowModules)
	if err != nil {
		return nil, err
	}
	deny, err := policyModules("DenyModules", o.DenyModules)
	if err != nil {
		return nil, err
	}
	for _, d := range slices.Clone(deny) {
		deny = append(deny, cImplementations[d]...)
	}
	slices.Sort(deny)
	if o.Guard != "" && o.Guard != HumanEval {
		return nil, field.Errorf("Guard", "{Guard} %q: the only guard is "+HumanEval, o.Guard)
	}
	writable := []string{"/tmp", "/dev/shm"}
	if !strings.HasPrefix(workdir+"/", "/tmp/") {
		writable = append(writable, workdir)
	}
	return &config{Allow: emptyIfNil(allow), Deny: emptyIfNil(slices.Compact(deny)), Guard: o.Guard, Writable: writable}, nil
}

func emptyIfNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// sitecustomize is the bootstrap with its configuration on top.
func (cfg *config) sitecustomize() []byte {
	lit, _ := json.Marshal(cfg) // strings only: cannot fail
	return []byte("_MICROBOX = " + string(lit) + "\n" + bootstrap)
}

// Apply places the hook in the root of s, a run built from base, and
// makes Python find it: its directory goes first on PYTHONPATH, before
// any the caller set. Nothing happens without a policy. The guard's
// bytecode comes from the cache (cache.go) when the sandbox's Python has
// compiled it before; the cache is under cacheDir, the caller's user cache
// directory ("" for none).
func (o *Options) Apply(ctx context.Context, base nsjail.Options, s *nsjail.Spec, cacheDir string) error {
	if !o.on() {
		return nil
	}
	cfg, err := o.config(s.Workdir)
	if err != nil {
		return err
	}
	dir := nsjail.RootFilesDir
	s.RootFiles = append(s.RootFiles,
		nsjail.File{Path: dir + "/sitecustomize.py", Data: cfg.sitecustomize(), Mode: 0o444},
		nsjail.File{Path: dir + "/" + moduleName + ".py", Data: []byte(module), Mode: 0o444})
	if tag, pyc := bytecode(ctx, base, s, cacheDir); pyc != nil {
		s.RootFiles = append(s.RootFiles, nsjail.File{
			Path: dir + "/__pycache__/" + moduleName + "." + tag + ".pyc", Data: pyc, Mode: 0o444})
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
