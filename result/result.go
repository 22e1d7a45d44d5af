// Package result is microbox's result contract: the verdict on one run as
// `microbox exec --json` prints it, the statuses, the limits that end a
// run, and the exit statuses of `microbox exec` without --json.
//
// Fields and statuses are only ever added, never renamed or removed:
// callers parse this JSON. Layers above the jail (the policy layers) add
// fields of their own by embedding Result, which keeps its bytes as they
// are.
package result

import (
	"fmt"
	"strings"

	"golang.org/x/sys/unix"
)

// Status is the verdict on a run. The names are a stable API.
type Status string

const (
	StatusOK           Status = "ok"            // exited 0
	StatusNonzero      Status = "nonzero"       // exited with another code
	StatusSignaled     Status = "signaled"      // killed by a signal microbox did not send
	StatusTimeout      Status = "timeout"       // wall-clock or CPU-time limit
	StatusMemory       Status = "memory"        // memory limit
	StatusOutputLimit  Status = "output_limit"  // stdout or stderr cap
	StatusSandboxError Status = "sandbox_error" // microbox could not set up or run the jail
	StatusRejected     Status = "rejected"      // refused before it ran (a policy layer)
	// The compile step of a compiled language did not succeed (Compile
	// says how it ended); the program did not run.
	StatusCompileError Status = "compile_error"
)

// Statuses lists every status in the order reports count them.
var Statuses = []Status{StatusOK, StatusNonzero, StatusSignaled, StatusTimeout, StatusMemory,
	StatusOutputLimit, StatusSandboxError, StatusRejected, StatusCompileError}

// Which limit ended a run, in Result.Limit.
const (
	LimitWall   = "wall"
	LimitCPU    = "cpu"
	LimitMemory = "memory"
	LimitStdout = "stdout"
	LimitStderr = "stderr"
)

// Result is what `microbox exec --json` prints.
type Result struct {
	Status          Status   `json:"status"`
	ExitCode        *int     `json:"exit_code"`
	Signal          *string  `json:"signal"`
	Stdout          string   `json:"stdout"`
	Stderr          string   `json:"stderr"`
	StdoutTruncated bool     `json:"stdout_truncated"`
	StderrTruncated bool     `json:"stderr_truncated"`
	WallTimeMs      float64  `json:"wall_time_ms"`
	CPUTimeMs       *float64 `json:"cpu_time_ms"`
	PeakMemoryBytes *int64   `json:"peak_memory_bytes"`
	Error           *string  `json:"error"`

	// Limit names the limit that ended the run: wall, cpu, memory,
	// stdout or stderr; empty when none did.
	Limit string `json:"limit,omitempty"`
	// Cgroup is the hierarchy that enforced the limits: v2, v1 or none.
	Cgroup string `json:"cgroup"`
	// Seccomp is the filter mode: default, log, profile or off.
	Seccomp string `json:"seccomp"`
	// SetupTimeMs is how long the jail took before the program started.
	SetupTimeMs float64 `json:"setup_time_ms"`
	// Trace lists the set-up phases (with --trace).
	Trace []Phase `json:"trace,omitempty"`
	// Start says how the program's interpreter started, for a run asked
	// to fork from a zygote's template: "zygote" if it did, "cold" if it
	// started afresh (no template could serve it); absent otherwise, and
	// when the program never started (sandbox_error).
	Start string `json:"start,omitempty"`
	// Fetched holds the files the run asked to fetch from its scratch
	// area after the program ended, by the path as asked (relative ones
	// in the working directory): each one's bytes (base64) or why it
	// could not be fetched. Absent when the run asked for none, and when
	// the program never started.
	Fetched map[string]*Fetched `json:"fetched,omitempty"`
	// Compile is how the compile step of a compiled language's program
	// ended, as a result of its own (its stdout, the binary, left out);
	// absent for an interpreted language.
	Compile *Result `json:"compile,omitempty"`
	// Cached, on a compile step's result, says that its binary was
	// reused from the same step (same program, files, root and limits)
	// run earlier in this process: the fields are that step's.
	Cached bool `json:"cached,omitempty"`

	// Unavailable, when set, says the program never started for want of
	// the host's resources (microbox was out of file descriptors), not
	// for anything of the run's own: a status of sandbox_error that is no
	// verdict on the run, which may be tried again as it is. A server
	// retries, then answers "busy" (HTTP 503) rather than this result.
	// It is never encoded.
	Unavailable error `json:"-"`
}

// Phase is one timed step of a run's set-up, in ms since the run began.
type Phase struct {
	Name string  `json:"name"`
	AtMs float64 `json:"at_ms"`
}

// SandboxError is the result of a run microbox could not set up or run;
// msg says why, in one line.
func SandboxError(msg string) *Result {
	return &Result{Status: StatusSandboxError, Error: &msg, Cgroup: "none"}
}

// NotRun is the result of a program that was refused or failed before
// it started: status and why, with the seccomp mode it would have had.
func NotRun(status Status, msg, seccompMode string) *Result {
	return &Result{Status: status, Error: &msg, Cgroup: "none", Seccomp: seccompMode}
}

// SetExit fills the verdict fields from the program's wait status.
func (r *Result) SetExit(ws unix.WaitStatus) {
	switch {
	case ws.Signaled():
		r.Status = StatusSignaled
		name := unix.SignalName(ws.Signal())
		if name == "" {
			name = "SIG" + strings.TrimPrefix(ws.Signal().String(), "signal ")
		}
		r.Signal = &name
	case ws.ExitStatus() == 0:
		r.Status = StatusOK
		code := 0
		r.ExitCode = &code
	default:
		r.Status = StatusNonzero
		code := ws.ExitStatus()
		r.ExitCode = &code
	}
}

// Exit statuses of `microbox exec` without --json for verdicts that have
// no exit status of the program's own. nsjail/nsinit (status.h) and the client
// (cmd/microbox/client.c) use ExitSandboxError too; a test holds them
// equal.
const (
	ExitCompileError = 120
	ExitRejected     = 121
	ExitOutputLimit  = 122
	ExitMemory       = 123
	ExitTimeout      = 124
	ExitSandboxError = 125
)

// ShellStatus is the status `microbox exec` exits with for this result:
// the program's own code, 128+N for signal N, or one of the codes above.
func (r *Result) ShellStatus() int {
	switch r.Status {
	case StatusOK, StatusNonzero:
		return *r.ExitCode
	case StatusSignaled:
		return 128 + int(unix.SignalNum(*r.Signal))
	case StatusTimeout:
		return ExitTimeout
	case StatusMemory:
		return ExitMemory
	case StatusOutputLimit:
		return ExitOutputLimit
	case StatusRejected:
		return ExitRejected
	case StatusCompileError:
		return ExitCompileError
	}
	return ExitSandboxError
}

// Describe says in one line how a run ended: its status, then the error
// or else the last line of stderr (a traceback's exception).
func (r *Result) Describe() string {
	msg := string(r.Status)
	if r.Error != nil {
		msg += ": " + *r.Error
	} else if line := LastLine(r.Stderr); line != "" {
		msg += ": " + line
	}
	return msg
}

// Why says, in one line, why the run ended when its status is not the
// program's own doing (a limit, a signal, microbox's failure, a
// refusal); "" for ok and nonzero.
func (r *Result) Why() string {
	switch r.Status {
	case StatusTimeout:
		return fmt.Sprintf("timeout: the %s time limit was reached after %.0f ms", r.Limit, r.WallTimeMs)
	case StatusMemory:
		return "memory: the program exceeded the memory limit"
	case StatusOutputLimit:
		return fmt.Sprintf("output_limit: the program wrote more than the output limit on %s", r.Limit)
	case StatusSignaled:
		return "signaled: the program was killed by " + deref(r.Signal)
	case StatusSandboxError, StatusRejected, StatusCompileError:
		return string(r.Status) + ": " + deref(r.Error)
	}
	return ""
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// LastLine is the last non-blank line of s, trimmed: for a Python
// traceback, the exception.
func LastLine(s string) string {
	s = strings.TrimSpace(s)
	return strings.TrimSpace(s[strings.LastIndexByte(s, '\n')+1:])
}
