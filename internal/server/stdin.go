package server

import (
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// cancellableFile reads a client's stdin for the run: the descriptor is
// the caller's and may stay open, unread, long after the run (a terminal,
// a pipe the caller never closes), so a read must be ended by the server
// rather than block a thread for ever. The file is left in blocking mode:
// its flags are shared with the caller.
type cancellableFile struct {
	f    *os.File
	stop *os.File // closed (write end) by cancel
	r    *os.File
}

func newCancellableFile(f *os.File) *cancellableFile {
	r, w, err := os.Pipe()
	if err != nil {
		return &cancellableFile{f: f}
	}
	return &cancellableFile{f: f, stop: w, r: r}
}

func (c *cancellableFile) Read(p []byte) (int, error) {
	if c.r == nil {
		return c.f.Read(p)
	}
	fds := []unix.PollFd{{Fd: int32(c.f.Fd()), Events: unix.POLLIN}, {Fd: int32(c.r.Fd()), Events: unix.POLLIN}}
	for {
		_, err := unix.Poll(fds, -1)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return 0, err
		}
		if fds[1].Revents != 0 {
			return 0, io.EOF // the run is over
		}
		return c.f.Read(p)
	}
}

// cancel ends every read, present and future. The pipe's read end is
// left to its finalizer: a copying goroutine of os/exec may still be
// about to poll it.
func (c *cancellableFile) cancel() {
	if c.stop != nil {
		c.stop.Close()
	}
}
