package main

import (
	"context"
	"os"
	"syscall"
	"testing"
	"time"
)

// catchInterrupts turns a signal into its context's cause through the C
// handler and the pipe (client.c); a later signal is drained, and neither
// kills the process. (Installed for the rest of this test binary's life,
// which sends itself no other SIGHUP.)
func TestCatchInterrupts(t *testing.T) {
	ctx, stop, err := catchInterrupts()
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	syscall.Kill(os.Getpid(), syscall.SIGHUP)
	select {
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("SIGHUP did not cancel the context")
	}
	if sig := interruptedBy(ctx); sig != syscall.SIGHUP {
		t.Errorf("cause %v, want SIGHUP", context.Cause(ctx))
	}
	syscall.Kill(os.Getpid(), syscall.SIGTERM)
	time.Sleep(50 * time.Millisecond) // delivered and drained, or this test binary is gone
	if sig := interruptedBy(ctx); sig != syscall.SIGHUP {
		t.Errorf("cause %v after a second signal, want the first (SIGHUP)", context.Cause(ctx))
	}
}
