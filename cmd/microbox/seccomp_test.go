package main

// Integration tests of the system-call filter, through the real binary:
// which filter a run gets, what it refuses and what it lets through, seen
// from inside the sandbox. (The red-team corpus's sys_*, tty_* and
// proc_ptrace cases probe the same ground with their own harness.)

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/microbox/microbox/result"
	"github.com/microbox/microbox/seccomp"
	libseccomp "github.com/seccomp/libseccomp-golang"
	"golang.org/x/sys/unix"
)

// seccompStatus is Python that prints the Seccomp line of /proc/self/status
// (0 none, 2 filter).
const seccompStatus = `print([l.split()[1] for l in open('/proc/self/status') if l.startswith('Seccomp:')][0])`

func TestSeccompDefaultOn(t *testing.T) {
	r := py(t, seccompStatus)
	wantStatus(t, r, result.StatusOK)
	if got := strings.TrimSpace(r.Stdout); got != "2" || r.Seccomp != "default" {
		t.Fatalf("Seccomp: %s, result seccomp %q; want 2 and default", got, r.Seccomp)
	}
	// The default policy is a stack: every filter of it is loaded.
	stack, err := seccomp.Program(seccomp.ModeDefault, "")
	if err != nil {
		t.Fatal(err)
	}
	filters, err := seccomp.Programs(stack)
	if err != nil {
		t.Fatal(err)
	}
	r = py(t, `print([l.split()[1] for l in open('/proc/self/status') if l.startswith('Seccomp_filters:')][0])`)
	if got := strings.TrimSpace(r.Stdout); got != strconv.Itoa(len(filters)) {
		t.Fatalf("Seccomp_filters: %s, want %d", got, len(filters))
	}
}

func TestSeccompOff(t *testing.T) {
	r := py(t, seccompStatus, "--seccomp", "off")
	wantStatus(t, r, result.StatusOK)
	if got := strings.TrimSpace(r.Stdout); got != "0" || r.Seccomp != "off" {
		t.Fatalf("Seccomp: %s, result seccomp %q; want 0 and off", got, r.Seccomp)
	}
}

// syscallProbe is one raw system call made from inside the sandbox with
// ctypes, with harmless or invalid arguments: refused by the filter it gets
// the filter's errno; let through, the kernel's own answer (EINVAL, EBADF,
// EFAULT, ...), which shows it got past the filter.
type syscallProbe struct {
	name string
	call string   // system call name, for its number on this architecture
	args []uint64 // ^0 is -1
	want syscall.Errno
}

const minus1 = ^uint64(0)

func m1(n int) []uint64 {
	a := make([]uint64, n)
	for i := range a {
		a[i] = minus1
	}
	return a
}

// refusedProbes are calls the default policy refuses: EPERM, or ENOSYS for
// clone3 (so that glibc falls back to clone).
func refusedProbes() []syscallProbe {
	eperm := syscall.EPERM
	return []syscallProbe{
		{"ptrace", "ptrace", m1(4), eperm},
		{"process_vm_readv", "process_vm_readv", m1(6), eperm},
		{"bpf", "bpf", []uint64{minus1, 0, 0}, eperm},
		{"perf_event_open", "perf_event_open", m1(5), eperm},
		{"userfaultfd", "userfaultfd", m1(1), eperm},
		{"io_uring_setup", "io_uring_setup", m1(2), eperm},
		{"keyctl", "keyctl", m1(5), eperm},
		{"add_key", "add_key", m1(5), eperm},
		{"mount", "mount", m1(5), eperm},
		{"umount2", "umount2", m1(2), eperm},
		{"pivot_root", "pivot_root", m1(2), eperm},
		{"chroot", "chroot", m1(1), eperm},
		{"fsopen", "fsopen", m1(2), eperm},
		{"open_tree", "open_tree", m1(3), eperm},
		{"unshare", "unshare", m1(1), eperm},
		{"setns", "setns", m1(2), eperm},
		{"kexec_load", "kexec_load", m1(4), eperm},
		{"init_module", "init_module", m1(3), eperm},
		{"reboot", "reboot", m1(4), eperm},
		{"swapon", "swapon", m1(2), eperm},
		{"settimeofday", "settimeofday", m1(2), eperm},
		{"syslog", "syslog", m1(3), eperm},
		{"iopl", "iopl", m1(1), eperm}, // x86 only; skipped elsewhere
		{"inotify_init1", "inotify_init1", []uint64{0}, eperm},
		{"ioctl(0, TIOCSTI)", "ioctl", []uint64{0, unix.TIOCSTI, minus1}, eperm},
		{"ioctl(0, TIOCSTI|1<<32)", "ioctl", []uint64{0, unix.TIOCSTI | 1<<32, minus1}, eperm},
		{"socket(AF_PACKET)", "socket", []uint64{unix.AF_PACKET, unix.SOCK_RAW, 0}, eperm},
		{"socket(AF_VSOCK)", "socket", []uint64{unix.AF_VSOCK, unix.SOCK_STREAM, 0}, eperm},
		{"socket(AF_NETLINK)", "socket", []uint64{unix.AF_NETLINK, unix.SOCK_RAW, 0}, eperm},
		// CLONE_THREAD without CLONE_SIGHAND: EINVAL should it get through.
		{"clone(CLONE_NEWUSER)", "clone", []uint64{unix.CLONE_NEWUSER | unix.CLONE_THREAD, 0, 0, 0, 0}, eperm},
		{"clone3", "clone3", []uint64{0, 0}, syscall.ENOSYS},
	}
}

// probeProgram is Python that makes each probe's call and prints one JSON
// object: probe name to errno (0: success; a descriptor it got is closed).
func probeProgram(t *testing.T, probes []syscallProbe) (string, []syscallProbe) {
	t.Helper()
	type call struct {
		Name string   `json:"name"`
		Nr   int      `json:"nr"`
		Args []uint64 `json:"args"`
	}
	var calls []call
	var kept []syscallProbe
	for _, p := range probes {
		nr, err := libseccomp.GetSyscallFromName(p.call)
		if err != nil || nr < 0 {
			t.Logf("%s: no such system call on %s; skipped", p.name, runtime.GOARCH)
			continue
		}
		calls = append(calls, call{p.name, int(nr), p.args})
		kept = append(kept, p)
	}
	data, err := json.Marshal(calls)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf(`
import ctypes, json, os
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
out = {}
for c in json.loads(%q):
    ctypes.set_errno(0)
    r = libc.syscall(ctypes.c_long(c['nr']), *[ctypes.c_ulong(a) for a in c['args']])
    out[c['name']] = ctypes.get_errno() if r == -1 else 0
    if r >= 0 and c['name'].startswith('socket'):
        os.close(r)
print(json.dumps(out))
`, data), kept
}

// runProbes runs the probes in a sandbox with flags and returns each one's
// errno.
func runProbes(t *testing.T, probes []syscallProbe, flags ...string) (map[string]syscall.Errno, []syscallProbe) {
	t.Helper()
	code, kept := probeProgram(t, probes)
	r := py(t, code, flags...)
	wantStatus(t, r, result.StatusOK)
	var got map[string]syscall.Errno
	if err := json.Unmarshal([]byte(r.Stdout), &got); err != nil {
		t.Fatalf("probe output %q: %v", r.Stdout, err)
	}
	return got, kept
}

func errnoName(e syscall.Errno) string {
	if e == 0 {
		return "success"
	}
	return unix.ErrnoName(e)
}

// TestSeccompRefusedSyscalls: every refused call gets the filter's answer,
// never the kernel's own argument errors.
func TestSeccompRefusedSyscalls(t *testing.T) {
	got, probes := runProbes(t, refusedProbes())
	for _, p := range probes {
		if e, ok := got[p.name]; !ok || e != p.want {
			t.Errorf("%s: got %s, want %s", p.name, errnoName(e), errnoName(p.want))
		}
	}
	t.Logf("%d calls refused", len(probes))
}

// TestSeccompLog: under --seccomp log the filter is loaded but lets the
// calls the default policy refuses through to the kernel. It is also the
// control for TestSeccompRefusedSyscalls: a probe whose answer differs here
// is refused by the filter there, not by the kernel.
func TestSeccompLog(t *testing.T) {
	r := py(t, seccompStatus, "--seccomp", "log")
	wantStatus(t, r, result.StatusOK)
	if got := strings.TrimSpace(r.Stdout); got != "2" || r.Seccomp != "log" {
		t.Fatalf("Seccomp: %s, result seccomp %q; want 2 and log", got, r.Seccomp)
	}
	got, probes := runProbes(t, refusedProbes(), "--seccomp", "log")
	// These reach a check of their arguments before any privilege check.
	through := map[string]syscall.Errno{
		"bpf":                     syscall.EINVAL,
		"unshare":                 syscall.EINVAL,
		"setns":                   syscall.EBADF,
		"mount":                   syscall.EFAULT,
		"chroot":                  syscall.EFAULT,
		"umount2":                 syscall.EINVAL,
		"process_vm_readv":        syscall.EINVAL,
		"ioctl(0, TIOCSTI)":       syscall.ENOTTY,
		"clone(CLONE_NEWUSER)":    syscall.EINVAL,
		"clone3":                  syscall.EINVAL,
		"socket(AF_NETLINK)":      0,
		"ioctl(0, TIOCSTI|1<<32)": syscall.ENOTTY,
	}
	var same []string
	for _, p := range probes {
		e := got[p.name]
		if want, ok := through[p.name]; ok && e != want {
			t.Errorf("%s under log: got %s, want the kernel's %s", p.name, errnoName(e), errnoName(want))
		}
		if e == p.want {
			same = append(same, p.name)
		}
	}
	for _, p := range probes {
		t.Logf("%-26s default: %-8s log: %s", p.name, errnoName(p.want), errnoName(got[p.name]))
	}
	// The others answer EPERM for want of a capability, in the kernel.
	t.Logf("refused by the kernel too (no capability): %v", same)
}

// TestSeccompX32Killed: a call through the x32 ABI kills the program.
func TestSeccompX32Killed(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skip("x32 exists on x86_64 only")
	}
	r := py(t, "import ctypes; ctypes.CDLL(None).syscall(0x40000000 | 39); print('survived')")
	wantStatus(t, r, result.StatusSignaled)
	if r.Signal == nil || *r.Signal != "SIGSYS" {
		t.Fatalf("signal %v, want SIGSYS", deref(r.Signal))
	}
}

// TestSeccompWorkloads: what CPython programs do keeps working under the
// default policy.
func TestSeccompWorkloads(t *testing.T) {
	cases := []struct{ name, code string }{
		{"threads", `
import threading
out = []
ts = [threading.Thread(target=out.append, args=(i,)) for i in range(8)]
for t in ts: t.start()
for t in ts: t.join()
assert sorted(out) == list(range(8))`},
		{"fork", `
import os
pid = os.fork()
if pid == 0:
    os._exit(7)
assert os.waitpid(pid, 0)[1] >> 8 == 7`},
		{"subprocess", `
import subprocess, sys
r = subprocess.run([sys.executable, '-c', 'import sys; print(sys.stdin.read().upper())'], input='hi', capture_output=True, text=True, check=True)
assert r.stdout == 'HI\n', r
assert subprocess.run(['/bin/sh', '-c', 'exit 3']).returncode == 3`},
		{"multiprocessing Pool(2)", `
import multiprocessing
def sq(x): return x * x
if __name__ == '__main__':
    with multiprocessing.Pool(2) as p:
        assert p.map(sq, range(10)) == [x * x for x in range(10)]`},
		{"asyncio", `
import asyncio
async def main():
    proc = await asyncio.create_subprocess_exec('/bin/echo', 'x', stdout=asyncio.subprocess.PIPE)
    out, _ = await proc.communicate()
    await asyncio.sleep(0.01)
    return out
assert asyncio.run(main()) == b'x\n'`},
		{"loopback sockets", `
import socket, threading
srv = socket.create_server(('127.0.0.1', 0))
def serve():
    c, _ = srv.accept()
    c.sendall(c.recv(100).upper())
    c.close()
threading.Thread(target=serve).start()
cli = socket.create_connection(srv.getsockname(), timeout=5)
cli.sendall(b'ping')
assert cli.recv(100) == b'PING'
a, b = socket.socketpair()
a.sendall(b'x'); assert b.recv(1) == b'x'
u = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
u.close()`},
		{"sqlite3", `
import sqlite3
db = sqlite3.connect('/tmp/t.db')
db.execute('create table t (x)')
db.executemany('insert into t values (?)', [(i,) for i in range(100)])
db.commit()
assert db.execute('select sum(x) from t').fetchone()[0] == 4950`},
		{"ctypes", `
import ctypes, os
libc = ctypes.CDLL(None)
assert libc.getpid() == os.getpid()
buf = ctypes.create_string_buffer(16)
libc.snprintf(buf, 16, b'%d', 42)
assert buf.value == b'42'
assert ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int)(lambda x: x + 1)(1) == 2`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := py(t, c.code+"\nprint('OK')\n", "--timeout", "20s")
			wantStatus(t, r, result.StatusOK)
			if strings.TrimSpace(r.Stdout) != "OK" {
				t.Fatalf("stdout %q stderr %q", r.Stdout, r.Stderr)
			}
		})
	}
}

// seccompTestdata is the seccomp package's test profiles.
func seccompTestdata(name string) string {
	return filepath.Join("..", "..", "seccomp", "testdata", name)
}

func TestSeccompProfileDenyGetpid(t *testing.T) {
	r := py(t, "import os; print(os.getpid(), os.getppid() > 0)", "--seccomp-profile", seccompTestdata("deny-getpid.json"))
	wantStatus(t, r, result.StatusOK)
	// getpid cannot fail, so CPython does not check: the refusal shows
	// as -EPERM, -1.
	if got := strings.TrimSpace(r.Stdout); got != "-1 True" || r.Seccomp != "profile" {
		t.Fatalf("stdout %q, result seccomp %q; want \"-1 True\" and profile", got, r.Seccomp)
	}
}

// TestSeccompProfileDockerStyle runs ordinary work under our profile in
// Docker's dialect.
func TestSeccompProfileDockerStyle(t *testing.T) {
	r := py(t, `
import json, subprocess, sys, threading
t = threading.Thread(target=print, args=('thread',)); t.start(); t.join()
print(subprocess.run([sys.executable, '-c', 'print(6 * 7)'], capture_output=True, text=True).stdout.strip())
print(json.dumps({'ok': True}))`, "--seccomp-profile", seccompTestdata("docker-style.json"))
	wantStatus(t, r, result.StatusOK)
	if r.Stdout != "thread\n42\n{\"ok\": true}\n" || r.Seccomp != "profile" {
		t.Fatalf("stdout %q, result seccomp %q", r.Stdout, r.Seccomp)
	}
}

// TestSeccompProfileUnknownField: a misspelt field could silently weaken a
// filter, so the profile is refused, naming the field.
func TestSeccompProfileUnknownField(t *testing.T) {
	path := filepath.Join(t.TempDir(), "typo.json")
	profile := `{"defaultAction": "SCMP_ACT_ERRNO", "sycalls": [{"names": ["execve"], "action": "SCMP_ACT_ALLOW"}]}`
	if err := os.WriteFile(path, []byte(profile), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(microbox, "exec", "--seccomp-profile", path, "-c", "pass")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != result.ExitSandboxError {
		t.Fatalf("exit %v, want %d", err, result.ExitSandboxError)
	}
	msg := strings.TrimSpace(stderr.String())
	if strings.Count(msg, "\n") != 0 || !strings.Contains(msg, `"sycalls"`) {
		t.Fatalf("stderr %q: want one line naming the field \"sycalls\"", msg)
	}
	r := execJSON(t, "", "--seccomp-profile", path, "-c", "pass")
	wantStatus(t, r, result.StatusSandboxError)
	if r.Error == nil || !strings.Contains(*r.Error, `"sycalls"`) {
		t.Fatalf("error %v: want it to name the field", deref(r.Error))
	}
}
