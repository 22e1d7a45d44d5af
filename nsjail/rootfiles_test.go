package nsjail

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// In the host-derived root, RootFiles go on a tmpfs of their own over a
// /run made for it, sized for them (they may be large: long code, see
// Options), made read-only after; without them, no /run appears at all.
func TestPlanRootFilesHostRoot(t *testing.T) {
	s := testSpec()
	s.RootFiles = []File{{Path: RootFilesDir + "/sitecustomize.py", Data: []byte("x = 1\n"), Mode: 0o444}}
	p, err := mountPlan(s, hostIDs())
	if err != nil {
		t.Fatal(err)
	}
	steps := decode(t, p.buf.Bytes())
	order := [][]string{
		{"mkdir", newRoot + "/run"},
		{"remount_ro", newRoot},
		{"mount", "tmpfs", newRoot + "/run", "tmpfs"},
		{"mkdir", newRoot + RootFilesDir},
		{"file", newRoot + RootFilesDir + "/sitecustomize.py", "292", "x = 1\n"},
		{"remount_ro", newRoot + "/run"},
	}
	last := -1
	for _, want := range order {
		i := index(steps, want...)
		if i <= last {
			t.Fatalf("step %v at %d, after %d:\n%v", want, i, last, steps)
		}
		last = i
	}
	p, _ = mountPlan(testSpec(), hostIDs())
	if strings.Contains(p.buf.String(), "/run") {
		t.Fatal("a plan without root files mentions /run")
	}
}

// In a prepared root (bound read-only) they go on a tmpfs over its /run,
// made read-only after.
func TestPlanRootFilesPreparedRoot(t *testing.T) {
	s := testSpec()
	s.RootDir = "/srv/root"
	s.RootFiles = []File{{Path: RootFilesDir + "/a/b.py", Data: []byte("b"), Mode: 0o444}}
	p, err := mountPlan(s, hostIDs())
	if err != nil {
		t.Fatal(err)
	}
	steps := decode(t, p.buf.Bytes())
	order := [][]string{
		{"bind", oldRoot + "/srv/root", newRoot},
		{"mount", "tmpfs", newRoot + "/run", "tmpfs"},
		{"mkdir", newRoot + RootFilesDir + "/a"},
		{"file", newRoot + RootFilesDir + "/a/b.py"},
		{"remount_ro", newRoot + "/run"},
	}
	last := -1
	for _, want := range order {
		i := index(steps, want...)
		if i <= last {
			t.Fatalf("step %v at %d, after %d:\n%v", want, i, last, steps)
		}
		last = i
	}
}

func TestValidateRootFiles(t *testing.T) {
	s := testSpec()
	s.RootFiles = []File{{Path: "/tmp/x.py"}}
	if err := s.validateRootFiles(); err == nil {
		t.Fatal("a root file outside " + RootFilesDir + " was accepted")
	}
	s.RootFiles = []File{{Path: RootFilesDir + "/../etc/passwd"}}
	if err := s.validateRootFiles(); err == nil {
		t.Fatal("an unclean root file path was accepted")
	}
	// A working directory's tmpfs must not hide them.
	s.RootFiles = []File{{Path: RootFilesDir + "/x.py"}}
	for _, w := range []string{"/run", RootFilesDir, RootFilesDir + "/sub"} {
		s.Workdir = w
		if err := s.validateRootFiles(); err == nil {
			t.Errorf("working directory %s accepted", w)
		}
	}
	s.Workdir = "/tmp"
	// A prepared root needs a real /run directory to mount on.
	root := t.TempDir()
	s.RootDir = root
	s.RootFiles = []File{{Path: RootFilesDir + "/x.py"}}
	if err := s.validateRootFiles(); err == nil || !strings.Contains(err.Error(), "/run") {
		t.Fatalf("no /run: %v", err)
	}
	os.Symlink("/etc", filepath.Join(root, "run"))
	if err := s.validateRootFiles(); err == nil {
		t.Fatal("a /run symlink was accepted")
	}
	os.Remove(filepath.Join(root, "run"))
	os.Mkdir(filepath.Join(root, "run"), 0o755)
	if err := s.validateRootFiles(); err != nil {
		t.Fatal(err)
	}
}
