package nsjail

// Jails started ahead of their runs (Spawner.Start), run in this test
// binary: it links nsinit, so /proc/self/exe is a working spawner.

import (
	"context"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/microbox/microbox/cgroup"
	"github.com/microbox/microbox/result"
	"github.com/microbox/microbox/seccomp"
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
	limits := cgroup.Limits{Memory: 128 << 20, Pids: 64}
	j := startFor(t, specWith(limits))
	// Waiting must not count: the program's time limit (1s) starts at Run.
	time.Sleep(1500 * time.Millisecond)
	s := specWith(limits)
	s.Argv = []string{"/usr/bin/python3", "-c", "import sys; print(sys.stdin.read().upper())"}
	s.Stdin = strings.NewReader("through the pipe")
	s.Capture = true
	r := Settle(j.Run(context.Background(), s, shapeOf(t, s)))
	if r.Status != result.StatusOK || r.Stdout != "THROUGH THE PIPE\n" {
		t.Fatalf("status %s stdout %q error %v", r.Status, r.Stdout, r.Error)
	}
	if r.Cgroup == "none" || r.PeakMemoryBytes == nil {
		t.Fatalf("ran outside its cgroup: %q", r.Cgroup)
	}
	if r := Settle(j.Run(context.Background(), s, shapeOf(t, s))); r.Status != result.StatusSandboxError {
		t.Fatalf("a second run in one jail: %s", r.Status)
	}

	other := startFor(t, specWith(limits))
	s2 := specWith(cgroup.Limits{Memory: 256 << 20, Pids: 64})
	if shapeOf(t, s2).Equal(other.shape) {
		t.Fatal("a jail fits a spec with other limits")
	}
	if r := Settle(other.Run(context.Background(), s2, shapeOf(t, s2))); r.Status != result.StatusSandboxError {
		t.Fatalf("a spec with other limits ran: %s", r.Status)
	}
}

// A jail started ahead holds its mounts: it fits only specs that would
// mount the same, and a run in it sees them.
func TestJailMountsAhead(t *testing.T) {
	needNamespaces(t)
	limits := cgroup.Limits{Pids: 64}
	base := specWith(limits)
	base.Workdir = "/work"
	base.Hostname = "ahead"
	j := startFor(t, base)
	defer j.Close()
	for name, change := range map[string]func(*Spec){
		"hostname":   func(s *Spec) { s.Hostname = "other" },
		"workdir":    func(s *Spec) { s.Workdir = "/tmp" },
		"tmpfs size": func(s *Spec) { s.TmpfsSize *= 2 },
		"root files": func(s *Spec) { s.RootFiles = []File{{Path: RootFilesDir + "/x.py", Data: []byte("x"), Mode: 0o444}} },
	} {
		s := specWith(limits)
		s.Workdir, s.Hostname = base.Workdir, base.Hostname
		change(s)
		if shapeOf(t, s).Equal(j.shape) {
			t.Errorf("a jail fits a spec with another %s", name)
		}
	}
	s := specWith(limits)
	s.Workdir, s.Hostname = base.Workdir, base.Hostname
	s.Files = []File{{Path: "/work/in/data.txt", Data: []byte("data"), Mode: 0o644}}
	s.Argv = []string{"/usr/bin/python3", "-c", `import os, socket
st = os.stat("in/data.txt")
print(os.getcwd(), socket.gethostname(), open("in/data.txt").read(), st.st_uid == os.getuid())
open("out", "w").write("scratch is writable")`}
	s.Capture = true
	if !shapeOf(t, s).Equal(j.shape) {
		t.Fatal("a jail does not fit a spec of its own shape")
	}
	if r := Settle(j.Run(context.Background(), testSpec(), shapeOf(t, s))); r.Status != result.StatusSandboxError {
		t.Fatalf("a jail ran a spec with another spec's shape: %s", r.Status)
	}
	j = startFor(t, base)
	defer j.Close()
	r := Settle(j.Run(context.Background(), s, shapeOf(t, s)))
	if r.Status != result.StatusOK || r.Stdout != "/work ahead data True\n" {
		t.Fatalf("status %s stdout %q stderr %q error %v", r.Status, r.Stdout, r.Stderr, r.Error)
	}
}

// A prepared root replaced on disk (same path, another directory) makes
// another shape: jails that bound the old one do not serve it.
func TestShapeFollowsRootDir(t *testing.T) {
	dir := t.TempDir()
	s := testSpec()
	s.RootDir = dir + "/root"
	if err := os.Mkdir(s.RootDir, 0o755); err != nil {
		t.Fatal(err)
	}
	before, err := ShapeOf(s)
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := ShapeOf(s); !again.Equal(before) {
		t.Fatal("one spec, two shapes")
	}
	if err := os.Rename(s.RootDir, dir+"/old"); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(s.RootDir, 0o755); err != nil {
		t.Fatal(err)
	}
	after, err := ShapeOf(s)
	if err != nil {
		t.Fatal(err)
	}
	if after.Equal(before) {
		t.Fatal("a replaced root has the old shape")
	}
}

func specWith(limits cgroup.Limits) *Spec {
	s := testSpec()
	s.Cgroup = &cgroup.Options{Limits: limits}
	return s
}

func shapeOf(t *testing.T, s *Spec) Shape {
	t.Helper()
	sh, err := ShapeOf(s)
	if err != nil {
		t.Fatal(err)
	}
	return sh
}

// testSpawner is a spawner that lasts as long as the test.
func testSpawner(t *testing.T) *Spawner {
	t.Helper()
	sp, err := NewSpawner()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sp.Close() })
	return sp
}

// startFor starts a jail of s's shape.
func startFor(t *testing.T, s *Spec) *Jail {
	t.Helper()
	j, err := testSpawner(t).Start(shapeOf(t, s))
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// A jail that runs nothing is ended by Close: its processes and cgroup go.
func TestJailClose(t *testing.T) {
	needNamespaces(t)
	j := startFor(t, specWith(cgroup.Limits{Pids: 16}))
	init := j.sv.pid
	j.Close()
	if j.sv != nil {
		t.Fatal("Close kept the jail")
	}
	if _, err := os.Stat("/proc/" + itoa(init)); err == nil {
		t.Fatalf("PID 1 (%d) still exists", init)
	}
	if s := testSpec(); Settle(j.Run(context.Background(), s, shapeOf(t, s))).Status != result.StatusSandboxError {
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
	if r.Status != result.StatusOK || r.Stdout != "True b''\n" {
		t.Fatalf("status %s stdout %q error %v", r.Status, r.Stdout, r.Error)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// A jail whose init died while it waited is no longer Alive, so that the
// server's pool starts that run cold instead of failing it.
func TestJailAlive(t *testing.T) {
	needNamespaces(t)
	j := startFor(t, testSpec())
	defer j.Close()
	if !j.Alive() {
		t.Fatal("a jail just started is not alive")
	}
	syscall.Kill(j.sv.pid, syscall.SIGKILL)
	deadline := time.Now().Add(5 * time.Second)
	for j.Alive() {
		if time.Now().After(deadline) {
			t.Fatal("a jail whose init was killed still counts as alive")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A run's verdict comes before its teardown, which must still leave
// nothing behind: the jail's processes and cgroup are gone when teardown
// returns.
func TestRunVerdictBeforeTeardown(t *testing.T) {
	needNamespaces(t)
	limits := cgroup.Limits{Memory: 128 << 20, Pids: 64}
	j := startFor(t, specWith(limits))
	sv := j.sv
	init := sv.pid
	groups := cgroupDirs(t, init)
	s := specWith(limits)
	s.Argv = []string{"/usr/bin/python3", "-c", "print('early')"}
	s.Capture = true
	r, teardown := j.Run(context.Background(), s, shapeOf(t, s))
	if r.Status != result.StatusOK || r.Stdout != "early\n" || r.PeakMemoryBytes == nil || r.CPUTimeMs == nil {
		t.Fatalf("status %s stdout %q error %v", r.Status, r.Stdout, r.Error)
	}
	if err := teardown(); err != nil {
		t.Fatal(err)
	}
	if !sv.reaped {
		t.Fatal("teardown did not wait for PID 1")
	}
	if _, err := os.Stat("/proc/" + itoa(init)); err == nil {
		t.Fatalf("PID 1 (%d) still exists", init)
	}
	for _, dir := range groups {
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Fatalf("cgroup %s left behind (%v)", dir, err)
		}
	}
}

// A program that exits while a process it left holds its output gets its
// verdict when the init's exit has ended that process: the verdict waits
// for the output's end, which does not wait for the teardown.
func TestRunVerdictWithOutputHeld(t *testing.T) {
	needNamespaces(t)
	s := testSpec()
	s.Argv = []string{"/usr/bin/python3", "-c", `import os, time
if os.fork() == 0:
    time.sleep(30)
    print("never", flush=True)
print("first", flush=True)`}
	s.Capture = true
	began := time.Now()
	r := Run(context.Background(), s)
	if r.Status != result.StatusOK || r.Stdout != "first\n" {
		t.Fatalf("status %s stdout %q error %v", r.Status, r.Stdout, r.Error)
	}
	if took := time.Since(began); took > 10*time.Second {
		t.Fatalf("the run took %s: it waited for the process left behind", took)
	}
}

// cgroupDirs are the directories of pid's cgroups in the mounted
// hierarchies (v1 controllers, or the v2 unified one).
func cgroupDirs(t *testing.T, pid int) []string {
	t.Helper()
	b, err := os.ReadFile("/proc/" + itoa(pid) + "/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	_, err = os.Stat("/sys/fs/cgroup/cgroup.controllers")
	unified := err == nil // else a v1 (hybrid) host, where the runs' groups are v1
	var dirs []string
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 || parts[2] == "/" {
			continue
		}
		switch {
		case unified && parts[1] == "":
			dirs = append(dirs, "/sys/fs/cgroup"+parts[2])
		case !unified && (parts[1] == "memory" || parts[1] == "pids"):
			dirs = append(dirs, "/sys/fs/cgroup/"+parts[1]+parts[2])
		}
	}
	if len(dirs) == 0 {
		t.Fatalf("pid %d is in no cgroup of its own:\n%s", pid, b)
	}
	return dirs
}

// A jail started ahead prepares its program (Shape.program) unless the
// program must wait under a filter that is not microbox's own (a caller's
// seccomp profile, which might refuse the calls the waiting process
// makes) or has a socket to microbox as its fd 0 (a held run). Programs
// of different sandboxes are different shapes.
func TestShapePreparesProgram(t *testing.T) {
	if shapeOf(t, testSpec()).program == nil {
		t.Fatal("the default spec's jail does not prepare its program")
	}
	own, err := seccomp.Program(seccomp.ModeDefault, "")
	if err != nil {
		t.Fatal(err)
	}
	filtered := testSpec()
	filtered.Seccomp, filtered.SeccompMode = own, string(seccomp.ModeDefault)
	if shapeOf(t, filtered).program == nil {
		t.Error("a run under the default filter is not prepared")
	}
	// A filter not microbox's own is not, whatever its label says.
	profile := testSpec()
	profile.SeccompMode, profile.Seccomp = string(seccomp.ModeDefault), make([]byte, 16)
	if shapeOf(t, profile).program != nil {
		t.Error("a caller's seccomp profile is prepared ahead of its run")
	}
	held := testSpec()
	held.Control = true
	if shapeOf(t, held).program != nil {
		t.Error("a held run's program is prepared ahead of its run")
	}
	other := testSpec()
	other.Rlimits.NoFile = 64
	if shapeOf(t, other).Equal(shapeOf(t, testSpec())) {
		t.Error("a jail prepared with one program's limits fits another's")
	}
	if shapeOf(t, filtered).Equal(shapeOf(t, testSpec())) {
		t.Error("a jail prepared without a filter fits a run with one")
	}
}

// preparedChild is the pid of a ready jail's prepared program (pid 2 of
// the jail), from its PID 1's children.
func preparedChild(t *testing.T, j *Jail) int {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(j.sv.pid) + "/task/" + strconv.Itoa(j.sv.pid) + "/children")
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b))
	if len(f) != 1 {
		t.Fatalf("PID 1 has children %q, want its prepared program alone", f)
	}
	pid, _ := strconv.Atoi(f[0])
	return pid
}

// vmData is the data size (VmData) of process pid, in bytes.
func vmData(t *testing.T, pid int) uint64 {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmData:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatalf("no VmData for pid %d", pid)
	return 0
}

// A jail whose prepared program has died (the OOM killer, a kill by hand)
// is no longer ready: a run must not be sent to it.
func TestPreparedProgramDeathEndsJail(t *testing.T) {
	needNamespaces(t)
	j := startFor(t, testSpec())
	defer j.Close()
	if err := syscall.Kill(preparedChild(t, j), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); j.Alive(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the jail still looks ready after its prepared program died")
		}
	}
}

// A prepared program reads its own part of the plan (its arguments and
// environment) before it takes its limits: with a small RLIMIT_DATA and
// long arguments it runs as a cold one does. And when its execve fails,
// the error names the program, as a cold run's does.
func TestPreparedProgramLimitsAndExecError(t *testing.T) {
	needNamespaces(t)
	// The waiting process holds what it was forked with (some 33 MiB of
	// data, mostly the spawner's): a limit of that and 256 KiB leaves it
	// no room for 600 KiB of arguments, and python all it needs.
	probe := startFor(t, testSpec())
	data := vmData(t, preparedChild(t, probe))
	probe.Close()
	long := func() *Spec {
		s := testSpec()
		s.Rlimits.Data = data + 256<<10
		s.Argv = []string{"/usr/bin/python3", "-c", "import sys; print(sum(map(len, sys.argv[1:])))"}
		for range 5 { // one argument is at most 128 KiB (MAX_ARG_STRLEN)
			s.Argv = append(s.Argv, strings.Repeat("x", 120<<10))
		}
		s.Capture = true
		return s
	}
	s := long()
	r := Settle(startFor(t, s).Run(context.Background(), s, shapeOf(t, s)))
	if r.Status != result.StatusOK || r.Stdout != "614400\n" {
		t.Fatalf("prepared, RLIMIT_DATA %d, 600 KiB of arguments: %s %q error %v", s.Rlimits.Data, r.Status, r.Stdout, deref(r.Error))
	}
	tooLong := func() *Spec {
		s := testSpec()
		s.Argv = []string{"/usr/bin/python3", "-c", "pass"}
		for range 30 {
			s.Argv = append(s.Argv, strings.Repeat("y", 100<<10)) // past ARG_MAX: E2BIG
		}
		return s
	}
	s = tooLong()
	r = Settle(startFor(t, s).Run(context.Background(), s, shapeOf(t, s)))
	if r.Status != result.StatusSandboxError || r.Error == nil || !strings.Contains(*r.Error, "exec /usr/bin/python3: Argument list too long") {
		t.Fatalf("prepared, an execve that fails: %s error %v", r.Status, deref(r.Error))
	}
}
