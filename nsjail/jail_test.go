package nsjail

// Jails started ahead of their runs (Start), run in this test binary: it
// links init.c, so /proc/self/exe is a working outer init.

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/microbox/microbox/cgroup"
)

func needNamespaces(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root for the jail's cgroup and id maps (CI runs as root)")
	}
}

// A started jail runs exactly one spec with its cgroup limits: the program
// runs, its stdin comes through, a second run and a spec with other limits
// are refused.
func TestJailStartedAhead(t *testing.T) {
	needNamespaces(t)
	opts := &cgroup.Options{Limits: cgroup.Limits{Memory: 128 << 20, Pids: 64}}
	j, err := Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	// Waiting must not count: the program's time limit (1s) starts at Run.
	time.Sleep(1500 * time.Millisecond)
	s := testSpec()
	s.Cgroup = &cgroup.Options{Limits: opts.Limits}
	s.Argv = []string{"/usr/bin/python3", "-c", "import sys; print(sys.stdin.read().upper())"}
	s.Stdin = strings.NewReader("through the pipe")
	s.Capture = true
	r := j.Run(context.Background(), s)
	if r.Status != StatusOK || r.Stdout != "THROUGH THE PIPE\n" {
		t.Fatalf("status %s stdout %q error %v", r.Status, r.Stdout, r.Error)
	}
	if r.Cgroup == "none" || r.PeakMemoryBytes == nil {
		t.Fatalf("ran outside its cgroup: %q", r.Cgroup)
	}
	if r := j.Run(context.Background(), s); r.Status != StatusSandboxError {
		t.Fatalf("a second run in one jail: %s", r.Status)
	}

	other, err := Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	s2 := testSpec()
	s2.Cgroup = &cgroup.Options{Limits: cgroup.Limits{Memory: 256 << 20, Pids: 64}}
	if other.Fits(s2) {
		t.Fatal("a jail fits a spec with other limits")
	}
	if r := other.Run(context.Background(), s2); r.Status != StatusSandboxError {
		t.Fatalf("a spec with other limits ran: %s", r.Status)
	}
}

// A jail that runs nothing is ended by Close: its processes and cgroup go.
func TestJailClose(t *testing.T) {
	needNamespaces(t)
	j, err := Start(&cgroup.Options{Limits: cgroup.Limits{Pids: 16}})
	if err != nil {
		t.Fatal(err)
	}
	init := j.sv.cmd.Process.Pid
	j.Close()
	if j.sv != nil {
		t.Fatal("Close kept the jail")
	}
	if _, err := os.Stat("/proc/" + itoa(init)); err == nil {
		t.Fatalf("outer init %d still exists", init)
	}
	if s := testSpec(); j.Run(context.Background(), s).Status != StatusSandboxError {
		t.Fatal("a closed jail ran")
	}
}

// Without stdin the program reads the jail's /dev/null.
func TestRunStdinNull(t *testing.T) {
	needNamespaces(t)
	s := testSpec()
	s.Argv = []string{"/usr/bin/python3", "-c", "import os, stat; st = os.fstat(0); print(stat.S_ISCHR(st.st_mode), os.read(0, 10))"}
	s.Capture = true
	r := Run(context.Background(), s)
	if r.Status != StatusOK || r.Stdout != "True b''\n" {
		t.Fatalf("status %s stdout %q error %v", r.Status, r.Stdout, r.Error)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// A jail whose init died while it waited is no longer Alive, so that the
// server's pool starts that run cold instead of failing it.
func TestJailAlive(t *testing.T) {
	needNamespaces(t)
	j, err := Start(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	if !j.Alive() {
		t.Fatal("a jail just started is not alive")
	}
	j.sv.cmd.Process.Kill()
	deadline := time.Now().Add(5 * time.Second)
	for j.Alive() {
		if time.Now().After(deadline) {
			t.Fatal("a jail whose init was killed still counts as alive")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
