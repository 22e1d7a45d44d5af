package result

import (
	"testing"

	"golang.org/x/sys/unix"
)

func TestShellStatus(t *testing.T) {
	var r Result
	r.SetExit(unix.WaitStatus(3 << 8))
	if r.Status != StatusNonzero || r.ShellStatus() != 3 {
		t.Fatalf("exit 3: %v %d", r.Status, r.ShellStatus())
	}
	r = Result{}
	r.SetExit(unix.WaitStatus(unix.SIGSEGV))
	if r.Status != StatusSignaled || *r.Signal != "SIGSEGV" || r.ShellStatus() != 128+11 {
		t.Fatalf("SIGSEGV: %v %v %d", r.Status, *r.Signal, r.ShellStatus())
	}
	for status, want := range map[Status]int{StatusTimeout: ExitTimeout, StatusMemory: ExitMemory,
		StatusOutputLimit: ExitOutputLimit, StatusSandboxError: ExitSandboxError} {
		if got := (&Result{Status: status}).ShellStatus(); got != want {
			t.Errorf("%s: %d, want %d", status, got, want)
		}
	}
}

func TestLastLine(t *testing.T) {
	for in, want := range map[string]string{
		"":                                      "",
		"one":                                   "one",
		"Traceback:\n  x\nValueError: boom\n\n": "ValueError: boom",
		"  \n a \n":                             "a",
	} {
		if got := LastLine(in); got != want {
			t.Errorf("LastLine(%q) = %q, want %q", in, got, want)
		}
	}
}
