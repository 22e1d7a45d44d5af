package interrupt

import (
	"context"
	"os"
	"syscall"
	"testing"
	"time"
)

func TestContext(t *testing.T) {
	ctx, stop := Context(context.Background())
	defer stop()
	syscall.Kill(os.Getpid(), syscall.SIGHUP)
	select {
	case <-ctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("SIGHUP did not end the context")
	}
	if Cause(ctx) != syscall.SIGHUP || context.Cause(ctx).Error() != "SIGHUP" {
		t.Fatalf("cause %v", context.Cause(ctx))
	}
	// SIGPIPE is caught, not a cause.
	ctx2, stop2 := Context(context.Background())
	defer stop2()
	syscall.Kill(os.Getpid(), syscall.SIGPIPE)
	time.Sleep(50 * time.Millisecond)
	if ctx2.Err() != nil {
		t.Fatal("SIGPIPE ended the context")
	}
}

func TestFromPipe(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	ctx, stop := FromPipe(r)
	defer stop()
	w.Write([]byte{byte(syscall.SIGTERM), byte(syscall.SIGINT)})
	select {
	case <-ctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the pipe's signal did not end the context")
	}
	if Cause(ctx) != syscall.SIGTERM {
		t.Fatalf("cause %v, want the first signal", context.Cause(ctx))
	}
	if Cause(context.Background()) != 0 {
		t.Fatal("a context no signal ended has a cause")
	}
}
