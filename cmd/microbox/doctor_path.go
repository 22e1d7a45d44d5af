package main

// doctor's exec.path: whether a `microbox exec` run here, by this user
// with this environment, is served (client.c hands it to a server) or
// runs in-process, and why.

import (
	"errors"
	"fmt"
	"os"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/microbox/microbox/internal/doctor"
	"github.com/microbox/microbox/internal/server"
)

const servedFix = "for served runs (most of an exec's start-up off the caller's clock): install deploy/systemd/microbox.socket (docs/deploy.md), or run microbox serve"

// execPathCheck looks where the client does: $MICROBOX_SOCKET, else the
// default socket. It connects, as the client would; under socket
// activation that starts the server, which is then ready for the next
// exec. The server's own refusals (another mount namespace, a closed
// descriptor 0 to 2) are not foreseen here: they cost a run time, never
// isolation.
func execPathCheck() doctor.Check {
	c := doctor.Check{Name: "exec.path", Status: doctor.Warn}
	path, set := os.LookupEnv(server.SocketEnv)
	switch {
	case set && path == "":
		c.Status, c.Detail = doctor.OK, "in-process: $"+server.SocketEnv+" is empty, which turns the server off"
		return c
	case !set:
		path = server.DefaultSocket
	}
	var st unix.Stat_t
	err := unix.Stat(path, &st)
	switch {
	case errors.Is(err, unix.ENOENT):
		c.Detail, c.Fix = "in-process: no server socket at "+path, servedFix
	case err != nil:
		c.Detail, c.Fix = fmt.Sprintf("in-process: %s: %v", path, err), servedFix
	case st.Mode&unix.S_IFMT != unix.S_IFSOCK:
		c.Detail, c.Fix = "in-process: "+path+" is not a socket", "remove it, or point $"+server.SocketEnv+" at a server's socket"
	case int(st.Uid) != os.Geteuid():
		c.Detail, c.Fix = fmt.Sprintf("in-process: the server at %s is uid %d's, and serves only its own user", path, st.Uid), "run a server as this user (microbox serve with $"+server.SocketEnv+" in a directory of yours)"
	default:
		c.Status, c.Detail, c.Fix = probeServer(path)
	}
	return c
}

// probeServer connects to the socket at path.
func probeServer(path string) (doctor.Status, string, string) {
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err == nil {
		err = unix.Connect(fd, &unix.SockaddrUnix{Name: path})
		unix.Close(fd)
	}
	switch {
	case err == nil:
		return doctor.OK, "served: a server listens on " + path + " (or systemd starts one for its first client)", ""
	case errors.Is(err, syscall.ECONNREFUSED):
		return doctor.Warn, "in-process: nobody listens on " + path + " (a server that stopped left it)", servedFix
	default:
		return doctor.Warn, fmt.Sprintf("in-process: cannot connect to %s: %v", path, err), servedFix
	}
}
