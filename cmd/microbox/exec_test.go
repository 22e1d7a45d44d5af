package main

// Integration tests: they build the real binary and run programs in it, so
// every isolation claim is checked from inside the sandbox. They need root
// (CI runs as root) or unprivileged user namespaces.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/microbox/microbox/cgroup"
	"github.com/microbox/microbox/internal/policy"
	"github.com/microbox/microbox/nsjail"
	"github.com/microbox/microbox/nsjail/nsinit"
	"github.com/microbox/microbox/result"
)

var (
	microbox       string // path of the binary under test
	microboxServer string // and of its server build, beside it
)

// serveTestEnv, set to 1, runs every test's `microbox exec` through a
// `microbox serve` (serve.go) started for the suite: `make unit` runs the
// suite both ways, so the server must give every verdict the in-process
// exec gives.
const serveTestEnv = "MICROBOX_TEST_SERVE"

// zygoteMode is set when the suite runs with $MICROBOX_ZYGOTE (make unit's
// third pass: every exec forked from a warm interpreter where one can
// take it, through the suite's server).
var zygoteMode = os.Getenv(zygoteEnv) != ""

// skipInZygoteMode skips a test of what only a cold run has.
func skipInZygoteMode(t *testing.T, why string) {
	t.Helper()
	if zygoteMode {
		t.Skip("in zygote mode: " + why)
	}
}

func TestMain(m *testing.M) {
	if os.Getenv(catchChildEnv) != "" { // TestCatchInterrupts's child: that test only
		os.Exit(m.Run())
	}
	dir, err := os.MkdirTemp("", "microbox-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// Both builds, side by side as make leaves them: `microbox serve`
	// and `microbox mcp` start the server build from beside microbox.
	microbox = filepath.Join(dir, "microbox")
	microboxServer = filepath.Join(dir, "microbox-server")
	// With the init image when the suite has it (make unit's
	// microbox_init_image), as make builds them.
	tags := func(t ...string) string {
		if nsinit.Image() != nil {
			t = append(t, "microbox_init_image")
		}
		return strings.Join(t, ",")
	}
	for _, b := range []*exec.Cmd{exec.Command("go", "build", "-tags", tags(), "-o", microbox, "."),
		exec.Command("go", "build", "-tags", tags("server"), "-o", microboxServer, ".")} {
		b.Stderr = os.Stderr
		if err := b.Run(); err != nil {
			fmt.Fprintf(os.Stderr, "%v: %v\n", b.Args, err)
			os.Exit(1)
		}
	}
	// Unless the suite is to go through a server, no test may use one
	// the host happens to run.
	os.Setenv(socketEnv, "")
	stop := func() {}
	if os.Getenv(serveTestEnv) == "1" {
		socket := filepath.Join(dir, "serve", "exec.sock")
		if stop, err = startTestServer(socket); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Setenv(socketEnv, socket)
	}
	// Groups some earlier process left behind (a run killed with its
	// container, say) are not this suite's leaks: they are noted, and the
	// checks below look only for new ones.
	for _, g := range runCgroups() {
		strayBefore[g] = true
	}
	if len(strayBefore) > 0 {
		fmt.Fprintf(os.Stderr, "note: %d run cgroups were left behind before the suite started; they are not counted as its leaks\n", len(strayBefore))
	}
	code := m.Run()
	stop()
	os.RemoveAll(dir)
	if leaks := runCgroups(); len(leaks) > 0 {
		fmt.Fprintf(os.Stderr, "FAIL: the test suite left cgroups behind: %v\n", leaks)
		code = 1
	}
	os.Exit(code)
}

// execJSON runs `microbox exec --json ARGS` and decodes its one JSON object.
func execJSON(t *testing.T, stdin string, args ...string) policy.Result {
	t.Helper()
	cmd := exec.Command(microbox, append([]string{"exec", "--json"}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	return jsonResult(t, cmd)
}

// jsonResult runs cmd, a `microbox exec --json` however started, and
// decodes the one JSON object it must print.
func jsonResult(t *testing.T, cmd *exec.Cmd) policy.Result {
	t.Helper()
	out, errOut, _ := runCmd(t, cmd)
	var r policy.Result
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("%v: output is not one JSON object (%v):\n%s\nstderr: %s", cmd.Args, err, out, errOut)
	}
	return r
}

// runCmd runs cmd and returns its stdout, stderr and exit code; only a
// failure to run it at all fails the test.
func runCmd(t *testing.T, cmd *exec.Cmd) ([]byte, []byte, int) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run %v: %v", cmd.Args, err)
	}
	return stdout.Bytes(), stderr.Bytes(), code
}

// runMicrobox runs the binary and returns its stdout and exit code.
func runMicrobox(t *testing.T, stdin string, args ...string) ([]byte, int) {
	t.Helper()
	cmd := exec.Command(microbox, args...)
	cmd.Stdin = strings.NewReader(stdin)
	out, errOut, code := runCmd(t, cmd)
	if len(errOut) > 0 {
		t.Logf("microbox stderr: %s", errOut)
	}
	return out, code
}

// py runs code with default limits and the given extra flags.
func py(t *testing.T, code string, flags ...string) policy.Result {
	t.Helper()
	return execJSON(t, "", append(flags, "-c", code)...)
}

func wantStatus(t *testing.T, r policy.Result, want result.Status) {
	t.Helper()
	if r.Status != want {
		t.Fatalf("status %q, want %q; error=%v stdout=%q stderr=%q", r.Status, want, deref(r.Error), r.Stdout, r.Stderr)
	}
}

func deref[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}

func TestVerdictOK(t *testing.T) {
	r := py(t, "print('hello')")
	wantStatus(t, r, result.StatusOK)
	if r.Stdout != "hello\n" || r.ExitCode == nil || *r.ExitCode != 0 {
		t.Fatalf("stdout %q exit %v", r.Stdout, deref(r.ExitCode))
	}
	if r.CPUTimeMs == nil || *r.CPUTimeMs <= 0 || r.PeakMemoryBytes == nil || *r.PeakMemoryBytes <= 0 || r.WallTimeMs <= 0 {
		t.Fatalf("accounting missing: cpu %v peak %v wall %v", deref(r.CPUTimeMs), deref(r.PeakMemoryBytes), r.WallTimeMs)
	}
}

func TestVerdictNonzero(t *testing.T) {
	r := py(t, "import sys; sys.exit(42)")
	wantStatus(t, r, result.StatusNonzero)
	if r.ExitCode == nil || *r.ExitCode != 42 {
		t.Fatalf("exit code %v, want 42", deref(r.ExitCode))
	}
}

// The program is not PID 1: a signal it raises on itself kills it.
func TestVerdictSignaledSelf(t *testing.T) {
	r := py(t, "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)")
	wantStatus(t, r, result.StatusSignaled)
	if r.Signal == nil || *r.Signal != "SIGSEGV" {
		t.Fatalf("signal %v, want SIGSEGV", deref(r.Signal))
	}
	r = py(t, "import os, signal; os.kill(os.getpid(), signal.SIGKILL)")
	wantStatus(t, r, result.StatusSignaled) // SIGKILL by itself is not "memory"
}

func TestVerdictTimeout(t *testing.T) {
	start := time.Now()
	r := py(t, "while True: pass", "--timeout", "1s")
	wantStatus(t, r, result.StatusTimeout)
	if r.Limit != result.LimitWall {
		t.Fatalf("limit %q, want wall", r.Limit)
	}
	// Enforcement precision, not speed: the limit must fire near 1 s.
	if el := time.Since(start); el > 1500*time.Millisecond || r.WallTimeMs < 1000 {
		t.Fatalf("timeout after %v (program wall %.0f ms), want 1 s..1.5 s", el, r.WallTimeMs)
	}
	r = py(t, "import time; time.sleep(30)", "--timeout", "300ms")
	wantStatus(t, r, result.StatusTimeout) // sleeping counts: the limit is wall-clock
}

func TestVerdictOutputLimit(t *testing.T) {
	r := py(t, "import sys\nwhile True: sys.stdout.write('x' * 65536)", "--output-limit", "100K")
	wantStatus(t, r, result.StatusOutputLimit)
	if !r.StdoutTruncated || len(r.Stdout) != 100*1024 || r.Limit != result.LimitStdout {
		t.Fatalf("truncated=%v len=%d limit=%q", r.StdoutTruncated, len(r.Stdout), r.Limit)
	}
	r = py(t, "import sys\nsys.stderr.write('e' * 300000)", "--output-limit", "100K")
	wantStatus(t, r, result.StatusOutputLimit)
	if r.Limit != result.LimitStderr || !r.StderrTruncated {
		t.Fatalf("limit %q stderr_truncated %v", r.Limit, r.StderrTruncated)
	}
}

func TestVerdictSandboxError(t *testing.T) {
	r := py(t, "print(1)", "--python", "/usr/bin/no-such-python")
	wantStatus(t, r, result.StatusSandboxError)
	if r.Error == nil || !strings.Contains(*r.Error, "no-such-python") {
		t.Fatalf("error %v should name the missing interpreter", deref(r.Error))
	}
}

// A program that fills stderr before writing stdout must not deadlock.
func TestStderrBeforeStdout(t *testing.T) {
	r := py(t, "import sys\nsys.stderr.write('e' * 300000)\nsys.stderr.flush()\nprint('done')", "--timeout", "5s")
	wantStatus(t, r, result.StatusOK)
	if len(r.Stderr) != 300000 || r.Stdout != "done\n" {
		t.Fatalf("stderr %d bytes, stdout %q", len(r.Stderr), r.Stdout)
	}
}

func TestInvalidUTF8IsReplaced(t *testing.T) {
	r := py(t, "import sys; sys.stdout.buffer.write(b'a\\xffb')")
	wantStatus(t, r, result.StatusOK)
	if r.Stdout != "a\uFFFDb" {
		t.Fatalf("stdout %q", r.Stdout)
	}
}

func TestStdinReachesProgram(t *testing.T) {
	r := execJSON(t, "5\n", "-c", "import sys; print(int(sys.stdin.read()) * 2)")
	wantStatus(t, r, result.StatusOK)
	if r.Stdout != "10\n" {
		t.Fatalf("stdout %q", r.Stdout)
	}
}

func TestFileArgsAndWorkdir(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "main.py")
	os.WriteFile(script, []byte("import os, sys\nprint(os.getcwd(), open('/work/data.csv').read().strip(), sys.argv[1:])\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "data.csv"), []byte("a,b\n"), 0o644)
	r := execJSON(t, "", "--file", filepath.Join(dir, "data.csv")+":/work/data.csv", "--workdir", "/work", script, "x", "--y")
	wantStatus(t, r, result.StatusOK)
	if r.Stdout != "/work a,b ['x', '--y']\n" {
		t.Fatalf("stdout %q", r.Stdout)
	}
}

// Each isolation claim, checked from inside.
func TestIsolation(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	hostname, _ := os.Hostname()

	cases := []struct{ name, code, want string }{
		{"rootfs is read-only", `
import errno
try:
    open('/usr/lib/microbox-probe', 'w')
    print('writable')
except OSError as e:
    print(errno.errorcode[e.errno])`, "EROFS"},
		{"no host processes", `import os; print(sorted(int(p) for p in os.listdir('/proc') if p.isdigit()))`, "[1, 2]"},
		{"no route to the host's loopback", fmt.Sprintf(`
import socket
s = socket.socket()
s.settimeout(1)
try:
    s.connect(('127.0.0.1', %d))
    print('connected')
except OSError as e:
    print('refused')`, port), "refused"},
		{"own hostname", `import socket; print(socket.gethostname())`, "microbox"},
		{"only fds 0-2", `import os; print(sorted(int(f) for f in os.listdir('/proc/self/fd')))`, "[0, 1, 2, 3]"}, // 3 is listdir's own
		{"no capabilities, no_new_privs", `
s = dict(l.split(':', 1) for l in open('/proc/self/status') if ':' in l)
print(*(s[k].strip() for k in ('CapInh', 'CapPrm', 'CapEff', 'CapBnd', 'CapAmb', 'NoNewPrivs')))`,
			"0000000000000000 0000000000000000 0000000000000000 0000000000000000 0000000000000000 1"},
		{"unprivileged uid", `import os; print(os.getuid(), os.getgid(), os.getgroups())`, "1000 1000 []"},
		// A forked run maps its one uid in a user namespace of its own,
		// inside its template's (which holds its host uid range).
		{"not root on the host, in a uid range of its own", fmt.Sprintf(`m = open('/proc/self/uid_map').read().split()
if m[2] == '1': print(m[0], int(m[1]) %% 65536 == 1000, 'forked')
else: print(m[0], int(m[1]) >= %d and (int(m[1]) - %d) %% 65536 == 0, m[2])`, nsjail.HostIDBase, nsjail.HostIDBase), "0 True 65536"},
		{"no session or terminal", `import os; print(os.getsid(0) == os.getpid(), os.isatty(0))`, "True False"},
		{"host secrets absent", `import os; print(os.path.exists('/root'), os.path.exists('/etc/shadow'), os.path.exists('/home'))`, "False False False"},
		{"passwd names only the sandbox", `print(sorted(l.split(':')[0] for l in open('/etc/passwd')))`, "['nobody', 'root', 'sandbox']"},
		{"jail first under OOM", `print(open('/proc/self/oom_score_adj').read().strip(), open('/proc/1/oom_score_adj').read().strip())`, "1000 1000"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := py(t, c.code)
			wantStatus(t, r, result.StatusOK)
			want := c.want
			if r.Start == "zygote" && strings.HasPrefix(c.name, "not root on the host") {
				want = "1000 True forked"
			}
			if got := strings.TrimSpace(r.Stdout); got != want {
				t.Fatalf("got %q, want %q", got, want)
			}
		})
	}
	if hostname == "microbox" {
		t.Log("the host itself is called microbox; the hostname case proves less")
	}
}

// An interpreter that exists but cannot be executed inside the jail is a
// sandbox_error that says so, not a program failure.
func TestExecFailureInsideJail(t *testing.T) {
	root := t.TempDir()
	os.Chmod(root, 0o755)
	os.Chmod(filepath.Dir(root), 0o755) // the jail's user must reach it
	for _, d := range []string{"usr/bin", "proc", "dev", "tmp", "etc"} {
		os.MkdirAll(filepath.Join(root, d), 0o755)
	}
	os.WriteFile(filepath.Join(root, "usr/bin/python3"), []byte("#!/nonexistent/interpreter\n"), 0o755)
	r := py(t, "print(1)", "--rootfs", root)
	wantStatus(t, r, result.StatusSandboxError)
	if e := deref(r.Error); !strings.Contains(fmt.Sprint(e), "exec /usr/bin/python3") {
		t.Fatalf("error %v, want it to name the failed exec", e)
	}
}

// Only fds 0-2 reach the program even when microbox inherits more.
func TestInheritedFdsDoNotLeak(t *testing.T) {
	f, err := os.Open("/etc/hostname")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cmd := exec.Command(microbox, "exec", "--json", "-c", "import os; print(sorted(os.listdir('/proc/self/fd')))")
	cmd.ExtraFiles = []*os.File{f, f}
	r := jsonResult(t, cmd)
	if strings.TrimSpace(r.Stdout) != "['0', '1', '2', '3']" {
		t.Fatalf("fds inside: %s", r.Stdout)
	}
}

func TestEnvironmentIsFresh(t *testing.T) {
	cmd := exec.Command(microbox, "exec", "--json", "--env", "EXTRA=1", "-c", "import os; print(sorted(os.environ))")
	cmd.Env = append(os.Environ(), "MICROBOX_TEST_SECRET=leak")
	r := jsonResult(t, cmd)
	if strings.Contains(r.Stdout, "MICROBOX_TEST_SECRET") || !strings.Contains(r.Stdout, "'EXTRA'") || !strings.Contains(r.Stdout, "'PYTHONDONTWRITEBYTECODE'") {
		t.Fatalf("environment inside: %s", r.Stdout)
	}
}

// A daemon the program leaves behind dies with the run, which ends when
// the main process does.
func TestDescendantsDieWithTheRun(t *testing.T) {
	start := time.Now()
	r := py(t, `
import os, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        time.sleep(60)
    os._exit(0)
print('parent done')`, "--timeout", "10s")
	wantStatus(t, r, result.StatusOK)
	if time.Since(start) > 5*time.Second {
		t.Fatalf("the run was held %v by its daemon", time.Since(start))
	}
}

func TestBadInput(t *testing.T) {
	cases := []struct {
		name string
		args []string
		want string // part of the one-line error
	}{
		{"missing file", []string{"exec", "/no/such/file.py"}, "no such file"},
		{"bad size", []string{"exec", "--mem", "12Q", "-c", "1"}, "--mem"},
		{"negative duration", []string{"exec", "--timeout", "-1s", "-c", "1"}, "negative"},
		{"unknown flag", []string{"exec", "--frobnicate", "-c", "1"}, "unknown flag"},
		{"no program", []string{"exec"}, "no program"},
		{"rootfs without python", []string{"exec", "--rootfs", t.TempDir(), "-c", "1"}, "rootfs"},
		{"tmpfs larger than memory", []string{"exec", "--mem", "32M", "--tmpfs-size", "64M", "-c", "1"}, "--tmpfs-size"},
		{"limit without cgroup", []string{"exec", "--no-cgroup", "--mem", "1G", "-c", "1"}, "--no-cgroup"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cmd := exec.Command(microbox, c.args...)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			err := cmd.Run()
			ee, ok := err.(*exec.ExitError)
			if !ok || ee.ExitCode() != result.ExitSandboxError {
				t.Fatalf("exit %v, want %d", err, result.ExitSandboxError)
			}
			msg := strings.TrimSpace(stderr.String())
			if strings.Count(msg, "\n") != 0 || !strings.Contains(msg, c.want) {
				t.Fatalf("stderr %q: want one line mentioning %q", msg, c.want)
			}
		})
	}
	// Under --json, bad input is still exactly one JSON object.
	r := execJSON(t, "", "--mem", "12Q", "-c", "1")
	wantStatus(t, r, result.StatusSandboxError)
}

// Without --json the output streams through and the exit status tells the
// verdict.
func TestExitStatusWithoutJSON(t *testing.T) {
	cases := []struct {
		args []string
		code int
		out  string
	}{
		{[]string{"-c", "print('hi')"}, 0, "hi\n"},
		{[]string{"-c", "raise SystemExit(3)"}, 3, ""},
		{[]string{"-c", "import os; os.kill(os.getpid(), 11)"}, 128 + 11, ""},
		{[]string{"--timeout", "200ms", "-c", "while 1: pass"}, result.ExitTimeout, ""},
		{[]string{"--output-limit", "10", "-c", "print('x' * 100)"}, result.ExitOutputLimit, "xxxxxxxxxx"},
	}
	for _, c := range cases {
		out, code := runMicrobox(t, "", append([]string{"exec"}, c.args...)...)
		if code != c.code || string(out) != c.out {
			t.Errorf("%v: exit %d stdout %q, want %d %q", c.args, code, out, c.code, c.out)
		}
	}
}

// Killing microbox itself with SIGKILL takes the whole jail with it.
// (In-process: TestServeRunDiesWithItsClient is this test for a server.)
func TestSupervisorDeathKillsTheJail(t *testing.T) {
	cmd := exec.Command(microbox, "exec", "--timeout", "60s", "-c", `
import os, time
os.fork()
print('ready', flush=True)
time.sleep(60)`)
	cmd.Env = append(os.Environ(), socketEnv+"=")
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 16)
	stdout.Read(buf)                        // the jail is up
	pids := descendants(t, cmd.Process.Pid) // the jail, and the spawner if it is not reaped yet
	if len(jailPids(t, cmd.Process.Pid)) == 0 {
		t.Fatal("found no jail processes under microbox")
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	deadline := time.Now().Add(3 * time.Second)
	for _, pid := range pids {
		for alive(pid) {
			if time.Now().After(deadline) {
				t.Fatalf("jail process %d survived microbox's death", pid)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	// Its cgroup is left for gc, which removes it.
	if out, code := runMicrobox(t, "", "gc"); code != 0 {
		t.Fatalf("gc exit %d: %s", code, out)
	}
	assertNoRunCgroups(t)
}

// jailPids lists the descendants of pid in other pid namespaces than
// pid's: the jails' processes, without a spawner.
func jailPids(t *testing.T, pid int) []int {
	var out []int
	own, _ := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", pid))
	for _, p := range descendants(t, pid) {
		if ns, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", p)); err == nil && ns != own {
			out = append(out, p)
		}
	}
	return out
}

// descendants lists the descendants of pid.
func descendants(t *testing.T, pid int) []int {
	var out []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		var p int
		if _, err := fmt.Sscan(e.Name(), &p); err != nil {
			continue
		}
		for q := p; q > 1; q = ppid(q) {
			if q == pid && p != pid {
				out = append(out, p)
				break
			}
		}
	}
	return out
}

func ppid(pid int) int {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	fields := strings.Fields(string(data[bytes.LastIndexByte(data, ')')+1:]))
	var p int
	fmt.Sscan(fields[1], &p)
	return p
}

func alive(pid int) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	fields := strings.Fields(string(data[bytes.LastIndexByte(data, ')')+1:]))
	return fields[0] != "Z"
}

// assertNoRunCgroups fails if any microbox run cgroup exists on the host.
func assertNoRunCgroups(t *testing.T) {
	t.Helper()
	if leaks := runCgroups(); len(leaks) > 0 {
		t.Fatalf("leftover cgroups: %v", leaks)
	}
}

// strayBefore holds the orphaned run groups that were there before the
// suite started (TestMain).
var strayBefore = map[string]bool{}

// runCgroups lists the microbox run cgroups on the host, in any hierarchy,
// whose microbox process has ended and which were not there before the
// suite started: a leak. (Groups of microbox processes still running, e.g.
// another user's, are in use, not leaked.) A group is unlocked for an
// instant after its mkdir, before its maker locks it (a server starts the
// next runs' jails as soon as a run ends): only one still unlocked a
// moment later is a leak.
func runCgroups() []string {
	var unlocked []string
	filepath.WalkDir("/sys/fs/cgroup", func(p string, d os.DirEntry, err error) error {
		if err != nil || !d.IsDir() || !cgroup.IsRunGroup(d.Name()) {
			return nil
		}
		if !strayBefore[p] && cgroup.Orphaned(p) {
			unlocked = append(unlocked, p)
		}
		return filepath.SkipDir
	})
	if len(unlocked) == 0 {
		return nil
	}
	time.Sleep(100 * time.Millisecond)
	var found []string
	for _, p := range unlocked {
		if cgroup.Orphaned(p) {
			found = append(found, p)
		}
	}
	return found
}

// As an unprivileged user with no delegated cgroup: runs that ask for
// limits are refused with the fix, and --no-cgroup still runs fully
// namespaced, the program in a user namespace of its own as uid 1000.
func TestRootless(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to switch to an unprivileged user")
	}
	os.Chmod(filepath.Dir(microbox), 0o755)
	asNobody := func(args ...string) *exec.Cmd {
		cmd := exec.Command(microbox, args...)
		cmd.Dir = "/"
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		return cmd
	}
	r := jsonResult(t, asNobody("exec", "--no-cgroup", "--json", "-c",
		"import os; print(os.getuid(), {l.split()[1] for l in open('/proc/self/status') if l.startswith('Cap')})"))
	wantStatus(t, r, result.StatusOK)
	if got := strings.TrimSpace(r.Stdout); got != "1000 {'0000000000000000'}" {
		t.Fatalf("uid and empty capability sets inside: %q", got)
	}
	// Rootless, PID 1 and the program share a host uid; what keeps PID 1's
	// /proc files from the program is that PID 1 holds capabilities the
	// program lacks (and, behind that, PID 1 is not dumpable).
	r = jsonResult(t, asNobody("exec", "--no-cgroup", "--json", "-c",
		"try:\n    open('/proc/1/environ').read(); print('readable')\nexcept PermissionError:\n    print('denied')"))
	if got := strings.TrimSpace(r.Stdout); got != "denied" {
		t.Fatalf("/proc/1/environ from the program: %q (%s)", got, r.Stderr)
	}
	// The program's own file and a scratch working directory belong to it.
	script := filepath.Join(filepath.Dir(microbox), "rootless.py")
	os.WriteFile(script, []byte("import os; open('own', 'w').write('x'); print(os.stat(__file__).st_uid, os.getcwd())\n"), 0o644)
	r = jsonResult(t, asNobody("exec", "--no-cgroup", "--json", "--workdir", "/work", script))
	wantStatus(t, r, result.StatusOK)
	if got := strings.TrimSpace(r.Stdout); got != "1000 /work" {
		t.Fatalf("rootless run of a file in /work: owner and cwd %q", got)
	}
	_, errOut, code := runCmd(t, asNobody("exec", "-c", "print(1)"))
	if code != result.ExitSandboxError || !strings.Contains(string(errOut), "--no-cgroup") {
		t.Fatalf("a rootless run with limits: exit %d, stderr %q", code, errOut)
	}
	// A rootless supervisor cannot reach the jail's scratch area: --fetch
	// is refused by name before the run.
	_, errOut, code = runCmd(t, asNobody("exec", "--no-cgroup", "--json", "--fetch", "out", "-c", "open('out', 'w')"))
	if code != result.ExitSandboxError || !strings.Contains(string(errOut), "--fetch: files can be fetched only when microbox runs as root") {
		t.Fatalf("a rootless run that fetches: exit %d, stderr %q", code, errOut)
	}
}

// Read-only binds cover what the host mounted below them: a separate
// /usr/local (made here in a private mount namespace) stays read-only.
func TestReadOnlyBindCoversSubmounts(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a tmpfs in a private mount namespace")
	}
	code := "import errno\ntry:\n    open('/usr/local/microbox-probe', 'w')\n    print('writable')\nexcept OSError as e:\n    print(errno.errorcode[e.errno])"
	cmd := exec.Command("unshare", "-m", "--propagation", "private", "sh", "-c",
		`mount -t tmpfs -o mode=1777 microbox-test /usr/local && exec "$0" exec --json -c "$1"`, microbox, code)
	r := jsonResult(t, cmd)
	if strings.TrimSpace(r.Stdout) != "EROFS" {
		t.Fatalf("a host submount under /usr: %q (error %v)", r.Stdout, deref(r.Error))
	}
}

// The program gets microbox's stdin through a pipe, never the host file
// itself: reopening /proc/self/fd/0 for writing cannot reach the file.
func TestStdinIsNotTheHostFile(t *testing.T) {
	f := filepath.Join(t.TempDir(), "stdin.txt")
	os.WriteFile(f, []byte("original\n"), 0o666)
	in, err := os.Open(f)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	cmd := exec.Command(microbox, "exec", "--json", "-c", `
import os, sys
print(sys.stdin.readline().strip())
try:
    fd = os.open('/proc/self/fd/0', os.O_WRONLY | os.O_TRUNC)
    os.write(fd, b'overwritten\n')
except OSError as e:
    pass`)
	cmd.Stdin = in
	r := jsonResult(t, cmd)
	if strings.TrimSpace(r.Stdout) != "original" {
		t.Fatalf("stdin inside: %q", r.Stdout)
	}
	if data, _ := os.ReadFile(f); string(data) != "original\n" {
		t.Fatalf("the host file behind stdin became %q", data)
	}
}

// An in-process exec's spawner is forked before Go starts (client.c, then
// nsjail/nsinit's microbox_prestart_spawner), and gets what an exec'd one gets: a
// process group of its own, /dev/null for stdio, its socket, none of
// microbox's other descriptors and none of its environment or arguments
// (nor, then, does the jail's PID 1, its fork, whose /proc/1/cmdline the
// program may read). It serves that one jail: once the program runs, it
// has exited and been reaped (Spawner.done).
func TestExecSpawnerIsForkedBeforeGo(t *testing.T) {
	f, err := os.Open("/etc/hostname")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cmd, fifo := startWithFIFOProgram(t, "--env", "ARG_SECRET=marlin")
	cmd.Env = append(os.Environ(), socketEnv+"=", "MICROBOX_TEST_SECRET=swordfish")
	cmd.ExtraFiles = []*os.File{f}
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer cmd.Process.Signal(syscall.SIGTERM) // microbox ends the run and removes its cgroup
	sp := waitForSpawner(t, cmd.Process.Pid)
	// The forked child sets itself up after the fork: its descriptors come
	// last, after the wipe and its process group (nsinit/spawner.c).
	const wantFDs = "0→/dev/null 1→/dev/null 2→/dev/null 3→socket"
	for deadline := time.Now().Add(10 * time.Second); spawnerFDs(sp) != wantFDs && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	if got := spawnerFDs(sp); got != wantFDs {
		t.Errorf("the spawner's descriptors: %v, want %s", got, wantFDs)
	}
	mine, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", cmd.Process.Pid))
	its, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", sp))
	if !bytes.Equal(its, mine) {
		t.Errorf("the spawner's name %q is not microbox's %q: it was exec'd, not forked", its, mine)
	}
	if pgid, _ := syscall.Getpgid(sp); pgid != sp {
		t.Errorf("the spawner is in process group %d, want its own (%d)", pgid, sp)
	}
	checkNoSecrets := func(p int) {
		env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", p))
		if err != nil || bytes.Contains(env, []byte("swordfish")) {
			t.Errorf("process %d's environment holds microbox's (%v)", p, err)
		}
		args, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p))
		if err != nil || bytes.Contains(args, []byte("marlin")) {
			t.Errorf("process %d's command line holds microbox's (%v)", p, err)
		}
	}
	checkNoSecrets(sp)

	writeFIFO(t, fifo, "print('ready', flush=True); import time; time.sleep(60)")
	stdout.Read(make([]byte, 16)) // the program runs
	jail := jailPids(t, cmd.Process.Pid)
	if len(jail) == 0 {
		t.Fatal("found no jail processes under microbox")
	}
	checkNoSecrets(jail[0])
	// Gone from /proc: it has exited and microbox has reaped it.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", sp)); err != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the spawner (%d) is still there, or not reaped, while the program runs: it serves one jail", sp)
		}
	}
}

// A one-shot exec's spawner dies with microbox, even before it has cloned
// anything: at the EOF on its socket, and by its parent-death signal
// (nsinit/spawner.c) if it were stuck elsewhere.
func TestExecSpawnerDiesWithMicrobox(t *testing.T) {
	cmd, _ := startWithFIFOProgram(t)
	cmd.Env = append(os.Environ(), socketEnv+"=")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() }) // if the test ends early
	sp := waitForSpawner(t, cmd.Process.Pid)
	cmd.Process.Signal(syscall.SIGKILL) // waiting for its program: no jail, no cgroup yet
	for deadline := time.Now().Add(10 * time.Second); alive(sp); {
		if time.Now().After(deadline) {
			t.Fatalf("the spawner %d outlived microbox", sp)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// startWithFIFOProgram makes an in-process `microbox exec FIFO` with args
// before the program: microbox reads the program from the FIFO, and waits
// there, after its spawner was forked and before there is a jail.
func startWithFIFOProgram(t *testing.T, args ...string) (*exec.Cmd, string) {
	t.Helper()
	fifo := filepath.Join(t.TempDir(), "main.py")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	args = append(append([]string{"exec", "--timeout", "60s"}, args...), fifo)
	return exec.Command(microbox, args...), fifo
}

// writeFIFO writes the program into the FIFO microbox reads, failing,
// rather than hanging, if microbox never opens it.
func writeFIFO(t *testing.T, fifo, program string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		fd, err := unix.Open(fifo, unix.O_WRONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
		if err == unix.ENXIO && time.Now().Before(deadline) {
			continue // no reader yet
		}
		if err != nil {
			t.Fatalf("open %s for microbox to read: %v", fifo, err)
		}
		_, err = unix.Write(fd, []byte(program))
		unix.Close(fd)
		if err != nil {
			t.Fatalf("write the program: %v", err)
		}
		return
	}
}

// waitForSpawner returns the one process of microbox's pid namespace among
// its descendants: the spawner, forked by the ELF constructor, which may
// not have run yet when the test looks first.
func waitForSpawner(t *testing.T, pid int) int {
	t.Helper()
	own, _ := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", pid))
	var found []int
	for deadline := time.Now().Add(10 * time.Second); len(found) == 0 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
		found = nil
		for _, p := range descendants(t, pid) {
			if ns, _ := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", p)); ns == own {
				found = append(found, p)
			}
		}
	}
	if len(found) != 1 {
		t.Fatalf("processes of microbox's in its pid namespace: %v, want one spawner", found)
	}
	return found[0]
}

// spawnerFDs lists a spawner's descriptors as "fd→target" (socket targets
// without their inode).
func spawnerFDs(sp int) string {
	fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", sp))
	var open []string
	for _, fd := range fds {
		target, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", sp, fd.Name()))
		open = append(open, fd.Name()+"→"+strings.SplitN(target, ":", 2)[0])
	}
	return strings.Join(open, " ")
}

// --trace lists the run's phases in time order, up to the program's exit;
// an in-process exec's list opens with the process's own start (its entry
// point) and Go's main, before the run, at negative times.
func TestExecTrace(t *testing.T) {
	skipInZygoteMode(t, "the trace's phases are a cold jail's set-up")
	cmd := exec.Command(microbox, "exec", "--json", "--trace", "-c", "print(1)")
	r := jsonResult(t, cmd)
	wantStatus(t, r, result.StatusOK)
	at := map[string]float64{}
	var names []string
	for i, p := range r.Trace {
		if i > 0 && p.AtMs < r.Trace[i-1].AtMs {
			t.Errorf("phase %s at %.3f ms comes after %s at %.3f ms", p.Name, p.AtMs, r.Trace[i-1].Name, r.Trace[i-1].AtMs)
		}
		at[p.Name] = p.AtMs
		names = append(names, p.Name)
	}
	for _, want := range []string{"plan-read", "exec", "started", "exited"} {
		if _, ok := at[want]; !ok {
			t.Errorf("no %s phase in %v", want, names)
		}
	}
	if got := at["exited"] - at["started"]; got < r.WallTimeMs-0.01 || got > r.WallTimeMs+0.01 {
		t.Errorf("started → exited is %.3f ms, the program's wall time %.3f ms", got, r.WallTimeMs)
	}
	if os.Getenv(serveTestEnv) == "1" {
		return // a server's run: the client's process is not the supervisor's
	}
	if len(names) < 3 || names[0] != "process-start" || names[1] != "go-main" || at["go-main"] >= 0 {
		t.Errorf("an in-process trace opens with process-start and go-main before the run: %v", r.Trace[:min(3, len(r.Trace))])
	}
}

// SIGINT, SIGTERM or SIGHUP to an in-process exec end its run: the verdict
// says which signal, the jail is killed and its cgroup removed before
// microbox exits 125. (A server's client: TestServeSignalEndsTheRun.) The
// same holds for a microbox without CAP_KILL, as in a container whose pod
// grants only CAP_SETUID, CAP_SETGID and CAP_SETPCAP (docs/deploy.md): the
// jail's processes have host uids of their own, and it kills them anyway.
func TestExecInterrupted(t *testing.T) {
	type interrupt struct {
		name   string
		sig    syscall.Signal
		prefix []string
	}
	cases := []interrupt{{"SIGINT", syscall.SIGINT, nil}, {"SIGTERM", syscall.SIGTERM, nil}, {"SIGHUP", syscall.SIGHUP, nil}}
	if os.Geteuid() == 0 {
		if setpriv, err := exec.LookPath("setpriv"); err == nil {
			cases = append(cases, interrupt{"SIGTERM without CAP_KILL", syscall.SIGTERM, []string{setpriv, "--bounding-set", "-kill"}})
		}
	}
	for _, c := range cases {
		sig := c.sig
		t.Run(c.name, func(t *testing.T) {
			args := append(slices.Clone(c.prefix), microbox, "exec", "--timeout", "60s", "-c", "print('ready', flush=True); import time; time.sleep(60)")
			cmd := exec.Command(args[0], args[1:]...)
			cmd.Env = append(os.Environ(), socketEnv+"=")
			stdout, _ := cmd.StdoutPipe()
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			stdout.Read(make([]byte, 16)) // the program runs
			jail := jailPids(t, cmd.Process.Pid)
			if len(jail) == 0 {
				t.Fatal("found no jail processes under microbox")
			}
			cmd.Process.Signal(sig)
			// The program sleeps for a minute: an exit long before that
			// is the jail's kill, not its end.
			waited := make(chan error, 1)
			go func() { waited <- cmd.Wait() }()
			var err error
			select {
			case err = <-waited:
			case <-time.After(20 * time.Second):
				cmd.Process.Kill()
				<-waited
				t.Fatalf("microbox still ran 20 s after %v: the jail was not killed; stderr %s", sig, stderr.String())
			}
			if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != result.ExitSandboxError {
				t.Fatalf("microbox ended with %v, want exit %d; stderr %s", err, result.ExitSandboxError, stderr.String())
			}
			if want := "interrupted: " + unix.SignalName(sig); !strings.Contains(stderr.String(), want) {
				t.Errorf("stderr %q, want %q", stderr.String(), want)
			}
			for _, pid := range jail {
				if alive(pid) {
					t.Errorf("jail process %d outlived microbox", pid)
				}
			}
			if left := cgroupsOf(cmd.Process.Pid); len(left) > 0 {
				t.Errorf("cgroups left behind: %v", left)
			}
		})
	}
}

// A signal microbox's caller ignores (nohup's SIGHUP, a shell's trap "")
// does not end the run, in-process or through a server's client (the
// suite's second pass): microbox keeps an inherited SIG_IGN, as any
// process that does not ask for the signal does.
func TestExecKeepsIgnoredSignals(t *testing.T) {
	cmd := exec.Command("/bin/sh", "-c", `trap "" HUP TERM; exec "$@"`, "sh", microbox, "exec", "--timeout", "60s",
		"-c", "import time; print('ready', flush=True); time.sleep(1); print('done')")
	stdout, _ := cmd.StdoutPipe()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make([]byte, 6)
	if _, err := io.ReadFull(stdout, ready); err != nil || string(ready) != "ready\n" {
		t.Fatalf("the program's first line %q: %v; stderr %s", ready, err, stderr.String())
	}
	cmd.Process.Signal(syscall.SIGHUP)
	cmd.Process.Signal(syscall.SIGTERM)
	rest, _ := io.ReadAll(stdout)
	if err := cmd.Wait(); err != nil || string(rest) != "done\n" {
		t.Errorf("after the ignored SIGHUP and SIGTERM: %v, stdout %q, stderr %s", err, rest, stderr.String())
	}
}

// A signal microbox's caller ignores (nohup, a shell's trap "") or blocks
// is not ignored or blocked in the program: both survive execve, and the
// run must not depend on who started microbox.
func TestCallerIgnoredSignalsDoNotReachTheProgram(t *testing.T) {
	code := `print([l for l in open('/proc/self/status') if l.startswith('SigIgn')][0].split()[1])`
	cmd := exec.Command("/bin/sh", "-c", `trap "" HUP INT TERM; exec "$@"`, "sh", microbox, "exec", "--json", "-c", code)
	r := jsonResult(t, cmd)
	wantStatus(t, r, result.StatusOK)
	var ign uint64
	if _, err := fmt.Sscanf(strings.TrimSpace(r.Stdout), "%x", &ign); err != nil {
		t.Fatalf("SigIgn %q: %v", r.Stdout, err)
	}
	for _, sig := range []syscall.Signal{syscall.SIGHUP, syscall.SIGINT, syscall.SIGTERM} {
		if ign&(1<<(sig-1)) != 0 {
			t.Errorf("the program ignores %v, as microbox's caller did (SigIgn %x)", sig, ign)
		}
	}
	// Nor is a signal the caller blocked blocked in the program (a
	// blocked mask, too, survives execve).
	code = `print([l for l in open('/proc/self/status') if l.startswith('SigBlk')][0].split()[1])`
	cmd = exec.Command("/usr/bin/python3", "-c", `import os, signal, sys
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1, signal.SIGTERM})
os.execv(sys.argv[1], sys.argv[1:])`, microbox, "exec", "--json", "-c", code)
	r = jsonResult(t, cmd)
	wantStatus(t, r, result.StatusOK)
	var blk uint64
	if _, err := fmt.Sscanf(strings.TrimSpace(r.Stdout), "%x", &blk); err != nil {
		t.Fatalf("SigBlk %q: %v", r.Stdout, err)
	}
	if blk != 0 {
		t.Errorf("the program has signals blocked, as microbox's caller did (SigBlk %x)", blk)
	}
}

// An in-process exec's Go runtime starts confined to one CPU (client.c),
// but neither microbox's threads nor the program keep that: both run on
// the CPUs microbox's caller gave it.
func TestExecKeepsTheCallersCPUs(t *testing.T) {
	caller := cpusAllowed(t, "/proc/self/status")
	if !strings.ContainsAny(caller, ",-") {
		t.Skipf("this machine lets the test run on one CPU only (%s): a pin to one CPU cannot be told apart", caller)
	}
	cmd := exec.Command(microbox, "exec", "--timeout", "60s", "-c", `
print([l for l in open('/proc/self/status') if l.startswith('Cpus_allowed_list')][0].split()[1], flush=True)
import time; time.sleep(60)`)
	cmd.Env = append(os.Environ(), socketEnv+"=")
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer cmd.Process.Signal(syscall.SIGTERM) // microbox ends the run and removes its cgroup
	buf := make([]byte, 64)
	n, _ := stdout.Read(buf)
	if got := strings.TrimSpace(string(buf[:n])); got != caller {
		t.Errorf("the program may run on CPUs %s, its caller on %s", got, caller)
	}
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/status", cmd.Process.Pid))
	if len(tasks) == 0 {
		t.Fatal("found no threads of microbox")
	}
	for _, task := range tasks {
		if got := cpusAllowed(t, task); got != caller {
			t.Errorf("%s: microbox's thread may run on CPUs %s, its caller on %s", task, got, caller)
		}
	}
}

func cpusAllowed(t *testing.T, status string) string {
	data, err := os.ReadFile(status)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "Cpus_allowed_list:"); ok {
			return strings.TrimSpace(v)
		}
	}
	t.Fatalf("%s has no Cpus_allowed_list", status)
	return ""
}
