package nsjail

import (
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// The supervisor's side of the sockets that carry descriptors (SCM_RIGHTS)
// or credentials: the spawner's (spawner.go) and a zygote's (zygote.go).
// Each waits in Go's poller, never in a thread blocked in a system call,
// for a socket of ours that is non-blocking.

// sendmsg sends msg with oob (unix.UnixRights: descriptors) on f, waiting
// in the poller while the socket is full; a peer that is gone is EPIPE or
// ECONNRESET, not SIGPIPE.
func sendmsg(f *os.File, msg, oob []byte) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Write(func(fd uintptr) bool {
		serr = unix.Sendmsg(int(fd), msg, oob, nil, unix.MSG_NOSIGNAL)
		return serr != unix.EAGAIN && serr != unix.EINTR
	}); err != nil {
		return err
	}
	return serr
}

// recvmsg receives one message on f, within f's read deadline, and its
// control messages into oob; a message of no bytes is io.EOF, the other
// side's close.
func recvmsg(f *os.File, buf, oob []byte) (n, oobn int, err error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return 0, 0, err
	}
	var rerr error
	if err := rc.Read(func(fd uintptr) bool {
		n, oobn, _, _, rerr = unix.Recvmsg(int(fd), buf, oob, 0)
		return rerr != unix.EAGAIN && rerr != unix.EINTR
	}); err != nil {
		return 0, 0, err
	}
	if rerr == nil && n == 0 {
		rerr = io.EOF
	}
	return n, oobn, rerr
}
