package server

import (
	"io"
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// cancellableFile reads a client's stdin for the run: the descriptor is
// the caller's and may stay open, unread, long after the run (a terminal,
// a pipe the caller never closes), so a read must be ended by the server
// rather than block a thread for ever. The file is left in blocking mode:
// its flags are shared with the caller. The pipe that ends reads is made
// by the first read: most runs have no stdin (the caller's is /dev/null)
// and never read it.
type cancellableFile struct {
	f *os.File

	mu        sync.Mutex
	stop      *os.File // closed (write end) by cancel
	r         *os.File
	noPipe    bool // os.Pipe failed: reads are plain
	cancelled bool
}

func newCancellableFile(f *os.File) *cancellableFile {
	return &cancellableFile{f: f}
}

// pipe is the read end of the pipe cancel closes, made on first use; nil
// when none could be made. cancelled says the run is over.
func (c *cancellableFile) pipe() (r *os.File, cancelled bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cancelled {
		return nil, true
	}
	if c.r == nil && !c.noPipe {
		r, w, err := os.Pipe()
		if err != nil {
			c.noPipe = true
		} else {
			c.r, c.stop = r, w
		}
	}
	return c.r, false
}

func (c *cancellableFile) Read(p []byte) (int, error) {
	stop, cancelled := c.pipe()
	if cancelled {
		return 0, io.EOF
	}
	if stop == nil {
		return c.f.Read(p)
	}
	fds := []unix.PollFd{{Fd: int32(c.f.Fd()), Events: unix.POLLIN}, {Fd: int32(stop.Fd()), Events: unix.POLLIN}}
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
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cancelled = true
	if c.stop != nil {
		c.stop.Close()
	}
}
