package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// suite is every test, in order. The first ones run microbox from the
// root cgroup as root; then from delegated non-root groups; then as an
// unprivileged user; doctor last.
var suite = []test{
	{"kernel", testKernel},
	{"run_ok", testRunOK},
	{"atomic_entry", testAtomicEntry},
	{"limits_written", testLimitsWritten},
	{"memory_limit", testMemoryLimit},
	{"memory_limit_child", testMemoryLimitChild},
	{"memory_peak", testMemoryPeak},
	{"socket_buffers_charged", testSocketBuffersCharged},
	{"uid_ranges", testUIDRanges},
	{"pids_limit", testPidsLimit},
	{"cpu_max", testCPUMax},
	{"cpu_time_limit", testCPUTimeLimit},
	{"timeout_kills_daemon", testTimeoutKillsDaemon},
	{"killed_supervisor_then_gc", testKilledSupervisorGC},
	{"nested_cgroup_parent", testNestedParent},
	{"nested_own_group", testNestedOwnGroup},
	{"nested_busy_group_refused", testNestedBusyGroup},
	{"container_cgroupns", testContainer},
	{"container_busy_refused", testContainerBusy},
	{"rootless_delegated_parent", testRootlessDelegatedParent},
	{"rootless_delegated_own_group", testRootlessDelegatedOwn},
	{"rootless_undelegated", testRootlessUndelegated},
	{"doctor_root", testDoctorRoot},
	{"doctor_rootless", testDoctorRootless},
	{"zygote", testZygote},
	{"no_leftover_cgroups", testNoLeftovers},
}

// testKernel checks the VM is what the suite means to test: pure cgroup
// v2 with memory, pids and cpu for child groups, memory.peak and
// cgroup.kill in a child group, unprivileged user namespaces.
func testKernel() error {
	if _, err := os.Stat(filepath.Join(cgroupRoot, "memory")); err == nil {
		return errors.New("a v1 memory hierarchy is mounted")
	}
	ctrls, err := readGroupFile("/", "cgroup.subtree_control")
	if err != nil {
		return err
	}
	if err := mentions(ctrls, "memory", "pids", "cpu"); err != nil {
		return fmt.Errorf("root subtree_control: %w", err)
	}
	if err := makeGroup("/probe"); err != nil {
		return err
	}
	defer os.Remove(filepath.Join(cgroupRoot, "probe"))
	for _, f := range []string{"memory.peak", "cgroup.kill", "memory.events", "cpu.max", "pids.max"} {
		if _, err := os.Stat(filepath.Join(cgroupRoot, "probe", f)); err != nil {
			return fmt.Errorf("a child group has no %s: %w", f, err)
		}
	}
	release, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	userns, _ := os.ReadFile("/proc/sys/kernel/unprivileged_userns_clone")
	fmt.Printf("kernel %s, controllers %q, unprivileged_userns_clone=%s\n", strings.TrimSpace(string(release)), ctrls, strings.TrimSpace(string(userns)))
	return nil
}

// testRunOK: a plain run on v2 reports v2 and its accounting.
func testRunOK() error {
	r, err := py("print('hello')")
	if err != nil {
		return err
	}
	if err := want(r, "ok", ""); err != nil {
		return err
	}
	if r.Cgroup != "v2" || r.Stdout != "hello\n" {
		return fmt.Errorf("cgroup %q stdout %q", r.Cgroup, r.Stdout)
	}
	if r.CPUMs == nil || *r.CPUMs <= 0 || r.Peak == nil || *r.Peak <= 0 {
		return fmt.Errorf("accounting missing: %s cpu %v peak %v", r, r.CPUMs, r.Peak)
	}
	return nil
}

// testAtomicEntry: every process of the jail is in the run group, and
// microbox is not. On v2 microbox never moves a process after clone
// (Enter does nothing), so being there at all means CLONE_INTO_CGROUP put
// it there before its first instruction; and the program's cgroup
// namespace is rooted at the run group (it sees "0::/"), which it would
// not be had the jail's namespaces been made outside the group.
func testAtomicEntry() error {
	l, err := as{}.start()
	if err != nil {
		return err
	}
	defer l.kill()
	group, err := onlyRunGroup()
	if err != nil {
		return err
	}
	procs, err := readGroupFile(group, "cgroup.procs")
	if err != nil {
		return err
	}
	pids := strings.Fields(procs)
	if len(pids) < 2 {
		return fmt.Errorf("run group %s holds %v, want the jail's init(s) and the program", group, pids)
	}
	supervisor := l.cmd.Process.Pid
	if own := procCgroup(supervisor); own == group {
		return fmt.Errorf("microbox itself is in the run group %s", group)
	}
	for _, p := range pids {
		pid, _ := strconv.Atoi(p)
		if !descends(pid, supervisor) {
			return fmt.Errorf("process %d in the run group is not microbox's", pid)
		}
	}
	// The jail's PID 1 (in a pid namespace of its own) was cloned into
	// the run group; the spawner that cloned it stays with microbox.
	supNS, _ := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", supervisor))
	for _, pid := range children(supervisor) {
		want := group
		if ns, _ := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", pid)); ns == supNS {
			want = procCgroup(supervisor)
		}
		if got := procCgroup(pid); got != want {
			return fmt.Errorf("microbox's child %d is in %q, not %s", pid, got, want)
		}
	}
	if _, err := l.finish(); err != nil {
		return err
	}
	r, err := py("print(open('/proc/self/cgroup').read().strip())")
	if err != nil {
		return err
	}
	if r.Status != "ok" || r.Stdout != "0::/\n" {
		return fmt.Errorf("the program's own view of its cgroup: %s", r)
	}
	return nil
}

// testLimitsWritten: the flags become memory.max, memory.swap.max,
// memory.oom.group (an OOM ends the whole run), pids.max and cpu.max of
// the run group.
func testLimitsWritten() error {
	l, err := as{}.start("--mem", "100M", "--pids", "50", "--cpus", "0.5")
	if err != nil {
		return err
	}
	defer l.kill()
	group, err := onlyRunGroup()
	if err != nil {
		return err
	}
	want := map[string]string{
		"memory.max": "104857600", "memory.swap.max": "0", "memory.oom.group": "1",
		"pids.max": "50", "cpu.max": "50000 100000",
	}
	for file, v := range want {
		got, err := readGroupFile(group, file)
		if err != nil || got != v {
			return fmt.Errorf("%s/%s = %q (%v), want %q", group, file, got, err, v)
		}
	}
	_, err = l.finish()
	return err
}

// testMemoryLimit: exceeding --mem is the memory verdict (from
// memory.events), with memory.peak just under the limit.
func testMemoryLimit() error {
	r, err := py("b = bytearray(256 << 20)", "--mem", "64M")
	if err != nil {
		return err
	}
	if err := want(r, "memory", "memory"); err != nil {
		return err
	}
	if r.Peak == nil || *r.Peak > 64<<20 || *r.Peak < 40<<20 {
		return fmt.Errorf("peak %v, want just under 64 MiB", deref(r.Peak))
	}
	return nil
}

// testMemoryLimitChild: a child process that allocates while its parent
// stays small still ends the run as memory.
func testMemoryLimitChild() error {
	r, err := py(`
import subprocess, sys
subprocess.run([sys.executable, '-c', 'b = bytearray(256 << 20)'])
print('parent survived')`, "--mem", "64M")
	if err != nil {
		return err
	}
	return want(r, "memory", "memory")
}

// testMemoryPeak: memory.peak reaches the program's high-water mark.
func testMemoryPeak() error {
	r, err := py("b = bytearray(40 << 20)\ndel b\nprint('ok')", "--mem", "256M")
	if err != nil {
		return err
	}
	if err := want(r, "ok", ""); err != nil {
		return err
	}
	if r.Peak == nil || *r.Peak < 40<<20 || *r.Peak > 128<<20 {
		return fmt.Errorf("peak %v, want 40..128 MiB", deref(r.Peak))
	}
	return nil
}

// testSocketBuffersCharged: on v2, socket buffers count against
// memory.max: a 64M run that fills loopback connections it never reads
// cannot queue more than its limit (it ends, or its sends stop, first).
func testSocketBuffersCharged() error {
	r, err := py(`
import socket
srv = socket.socket(); srv.bind(("127.0.0.1", 0)); srv.listen(512)
port = srv.getsockname()[1]
total, conns, buf = 0, [], b"x" * 65536
for i in range(200):
    c = socket.create_connection(("127.0.0.1", port)); a, _ = srv.accept()
    c.setblocking(False); conns += [c, a]
    while True:
        try:
            total += c.send(buf)
        except OSError:
            break
print(total >> 20)
`, "--mem", "64M", "--timeout", "60s")
	if err != nil {
		return err
	}
	if r.Status == "memory" {
		return nil
	}
	if err := want(r, "ok", ""); err != nil {
		return err
	}
	if mib, _ := strconv.Atoi(strings.TrimSpace(r.Stdout)); mib > 128 {
		return fmt.Errorf("a 64M run queued %d MiB in unread socket buffers", mib)
	}
	return nil
}

// testUIDRanges: two runs at once have host uids of their own, and their
// user namespaces are not root's.
func testUIDRanges() error {
	code := "import time; print(open('/proc/self/uid_map').read().split()[1], flush=True); time.sleep(1)"
	type out struct {
		r   result
		err error
	}
	ch := make(chan out, 2)
	for range 2 {
		go func() {
			r, err := py(code)
			ch <- out{r, err}
		}()
	}
	seen := map[string]bool{}
	for range 2 {
		o := <-ch
		if o.err != nil {
			return o.err
		}
		if err := want(o.r, "ok", ""); err != nil {
			return err
		}
		base := strings.TrimSpace(o.r.Stdout)
		if n, _ := strconv.Atoi(base); n < 1<<30 {
			return fmt.Errorf("a run's ids map to host uid %s, below 2^30", base)
		}
		seen[base] = true
	}
	if len(seen) != 2 {
		return fmt.Errorf("two concurrent runs share the host uid range %v", seen)
	}
	return nil
}

// testPidsLimit: threads stop at pids.max, and a fork bomb is contained.
func testPidsLimit() error {
	r, err := py(`
import threading, time
n = 0
try:
    while True:
        threading.Thread(target=time.sleep, args=(5,), daemon=True).start()
        n += 1
except RuntimeError:
    print(n)`, "--pids", "16")
	if err != nil {
		return err
	}
	if err := want(r, "ok", ""); err != nil {
		return err
	}
	n, _ := strconv.Atoi(strings.TrimSpace(r.Stdout))
	if n < 5 || n >= 16 {
		return fmt.Errorf("%q threads started under --pids 16", r.Stdout)
	}
	r, err = py(`
import os
while True:
    try:
        os.fork()
    except OSError:
        pass`, "--pids", "16", "--timeout", "2s")
	if err != nil {
		return err
	}
	if r.Status != "timeout" && r.Status != "nonzero" {
		return fmt.Errorf("fork bomb: %s", r)
	}
	return nil
}

// testCPUMax: --cpus 0.5 holds a busy loop to about half a core.
func testCPUMax() error {
	r, err := py("import time\nend = time.time() + 2\nwhile time.time() < end: pass", "--cpus", "0.5", "--timeout", "10s")
	if err != nil {
		return err
	}
	if err := want(r, "ok", ""); err != nil {
		return err
	}
	ratio := *r.CPUMs / r.WallMs
	if ratio < 0.3 || ratio > 0.7 {
		return fmt.Errorf("CPU/wall %.2f under --cpus 0.5 (cpu %.0f ms, wall %.0f ms)", ratio, *r.CPUMs, r.WallMs)
	}
	return nil
}

// testCPUTimeLimit: --cpu-time is read from cpu.stat while the run goes.
func testCPUTimeLimit() error {
	r, err := py("while True: pass", "--cpu-time", "500ms", "--timeout", "20s")
	if err != nil {
		return err
	}
	if err := want(r, "timeout", "cpu"); err != nil {
		return err
	}
	if *r.CPUMs < 500 || *r.CPUMs > 3000 {
		return fmt.Errorf("cpu %.0f ms for a 500 ms limit", *r.CPUMs)
	}
	return nil
}

// testTimeoutKillsDaemon: on timeout, a daemonized grandchild (own
// session, re-executed) dies with the run and the group is removed.
func testTimeoutKillsDaemon() error {
	const marker = "vmtest-daemon-marker"
	r, err := py(fmt.Sprintf(`
import os, sys, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execv(sys.executable, [sys.executable, '-c', 'import time; time.sleep(300)', '%s'])
    os._exit(0)
while True: pass`, marker), "--timeout", "2s")
	if err != nil {
		return err
	}
	if err := want(r, "timeout", "wall"); err != nil {
		return err
	}
	for i := 0; i < 100; i++ {
		if len(aliveWith(marker)) == 0 {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("the daemon survived the run: pids %v", aliveWith(marker))
}

// testKilledSupervisorGC: SIGKILL to microbox takes the jail with it;
// its group stays behind until `microbox gc` removes it.
func testKilledSupervisorGC() error {
	l, err := as{}.start()
	if err != nil {
		return err
	}
	group, err := onlyRunGroup()
	if err != nil {
		l.kill()
		return err
	}
	l.kill()
	for i := 0; ; i++ {
		procs, _ := readGroupFile(group, "cgroup.procs")
		if procs == "" {
			break
		}
		if i == 200 {
			return fmt.Errorf("jail processes %s outlived microbox", procs)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if left := runGroups(); len(left) != 1 {
		return fmt.Errorf("after SIGKILL, run groups %v (want the orphan %s)", left, group)
	}
	out, stderr, code, err := as{}.run("", "gc")
	if err != nil || code != 0 || !strings.Contains(out, "removed") {
		return fmt.Errorf("gc: exit %d %v: %q %q", code, err, out, stderr)
	}
	return nil
}

// testNestedParent: microbox in a leaf of a delegated group, making run
// groups beside it with --cgroup-parent.
func testNestedParent() error {
	if err := makeGroup("/delegated/runner"); err != nil {
		return err
	}
	if err := enableAllControllers("/delegated"); err != nil {
		return err
	}
	a := as{cgroup: "/delegated/runner"}
	l, err := a.start("--cgroup-parent", "/delegated", "--mem", "64M")
	if err != nil {
		return err
	}
	defer l.kill()
	group, err := onlyRunGroup()
	if err != nil {
		return err
	}
	if filepath.Dir(group) != "/delegated" {
		return fmt.Errorf("run group %s is not under /delegated", group)
	}
	if _, err := l.finish(); err != nil {
		return err
	}
	r, err := a.exec("--cgroup-parent", "/delegated", "--mem", "64M", "-c", "b = bytearray(256 << 20)")
	if err != nil {
		return err
	}
	return want(r, "memory", "memory")
}

// testNestedOwnGroup: microbox alone in a non-root group, no
// --cgroup-parent: it steps into a microbox-supervisor leaf and makes run
// groups in its own group. Later runs of a microbox already in the leaf
// (as `batch` is after its first run) keep using the group above it.
func testNestedOwnGroup() error {
	if err := makeGroup("/delegated/own"); err != nil {
		return err
	}
	l, err := as{cgroup: "/delegated/own"}.start()
	if err != nil {
		return err
	}
	defer l.kill()
	group, err := onlyRunGroup()
	if err != nil {
		return err
	}
	if filepath.Dir(group) != "/delegated/own" {
		return fmt.Errorf("run group %s is not in microbox's own group", group)
	}
	if got := procCgroup(l.cmd.Process.Pid); got != "/delegated/own/microbox-supervisor" {
		return fmt.Errorf("microbox is in %s, want its supervisor leaf", got)
	}
	if _, err := l.finish(); err != nil {
		return err
	}
	again := as{cgroup: "/delegated/own/microbox-supervisor"}
	for i := 0; i < 2; i++ {
		r, err := again.exec("--mem", "64M", "-c", "b = bytearray(256 << 20)")
		if err != nil {
			return err
		}
		if err := want(r, "memory", "memory"); err != nil {
			return err
		}
	}
	return nil
}

// testNestedBusyGroup: a group that holds other processes cannot hand
// out controllers; the run is refused, saying how to fix it.
func testNestedBusyGroup() error {
	if err := makeGroup("/delegated/busy"); err != nil {
		return err
	}
	stop, err := hold("/delegated/busy")
	if err != nil {
		return err
	}
	defer stop()
	r, err := as{cgroup: "/delegated/busy"}.exec("-c", "print(1)")
	if err != nil {
		return err
	}
	if err := want(r, "sandbox_error", ""); err != nil {
		return err
	}
	if r.Error == nil {
		return errors.New("no error message")
	}
	return mentions(*r.Error, "Delegate=yes", "--cgroup-parent")
}

// testContainer: microbox as a container's only process, in a cgroup
// namespace whose root is the container's (non-root) group, as Docker
// runs it on v2. That "/" is not the hierarchy's root: it must step into
// a supervisor leaf like in any other group, and limits must hold.
func testContainer() error {
	if err := makeGroup("/container"); err != nil {
		return err
	}
	a := as{cgroup: "/container", container: true}
	r, err := a.exec("-c", "print(open('/proc/self/cgroup').read().strip())")
	if err != nil {
		return err
	}
	if err := want(r, "ok", ""); err != nil {
		return err
	}
	if r.Cgroup != "v2" || r.Stdout != "0::/\n" {
		return fmt.Errorf("cgroup %q stdout %q", r.Cgroup, r.Stdout)
	}
	if _, err := os.Stat(filepath.Join(cgroupRoot, "container/microbox-supervisor")); err != nil {
		return fmt.Errorf("microbox did not step into a leaf of the container's group: %w", err)
	}
	r, err = as{cgroup: "/container/microbox-supervisor", container: true}.exec("--mem", "64M", "-c", "b = bytearray(256 << 20)")
	if err != nil {
		return err
	}
	return want(r, "memory", "memory")
}

// testContainerBusy: a container whose group holds another process (its
// own init) cannot hand out controllers; the run is refused with the fix.
func testContainerBusy() error {
	if err := makeGroup("/container-busy"); err != nil {
		return err
	}
	stop, err := hold("/container-busy")
	if err != nil {
		return err
	}
	defer stop()
	r, err := as{cgroup: "/container-busy", container: true}.exec("-c", "print(1)")
	if err != nil {
		return err
	}
	if err := want(r, "sandbox_error", ""); err != nil {
		return err
	}
	if r.Error == nil {
		return errors.New("no error message")
	}
	if err := mentions(*r.Error, "Delegate=yes", "--cgroup-parent", "--no-cgroup"); err != nil {
		return err
	}
	d, code, status, err := doctor(as{cgroup: "/container-busy", container: true})
	if err != nil {
		return err
	}
	if code == 0 || d.OK || status["cgroup.delegation"] != "fail" {
		return fmt.Errorf("doctor in a busy container: exit %d %v", code, status)
	}
	return nil
}

// The rootless tests emulate what systemd gives a user session with
// Delegate=yes: /user is delegated to uid 1000, which owns the groups it
// made inside.

// testRootlessDelegatedParent: uid 1000 in a leaf of its delegated
// subtree, run groups beside it with --cgroup-parent; limits hold.
func testRootlessDelegatedParent() error {
	if err := delegate("/user", userUID); err != nil {
		return err
	}
	if err := giveSubtree("/user/runner", userUID); err != nil {
		return err
	}
	a := as{cgroup: "/user/runner", uid: userUID}
	r, err := a.exec("--cgroup-parent", "/user", "-c", "import os; print(os.getuid())")
	if err != nil {
		return err
	}
	if err := want(r, "ok", ""); err != nil {
		return err
	}
	if r.Cgroup != "v2" || r.Stdout != "1000\n" {
		return fmt.Errorf("cgroup %q stdout %q", r.Cgroup, r.Stdout)
	}
	r, err = a.exec("--cgroup-parent", "/user", "--mem", "64M", "-c", "b = bytearray(256 << 20)")
	if err != nil {
		return err
	}
	if err := want(r, "memory", "memory"); err != nil {
		return err
	}
	r, err = a.exec("--cgroup-parent", "/user", "--pids", "8", "-c", `
import threading, time
n = 0
try:
    while True:
        threading.Thread(target=time.sleep, args=(5,), daemon=True).start()
        n += 1
except RuntimeError:
    print(n)`)
	if err != nil {
		return err
	}
	if n, _ := strconv.Atoi(strings.TrimSpace(r.Stdout)); r.Status != "ok" || n >= 8 {
		return fmt.Errorf("--pids 8 as uid 1000: %s", r)
	}
	return nil
}

// testRootlessDelegatedOwn: uid 1000 alone in a group of its subtree,
// no --cgroup-parent: the supervisor leaf works without privilege.
func testRootlessDelegatedOwn() error {
	if err := delegate("/user", userUID); err != nil {
		return err
	}
	if err := giveSubtree("/user/own", userUID); err != nil {
		return err
	}
	r, err := as{cgroup: "/user/own", uid: userUID}.exec("--mem", "64M", "-c", "b = bytearray(256 << 20)")
	if err != nil {
		return err
	}
	if err := want(r, "memory", "memory"); err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(cgroupRoot, "user/own/microbox-supervisor")); err != nil {
		return fmt.Errorf("no supervisor leaf: %w", err)
	}
	return nil
}

// testRootlessUndelegated: uid 1000 in a group it was not given: a run
// with limits is refused with the fixes, --no-cgroup runs fully
// namespaced.
func testRootlessUndelegated() error {
	if err := makeGroup("/undelegated"); err != nil {
		return err
	}
	a := as{cgroup: "/undelegated", uid: userUID}
	_, stderr, code, err := a.run("", "exec", "-c", "print(1)")
	if err != nil {
		return err
	}
	if code != 125 {
		return fmt.Errorf("a run with limits exited %d, want 125; stderr %q", code, stderr)
	}
	if err := mentions(stderr, "--no-cgroup", "--cgroup-parent", "Delegate=yes"); err != nil {
		return err
	}
	r, err := a.exec("--no-cgroup", "-c", "import os; print(os.getuid(), sorted({l.split()[1] for l in open('/proc/self/status') if l.startswith('Cap')}))")
	if err != nil {
		return err
	}
	if err := want(r, "ok", ""); err != nil {
		return err
	}
	if r.Cgroup != "none" || r.Stdout != "1000 ['0000000000000000']\n" {
		return fmt.Errorf("--no-cgroup: cgroup %q stdout %q (want uid 1000 and five empty capability sets)", r.Cgroup, r.Stdout)
	}
	return nil
}

// doctorReport is the part of `microbox doctor --json` the suite checks.
type doctorReport struct {
	OK     bool `json:"ok"`
	Checks []struct {
		Name   string `json:"name"`
		Status string `json:"status"`
		Detail string `json:"detail"`
		Fix    string `json:"fix"`
	} `json:"checks"`
}

// doctor runs `microbox doctor --json` and returns its report, exit code
// and the status of each check by name.
func doctor(a as) (doctorReport, int, map[string]string, error) {
	out, stderr, code, err := a.run("", "doctor", "--json")
	var d doctorReport
	if err != nil {
		return d, code, nil, err
	}
	if err := json.Unmarshal([]byte(out), &d); err != nil {
		return d, code, nil, fmt.Errorf("doctor --json: %v: %q %q", err, out, stderr)
	}
	status := map[string]string{}
	for _, c := range d.Checks {
		status[c.Name] = c.Status
		fmt.Printf("  doctor %-5s %-22s %s\n", c.Status, c.Name, c.Detail)
	}
	return d, code, status, nil
}

// testDoctorRoot: as root on v2 every check passes and doctor exits 0.
func testDoctorRoot() error {
	d, code, status, err := doctor(as{})
	if err != nil {
		return err
	}
	if code != 0 || !d.OK {
		return fmt.Errorf("doctor exit %d ok=%v: %v", code, d.OK, status)
	}
	for _, name := range []string{"cgroup.mode", "cgroup.controllers", "cgroup.memory_peak", "cgroup.kill", "cgroup.clone_into", "cgroup.delegation", "run"} {
		if status[name] != "ok" {
			return fmt.Errorf("check %s is %q, want ok", name, status[name])
		}
	}
	return nil
}

// testDoctorRootless: without delegation doctor fails (a default run
// would) and names the fix; in a delegated group it passes.
func testDoctorRootless() error {
	if err := makeGroup("/undelegated"); err != nil {
		return err
	}
	d, code, status, err := doctor(as{cgroup: "/undelegated", uid: userUID})
	if err != nil {
		return err
	}
	if code == 0 || d.OK || status["cgroup.delegation"] != "fail" || status["run.no-cgroup"] != "ok" {
		return fmt.Errorf("undelegated: exit %d ok=%v %v", code, d.OK, status)
	}
	if err := delegate("/user", userUID); err != nil {
		return err
	}
	if err := giveSubtree("/user/doctor", userUID); err != nil {
		return err
	}
	d, code, status, err = doctor(as{cgroup: "/user/doctor", uid: userUID})
	if err != nil {
		return err
	}
	if code != 0 || !d.OK || status["cgroup.delegation"] != "ok" {
		return fmt.Errorf("delegated: exit %d ok=%v %v", code, d.OK, status)
	}
	return nil
}

// testNoLeftovers: after the whole suite, no run group and no jail
// process or spawner is left anywhere.
func testNoLeftovers() error {
	if g := runGroups(); len(g) > 0 {
		return fmt.Errorf("run groups left: %v", g)
	}
	if p := aliveWith("microbox-spawner"); len(p) > 0 {
		return fmt.Errorf("jail spawners or PID 1s left: %v", p)
	}
	return nil
}

func deref[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}

// testZygote: runs forked from a warm interpreter (batch --zygote) get v2
// cgroups of their own, adopted after the fork: the memory limit, the
// pids limit and the wall clock end them as they end cold runs, and every
// one forked.
func testZygote() error {
	tasks := strings.Join([]string{
		`{"id": "ok", "code": "import os; print(os.getpid())"}`,
		`{"id": "memory", "code": "b = bytearray(256 << 20)"}`,
		`{"id": "pids", "code": "import os\nfor _ in range(64):\n    if os.fork() == 0:\n        import time; time.sleep(5); os._exit(0)"}`,
		`{"id": "timeout", "code": "while True: pass", "timeout": "300ms"}`,
	}, "\n") + "\n"
	out, stderr, code, err := as{}.run(tasks, "batch", "--zygote", "--mem", "64M", "--pids", "16", "--jobs", "1")
	if err != nil || code != 0 {
		return fmt.Errorf("batch --zygote: exit %d %v: %s", code, err, stderr)
	}
	want := map[string]string{"ok": "ok", "memory": "memory", "pids": "nonzero", "timeout": "timeout"}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var r struct {
			result
			ID    string `json:"id"`
			Start string `json:"start"`
		}
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			return fmt.Errorf("%v: %q", err, line)
		}
		if r.Status != want[r.ID] || r.Start != "zygote" || r.Cgroup != "v2" {
			return fmt.Errorf("%s: start %q, want %s forked on v2: %s", r.ID, r.Start, want[r.ID], r.result)
		}
		if r.ID == "ok" && r.Stdout != "2\n" {
			return fmt.Errorf("ok: pid %q, want 2", r.Stdout)
		}
	}
	return nil
}
