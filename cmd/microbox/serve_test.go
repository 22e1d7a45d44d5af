package main

// Tests of `microbox serve` and its client (client.c). The whole exec suite
// also runs through a server (MICROBOX_TEST_SERVE=1, see TestMain); these
// check what only a server has: that it really runs the client's program,
// that a run ends with its client, relative names, stdin, refusals and the
// fallback to an in-process run.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/microbox/microbox/cgroup"
	"github.com/microbox/microbox/internal/server"
	"github.com/microbox/microbox/result"
)

// socketEnv is the variable that sends a client to a server, or, set to
// "", keeps it in-process.
const socketEnv = server.SocketEnv

// launchServer starts `microbox serve` on socket, its log to log, and
// waits until it listens.
func launchServer(socket string, log io.Writer, args ...string) (*exec.Cmd, error) {
	if err := os.MkdirAll(filepath.Dir(socket), 0o700); err != nil {
		return nil, err
	}
	cmd := exec.Command(microbox, append([]string{"serve", "--socket", socket}, args...)...)
	cmd.Stderr = log
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if fi, err := os.Stat(socket); err == nil && fi.Mode()&os.ModeSocket != 0 {
			return cmd, nil
		}
	}
	stopServer(cmd)
	return nil, fmt.Errorf("microbox serve did not listen on %s", socket)
}

func stopServer(cmd *exec.Cmd) {
	cmd.Process.Signal(syscall.SIGTERM)
	cmd.Wait()
}

// startTestServer starts the server TestMain sends the whole suite to.
func startTestServer(socket string) (func(), error) {
	cmd, err := launchServer(socket, os.Stderr)
	if err != nil {
		return nil, err
	}
	return func() { stopServer(cmd) }, nil
}

// testServer starts a server of the test's own and returns its socket and
// pid; when the test ends, the server must stop and remove its socket.
func testServer(t *testing.T, args ...string) (string, int) {
	t.Helper()
	socket := filepath.Join(t.TempDir(), "s", "exec.sock")
	var log bytes.Buffer
	cmd, err := launchServer(socket, &log, args...)
	if err != nil {
		t.Fatalf("%v: %s", err, log.String())
	}
	t.Cleanup(func() {
		stopServer(cmd)
		if _, err := os.Stat(socket); err == nil {
			t.Errorf("the server left its socket behind")
		}
		t.Logf("server log:\n%s", log.String())
	})
	return socket, cmd.Process.Pid
}

// client is `microbox exec args...` sent to the server at socket.
func client(socket string, args ...string) *exec.Cmd {
	cmd := exec.Command(microbox, append([]string{"exec"}, args...)...)
	cmd.Env = append(os.Environ(), socketEnv+"="+socket)
	return cmd
}

// startSleeper starts a client whose program prints "ready" and sleeps,
// and returns once it printed.
func startSleeper(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 6)
	if n, _ := out.Read(buf); string(buf[:n]) != "ready\n" {
		t.Fatalf("program's first output %q", buf[:n])
	}
}

const sleeperCode = "import time; print('ready', flush=True); time.sleep(60)"

// A server stopped right after a run, while it starts the jails for the
// next ones, leaves no cgroup behind: it waits for them and ends them.
func TestServeStopLeavesNoCgroups(t *testing.T) {
	socket := filepath.Join(t.TempDir(), "s", "exec.sock")
	var log bytes.Buffer
	server, err := launchServer(socket, &log)
	if err != nil {
		t.Fatalf("%v: %s", err, log.String())
	}
	r := jsonResult(t, client(socket, "--json", "-c", "print(1)"))
	wantStatus(t, r, result.StatusOK)
	// Its refill is under way: stop it now.
	server.Process.Signal(syscall.SIGTERM)
	if err := server.Wait(); err != nil {
		t.Errorf("server: %v\nlog:\n%s", err, log.String())
	}
	if r.Cgroup == string(cgroup.ModeNone) {
		t.Skip("runs here get no cgroup: nothing to leave behind")
	}
	if left := cgroupsOf(server.Process.Pid); len(left) > 0 {
		t.Errorf("cgroups left behind by the stopped server: %v\nlog:\n%s", left, log.String())
	}
}

// The server, not the client, runs the jail: the program's processes are
// the server's descendants and the client has none. Every verdict is the
// one an in-process exec gives.
func TestServeRunsTheClientsProgram(t *testing.T) {
	socket, server := testServer(t)
	cmd := client(socket, "--timeout", "60s", "-c", sleeperCode)
	startSleeper(t, cmd)
	if pids := jailPids(t, cmd.Process.Pid); len(pids) != 0 {
		t.Errorf("the client has children %v: it ran the jail itself", pids)
	}
	if pids := jailPids(t, server); len(pids) < 2 {
		t.Errorf("the server's jailed descendants %v: want PID 1 and python", pids)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	cmd.Wait()

	for _, c := range []struct {
		args []string
		code int
		out  string
	}{
		{[]string{"-c", "print('hi')"}, 0, "hi\n"},
		{[]string{"-c", "raise SystemExit(3)"}, 3, ""},
		{[]string{"-c", "import os; os.kill(os.getpid(), 9)"}, 128 + 9, ""},
		{[]string{"--timeout", "200ms", "-c", "while 1: pass"}, result.ExitTimeout, ""},
		{[]string{"--mem", "64M", "--tmpfs-size", "16M", "-c", "x = bytearray(200 << 20)"}, result.ExitMemory, ""},
		{[]string{"--output-limit", "10", "-c", "print('x' * 100)"}, result.ExitOutputLimit, "xxxxxxxxxx"},
		{[]string{"--mem", "12Q", "-c", "1"}, result.ExitSandboxError, ""},
	} {
		out, _, code := runCmd(t, client(socket, c.args...))
		if code != c.code || string(out) != c.out {
			t.Errorf("%v: exit %d stdout %q, want %d %q", c.args, code, out, c.code, c.out)
		}
	}
}

// A run ends with its client: killing the client kills the jail, and the
// server removes the run's cgroup (no gc needed).
func TestServeRunDiesWithItsClient(t *testing.T) {
	skipInZygoteMode(t, "the server's templates outlive their clients by design (a forked run ending with its caller: internal/zygote's TestPoolRunEndsWithItsContext)")
	socket, server := testServer(t, "--warm", "0")
	cmd := client(socket, "--timeout", "60s", "-c", sleeperCode)
	startSleeper(t, cmd)
	pids := jailPids(t, server)
	if len(pids) == 0 {
		t.Fatal("no jail under the server")
	}
	cmd.Process.Kill()
	cmd.Wait()
	deadline := time.Now().Add(5 * time.Second)
	for _, pid := range pids {
		for alive(pid) {
			if time.Now().After(deadline) {
				t.Fatalf("jail process %d outlived its client", pid)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	for len(runCgroups()) > 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	assertNoRunCgroups(t)
}

// SIGTERM to the client ends the run as it ends an in-process one: the
// jail is killed and the verdict still reported.
func TestServeSignalEndsTheRun(t *testing.T) {
	socket, _ := testServer(t)
	cmd := client(socket, "--json", "--timeout", "60s", "-c", sleeperCode)
	var stdout bytes.Buffer
	r, w, _ := os.Pipe()
	cmd.Stdout = w
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	// With --json nothing streams: wait until python runs in the jail.
	time.Sleep(500 * time.Millisecond)
	cmd.Process.Signal(syscall.SIGTERM)
	stdout.ReadFrom(r)
	err := cmd.Wait()
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != result.ExitSandboxError {
		t.Fatalf("client ended with %v, want exit %d", err, result.ExitSandboxError)
	}
	if !strings.Contains(stdout.String(), `"status":"sandbox_error"`) || !strings.Contains(stdout.String(), "interrupted") {
		t.Fatalf("result %s", stdout.String())
	}
}

// Relative names are the client's: the program file, --file and the audit
// log are found from the client's working directory.
func TestServeUsesTheClientsDirectory(t *testing.T) {
	socket, _ := testServer(t)
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "prog.py"), []byte("print(open('data.txt').read())\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "data.txt"), []byte("from the client's directory"), 0o644)
	cmd := client(socket, "--audit-log", "audit.jsonl", "--file", "data.txt", "prog.py")
	cmd.Dir = dir
	out, errOut, code := runCmd(t, cmd)
	if code != 0 || strings.TrimSpace(string(out)) != "from the client's directory" {
		t.Fatalf("exit %d stdout %q stderr %q", code, out, errOut)
	}
	line, err := os.ReadFile(filepath.Join(dir, "audit.jsonl"))
	if err != nil || !strings.Contains(string(line), fmt.Sprintf(`"pid":%d`, cmd.Process.Pid)) {
		t.Fatalf("audit log in the client's directory, with the client's pid %d: %q %v", cmd.Process.Pid, line, err)
	}
}

// A stdin the caller never closes must not hold the run or the server: the
// program that does not read it ends, and the next run is served.
func TestServeStdinLeftOpen(t *testing.T) {
	socket, _ := testServer(t)
	r, w, _ := os.Pipe()
	defer w.Close()
	for i := range 2 {
		cmd := client(socket, "-c", "print('done')")
		cmd.Stdin = r
		done := make(chan []byte, 1)
		go func() { out, _, _ := runCmd(t, cmd); done <- out }()
		select {
		case out := <-done:
			if string(out) != "done\n" {
				t.Fatalf("run %d: stdout %q", i, out)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("run %d hangs on a stdin left open", i)
		}
	}
	cmd := client(socket, "-c", "import sys; print(sys.stdin.read())")
	cmd.Stdin = strings.NewReader("fed through")
	if out, _, _ := runCmd(t, cmd); string(out) != "fed through\n" {
		t.Fatalf("stdin through the server: %q", out)
	}
}

// Without a server the client runs in-process: no socket, a stale one, a
// path that is no socket at all.
func TestServeFallsBack(t *testing.T) {
	dir := t.TempDir()
	stale := filepath.Join(dir, "stale.sock")
	l, err := netListenUnix(stale)
	if err != nil {
		t.Fatal(err)
	}
	l.SetUnlinkOnClose(false)
	l.Close() // the socket file stays, nobody listens
	notSocket := filepath.Join(dir, "file")
	os.WriteFile(notSocket, nil, 0o600)
	for _, sock := range []string{filepath.Join(dir, "none.sock"), stale, notSocket} {
		out, errOut, code := runCmd(t, client(sock, "-c", "print('in-process')"))
		if code != 0 || string(out) != "in-process\n" {
			t.Errorf("socket %s: exit %d stdout %q stderr %q", sock, code, out, errOut)
		}
	}
}

// A server refuses a socket directory others may write, and a live
// server's socket.
func TestServeRefusesUnsafeSockets(t *testing.T) {
	open := filepath.Join(t.TempDir(), "open")
	os.Mkdir(open, 0o777)
	os.Chmod(open, 0o777)
	_, errOut, code := runCmd(t, exec.Command(microbox, "serve", "--socket", filepath.Join(open, "exec.sock")))
	if code != result.ExitSandboxError || !strings.Contains(string(errOut), "only you") {
		t.Errorf("world-writable directory: exit %d, stderr %q", code, errOut)
	}
	socket, _ := testServer(t)
	_, errOut, code = runCmd(t, exec.Command(microbox, "serve", "--socket", socket))
	if code != result.ExitSandboxError || !strings.Contains(string(errOut), "already listens") {
		t.Errorf("a live server's socket: exit %d, stderr %q", code, errOut)
	}
}

// A client of another user runs in-process: the server never runs a
// program for a user it is not.
func TestServeOtherUserRunsItself(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to switch to another user")
	}
	socket, server := testServer(t)
	os.Chmod(filepath.Dir(microbox), 0o755)
	// Let the other user reach the socket, as a careless set-up would.
	for d := filepath.Dir(socket); d != os.TempDir() && d != "/"; d = filepath.Dir(d) {
		os.Chmod(d, 0o755)
	}
	os.Chmod(socket, 0o777)
	cmd := client(socket, "--no-cgroup", "-c", "import time; print('ready', flush=True); time.sleep(60)")
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	startSleeper(t, cmd)
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	if pids := jailPids(t, server); len(pids) != 0 {
		t.Fatalf("the server runs a jail for another user: %v", pids)
	}
	if pids := jailPids(t, cmd.Process.Pid); len(pids) == 0 {
		t.Fatal("the client did not run its jail itself")
	}
}

func netListenUnix(path string) (*net.UnixListener, error) {
	return net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
}

// A client in another mount namespace names other files: it runs itself.
func TestServeOtherMountNamespaceRunsItself(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for unshare -m")
	}
	socket, server := testServer(t)
	cmd := exec.Command("unshare", "-m", "--propagation", "private", microbox, "exec", "--timeout", "60s", "-c", sleeperCode)
	cmd.Env = append(os.Environ(), socketEnv+"="+socket)
	startSleeper(t, cmd)
	// SIGTERM: the in-process run removes its cgroup before it exits.
	defer func() { cmd.Process.Signal(syscall.SIGTERM); cmd.Wait() }()
	if pids := jailPids(t, server); len(pids) != 0 {
		t.Fatalf("the server runs a jail for a client in another mount namespace: %v", pids)
	}
	if pids := jailPids(t, cmd.Process.Pid); len(pids) == 0 {
		t.Fatal("the client did not run its jail itself")
	}
}

// A server killed with runs in flight: every --json client still prints
// one parseable sandbox_error result (exit 125), and what the runs left
// (their cgroups, the socket) goes with the next run and the next server.
func TestServerKilledMidRun(t *testing.T) {
	socket := filepath.Join(t.TempDir(), "s", "exec.sock")
	srv, err := launchServer(socket, io.Discard, "--warm", "0")
	if err != nil {
		t.Fatal(err)
	}
	const clients = 8
	type outcome struct {
		out  []byte
		code int
	}
	done := make(chan outcome, clients)
	for range clients {
		go func() {
			cmd := exec.Command(microbox, "exec", "--json", "--timeout", "20s", "-c", "import time; print('started', flush=True); time.sleep(10)")
			cmd.Env = append(os.Environ(), socketEnv+"="+socket)
			var out bytes.Buffer
			cmd.Stdout = &out
			err := cmd.Run()
			code := 0
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			}
			done <- outcome{out.Bytes(), code}
		}()
	}
	// Kill it once every run has a jail.
	for deadline := time.Now().Add(15 * time.Second); len(jailPids(t, srv.Process.Pid)) < clients; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d runs started", len(jailPids(t, srv.Process.Pid)), clients)
		}
	}
	srv.Process.Kill()
	srv.Wait()
	for range clients {
		o := <-done
		var r result.Result
		if err := json.Unmarshal(o.out, &r); err != nil {
			t.Fatalf("a client printed no JSON result (%v): %q", err, o.out)
		}
		if o.code != result.ExitSandboxError || r.Status != result.StatusSandboxError || r.Error == nil || !strings.Contains(*r.Error, "ended before the run did") {
			t.Fatalf("exit %d status %s error %v", o.code, r.Status, deref(r.Error))
		}
	}
	// The next in-process run collects the dead server's groups (a
	// server collects once a minute, and under MICROBOX_TEST_SERVE the
	// suite's own may just have); the next server takes over its socket.
	time.Sleep(100 * time.Millisecond)
	next := exec.Command(microbox, "exec", "--json", "-c", "print(1)")
	next.Env = append(os.Environ(), socketEnv+"=")
	wantStatus(t, jsonResult(t, next), result.StatusOK)
	assertNoRunCgroups(t)
	srv2, err := launchServer(socket, io.Discard)
	if err != nil {
		t.Fatalf("a new server could not take the dead one's socket: %v", err)
	}
	stopServer(srv2)
}

// A stalled server (stopped here) does not keep its client for ever: the
// caller's first signal asks the server to end the run, and a second one
// ends the wait, with a sandbox_error that says so. The run ends once the
// server goes on and finds its client gone.
func TestServeStalledClientEndsOnSecondSignal(t *testing.T) {
	socket := filepath.Join(t.TempDir(), "s", "exec.sock")
	srv, err := launchServer(socket, io.Discard, "--warm", "0")
	if err != nil {
		t.Fatal(err)
	}
	defer stopServer(srv)
	cmd := exec.Command(microbox, "exec", "--timeout", "60s", "-c", sleeperCode)
	cmd.Env = append(os.Environ(), socketEnv+"="+socket)
	// A file, not a pipe: the stopped server's jail holds the client's
	// descriptors, and Wait would wait for a pipe's end.
	stderrFile, err := os.Create(filepath.Join(t.TempDir(), "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	defer stderrFile.Close()
	cmd.Stderr = stderrFile
	stderr := func() string { b, _ := os.ReadFile(stderrFile.Name()); return string(b) }
	startSleeper(t, cmd)
	srv.Process.Signal(syscall.SIGSTOP)
	cmd.Process.Signal(syscall.SIGINT)
	time.Sleep(200 * time.Millisecond)
	cmd.Process.Signal(syscall.SIGINT)
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	select {
	case err = <-waited:
	case <-time.After(10 * time.Second):
		cmd.Process.Kill()
		<-waited
		srv.Process.Signal(syscall.SIGCONT)
		t.Fatalf("the client still waited for its stopped server 10 s after a second SIGINT; stderr %s", stderr())
	}
	srv.Process.Signal(syscall.SIGCONT)
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != result.ExitSandboxError || !strings.Contains(stderr(), "did not answer") {
		t.Errorf("client ended with %v, stderr %q; want exit %d saying the server did not answer", err, stderr(), result.ExitSandboxError)
	}
	if zygoteMode { // the jail processes under the server include its template, which outlives the run (TestServeRunDiesWithItsClient)
		return
	}
	for deadline := time.Now().Add(10 * time.Second); len(jailPids(t, srv.Process.Pid)) > 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the run outlived its client once the server went on")
		}
	}
}

// A client that connects and sends nothing does not keep SIGTERM from
// stopping the server.
func TestServeStopsWithIdleClient(t *testing.T) {
	socket := filepath.Join(t.TempDir(), "s", "exec.sock")
	srv, err := launchServer(socket, io.Discard, "--warm", "0")
	if err != nil {
		t.Fatal(err)
	}
	idle, err := net.Dial("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	time.Sleep(100 * time.Millisecond)
	start := time.Now()
	srv.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { srv.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		srv.Process.Kill()
		<-done
		t.Fatal("the server did not stop within 5 s of SIGTERM with an idle client connected")
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("the server took %s to stop", took)
	}
}

// A server out of descriptors neither fails runs nor floods its log: the
// clients it cannot serve run in-process, as promised.
func TestServeOutOfDescriptors(t *testing.T) {
	skipInZygoteMode(t, "a template holds a descriptor per child's uid range (docs/zygote.md), beyond this test's 48")
	socket := filepath.Join(t.TempDir(), "s", "exec.sock")
	os.MkdirAll(filepath.Dir(socket), 0o700)
	var log bytes.Buffer
	srv := exec.Command("sh", "-c", "ulimit -n 48 && exec "+microbox+" serve --warm 0 --socket "+socket)
	srv.Stderr = &log
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer stopServer(srv)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if fi, err := os.Stat(socket); err == nil && fi.Mode()&os.ModeSocket != 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server did not listen: %s", log.String())
		}
	}
	const clients = 24
	errs := make(chan string, clients)
	for i := range clients {
		go func() {
			cmd := exec.Command(microbox, "exec", "--json", "-c", fmt.Sprintf("import time; time.sleep(0.3); print(%d)", i))
			cmd.Env = append(os.Environ(), socketEnv+"="+socket)
			out, _ := cmd.Output()
			var r result.Result
			if err := json.Unmarshal(out, &r); err != nil || r.Status != result.StatusOK || r.Stdout != fmt.Sprintf("%d\n", i) {
				errs <- fmt.Sprintf("client %d: %v status %s error %v stdout %q", i, err, r.Status, deref(r.Error), r.Stdout)
				return
			}
			errs <- ""
		}()
	}
	for range clients {
		if e := <-errs; e != "" {
			t.Error(e)
		}
	}
	if n := strings.Count(log.String(), "\n"); n > 20 {
		t.Errorf("the server logged %d lines:\n%.2000s", n, log.String())
	}
}
