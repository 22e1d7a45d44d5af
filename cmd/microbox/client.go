package main

// client.c is the client half of `microbox serve` (serve.go): it runs as an
// ELF constructor, before the Go runtime, whenever this binary is started
// as `microbox exec`, and hands the run to a server if one listens.

// #cgo CFLAGS: -O2 -Wall -Wextra -Wno-unused-parameter
// void microbox_unpin(void);
import "C"

import (
	"os"
	"runtime"
)

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
