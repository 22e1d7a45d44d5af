package main

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/microbox/microbox/internal/interrupt"
)

// catchChildEnv, set, makes the test binary TestCatchInterrupts's child:
// it installs the handler for good, so the test runs it in a process of
// its own (TestMain skips the suite's set-up there).
const catchChildEnv = "MICROBOX_TEST_CATCH_CHILD"

// catchInterrupts turns a signal into its context's cause through the C
// handler and the pipe (client.c); a later signal is drained, and neither
// kills the process.
func TestCatchInterrupts(t *testing.T) {
	if os.Getenv(catchChildEnv) == "" {
		child := exec.Command(os.Args[0], "-test.run=^TestCatchInterrupts$", "-test.v")
		child.Env = append(os.Environ(), catchChildEnv+"=1")
		out, err := child.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "--- PASS: TestCatchInterrupts") {
			t.Fatalf("child: %v\n%s", err, out)
		}
		return
	}
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
	if sig := interrupt.Cause(ctx); sig != syscall.SIGHUP {
		t.Errorf("cause %v, want SIGHUP", context.Cause(ctx))
	}
	syscall.Kill(os.Getpid(), syscall.SIGTERM)
	time.Sleep(50 * time.Millisecond) // delivered and drained, or this process is gone
	if sig := interrupt.Cause(ctx); sig != syscall.SIGHUP {
		t.Errorf("cause %v after a second signal, want the first (SIGHUP)", context.Cause(ctx))
	}
}
