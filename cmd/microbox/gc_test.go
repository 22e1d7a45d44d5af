package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/microbox/microbox/result"
)

// freeHostPid is a pid no process has on the host.
func freeHostPid(t *testing.T) int {
	for p := 40000; p < 60000; p++ {
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", p)); err != nil {
			return p
		}
	}
	t.Fatal("no free pid")
	return 0
}

// groupsOf lists the run groups, live or not, of the microbox process
// pid (as its namespace numbers it).
func groupsOf(pid int) []string {
	var found []string
	filepath.WalkDir("/sys/fs/cgroup", func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() && strings.HasPrefix(d.Name(), fmt.Sprintf("microbox-jail-%d-", pid)) {
			found = append(found, p)
		}
		return nil
	})
	return found
}

// waitGroups waits until the microbox process pid has a run group.
func waitGroups(t *testing.T, pid int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if len(groupsOf(pid)) > 0 {
			return
		}
	}
	t.Fatalf("microbox pid %d made no run group", pid)
}

// A run of a microbox in another PID namespace (a container, unshare
// --pid) sharing the cgroup parent survives a collection from this one,
// though the pid in its group's name means nothing here.
func TestGCSparesOtherPIDNamespace(t *testing.T) {
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("no unshare(1)")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root for unshare --pid")
	}
	pid := freeHostPid(t)
	// In the new namespace, the shell's first child gets pid `pid`: one
	// this /proc does not show, as a container's would be.
	script := fmt.Sprintf(`echo %d > /proc/sys/kernel/ns_last_pid && %s exec --json -c 'import time; time.sleep(3); print("survived")'`, pid-1, microbox)
	inner := exec.Command("unshare", "--pid", "--fork", "--mount-proc", "sh", "-c", script)
	inner.Env = append(os.Environ(), socketEnv+"=")
	out := make(chan []byte, 1)
	go func() {
		b, _ := inner.Output()
		out <- b
	}()
	waitGroups(t, pid)
	if o, code := runMicrobox(t, "", "gc"); code != 0 {
		t.Fatalf("gc exit %d: %s", code, o)
	}
	var r result.Result
	b := <-out
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("inner run: %v: %s", err, b)
	}
	if r.Status != result.StatusOK || r.Stdout != "survived\n" {
		t.Fatalf("the other namespace's run: status %s error %v stdout %q", r.Status, deref(r.Error), r.Stdout)
	}
	assertNoRunCgroups(t)
}

// A microbox killed and left unreaped (a zombie) owns nothing: its group
// is collected.
func TestGCCollectsZombieOwner(t *testing.T) {
	// The shell starts microbox, then becomes a sleep that never reaps it.
	sh := exec.Command("sh", "-c", microbox+` exec -c 'import time; time.sleep(60)' & exec sleep 30`)
	sh.Env = append(os.Environ(), socketEnv+"=")
	if err := sh.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		sh.Process.Kill()
		sh.Wait()
	}()
	var mb int
	for deadline := time.Now().Add(10 * time.Second); mb == 0 && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		data, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", sh.Process.Pid, sh.Process.Pid))
		if f := strings.Fields(string(data)); len(f) > 0 {
			mb, _ = strconv.Atoi(f[0])
		}
	}
	if mb == 0 {
		t.Fatal("found no microbox under the shell")
	}
	waitGroups(t, mb)
	syscall.Kill(mb, syscall.SIGKILL)
	// A zombie, and all of it: the main thread of a killed Go process is
	// a zombie before its other threads have ended, and those still hold
	// its memory (so /proc/PID/exe) and descriptors (so the groups' owner
	// locks), by which gc rightly still sees an owner.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		stat, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", mb))
		_, exeErr := os.Stat(fmt.Sprintf("/proc/%d/exe", mb))
		tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", mb))
		if f := strings.Fields(string(stat)); len(f) > 2 && f[2] == "Z" && exeErr != nil && len(tasks) <= 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("microbox %d did not become a whole zombie: %q, %d threads", mb, stat, len(tasks))
		}
	}
	if o, code := runMicrobox(t, "", "gc"); code != 0 {
		t.Fatalf("gc exit %d: %s", code, o)
	}
	if left := groupsOf(mb); len(left) > 0 {
		t.Fatalf("the zombie's groups survived gc: %v", left)
	}
}

// The wall-clock limit holds while the supervisor is stopped (SIGSTOP),
// in-process and in a server: the jail's PID 1 keeps its own deadline.
func TestStoppedSupervisorKeepsTimeout(t *testing.T) {
	// run stops the process stopped(cmd) names while cmd's program runs.
	run := func(t *testing.T, socket string, stopped func(*exec.Cmd) int) {
		cmd := exec.Command(microbox, "exec", "--json", "--timeout", "1s", "-c", "while True: pass")
		cmd.Env = append(os.Environ(), socketEnv+"="+socket)
		var out strings.Builder
		cmd.Stdout = &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(300 * time.Millisecond)
		pid := stopped(cmd)
		syscall.Kill(pid, syscall.SIGSTOP)
		time.Sleep(3 * time.Second)
		syscall.Kill(pid, syscall.SIGCONT)
		cmd.Wait()
		var r result.Result
		if err := json.Unmarshal([]byte(out.String()), &r); err != nil {
			t.Fatalf("%v: %q", err, out.String())
		}
		if r.Status != result.StatusTimeout || r.Limit != result.LimitWall {
			t.Fatalf("status %s limit %q error %v, want a wall timeout", r.Status, r.Limit, deref(r.Error))
		}
		if r.WallTimeMs > 1100 || (r.CPUTimeMs != nil && *r.CPUTimeMs > 1100) {
			t.Fatalf("a 1 s limit ran %.0f ms of wall time and %.0f ms of CPU while the supervisor was stopped", r.WallTimeMs, deref(r.CPUTimeMs))
		}
	}
	t.Run("in-process", func(t *testing.T) {
		run(t, "", func(cmd *exec.Cmd) int { return cmd.Process.Pid })
	})
	t.Run("server", func(t *testing.T) {
		socket, pid := testServer(t, "--warm", "0")
		run(t, socket, func(*exec.Cmd) int { return pid })
	})
}

// Runs started together, each collecting stale groups as it goes, never
// take each other's fresh groups: every run gets its verdict (a group is
// unlocked for an instant after its mkdir; without cgroup.makerRuns, 3 of
// these 160 runs ended in sandbox_error, "taken by a collection").
func TestConcurrentRunsKeepTheirGroups(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for cgroups (CI runs as root)")
	}
	for round := range 5 {
		var wg sync.WaitGroup
		for i := range 32 {
			wg.Go(func() {
				cmd := exec.Command(microbox, "exec", "--json", "-c", "print(1)")
				cmd.Env = append(os.Environ(), socketEnv+"=")
				out, _ := cmd.Output()
				var r result.Result
				if err := json.Unmarshal(out, &r); err != nil || r.Status != result.StatusOK {
					t.Errorf("round %d run %d: %s %v (%v: %s)", round, i, r.Status, deref(r.Error), err, out)
				}
			})
		}
		wg.Wait()
	}
}
