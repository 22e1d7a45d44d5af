package cgroup

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

func TestReadKey(t *testing.T) {
	f := filepath.Join(t.TempDir(), "memory.events")
	os.WriteFile(f, []byte("low 0\nhigh 2\noom_kill 3\n"), 0o644)
	if v, err := readKey(f, "oom_kill"); err != nil || v != 3 {
		t.Fatalf("oom_kill = %d, %v", v, err)
	}
	if _, err := readKey(f, "oom_group_kill"); err == nil {
		t.Fatal("a missing key must be an error, not 0")
	}
}

// GC removes only run groups whose microbox is gone, and nothing else.
func TestStaleRuns(t *testing.T) {
	dir := t.TempDir()
	dead := runPrefix + "999999999-1-00000000" // no such pid
	live := runPrefix + strconv.Itoa(os.Getpid()) + "-1-00000000"
	for _, d := range []string{dead, live, "microbox-supervisor", "someone-else"} {
		os.Mkdir(filepath.Join(dir, d), 0o755)
	}
	stale := staleRuns(dir)
	if len(stale) != 1 || filepath.Base(stale[0]) != dead {
		t.Fatalf("stale = %v, want only %s", stale, dead)
	}
}

func TestV1Resources(t *testing.T) {
	r := v1Resources(Limits{Memory: 256 << 20, CPUs: 0.5, Pids: 64})
	if *r.Memory.Limit != 256<<20 || *r.Memory.Swap != 256<<20 {
		t.Fatalf("memory %d memsw %d: memsw must equal the limit (no swap)", *r.Memory.Limit, *r.Memory.Swap)
	}
	if *r.CPU.Quota != 50000 || *r.CPU.Period != 100000 || *r.Pids.Limit != 64 {
		t.Fatalf("cpu %d/%d pids %d", *r.CPU.Quota, *r.CPU.Period, *r.Pids.Limit)
	}
	if r := v1Resources(Limits{}); r.Memory != nil || r.CPU != nil || r.Pids != nil {
		t.Fatal("no limits asked, none set")
	}
}

// A real run group on this host: limits written, a process moved in,
// usage read, the process killed, the group removed.
func TestRunGroupLifecycle(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("creating cgroups here needs root (CI runs as root)")
	}
	if HostMode() == ModeNone {
		t.Skip("this kernel has no cgroup hierarchy microbox can use")
	}
	r, err := New(Options{Limits: Limits{Memory: 64 << 20, CPUs: 1, Pids: 16}})
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sleep", "30")
	if r.CloneFD() >= 0 {
		t.Skip("v2 host: entry is at clone time, covered by the VM suite")
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if err := r.Enter(cmd.Process.Pid); err != nil {
		t.Fatal(err)
	}
	if err := r.Kill(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Kill did not end the group's process")
	}
	if _, err := r.Usage(); err != nil {
		t.Fatalf("usage: %v", err)
	}
	dirs := r.(*v1Run).dirs
	if len(dirs) != len(v1Controllers) {
		t.Fatalf("joined %d hierarchies, want %d", len(dirs), len(v1Controllers))
	}
	if err := r.Remove(); err != nil {
		t.Fatal(err)
	}
	for _, d := range dirs {
		if _, err := os.Stat(d); err == nil {
			t.Fatalf("%s left behind", d)
		}
	}
}
