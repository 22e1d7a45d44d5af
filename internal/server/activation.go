package server

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/microbox/microbox/field"
)

// Socket activation (systemd's sd_listen_fds protocol, small enough to
// speak here): a service manager that made the exec socket itself
// (deploy/systemd/microbox.socket) starts the server on the socket's first
// connection with the socket as fd 3, LISTEN_FDS=1 and LISTEN_PID our pid.
// Clients connect before the server runs; their connections wait in the
// socket's queue, and a server that exits when idle (Options.IdleExit)
// leaves the queue to the next one the manager starts.
const (
	listenFDsStart = 3
	listenPIDEnv   = "LISTEN_PID"
	listenFDsEnv   = "LISTEN_FDS"
	listenNamesEnv = "LISTEN_FDNAMES"
)

// activatedSocket returns the exec socket a service manager passed this
// process, nil when none was passed (no LISTEN_PID, or another process's).
// The variables are unset either way, so nothing the server starts
// inherits them. The socket is checked as listen makes its own: a
// listening Unix stream socket, a file of this user's with mode 0600 or
// stricter, in a directory only this user can write.
func activatedSocket() (*net.UnixListener, string, error) {
	pid, fds := os.Getenv(listenPIDEnv), os.Getenv(listenFDsEnv)
	for _, v := range []string{listenPIDEnv, listenFDsEnv, listenNamesEnv} {
		os.Unsetenv(v)
	}
	if pid == "" || pid != strconv.Itoa(os.Getpid()) {
		return nil, "", nil
	}
	if fds != "1" {
		return nil, "", fmt.Errorf("serve: socket activation passed %s=%q sockets; give the socket unit exactly one ListenStream=, the exec socket", listenFDsEnv, fds)
	}
	unix.CloseOnExec(listenFDsStart)
	path, err := checkActivated(listenFDsStart)
	if err != nil {
		return nil, "", fmt.Errorf("serve: the socket passed by socket activation: %w", err)
	}
	f := os.NewFile(listenFDsStart, "exec socket")
	l, err := net.FileListener(f) // a duplicate: the manager keeps the socket
	f.Close()
	if err != nil {
		return nil, "", fmt.Errorf("serve: the socket passed by socket activation: %w", err)
	}
	ul, ok := l.(*net.UnixListener)
	if !ok {
		l.Close()
		return nil, "", errors.New("serve: the socket passed by socket activation is not a Unix socket")
	}
	ul.SetUnlinkOnClose(false) // the manager's socket, for the next server
	return ul, path, nil
}

// checkActivated checks that fd is a listening Unix stream socket bound to
// a private path, and returns the path.
func checkActivated(fd int) (string, error) {
	for _, want := range []struct{ opt, value int }{
		{unix.SO_DOMAIN, unix.AF_UNIX}, {unix.SO_TYPE, unix.SOCK_STREAM}, {unix.SO_ACCEPTCONN, 1},
	} {
		v, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, want.opt)
		if err != nil {
			return "", err
		}
		if v != want.value {
			return "", field.Errorf("Socket", "fd %d is not a listening Unix stream socket; use ListenStream=/run/microbox/exec.sock in the socket unit", fd)
		}
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		return "", err
	}
	un, ok := sa.(*unix.SockaddrUnix)
	if !ok || !filepath.IsAbs(un.Name) {
		return "", field.Errorf("Socket", "fd %d is not bound to a file; use ListenStream=/run/microbox/exec.sock in the socket unit", fd)
	}
	var st unix.Stat_t
	if err := unix.Stat(un.Name, &st); err != nil {
		return "", err
	}
	if int(st.Uid) != os.Geteuid() || st.Mode&0o077 != 0 {
		return "", field.Errorf("Socket", "%s is owned by uid %d with mode %o; set SocketMode=0600 (and SocketUser= the server's user) in the socket unit", un.Name, st.Uid, st.Mode&0o7777)
	}
	if err := privateDirectory(filepath.Dir(un.Name)); err != nil {
		return "", err
	}
	return un.Name, nil
}
