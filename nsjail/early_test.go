package nsjail

import (
	"context"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/microbox/microbox/cgroup"
	"github.com/microbox/microbox/result"
)

// askEarly has sp's spawner clone a PID 1 before any run asks for one, as
// SpawnEarly does for a one-shot exec's prestarted spawner.
func askEarly(t *testing.T, sp *Spawner) {
	t.Helper()
	sp.mu.Lock()
	e, err := sp.askEarlyLocked()
	sp.early = e
	sp.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
}

// The first run of a spawner asked early takes the PID 1 it cloned: the
// trace starts with the request, and the run has every layer (its
// cgroup, on v1, joined through its go).
func TestEarlyJailIsAdopted(t *testing.T) {
	needNamespaces(t)
	specs := map[string]*Spec{"no cgroup": testSpec()}
	if cgroup.HostMode() == cgroup.ModeV1 { // on v2 PID 1 is cloned into its group: none early
		specs["cgroup v1"] = specWith(cgroup.Limits{Memory: 128 << 20, Pids: 32})
	}
	for name, s := range specs {
		sp := testSpawner(t)
		askEarly(t, sp)
		s.Trace, s.Capture = true, true
		r := Settle(sp.RunEarly(context.Background(), s))
		if r.Status != result.StatusOK {
			t.Fatalf("%s: status %s, error %v", name, r.Status, r.Error)
		}
		var phases []string
		for _, p := range r.Trace {
			phases = append(phases, p.Name)
		}
		if !slices.Contains(phases, "spawn-asked") || slices.Contains(phases, "pipes") {
			t.Errorf("%s: phases %v; want the early PID 1's (spawn-asked), no pipes of the run's own", name, phases)
		}
		if s.Cgroup != nil && (r.Cgroup != "v1" || r.PeakMemoryBytes == nil || r.CPUTimeMs == nil || *r.CPUTimeMs <= 0) {
			t.Errorf("%s: cgroup %q, peak %v, CPU %v: the run was not in its group", name, r.Cgroup, r.PeakMemoryBytes, r.CPUTimeMs)
		}
	}
}

// A first run the early PID 1 does not fit (a held run: its fd 0 is a
// socket) ends it, reaped, and runs in a PID 1 of its own.
func TestEarlyJailNotFittingEnds(t *testing.T) {
	needNamespaces(t)
	sp := testSpawner(t)
	askEarly(t, sp)
	s := testSpec()
	s.Control = true
	s.Argv = []string{"/usr/bin/python3", "-c", "import os; os.write(0, b'hi')"}
	h, err := sp.StartHeld(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 2)
	if _, err := h.Control.Read(buf); err != nil || string(buf) != "hi" {
		t.Errorf("read %q, %v from the held run's program", buf, err)
	}
	if r := h.Wait(); r.Status != result.StatusOK {
		t.Fatalf("status %s, error %v", r.Status, r.Error)
	}
	if left := slices.DeleteFunc(children(t), func(pid int) bool { return pid == sp.pid }); len(left) > 0 {
		t.Errorf("processes %v of ours besides the spawner: the early PID 1 was not ended", left)
	}
}

// children are this process's child processes.
func children(t *testing.T) []int {
	t.Helper()
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, task := range tasks {
		b, _ := os.ReadFile("/proc/self/task/" + task.Name() + "/children")
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}
