// Package interrupt turns the signals that ask microbox to stop (SIGINT,
// SIGTERM, SIGHUP) into a context whose cause names the signal: the run
// in progress is killed and its cgroup removed, and its verdict says
// "interrupted: SIGTERM".
package interrupt

import (
	"context"
	"errors"
	"io"
	"os"
	"os/signal"
	"syscall"

	"golang.org/x/sys/unix"
)

// Signals are the signals that stop microbox.
var Signals = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP}

// Signal is the cause of a context a signal ended.
type Signal struct{ syscall.Signal }

func (s Signal) Error() string { return unix.SignalName(s.Signal) }

// Context is cancelled by the first of Signals, with it as the cause. It
// also catches SIGPIPE, so that a reader that goes away makes writes fail
// with EPIPE, which callers handle, instead of killing microbox before it
// has cleaned up. stop gives the signals their default action back: a
// second one then ends microbox at once. Caught signals are reset in the
// jails by execve.
func Context(parent context.Context) (ctx context.Context, stop func()) {
	ctx, cancel := context.WithCancelCause(parent)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, append(Signals, syscall.SIGPIPE)...)
	go func() {
		for s := range sigs {
			if s != syscall.SIGPIPE {
				cancel(Signal{s.(syscall.Signal)})
			}
		}
	}()
	return ctx, func() {
		signal.Stop(sigs)
		cancel(nil)
	}
}

// FromPipe is Context for signals a handler of microbox's own writes to a
// pipe, one byte per signal number (a one-shot exec's C handler, which
// spares Go's os/signal threads: cmd/microbox/client.c). The pipe is read
// in Go's poller for as long as it is open.
func FromPipe(pipe io.Reader) (ctx context.Context, stop func()) {
	ctx, cancel := context.WithCancelCause(context.Background())
	go func() {
		var b [1]byte
		for {
			n, err := pipe.Read(b[:])
			if err != nil {
				return
			}
			if n == 1 {
				cancel(Signal{syscall.Signal(b[0])}) // the first cause stays
			}
		}
	}()
	return ctx, func() { cancel(nil) }
}

// Cause is the signal that ended ctx, or 0.
func Cause(ctx context.Context) syscall.Signal {
	var s Signal
	if errors.As(context.Cause(ctx), &s) {
		return s.Signal
	}
	return 0
}
