package nsjail

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/microbox/microbox/field"
	"github.com/microbox/microbox/rootfs"
)

// reachableTempDir is a temporary directory the jail may bind: not
// writable by others, nor is its parent.
func reachableTempDir(t *testing.T) string {
	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	os.Chmod(filepath.Dir(dir), 0o755)
	return dir
}

// The default chain of the root: RootFS, else $MICROBOX_ROOTFS, else the
// system root if it exists, else the host-derived root.
func TestRootDirChain(t *testing.T) {
	good := reachableTempDir(t)
	for _, d := range []string{"proc", "dev", "tmp", "usr/bin"} {
		os.MkdirAll(filepath.Join(good, d), 0o755)
	}
	os.WriteFile(filepath.Join(good, "usr/bin/python3"), []byte("#!x"), 0o755)
	old := systemRoot
	defer func() { systemRoot = old }()
	systemRoot = filepath.Join(t.TempDir(), "none")
	env := map[string]string{}
	check := func(rootFS, want string) {
		t.Helper()
		o := Defaults()
		o.RootFS, o.Getenv = rootFS, func(k string) string { return env[k] }
		if err := o.Prepare(); err != nil || o.RootDir() != want {
			t.Errorf("RootFS %q: root %q, %v; want %q", rootFS, o.RootDir(), err, want)
		}
	}
	check("", "") // nothing configured: the host-derived root
	systemRoot = good
	check("", good) // the system root exists
	other := reachableTempDir(t)
	os.Symlink(good, filepath.Join(other, "r"))
	env[rootfs.EnvRootfs] = filepath.Join(other, "r")
	check("", filepath.Join(other, "r")) // the environment wins over the system root
	check(good, good)                    // RootFS wins over both
	systemRoot = t.TempDir()             // exists, but holds no python
	delete(env, rootfs.EnvRootfs)
	o := Defaults()
	o.Getenv = func(k string) string { return env[k] }
	err := o.Prepare()
	if err == nil || !strings.Contains(err.Error(), "the system root "+systemRoot) || !strings.Contains(field.Message(err, strings.ToLower), "pass rootfs") {
		t.Errorf("a broken system root: %v", err)
	}
}

// Options build exec's runs: argv, the environment, files and limits.
func TestOptionsSpec(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "prog.py"), []byte("print(1)"), 0o644)
	os.WriteFile(filepath.Join(dir, "data.txt"), []byte("42"), 0o644)
	o := Defaults()
	o.Dir, o.File, o.Args = dir, "prog.py", []string{"a"}
	o.HostFiles = []HostFile{{Host: "data.txt"}, {Host: dir + "/data.txt", Path: "/tmp/d/e.txt"}}
	o.Env = []string{"LANG=C", "X=1"}
	o.Files = []File{{Path: "/tmp/mem.txt", Data: []byte("m")}}
	s, err := o.Spec()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(s.Argv, []string{"/usr/bin/python3", "/tmp/prog.py", "a"}) {
		t.Errorf("argv %q", s.Argv)
	}
	var paths []string
	for _, f := range s.Files {
		paths = append(paths, f.Path)
	}
	if !slices.Equal(paths, []string{"/tmp/prog.py", "/tmp/data.txt", "/tmp/d/e.txt", "/tmp/mem.txt"}) {
		t.Errorf("files %q", paths)
	}
	if !slices.Contains(s.Env, "LANG=C") || slices.Contains(s.Env, "LANG=C.UTF-8") || !slices.Contains(s.Env, "X=1") {
		t.Errorf("env %q", s.Env)
	}
	if s.Cgroup == nil || s.Cgroup.Limits.Memory != 256<<20 || s.Cgroup.Limits.Pids != 128 || s.SeccompMode != "default" || len(s.Seccomp) == 0 {
		t.Errorf("cgroup %+v seccomp %q", s.Cgroup, s.SeccompMode)
	}
	code := "print(2)"
	o.File, o.Code, o.PythonFlags = "", &code, []string{"-I"}
	if s, err = o.Spec(); err != nil || !slices.Equal(s.Argv, []string{"/usr/bin/python3", "-I", "-c", "print(2)", "a"}) {
		t.Errorf("code argv %q %v", s.Argv, err)
	}
}

// Bad options are refused with the field at fault.
func TestOptionsErrors(t *testing.T) {
	code := "1"
	cases := []struct {
		change func(*Options)
		field  string
	}{
		{func(o *Options) { o.NoCgroup = true }, "Memory"},
		{func(o *Options) { *o = o.WithoutCgroup(); o.CPUTime = 1 }, "CPUTime"},
		{func(o *Options) { o.CPUs = 0 }, "CPUs"},
		{func(o *Options) { o.Pids = 1 }, "Pids"},
		{func(o *Options) { o.Env = []string{"NOEQ"} }, "Env"},
		{func(o *Options) { o.Seccomp = "bogus" }, "Seccomp"},
		{func(o *Options) { o.TmpfsSize = o.Memory * 2 }, "TmpfsSize"},
		{func(o *Options) { o.Timeout = 0 }, "Timeout"},
		{func(o *Options) { o.File = "x.py" }, "Code"},
		{func(o *Options) { o.Code = nil }, "Code"},
		{func(o *Options) { o.HostFiles = []HostFile{{Host: "/nonexistent"}} }, "HostFiles"},
		{func(o *Options) { o.Python = "python3" }, "Python"},
		// Outside the kernel's range: refused before cgroupfs sees them
		// (1e19 cores overflowed the quota into no limit).
		{func(o *Options) { o.CPUs = 1e19 }, "CPUs"},
		{func(o *Options) { o.CPUs = 1e-300 }, "CPUs"},
		{func(o *Options) { o.CPUs = 0.009 }, "CPUs"},
		{func(o *Options) { o.Pids = 1<<63 - 1 }, "Pids"},
		{func(o *Options) { o.Memory = 1 << 62 }, "Memory"},
		{func(o *Options) { o.Timeout = 1 << 62 }, "Timeout"},
		{func(o *Options) { o.CPUTime = 1 << 62 }, "CPUTime"},
	}
	for _, c := range cases {
		o := Defaults()
		o.Code = &code
		c.change(&o)
		_, err := o.Spec()
		var fe *field.Error
		if !errors.As(err, &fe) || fe.Name != c.field {
			t.Errorf("%s: error %v, want one in field %s", c.field, err, c.field)
		}
	}
}
