package main

// Tests of a socket-activated `microbox serve` (internal/server's
// activation.go): the socket comes from a service manager as fd 3, with
// LISTEN_PID and LISTEN_FDS, as systemd passes deploy/systemd/microbox.socket.

import (
	"bytes"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/microbox/microbox/result"
)

// activationSocket is a listening socket, mode 0600 in a private
// directory, as the socket unit makes it; the test keeps it, as the
// manager does across the servers it starts.
func activationSocket(t *testing.T, mode os.FileMode) (string, *os.File) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "exec.sock")
	l, err := netListenUnix(path)
	if err != nil {
		t.Fatal(err)
	}
	l.SetUnlinkOnClose(false)
	f, err := l.File()
	l.Close()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
	return path, f
}

// activated is `microbox serve args...` started the way a service manager
// starts it: socket as fd 3, LISTEN_FDS=fds and LISTEN_PID its own pid.
func activated(socket *os.File, fds string, log io.Writer, args ...string) *exec.Cmd {
	cmd := exec.Command("/bin/sh", append([]string{"-c", `export LISTEN_PID=$$ LISTEN_FDS=` + fds + `; exec "$0" serve "$@"`, microbox}, args...)...)
	cmd.ExtraFiles = []*os.File{socket}
	if log != nil {
		cmd.Stderr = log
	}
	return cmd
}

// A socket-activated server serves the socket it was passed, exits when
// idle (--idle-exit) and leaves the socket to the next: a client that
// connected while no server ran is served by the next one started.
func TestActivationServesAndExitsWhenIdle(t *testing.T) {
	path, sock := activationSocket(t, 0o600)
	var log syncBuffer
	srv, exited := startActivated(t, sock, &log, "--socket", path, "--warm", "0", "--idle-exit", "500ms")
	defer func() {
		// exited has the server's one Wait: a second would block.
		if exited != nil {
			srv.Process.Signal(syscall.SIGTERM)
			<-exited
		}
		t.Logf("server log:\n%s", log.String())
	}()
	cmd := client(path, "--timeout", "60s", "-c", sleeperCode)
	startSleeper(t, cmd)
	if pids := jailPids(t, cmd.Process.Pid); len(pids) != 0 {
		t.Errorf("the client has children %v: it ran the jail itself", pids)
	}
	if pids := jailPids(t, srv.Process.Pid); len(pids) < 2 {
		t.Errorf("the server's jailed descendants %v: want PID 1 and python", pids)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	cmd.Wait()
	select {
	case err := <-exited:
		exited = nil
		if err != nil {
			t.Fatalf("the idle server: %v", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the server did not exit once idle")
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("the idle server removed the manager's socket: %v", err)
	}

	// The next client connects while no server runs, as systemd's socket
	// lets it; the server started for it serves it.
	var out bytes.Buffer
	next := client(path, "-c", "print('queued')")
	next.Stdout = &out
	if err := next.Start(); err != nil {
		t.Fatal(err)
	}
	waitConnected(t, path)
	srv, exited = startActivated(t, sock, &log, "--warm", "0", "--idle-exit", "500ms")
	if err := next.Wait(); err != nil || out.String() != "queued\n" {
		t.Fatalf("the queued client: %v, stdout %q", err, out.String())
	}
}

// startActivated starts an activated server and waits until it serves;
// exited gets its Wait's error (the server's only Wait).
func startActivated(t *testing.T, sock *os.File, log *syncBuffer, args ...string) (*exec.Cmd, <-chan error) {
	t.Helper()
	srv := activated(sock, "1", log, args...)
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- srv.Wait() }()
	n := strings.Count(log.String(), "serving exec on")
	for strings.Count(log.String(), "serving exec on") == n {
		select {
		case err := <-exited:
			t.Fatalf("the activated server ended (%v) before it served: %s", err, log.String())
		case <-time.After(5 * time.Millisecond):
		}
	}
	return srv, exited
}

// waitConnected waits until a client's connection waits on the socket at
// path (ss would say so; a second connection that is accepted by nobody
// tells us the backlog is in use, so look at the socket's queue instead).
func waitConnected(t *testing.T, path string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		data, _ := os.ReadFile("/proc/net/unix")
		for _, line := range strings.Split(string(data), "\n") {
			f := strings.Fields(line)
			// Num RefCount Protocol Flags Type St Inode Path: a listener
			// with connections waiting has a RefCount above 2.
			if len(f) == 8 && f[7] == path && f[1] != "00000002" {
				return
			}
		}
	}
	t.Fatal("the client never connected")
}

// A passed socket others could use, more sockets than the exec socket,
// and --idle-exit with the HTTP API are refused, each with the fix.
func TestActivationRefusals(t *testing.T) {
	open, openSock := activationSocket(t, 0o666)
	path, sock := activationSocket(t, 0o600)
	for _, c := range []struct {
		name string
		cmd  *exec.Cmd
		want string
	}{
		{"mode 0666", activated(openSock, "1", nil, "--socket", open, "--warm", "0"), "SocketMode=0600"},
		{"two sockets", activated(sock, "2", nil, "--socket", path, "--warm", "0"), "exactly one ListenStream="},
		{"another --socket", activated(sock, "1", nil, "--socket", path+".other", "--warm", "0"), "socket activation passed " + path},
		{"--http", exec.Command(microbox, "serve", "--socket", path, "--idle-exit", "1m", "--http", "127.0.0.1:0"), "--idle-exit 1m0s with --http"},
	} {
		var errOut bytes.Buffer
		c.cmd.Stderr = &errOut
		if err := c.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// A server that took the socket would serve until stopped.
		stop := time.AfterFunc(60*time.Second, func() { c.cmd.Process.Kill() })
		err := c.cmd.Wait()
		stop.Stop()
		code := -1
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		}
		if code != result.ExitSandboxError || !strings.Contains(errOut.String(), c.want) {
			t.Errorf("%s: exit %d (%v), stderr %q; want %d and %q", c.name, code, err, errOut.String(), result.ExitSandboxError, c.want)
		}
	}
	if c, err := net.Dial("unix", path); err != nil {
		t.Errorf("a refusal closed the manager's socket: %v", err)
	} else {
		c.Close()
	}
}
