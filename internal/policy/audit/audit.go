// Package audit is the audit log: one JSON line per run, appended. It
// records what ran (the code's sha256, never the code unless asked), under
// which limits and policy, for whom, and how it ended.
//
// Concurrent microbox processes may share one log: the file is opened
// with O_APPEND and each line is written with a single write(2). On Linux
// local filesystems (ext4, xfs, btrfs, tmpfs) such a write is appended
// whole, never interleaved with another writer's; POSIX does not promise
// it, and network filesystems (NFS) do not keep it.
package audit

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/microbox/microbox/field"
	"github.com/microbox/microbox/internal/policy/redact"
	"github.com/microbox/microbox/nsjail"
	"github.com/microbox/microbox/result"
)

// Env names the log when the options name none.
const Env = "MICROBOX_AUDIT_LOG"

// Options are a run's audit settings. Errors name these fields.
type Options struct {
	// AuditLog is the log file; "" is $MICROBOX_AUDIT_LOG, and no log if
	// that is unset.
	AuditLog string
	// AuditInclude adds to the line: code (the program's source), output
	// (stdout and stderr, as the caller gets them).
	AuditInclude []string
}

// What AuditInclude may add to a line.
const (
	includeCode   = "code"
	includeOutput = "output"
)

// Log is an open log; a run writes one line to it.
type Log struct {
	f       *os.File
	code    bool
	output  bool
	program string // the host file, or "-c"
	pid     int
	policy  Policy
}

// Open opens the log for a run of base, or returns nil when there is
// none; the log's name, relative or from the environment, is read as
// base's are. pid is the microbox process the caller started; policy is
// what the run's line says of its policy layers. The log is opened before
// the run: one that cannot be written refuses the run rather than letting
// it go unrecorded.
func Open(o Options, base *nsjail.Options, pid int, policy Policy) (*Log, error) {
	name := o.AuditLog
	if name == "" {
		name = base.CallerEnv(Env)
	}
	if name == "" {
		if len(o.AuditInclude) > 0 {
			return nil, field.Errorf("AuditInclude", "{AuditInclude} needs {AuditLog} FILE or $%s", Env)
		}
		return nil, nil
	}
	l := &Log{program: program(base), pid: pid, policy: policy}
	for _, what := range o.AuditInclude {
		switch strings.TrimSpace(what) {
		case includeCode:
			l.code = true
		case includeOutput:
			l.output = true
		default:
			return nil, field.Errorf("AuditInclude", "{AuditInclude} %q: want code, output or both", what)
		}
	}
	f, err := os.OpenFile(base.HostPath(name), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, field.Errorf("AuditLog", "audit log %s: %v; give a writable file with {AuditLog} or $%s", name, cause(err), Env)
	}
	l.f = f
	return l, nil
}

// program names the program of base's runs: its host file, absolute, or
// -c for code.
func program(base *nsjail.Options) string {
	if base.File == "" {
		return "-c"
	}
	abs, _ := filepath.Abs(base.HostPath(base.File))
	return abs
}

// Close closes the log without writing a line, for a run that will not
// happen.
func (l *Log) Close() { l.f.Close() }

// CapturesOutput reports whether the line records the run's output, which
// must then be captured also when it streams.
func (l *Log) CapturesOutput() bool { return l.output }

// cause is err without the path, which the message already names.
func cause(err error) error {
	if pe, ok := err.(*os.PathError); ok {
		return pe.Err
	}
	return err
}

// record is one line of the log. Fields are only ever added.
type record struct {
	Time       string `json:"time"` // RFC 3339, UTC, when the run ended
	UID        int    `json:"uid"`  // the caller's real uid
	GID        int    `json:"gid"`
	PID        int    `json:"pid"` // microbox's own
	Command    string `json:"command"`
	Program    string `json:"program"`
	CodeSHA256 string `json:"code_sha256"`
	CodeBytes  int    `json:"code_bytes"`

	Limits limits `json:"limits"`
	Policy Policy `json:"policy"`

	Status          result.Status      `json:"status"`
	ExitCode        *int               `json:"exit_code"`
	Signal          *string            `json:"signal"`
	Limit           string             `json:"limit,omitempty"`
	Error           *string            `json:"error"`
	WallTimeMs      float64            `json:"wall_time_ms"`
	CPUTimeMs       *float64           `json:"cpu_time_ms"`
	PeakMemoryBytes *int64             `json:"peak_memory_bytes"`
	SetupTimeMs     float64            `json:"setup_time_ms"`
	Cgroup          string             `json:"cgroup"`
	RiskScore       *int               `json:"risk_score,omitempty"`
	Redactions      []redact.Redaction `json:"redactions,omitempty"`

	// Only with AuditInclude.
	Code   *string `json:"code,omitempty"`
	Stdout *string `json:"stdout,omitempty"`
	Stderr *string `json:"stderr,omitempty"`
}

// limits are the limits the run had; 0 means none.
type limits struct {
	MemoryBytes      int64   `json:"memory_bytes"`
	CPUs             float64 `json:"cpus"`
	Pids             int64   `json:"pids"`
	TimeoutMs        int64   `json:"timeout_ms"`
	CPUTimeMs        int64   `json:"cpu_time_ms"`
	OutputLimitBytes int64   `json:"output_limit_bytes"`
	TmpfsSizeBytes   int64   `json:"tmpfs_size_bytes"`
	Seccomp          string  `json:"seccomp"`
	Rootfs           string  `json:"rootfs"`
	Python           string  `json:"python"`
}

// Policy is which policy layers the run had, as the caller gave them.
type Policy struct {
	DenyModules  []string `json:"deny_modules,omitempty"`
	AllowModules []string `json:"allow_modules,omitempty"`
	Guard        string   `json:"guard,omitempty"`
	Redact       bool     `json:"redact"`
	MaxRisk      *int     `json:"max_risk,omitempty"`
}

// Outcome is how a run ended, with what the policy layers found.
type Outcome struct {
	*result.Result
	RiskScore  *int
	Redactions []redact.Redaction
}

// Write appends the line of a run of s, whose program's source is code,
// that ended as out, and closes the log.
func (l *Log) Write(s *nsjail.Spec, code []byte, out Outcome) error {
	return l.write(l.record(s, code, out))
}

// record builds the line.
func (l *Log) record(s *nsjail.Spec, code []byte, out Outcome) record {
	sum := sha256.Sum256(code)
	rec := record{
		Time:       time.Now().UTC().Format(time.RFC3339Nano),
		UID:        os.Getuid(),
		GID:        os.Getgid(),
		PID:        l.pid,
		Command:    "exec",
		Program:    l.program,
		CodeSHA256: hex.EncodeToString(sum[:]),
		CodeBytes:  len(code),
		Limits:     limitsOf(s),
		Policy:     l.policy,

		Status: out.Status, ExitCode: out.ExitCode, Signal: out.Signal, Limit: out.Limit,
		Error: out.Error, WallTimeMs: out.WallTimeMs, CPUTimeMs: out.CPUTimeMs,
		PeakMemoryBytes: out.PeakMemoryBytes, SetupTimeMs: out.SetupTimeMs, Cgroup: out.Cgroup,
		RiskScore: out.RiskScore, Redactions: out.Redactions,
	}
	if l.code {
		c := string(code)
		rec.Code = &c
	}
	if l.output {
		rec.Stdout, rec.Stderr = &out.Stdout, &out.Stderr
	}
	return rec
}

func limitsOf(s *nsjail.Spec) limits {
	l := limits{
		TimeoutMs:        s.Timeout.Milliseconds(),
		CPUTimeMs:        s.CPUTime.Milliseconds(),
		OutputLimitBytes: s.OutputLimit,
		TmpfsSizeBytes:   s.TmpfsSize,
		Seccomp:          s.SeccompMode,
		Rootfs:           s.RootDir,
	}
	if len(s.Argv) > 0 {
		l.Python = s.Argv[0]
	}
	if c := s.Cgroup; c != nil {
		l.MemoryBytes, l.CPUs, l.Pids = c.Limits.Memory, c.Limits.CPUs, c.Limits.Pids
	}
	return l
}

// write appends rec as one line with one write(2), and closes the log.
func (l *Log) write(rec record) error {
	defer l.f.Close()
	line, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("audit log: %w", err)
	}
	line = append(line, '\n')
	// Not f.Write, which would loop on a short write and so could split the
	// line between two appends.
	n, err := unix.Write(int(l.f.Fd()), line)
	for err == unix.EINTR {
		n, err = unix.Write(int(l.f.Fd()), line)
	}
	switch {
	case err != nil:
		return fmt.Errorf("audit log %s: %w", l.f.Name(), err)
	case n != len(line):
		return fmt.Errorf("audit log %s: short write (%d of %d bytes; disk full?)", l.f.Name(), n, len(line))
	}
	return nil
}
