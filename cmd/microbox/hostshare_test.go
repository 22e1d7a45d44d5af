package main

// What a run shares with the host and with other runs, seen from inside
// and, where the harm would be on the host, from the host.

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/microbox/microbox/result"
)

// /proc tells nothing of the host: its boot arguments, boot id, kernel
// configuration, load and pressure read as empty.
func TestProcMasked(t *testing.T) {
	r := py(t, `
import os
for p in ["/proc/cmdline", "/proc/sys/kernel/random/boot_id", "/proc/config.gz", "/proc/loadavg", "/proc/keys", "/proc/timer_list"]:
    if os.path.exists(p):
        print(p, len(open(p, "rb").read()))
for d in ["/proc/pressure", "/proc/acpi"]:
    if os.path.isdir(d):
        print(d, os.listdir(d))
try:
    open("/proc/cmdline", "w")
except OSError as e:
    print("write", e.errno)
`)
	wantStatus(t, r, result.StatusOK)
	host, _ := os.ReadFile("/proc/cmdline")
	if len(host) == 0 {
		t.Fatal("the host's /proc/cmdline is empty: nothing to compare with")
	}
	for _, line := range strings.Split(strings.TrimSpace(r.Stdout), "\n") {
		f := strings.Fields(line)
		switch {
		case f[0] == "write":
			if f[1] != "30" { // EROFS
				t.Errorf("writing /proc/cmdline: errno %s", f[1])
			}
		case strings.HasPrefix(f[1], "["):
			if f[1] != "[]" {
				t.Errorf("%s lists %s", f[0], f[1])
			}
		case f[1] != "0":
			t.Errorf("%s has %s bytes", f[0], f[1])
		}
	}
	if !strings.Contains(r.Stdout, "/proc/cmdline 0") {
		t.Errorf("/proc/cmdline not checked: %q", r.Stdout)
	}
}

// The calls that touch what the run shares with the host are refused:
// dnotify on the shared /usr, page-cache advice and RWF_NOWAIT probes,
// socket filters, upper-layer protocols, MPTCP and UDP-Lite; sync
// succeeds without writing back the host's file systems.
func TestHostSharedCallsRefused(t *testing.T) {
	r := py(t, `
import errno, fcntl, os, socket
def errname(f):
    try:
        f()
        return "ok"
    except OSError as e:
        return errno.errorcode[e.errno]
fd = os.open("/usr/lib", os.O_RDONLY)
f = os.open("/usr/bin/python3", os.O_RDONLY)
print("F_NOTIFY", errname(lambda: fcntl.fcntl(fd, fcntl.F_NOTIFY, fcntl.DN_ACCESS)))
print("fadvise", errname(lambda: os.posix_fadvise(f, 0, 0, os.POSIX_FADV_DONTNEED)))
print("RWF_NOWAIT", errname(lambda: os.preadv(f, [bytearray(16)], 0, os.RWF_NOWAIT)))
print("preadv2", errname(lambda: os.preadv(f, [bytearray(16)], 0, 0)))
print("MPTCP", errname(lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM, 262)))
print("UDPLITE", errname(lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM, 136)))
s = socket.socket()
print("TCP_ULP", errname(lambda: s.setsockopt(socket.IPPROTO_TCP, 31, b"tls")))
print("SO_ATTACH_FILTER", errname(lambda: s.setsockopt(socket.SOL_SOCKET, 26, bytes(16))))
print("SO_REUSEADDR", errname(lambda: s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)))
print("sync", errname(os.sync))
`)
	wantStatus(t, r, result.StatusOK)
	want := map[string]string{"F_NOTIFY": "EPERM", "fadvise": "EPERM", "RWF_NOWAIT": "EPERM", "preadv2": "ok",
		"MPTCP": "EPERM", "UDPLITE": "EPERM", "TCP_ULP": "EPERM", "SO_ATTACH_FILTER": "EPERM",
		"SO_REUSEADDR": "ok", "sync": "ok"}
	got := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(r.Stdout), "\n") {
		k, v, _ := strings.Cut(line, " ")
		got[k] = v
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %q, want %s", k, got[k], v)
		}
	}
}

// A run's sync() does not write back the host's dirty data.
func TestSyncLeavesHostDirtyData(t *testing.T) {
	dirty := func() int {
		data, _ := os.ReadFile("/proc/meminfo")
		for _, line := range strings.Split(string(data), "\n") {
			if f := strings.Fields(line); len(f) >= 2 && f[0] == "Dirty:" {
				kb, _ := strconv.Atoi(f[1])
				return kb
			}
		}
		return -1
	}
	dir, err := os.MkdirTemp("/var/tmp", "microbox-dirty-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	// 64 MiB of dirty pages on the host's disk, well under the kernel's
	// background write-back threshold, and younger than its expiry.
	if err := os.WriteFile(dir+"/dirty", make([]byte, 64<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	before := dirty()
	if before < 32<<10 {
		t.Skipf("the host's file system keeps no dirty pages (Dirty: %d kB): nothing to lose", before)
	}
	r := py(t, "import os; os.sync(); os.sync()")
	wantStatus(t, r, result.StatusOK)
	if after := dirty(); after < before/2 {
		t.Fatalf("the run's sync() wrote back the host's data: Dirty %d kB → %d kB", before, after)
	}
}

// The host's Debian packages that reach their libraries through
// /etc/alternatives (numpy: BLAS, LAPACK) import and work in the default
// root. scripts/deps installs python3-numpy.
func TestNumpyInDefaultRoot(t *testing.T) {
	r := py(t, "import numpy as np\na = np.arange(6.0).reshape(2, 3)\nprint((a @ a.T).tolist(), np.linalg.inv(np.array([[2.0, 0], [0, 4]])).tolist())",
		"--rootfs", "", "--mem", "512M")
	wantStatus(t, r, result.StatusOK)
	if strings.TrimSpace(r.Stdout) != "[[5.0, 14.0], [14.0, 50.0]] [[0.5, 0.0], [0.0, 0.25]]" {
		t.Fatalf("stdout %q stderr %q", r.Stdout, r.Stderr)
	}
}

// Debian's matplotlib, which reads its defaults from /etc/matplotlibrc
// only and its fonts through fontconfig's /etc/fonts, imports and draws a
// figure in the default root, with nothing on stderr. scripts/deps
// installs python3-matplotlib.
func TestMatplotlibInDefaultRoot(t *testing.T) {
	r := py(t, "import matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt\nplt.plot([1, 2])\nplt.title('t')\nplt.savefig('/tmp/f.png')\nprint(open('/tmp/f.png', 'rb').read(4))",
		"--rootfs", "", "--mem", "512M", "--timeout", "30s")
	wantStatus(t, r, result.StatusOK)
	if strings.TrimSpace(r.Stdout) != `b'\x89PNG'` || r.Stderr != "" {
		t.Fatalf("stdout %q stderr %q", r.Stdout, r.Stderr)
	}
}

// The program's rlimits are microbox's own, not inherited.
func TestRlimitsExplicit(t *testing.T) {
	r := py(t, "import resource as r; print(*[r.getrlimit(x) for x in (r.RLIMIT_NOFILE, r.RLIMIT_SIGPENDING, r.RLIMIT_MSGQUEUE)])",
		"--nofile", "64")
	wantStatus(t, r, result.StatusOK)
	if got := strings.TrimSpace(r.Stdout); got != "(64, 64) (1024, 1024) (819200, 819200)" {
		t.Fatalf("rlimits %q", got)
	}
}

// Socket buffers count against --mem: a run that fills loopback
// connections it never reads cannot pin more of the host's memory than
// its limit (on v1, through memory.kmem.tcp; before, 64M runs pinned
// gigabytes and the host-wide tcp_mem).
func TestSocketBuffersBounded(t *testing.T) {
	r := py(t, `
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
	if r.Status == result.StatusMemory {
		return // charged to the memory limit itself (cgroup v2)
	}
	wantStatus(t, r, result.StatusOK)
	if mib, _ := strconv.Atoi(strings.TrimSpace(r.Stdout)); mib > 128 {
		t.Fatalf("a 64M run queued %d MiB in unread socket buffers", mib)
	}
}

// A run's queued signals are charged to its own host uid, not to host
// root's: host root still queues signals while a run has queued all it
// may (the jail's user namespace is created by the run's own uid).
func TestSignalFloodSparesHostRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the host side of this test is root's quota")
	}
	var lim unix.Rlimit
	unix.Getrlimit(unix.RLIMIT_SIGPENDING, &lim)
	cmd := exec.Command(microbox, "exec", "--timeout", "30s", "--sigpending", strconv.FormatUint(lim.Max, 10), "-c", `
import signal, sys, threading
signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGRTMIN])
n, me = 0, threading.get_ident()
while True:
    try:
        signal.pthread_kill(me, signal.SIGRTMIN)  # queued, unlike kill's
    except OSError:
        break
    n += 1
print(n, flush=True)
sys.stdin.read()
`)
	cmd.Env = append(os.Environ(), socketEnv+"=")
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		stdin.Close()
		cmd.Wait()
	}()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("the run queued nothing: %v", err)
	}
	queued, _ := strconv.Atoi(strings.TrimSpace(line))
	if queued < 1000 {
		t.Fatalf("the run queued only %d signals", queued)
	}
	// Host root, meanwhile, queues signals of its own.
	out, err := exec.Command("/usr/bin/python3", "-c", `
import signal, threading
signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGRTMIN])
for i in range(100):
    signal.pthread_kill(threading.get_ident(), signal.SIGRTMIN)
print("ok")
`).CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "ok" {
		t.Fatalf("with %d signals queued in a run, host root could not queue one: %v %s", queued, err, out)
	}
}

// Concurrent runs do not share per-user kernel quotas: a run that takes
// its user's whole pipe-buffer quota leaves another run's pipes their
// full size (each run's program has a host uid of its own).
func TestRunsHaveQuotasOfTheirOwn(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("rootless runs share the caller's uid, by the kernel's rules")
	}
	soft, err := os.ReadFile("/proc/sys/fs/pipe-user-pages-soft")
	if err != nil || strings.TrimSpace(string(soft)) == "0" {
		t.Skip("no per-user pipe quota on this kernel")
	}
	pages, _ := strconv.Atoi(strings.TrimSpace(string(soft)))
	// Pipes of 1 MiB until the quota refuses one more (EPERM), then
	// default ones past it.
	hog := exec.Command(microbox, "exec", "--timeout", "30s", "--nofile", "4096", "-c", fmt.Sprintf(`
import fcntl, os, sys
pipes = [os.pipe() for i in range(%d)]
for r, w in pipes:
    try:
        fcntl.fcntl(w, 1031, 1 << 20)  # F_SETPIPE_SZ
    except PermissionError:
        break
pipes += [os.pipe() for i in range(32)]
r, w = os.pipe()
print("hogging", fcntl.fcntl(w, 1032), flush=True)  # F_GETPIPE_SZ
sys.stdin.read()
`, pages/256+8))
	hog.Env = append(os.Environ(), socketEnv+"=")
	stdin, _ := hog.StdinPipe()
	stdout, _ := hog.StdoutPipe()
	if err := hog.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		stdin.Close()
		hog.Wait()
	}()
	if line, err := bufio.NewReader(stdout).ReadString('\n'); err != nil || line != "hogging 8192\n" {
		t.Fatalf("the hog did not use up its quota (its own new pipes are not cut to 8 KiB): %q %v", line, err)
	}
	r := py(t, "import fcntl, os\nr, w = os.pipe()\nprint(fcntl.fcntl(w, 1032))  # F_GETPIPE_SZ")
	wantStatus(t, r, result.StatusOK)
	if got := strings.TrimSpace(r.Stdout); got != "65536" {
		t.Fatalf("beside a run holding its pipe quota, another run's pipe holds %s bytes, not 65536", got)
	}
}
