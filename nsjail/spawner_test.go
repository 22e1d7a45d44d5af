package nsjail

import (
	"context"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/microbox/microbox/cgroup"
	"github.com/microbox/microbox/result"
)

// PID 1 is the caller's child (the spawner clones it with CLONE_PARENT),
// in a pid namespace of its own and in the run's cgroup, whose cgroup
// namespace is rooted there: the program sees "/" in every hierarchy.
func TestSpawnerJailIsOurs(t *testing.T) {
	needNamespaces(t)
	limits := cgroup.Limits{Memory: 128 << 20, Pids: 64}
	j := startFor(t, specWith(limits))
	pid := j.sv.pid
	if got := parentOf(t, pid); got != os.Getpid() {
		t.Fatalf("PID 1 (%d) is the child of %d, want this process (%d)", pid, got, os.Getpid())
	}
	own, _ := os.Readlink("/proc/self/ns/pid")
	if ns, _ := os.Readlink("/proc/" + itoa(pid) + "/ns/pid"); ns == own || ns == "" {
		t.Fatalf("PID 1 is in pid namespace %q, ours is %q", ns, own)
	}
	cgroupDirs(t, pid) // fails unless PID 1 is in a cgroup of its own

	s := specWith(limits)
	s.Argv = []string{"/usr/bin/python3", "-c", "print(open('/proc/self/cgroup').read(), end='')"}
	s.Capture = true
	r := Settle(j.Run(context.Background(), s, shapeOf(t, s)))
	if r.Status != result.StatusOK || r.Stdout == "" {
		t.Fatalf("status %s stdout %q error %v", r.Status, r.Stdout, deref(r.Error))
	}
	for _, line := range strings.Split(strings.TrimSpace(r.Stdout), "\n") {
		if !strings.HasSuffix(line, ":/") {
			t.Errorf("the program sees a cgroup path outside its own: %q", line)
		}
	}
}

// A spawner that died (the OOM killer, say) is replaced at the next
// request, which runs as if nothing happened.
func TestSpawnerRestarts(t *testing.T) {
	needNamespaces(t)
	sp := testSpawner(t)
	dead := sp.pid
	syscall.Kill(dead, syscall.SIGKILL)
	deadline := time.Now().Add(5 * time.Second)
	for processState(dead) != "Z" { // gone but not reaped: its socket is closed
		if time.Now().After(deadline) {
			t.Fatalf("spawner %d did not die", dead)
		}
		time.Sleep(5 * time.Millisecond)
	}
	s := testSpec()
	s.Argv = []string{"/usr/bin/python3", "-c", "print('again')"}
	s.Capture = true
	if r := sp.Run(context.Background(), s); r.Status != result.StatusOK || r.Stdout != "again\n" {
		t.Fatalf("status %s stdout %q error %v", r.Status, r.Stdout, deref(r.Error))
	}
	if sp.pid == dead {
		t.Fatal("the dead spawner was not replaced")
	}
	if _, err := os.Stat("/proc/" + itoa(dead)); err == nil {
		t.Fatalf("the dead spawner %d was not reaped", dead)
	}
}

// A malformed request is answered with an error, nothing is cloned, and
// the spawner serves the next request.
func TestSpawnerRefusesMalformedRequests(t *testing.T) {
	needNamespaces(t)
	sp := testSpawner(t)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	good, _ := spawnRequest{flags: namespaces, uidMap: "0 0 1", gidMap: "0 0 1", setgroups: "deny", cgroupFD: -1}.encode()
	withCgroup, _ := spawnRequest{flags: namespaces, uidMap: "0 0 1", gidMap: "0 0 1", setgroups: "deny", cgroupFD: 9}.encode()
	for name, c := range map[string]struct {
		msg []byte
		fds []int
	}{
		"two descriptors":      {good, []int{int(r.Fd()), int(w.Fd())}},
		"no strings":           {good[:8], fds6(r, w)},
		"unterminated maps":    {good[:len(good)-1], fds6(r, w)},
		"short":                {[]byte{1, 2, 3}, fds6(r, w)},
		"an extra not sent":    {withCgroup, fds6(r, w)},
		"an extra not named":   {good, append(fds6(r, w), int(r.Fd()))},
		"an unknown extra":     {append(good[:len(good)-1], 'x', 0), append(fds6(r, w), int(r.Fd()))},
		"the same extra twice": {append(withCgroup[:len(withCgroup)-1], 'c', 0), append(fds6(r, w), int(r.Fd()), int(r.Fd()))},
	} {
		sp.mu.Lock()
		pid, err := sp.roundTrip(c.msg, unix.UnixRights(c.fds...), nil)
		sp.mu.Unlock()
		if err == nil || pid != 0 || !strings.Contains(err.Error(), "spawner:") {
			t.Errorf("%s: pid %d, error %v; want a refusal", name, pid, err)
		}
	}
	s := testSpec()
	s.Argv = []string{"/usr/bin/python3", "-c", "print('still here')"}
	s.Capture = true
	if res := sp.Run(context.Background(), s); res.Status != result.StatusOK || res.Stdout != "still here\n" {
		t.Fatalf("status %s stdout %q error %v", res.Status, res.Stdout, deref(res.Error))
	}
}

func fds6(r, w *os.File) []int {
	return []int{int(r.Fd()), int(w.Fd()), int(w.Fd()), int(r.Fd()), int(w.Fd()), int(r.Fd())}
}

// parentOf and processState read /proc/PID/stat.
func parentOf(t *testing.T, pid int) int {
	t.Helper()
	f := statFields(pid)
	if len(f) < 2 {
		t.Fatalf("no /proc/%d/stat", pid)
	}
	n, _ := strconv.Atoi(f[1])
	return n
}

func processState(pid int) string {
	if f := statFields(pid); len(f) > 0 {
		return f[0]
	}
	return ""
}

// statFields are the fields of /proc/PID/stat after the command name.
func statFields(pid int) []string {
	b, err := os.ReadFile("/proc/" + itoa(pid) + "/stat")
	if err != nil {
		return nil
	}
	s := string(b)
	return strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// A jail part larger than a pipe holds (root files of 256 KiB) reaches
// PID 1: it reads its plan only after the go, so the go comes first.
func TestJailPlanLargerThanAPipe(t *testing.T) {
	needNamespaces(t)
	s := testSpec()
	big := strings.Repeat("# policy helper\n", 16<<10) // 256 KiB
	s.RootFiles = []File{{Path: RootFilesDir + "/big.py", Data: []byte(big), Mode: 0o644}}
	s.Argv = []string{"/usr/bin/python3", "-c", "import os; print(os.path.getsize('" + RootFilesDir + "/big.py'))"}
	s.Capture = true
	done := make(chan *result.Result, 1)
	go func() { done <- Run(context.Background(), s) }()
	select {
	case r := <-done:
		if r.Status != result.StatusOK || r.Stdout != strconv.Itoa(len(big))+"\n" {
			t.Fatalf("status %s stdout %q error %v", r.Status, r.Stdout, deref(r.Error))
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the run with a large jail part never started: supervisor and PID 1 wait for each other")
	}
}

// A spawner that died while it had a request is replaced at the next one.
func TestSpawnerRestartsAfterDyingMidRequest(t *testing.T) {
	needNamespaces(t)
	sp := testSpawner(t)
	sp.mu.Lock()
	sp.stopLocked() // what roundTrip does when the answer never comes
	sp.mu.Unlock()
	s := testSpec()
	s.Argv = []string{"/usr/bin/python3", "-c", "print('replaced')"}
	s.Capture = true
	if r := sp.Run(context.Background(), s); r.Status != result.StatusOK || r.Stdout != "replaced\n" {
		t.Fatalf("status %s stdout %q error %v", r.Status, r.Stdout, deref(r.Error))
	}
	sp.Close()
	if r := sp.Run(context.Background(), s); r.Status != result.StatusSandboxError {
		t.Fatalf("a closed spawner ran a jail: %s", r.Status)
	}
}

// The spawner is out of microbox's process group: a ^C at the terminal,
// sent to the foreground group, is microbox's to handle and does not kill
// the spawner, whose jails are its clones.
func TestSpawnerOwnProcessGroup(t *testing.T) {
	needNamespaces(t)
	sp := testSpawner(t)
	pgid, err := unix.Getpgid(sp.pid)
	if err != nil {
		t.Fatal(err)
	}
	if pgid == unix.Getpgrp() {
		t.Fatalf("the spawner is in microbox's process group %d", pgid)
	}
}

// A PID 1 that cannot join its cgroup (here: its v1 group was removed
// after the supervisor opened the tasks file the go carries) says why on
// its status pipe and ends: nothing of the jail runs outside the group.
func TestJailThatCannotJoinItsCgroupEnds(t *testing.T) {
	needNamespaces(t)
	if cgroup.HostMode() != cgroup.ModeV1 {
		t.Skip("v1 only: on v2 PID 1 is cloned into its group")
	}
	cg, err := cgroup.New(cgroup.Options{Limits: cgroup.Limits{Pids: 16}})
	if err != nil {
		t.Fatal(err)
	}
	tasks, err := cg.JoinFDs()
	if err != nil {
		cg.Remove()
		t.Fatal(err)
	}
	defer closeFDs(tasks)
	if err := cg.Remove(); err != nil {
		t.Fatal(err)
	}
	status := goAndStatus(t, []byte{goByte, byte(len(tasks))}, tasks)
	if !strings.HasPrefix(status, statusError+" join the run's cgroup") {
		t.Errorf("PID 1's status %q does not say it could not join its cgroup", status)
	}
}

// A go that does not carry the tasks files it names ends PID 1, which
// must not go on outside a group it was meant to join; so does one that
// is not a go at all.
func TestJailEndsAtAMalformedGo(t *testing.T) {
	needNamespaces(t)
	null, err := os.Open("/dev/null")
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	nullFD := int(null.Fd())
	for name, c := range map[string]struct {
		msg []byte
		fds []int
	}{
		"a descriptor named, none sent": {[]byte{goByte, 1}, nil},
		"one sent, none named":          {[]byte{goByte, 0}, []int{nullFD}},
		"one sent, two named":           {[]byte{goByte, 2}, []int{nullFD}},
		"no count":                      {[]byte{goByte}, nil},
		"not a go":                      {[]byte{'x', 0}, nil},
	} {
		status := goAndStatus(t, c.msg, c.fds)
		if !strings.HasPrefix(status, statusError+" malformed go") {
			t.Errorf("%s: PID 1's status %q; want it to end at a malformed go", name, status)
		}
	}
}

// goAndStatus spawns a PID 1, sends it msg with fds as its go and returns
// its status lines once it has ended, which it must with
// ExitSandboxError.
func goAndStatus(t *testing.T, msg []byte, fds []int) string {
	t.Helper()
	null, err := os.Open("/dev/null")
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	statusR, statusW, _ := os.Pipe()
	defer statusR.Close()
	syncW, syncR, err := socketpair(unix.SOCK_SEQPACKET)
	if err != nil {
		t.Fatal(err)
	}
	defer syncW.Close()
	n := int(null.Fd())
	req := spawnRequest{flags: namespaces, uidMap: "0 0 1", gidMap: "0 0 1", setgroups: "deny", cgroupFD: -1}
	pid, err := testSpawner(t).spawn(req, []int{n, n, n, n, int(statusW.Fd()), syncR}, nil)
	statusW.Close()
	unix.Close(syncR)
	if pid == 0 {
		t.Fatalf("no PID 1: %v", err)
	}
	if err := sendmsg(syncW, msg, unix.UnixRights(fds...)); err != nil {
		t.Errorf("send the go: %v", err)
	}
	ws, werr := waitExit(pid)
	line, _ := io.ReadAll(statusR)
	if werr != nil || ws.ExitStatus() != result.ExitSandboxError {
		t.Errorf("PID 1 ended with %v (%v), want exit %d", ws, werr, result.ExitSandboxError)
	}
	return string(line)
}

// Each jail has a network namespace of its own, new, with lo up: jails
// alive at once from one spawner (which makes each jail's namespace ahead
// of its request, spawner.c: make_net) never share one, nor the host's.
func TestSpawnerNetworkNamespacePerJail(t *testing.T) {
	needNamespaces(t)
	limits := cgroup.Limits{Memory: 128 << 20, Pids: 64}
	sp := testSpawner(t)
	own, _ := os.Readlink("/proc/self/ns/net")
	seen := map[string]bool{own: true}
	var jails []*Jail
	var names []string
	for range 3 {
		j, err := sp.Start(shapeOf(t, specWith(limits)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { j.Close() })
		ns, err := os.Readlink("/proc/" + itoa(j.sv.pid) + "/ns/net")
		if err != nil || seen[ns] {
			t.Fatalf("jail %d: network namespace %q (%v), seen %v", len(jails), ns, err, seen)
		}
		seen[ns] = true
		jails = append(jails, j)
		names = append(names, ns)
	}
	code := `import os, socket
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen()
c = socket.create_connection(s.getsockname()); a, _ = s.accept(); c.sendall(b"lo"); print(a.recv(2).decode(), os.readlink("/proc/self/ns/net"))`
	for i, j := range jails {
		s := specWith(limits)
		s.Argv = []string{"/usr/bin/python3", "-c", code}
		s.Capture = true
		r := Settle(j.Run(context.Background(), s, shapeOf(t, s)))
		if want := "lo " + names[i] + "\n"; r.Status != result.StatusOK || r.Stdout != want {
			t.Errorf("jail %d: status %s stdout %q error %v, want %q", i, r.Status, r.Stdout, deref(r.Error), want)
		}
	}
}
