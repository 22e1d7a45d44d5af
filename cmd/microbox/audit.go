package main

// The audit log (--audit-log FILE or $MICROBOX_AUDIT_LOG): one JSON line
// per run, appended. It records what ran (the code's sha256, never the
// code unless asked), under which limits and policy, for whom, and how it
// ended.
//
// Concurrent microbox processes may share one log: the file is opened
// with O_APPEND and each line is written with a single write(2). On Linux
// local filesystems (ext4, xfs, btrfs, tmpfs) such a write is appended
// whole, never interleaved with another writer's; POSIX does not promise
// it, and network filesystems (NFS) do not keep it.

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/microbox/microbox/nsjail"
	"github.com/microbox/microbox/result"
)

// auditEnv names the log when --audit-log is not given.
const auditEnv = "MICROBOX_AUDIT_LOG"

// auditFlags are exec's audit options.
type auditFlags struct {
	path    string
	include []string
}

// What --audit-include may add to a line.
const (
	auditCode   = "code"
	auditOutput = "output"
)

func (a *auditFlags) register(c *cobra.Command) {
	fl := c.Flags()
	fl.StringVar(&a.path, "audit-log", "", "append one JSON line per run to `FILE` (default: $"+auditEnv+"; none if unset)")
	fl.StringSliceVar(&a.include, "audit-include", nil, "also record, comma-separated: code (the program's source), output (stdout and stderr, after --redact)")
}

// auditLog is an open log; a run writes one line to it.
type auditLog struct {
	f       *os.File
	code    bool
	output  bool
	program string // the host file, or "-c"
	pid     int    // the microbox process the caller started
}

// open opens the log named by the flag or the environment, or returns nil
// when there is none. It is opened before the run: a log that cannot be
// written refuses the run rather than letting it go unrecorded.
func (a *auditFlags) open(inv *invocation, program string) (*auditLog, error) {
	name := a.path
	if name == "" {
		name = inv.getenv(auditEnv)
	}
	if name == "" {
		if len(a.include) > 0 {
			return nil, usagef("--audit-include needs --audit-log FILE or $%s", auditEnv)
		}
		return nil, nil
	}
	l := &auditLog{program: program, pid: inv.pid()}
	for _, what := range a.include {
		switch strings.TrimSpace(what) {
		case auditCode:
			l.code = true
		case auditOutput:
			l.output = true
		default:
			return nil, usagef("--audit-include %q: want code, output or both", what)
		}
	}
	f, err := os.OpenFile(inv.path(name), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, usagef("audit log %s: %v; give a writable file with --audit-log or $%s", name, auditCause(err), auditEnv)
	}
	l.f = f
	return l, nil
}

// auditCause is err without the path, which the message already names.
func auditCause(err error) error {
	if pe, ok := err.(*os.PathError); ok {
		return pe.Err
	}
	return err
}

// auditRecord is one line of the log. Fields are only ever added.
type auditRecord struct {
	Time       string `json:"time"` // RFC 3339, UTC, when the run ended
	UID        int    `json:"uid"`  // the caller's real uid
	GID        int    `json:"gid"`
	PID        int    `json:"pid"` // microbox's own
	Command    string `json:"command"`
	Program    string `json:"program"`
	CodeSHA256 string `json:"code_sha256"`
	CodeBytes  int    `json:"code_bytes"`

	Limits auditLimits `json:"limits"`
	Policy auditPolicy `json:"policy"`

	Status          result.Status `json:"status"`
	ExitCode        *int          `json:"exit_code"`
	Signal          *string       `json:"signal"`
	Limit           string        `json:"limit,omitempty"`
	Error           *string       `json:"error"`
	WallTimeMs      float64       `json:"wall_time_ms"`
	CPUTimeMs       *float64      `json:"cpu_time_ms"`
	PeakMemoryBytes *int64        `json:"peak_memory_bytes"`
	SetupTimeMs     float64       `json:"setup_time_ms"`
	Cgroup          string        `json:"cgroup"`
	RiskScore       *int          `json:"risk_score,omitempty"`
	Redactions      []Redaction   `json:"redactions,omitempty"`

	// Only with --audit-include.
	Code   *string `json:"code,omitempty"`
	Stdout *string `json:"stdout,omitempty"`
	Stderr *string `json:"stderr,omitempty"`
}

// auditLimits are the limits the run had; 0 means none.
type auditLimits struct {
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

// auditPolicy is which policy layers the run had.
type auditPolicy struct {
	DenyModules  []string `json:"deny_modules,omitempty"`
	AllowModules []string `json:"allow_modules,omitempty"`
	Guard        string   `json:"guard,omitempty"`
	Redact       bool     `json:"redact"`
	MaxRisk      *int     `json:"max_risk,omitempty"`
}

// record builds the line for a run of s that ended with res.
func (l *auditLog) record(s *nsjail.Spec, res *layeredResult, policy auditPolicy) auditRecord {
	code, _ := programSource(s)
	sum := sha256.Sum256(code)
	rec := auditRecord{
		Time:       time.Now().UTC().Format(time.RFC3339Nano),
		UID:        os.Getuid(),
		GID:        os.Getgid(),
		PID:        l.pid,
		Command:    "exec",
		Program:    l.program,
		CodeSHA256: hex.EncodeToString(sum[:]),
		CodeBytes:  len(code),
		Limits:     auditLimitsOf(s),
		Policy:     policy,

		Status: res.Status, ExitCode: res.ExitCode, Signal: res.Signal, Limit: res.Limit,
		Error: res.Error, WallTimeMs: res.WallTimeMs, CPUTimeMs: res.CPUTimeMs,
		PeakMemoryBytes: res.PeakMemoryBytes, SetupTimeMs: res.SetupTimeMs, Cgroup: res.Cgroup,
		Redactions: res.Redactions,
	}
	if res.Risk != nil {
		rec.RiskScore = &res.Risk.Score
	}
	if l.code {
		c := string(code)
		rec.Code = &c
	}
	if l.output {
		rec.Stdout, rec.Stderr = &res.Stdout, &res.Stderr
	}
	return rec
}

func auditLimitsOf(s *nsjail.Spec) auditLimits {
	l := auditLimits{
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
func (l *auditLog) write(rec auditRecord) error {
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
