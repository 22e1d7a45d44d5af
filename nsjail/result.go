package nsjail

import (
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
	StatusRejected     Status = "rejected"      // refused before it ran (exec --max-risk)
)

// Which limit ended a run, in Result.Limit.
const (
	LimitWall   = "wall"
	LimitCPU    = "cpu"
	LimitMemory = "memory"
	LimitStdout = "stdout"
	LimitStderr = "stderr"
)

// Result is what `microbox exec --json` prints. Fields are only ever added,
// never renamed.
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
	// Redactions counts what --redact masked in stdout and stderr, by
	// kind; absent when nothing was.
	Redactions []Redaction `json:"redactions,omitempty"`
	// Risk is the static risk report the run was judged by (--max-risk).
	Risk *RiskReport `json:"risk,omitempty"`
}

// Redaction is one kind of secret --redact masked, and how often.
type Redaction struct {
	Kind  string `json:"kind"`
	Count int    `json:"count"`
}

// RiskReport is what `microbox check` says about a program before it runs:
// the risky constructs found, their points and the total's level.
type RiskReport struct {
	Score    int           `json:"score"`
	Level    string        `json:"level"`
	Findings []RiskFinding `json:"findings"`
	// SyntaxError is set when the code does not parse; Score is then 0.
	SyntaxError *SyntaxError `json:"syntax_error"`
}

// RiskFinding is one distinct risky construct: the first place it occurs
// and how many times it does. Points count once per construct.
type RiskFinding struct {
	Rule   string `json:"rule"`
	Name   string `json:"name"`
	Points int    `json:"points"`
	Count  int    `json:"count"`
	Line   int    `json:"line"`
	Col    int    `json:"col"`
}

// SyntaxError is where and why the code failed to parse.
type SyntaxError struct {
	Message string `json:"message"`
	Line    int    `json:"line"`
	Col     int    `json:"col"`
}

// Phase is one timed step of a run's set-up, in ms since microbox started it.
type Phase struct {
	Name string  `json:"name"`
	AtMs float64 `json:"at_ms"`
}

func sandboxError(msg string) *Result {
	return &Result{Status: StatusSandboxError, Error: &msg, Cgroup: "none"}
}

// setExit fills the verdict fields from the program's wait status.
func (r *Result) setExit(ws unix.WaitStatus) {
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

// Exit codes of `microbox exec` without --json for verdicts that have no
// exit status of the program's own.
const (
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
	}
	return ExitSandboxError
}
