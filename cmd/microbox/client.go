package main

// client.c is the client half of `microbox serve` (internal/server): it
// is the binary's entry point, before the C library and the Go runtime
// start, and whenever this binary is started as `microbox exec` it hands
// the run to a server if one listens.

// #cgo CFLAGS: -O2 -Wall -Wextra -Wno-unused-parameter -I${SRCDIR}/../../nsjail/nsinit
// #cgo LDFLAGS: -Wl,-e,mbxentry
// void microbox_unpin(void);
// int microbox_catch_interrupts(void);
// extern long long microbox_constructor_ns;
import "C"

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"

	"github.com/microbox/microbox/internal/interrupt"
	"github.com/microbox/microbox/nsjail"
)

// serverLostEnv carries the client's report of a server that died mid-run
// into this binary, started again to print it (client.c: server_lost).
const serverLostEnv = "_MICROBOX_SERVER_LOST"

// serverLost is that report, if this start of the binary is for it.
func serverLost() error {
	msg := os.Getenv(serverLostEnv)
	if msg == "" {
		return nil
	}
	os.Unsetenv(serverLostEnv)
	return errors.New(msg)
}

// oneProcessor is the Go half of the constructor's pin (client.c) for a
// one-shot exec: one processor, and the caller's CPUs back for every
// thread. GOMAXPROCS is fixed first: set, it no longer follows the CPUs
// the runtime may use, which the unpin changes.
func oneProcessor() {
	if os.Getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(1)
	}
	C.microbox_unpin()
}

// catchInterrupts returns a context that SIGINT, SIGTERM or SIGHUP cancel,
// with the first one as its cause. The handler is C's (client.c) and stays
// for the rest of the process's life, which for a one-shot exec ends with
// the run: later signals are read and dropped. An in-process exec takes
// this over os/signal, whose threads cost a run about 2 ms here.
func catchInterrupts() (context.Context, context.CancelFunc, error) {
	fd, err := C.microbox_catch_interrupts()
	if fd < 0 {
		return nil, nil, fmt.Errorf("catch SIGINT, SIGTERM and SIGHUP: %w", err)
	}
	ctx, stop := interrupt.FromPipe(os.NewFile(uintptr(fd), "interrupts"))
	return ctx, stop, nil
}

// processMoments are the process's own moments before its run, for
// --trace: the exec's entry (client.c, after the kernel's execve, before
// libc's start-up) and Go's main. None for a process that did not start
// as `microbox exec`.
func processMoments(goMain nsjail.Moment) []nsjail.Moment {
	if C.microbox_constructor_ns == 0 {
		return nil
	}
	return []nsjail.Moment{{Name: "process-start", At: int64(C.microbox_constructor_ns)}, goMain}
}
