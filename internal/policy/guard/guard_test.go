package guard

// Unit tests of the Go side; the hook's behaviour in a sandbox is tested
// through the real binary (cmd/microbox/guard_test.go).

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/microbox/microbox/nsjail"
)

func TestGuardConfig(t *testing.T) {
	g := &Options{DenyModules: []string{"socket", "os", "os", " "}, AllowModules: []string{"math"}}
	cfg, err := g.config("/work")
	if err != nil {
		t.Fatal(err)
	}
	// C implementations follow their module; duplicates and blanks go.
	if want := []string{"_socket", "os", "posix", "socket"}; !slices.Equal(cfg.Deny, want) {
		t.Fatalf("deny %v, want %v", cfg.Deny, want)
	}
	if want := []string{"/tmp", "/dev/shm", "/work"}; !slices.Equal(cfg.Writable, want) {
		t.Fatalf("writable %v, want %v", cfg.Writable, want)
	}
	for _, bad := range []Options{
		{DenyModules: []string{"os;rm"}},
		{AllowModules: []string{"1abc"}},
		{DenyModules: []string{"a..b"}},
		{Guard: "docker"},
	} {
		if _, err := bad.config("/tmp"); err == nil {
			t.Errorf("%+v: accepted", bad)
		}
	}
}

// The configuration line is a Python literal even for awkward paths.
func TestGuardConfigIsPythonLiteral(t *testing.T) {
	cfg := &config{Allow: []string{}, Deny: []string{"os"}, Writable: []string{"/tmp", `/a"b\c<d>`}}
	line, _, _ := strings.Cut(string(cfg.sitecustomize()), "\n")
	if !strings.HasPrefix(line, "_MICROBOX = {") {
		t.Fatalf("first line %q", line)
	}
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("no python3 on the host to parse the literal with")
	}
	out, err := exec.Command("python3", "-I", "-c", line+"\nimport json; print(json.dumps(_MICROBOX))").Output()
	if err != nil {
		t.Fatalf("python3 cannot read %q: %v", line, err)
	}
	var back config
	if err := json.Unmarshal(out, &back); err != nil || back.Writable[1] != `/a"b\c<d>` {
		t.Fatalf("round trip: %s (%v)", out, err)
	}
}

// Without a policy the spec is untouched: no file, no mount, no variable.
func TestGuardOffCostsNothing(t *testing.T) {
	s := &nsjail.Spec{Argv: []string{"/usr/bin/python3"}, Env: []string{"PATH=/usr/bin"}, Workdir: "/tmp"}
	if err := (&Options{}).Apply(t.Context(), nsjail.Defaults(), s, t.TempDir()); err != nil {
		t.Fatal(err)
	}
	if len(s.RootFiles) != 0 || len(s.Env) != 1 {
		t.Fatalf("files %v env %v", s.RootFiles, s.Env)
	}
}

// The hook's directory goes first on PYTHONPATH, the caller's after it.
func TestGuardPythonPath(t *testing.T) {
	// A cache directory that cannot be created (its parent is a file): no
	// cache, so no compiling run, and nothing written outside the test.
	notDir := filepath.Join(t.TempDir(), "file")
	os.WriteFile(notDir, nil, 0o600)
	s := &nsjail.Spec{Argv: []string{"/usr/bin/python3"}, Env: []string{"PYTHONPATH=/work/lib"}, Workdir: "/tmp"}
	if err := (&Options{DenyModules: []string{"os"}}).Apply(t.Context(), nsjail.Defaults(), s, filepath.Join(notDir, "cache")); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(s.Env, "PYTHONPATH="+nsjail.RootFilesDir+":/work/lib") {
		t.Fatalf("env %v", s.Env)
	}
	var names []string
	for _, f := range s.RootFiles {
		names = append(names, f.Path)
		if f.Mode != 0o444 {
			t.Errorf("%s mode %v", f.Path, f.Mode)
		}
	}
	if want := []string{nsjail.RootFilesDir + "/sitecustomize.py", nsjail.RootFilesDir + "/_microbox_guard.py"}; !slices.Equal(names, want) {
		t.Fatalf("root files %v, want %v", names, want)
	}
}

// A hook that cannot install itself stops the interpreter before the
// program runs, rather than letting it run without its policy. (Run with
// the host's python3: this tests microbox's own Python, not a program.)
func TestGuardFailsClosed(t *testing.T) {
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3 on the host")
	}
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "sitecustomize.py"), []byte("_MICROBOX = {}\n"+bootstrap), 0o444)
	os.WriteFile(filepath.Join(dir, moduleName+".py"), []byte(module), 0o444)
	cmd := exec.Command(python, "-c", "print('the program ran')")
	cmd.Env = []string{"PYTHONPATH=" + dir, "PYTHONDONTWRITEBYTECODE=1"}
	out, err := cmd.CombinedOutput()
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != 125 || strings.Contains(string(out), "the program ran") ||
		!strings.Contains(string(out), "microbox: the module policy could not be installed") {
		t.Fatalf("exit %v: %s", err, out)
	}
}

// A cache entry is trusted only while nobody else can write to it or to
// its directory.
func TestCacheTrust(t *testing.T) {
	path := filepath.Join(t.TempDir(), "microbox", "guard-test.pyc")
	pyc := make([]byte, 32)
	if err := writeCache(path, "cpython-311", pyc); err != nil {
		t.Fatal(err)
	}
	fi, _ := os.Stat(path)
	di, _ := os.Stat(filepath.Dir(path))
	if fi.Mode().Perm() != 0o600 || di.Mode().Perm() != 0o700 {
		t.Fatalf("cache modes %v %v, want private", fi.Mode(), di.Mode())
	}
	if tag, got, ok := readCache(path); !ok || tag != "cpython-311" || len(got) != len(pyc) {
		t.Fatalf("read back %q %d bytes %v", tag, len(got), ok)
	}
	os.Chmod(filepath.Dir(path), 0o777)
	if _, _, ok := readCache(path); ok {
		t.Fatal("a world-writable cache directory was trusted")
	}
	os.Chmod(filepath.Dir(path), 0o700)
	os.Chmod(path, 0o622)
	if _, _, ok := readCache(path); ok {
		t.Fatal("a group-writable cache file was trusted")
	}
}
