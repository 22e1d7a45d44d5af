// Package nsjail runs one program in a fresh set of Linux namespaces and
// returns a verdict on how it ended (package result).
//
// A run's steps, in the order they happen, one concern per file:
//
//	options.go   Options, a run as a caller states it, become a Spec
//	spec.go      the Spec and its validation
//	run.go       Run: from a Spec to the verdict; Teardown, the retries
//	             of a start short of descriptors
//	supervise.go the supervisor: the run's cgroup, PID 1, the plan, the
//	             limits, the kill and the teardown
//	spawner.go   the spawner, which clones each jail's PID 1
//	plan.go      the plan: the steps PID 1 carries out, as data
//	nsinit/      the child side, in C before Go's runtime, one role a
//	             file (its README.md): the spawner, PID 1, which builds
//	             the root, pivots into it, drops every privilege, loads
//	             the filter and execs the program, and the plan's
//	             interpreter; a header per protocol
//	init.go      the Go side of nsinit's protocols: the spawner's
//	             request, PID 1's descriptors and status lines
//	sockmsg.go   messages with descriptors, on the spawner's and a
//	             zygote's sockets
//	ids.go       how the jail's user ids map to the host's
//	slots.go     uid slots: a host uid range of each root-run jail's own,
//	             held by a file lock
//	sigkill.go   the kill of a PID 1 whose user namespace another uid
//	             owns, as that uid when CAP_KILL is missing
//	pipes.go     the descriptors between the supervisor and PID 1
//	output.go    stdout and stderr, drained and capped
//	verdict.go   the verdict, from what PID 1 and the cgroup reported
//	fetch.go     files fetched from the scratch area once the run ended
//	jail.go      jails started ahead of their runs (microbox serve)
//	held.go      a held run: its program talks with its caller over a
//	             socket while it runs (a session's interpreter,
//	             internal/session)
//
// Runs forked from a zygote's template interpreter:
//
//	zygote.go          Zygote, a spec's request for one (CheckZygote), and
//	                   the sockets to a template and its children
//	zygote_key.go      the template key: what runs of one template share,
//	                   and what a fork cannot run as a cold run would
//	zygote_template.go starting a template in a jail of its own, holding
//	                   it, ending it
//	zygote_child.go    a child forked ahead of its run, and the run in it
//	zygote_wire.go     the Go side of the zygote's protocol (nsinit/zygote.h)
//	zygote.py          the template's program, in the jail: it forks the
//	                   children, which sandbox themselves and run the run
//
// Tests, one file per concern above: initc_test.go (each protocol's
// sides held equal: nsinit's headers, Go's, zygote.py's), jail_test.go, options_test.go, output_test.go,
// plan_test.go, rootfiles_test.go (Spec.RootFiles in the plan),
// spawner_test.go, verdict_test.go and zygote_test.go.
package nsjail

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/microbox/microbox/cgroup"
	"github.com/microbox/microbox/field"
	"github.com/microbox/microbox/rootfs"
)

// Spec says what to run and under which limits.
type Spec struct {
	// Argv is the program's argument vector; Argv[0] is the path of the
	// executable inside the root (normally the Python interpreter).
	Argv []string
	// Env is the program's whole environment; nothing is inherited.
	Env []string
	// Workdir is the program's working directory: a scratch tmpfs of its
	// own, or a directory inside /tmp.
	Workdir string
	// Files are written into the scratch area before the program starts,
	// owned by the program's user.
	Files []File
	// Fetch are files read from the scratch area once the program has
	// ended, into the result's Fetched (fetch.go): each of at most
	// FetchMaxFile bytes, all together at most FetchMaxTotal.
	Fetch                       []FetchFile
	FetchMaxFile, FetchMaxTotal int64
	// RootFiles are placed read-only under RootFilesDir, for helpers
	// microbox itself starts in the sandbox (the module policy's
	// sitecustomize). In the host-derived root they are written before the
	// root is made read-only; in a prepared root a small tmpfs is mounted
	// on its /run for them, then made read-only. None: nothing is made.
	RootFiles []File
	// RootDir is a prepared root filesystem; "" means the root derived from
	// the host's /usr.
	RootDir string
	// TmpfsSize caps each scratch tmpfs (/tmp, the working directory,
	// /dev/shm) in bytes.
	TmpfsSize int64
	Hostname  string

	// Stdin feeds the program, copied through a pipe (the jail may have
	// been started before the run: see Start); nil means /dev/null.
	Stdin io.Reader
	// Stdout and Stderr, when set, receive the program's output as it
	// comes (still capped); the Result holds a copy only if Capture is set.
	Stdout, Stderr io.Writer
	Capture        bool
	// OutputLimit caps each of stdout and stderr in bytes.
	OutputLimit int64
	// OutputTruncate keeps a run going past OutputLimit: the rest of
	// that stream is read and dropped, the Result's *_truncated flags
	// say so, and the verdict is the program's own. Otherwise writing
	// past the limit ends the run (output_limit).
	OutputTruncate bool

	// Timeout is the wall-clock limit from the program's start.
	Timeout time.Duration
	// CPUTime limits the CPU time of all the run's processes together
	// (0: none); it needs a cgroup.
	CPUTime time.Duration
	// Rlimits are the program's resource limits; zero fields take
	// DefaultRlimits'.
	Rlimits Rlimits
	// Cgroup places the run in a cgroup of its own with these limits; nil
	// runs without one (and so without memory, CPU and pids limits).
	Cgroup *cgroup.Options

	// Seccomp is a compiled policy, a stack of BPF programs
	// (seccomp.Programs), each loaded in turn as the program's process's
	// last step before execve (in a jail started ahead, before its run
	// comes); nil loads none.
	Seccomp []byte
	// Labels describe the run in the result (e.g. the seccomp mode).
	SeccompMode string

	// FieldNames spells the fields of Options in the messages of the
	// run's errors as the caller's own options are called (a flag, a
	// JSON key); nil keeps the Go names.
	FieldNames func(field string) string

	// Zygote, when set, asks that the run fork from a zygote's template
	// (zygote.go).
	Zygote *Zygote

	// Compile, when set, is the compile step of a compiled language's
	// program: a run of its own, in a jail of its own, before this one,
	// whose stdout is the binary (Argv[0] here) that the caller places
	// in this run's Files once it succeeded (batch.Run.Execute).
	Compile *Spec

	// Control makes the program's fd 0 a stream socket to the caller
	// instead of stdin (Stdin must be nil): a held run (held.go).
	Control bool

	// template marks the jail of a zygote's template (zygote_template.go): its
	// program keeps the jail's root, with no filter or time limit.
	template bool

	// Trace records the set-up phases with timestamps in the result.
	Trace bool
	// Before are the caller's own moments before the run (a one-shot
	// exec's process start and Go's main): with Trace they open the trace,
	// at negative times.
	Before []Moment
}

// Rlimits are the per-process resource limits a program starts with
// (soft and hard alike, so it cannot raise them), set explicitly rather
// than inherited from microbox, whose own may be far higher (a service
// manager's LimitNOFILE=infinity, say).
type Rlimits struct {
	// NoFile bounds each process's open descriptors: with the pids
	// limit it bounds a run's share of the host's open-file table.
	NoFile uint64
	// SigPending bounds the signals queued to the run's user.
	SigPending uint64
	// MsgQueue bounds the bytes of POSIX message queues (which the
	// default filter does not even allow).
	MsgQueue uint64
	// Data bounds each process's data segment (RLIMIT_DATA: the heap and
	// every private writable mapping), so that an allocation past it
	// fails in the program (Python raises MemoryError) where the cgroup
	// would kill the run; 0: none (Options.MemoryRlimit sets it).
	Data uint64
}

// settings are the rlimits a program is started with, soft and hard as
// one, as (resource, limit) pairs: the jail's init (plan.go) and a zygote's
// child (zygote_child.go) set the same ones.
func (r Rlimits) settings() [][2]uint64 {
	r = r.withDefaults()
	set := [][2]uint64{{unix.RLIMIT_CORE, 0}, // no core files
		{unix.RLIMIT_NOFILE, r.NoFile}, {unix.RLIMIT_SIGPENDING, r.SigPending}, {unix.RLIMIT_MSGQUEUE, r.MsgQueue}}
	if r.Data != 0 {
		set = append(set, [2]uint64{unix.RLIMIT_DATA, r.Data})
	}
	return set
}

// DefaultRlimits are the limits a run gets unless it asks for others.
var DefaultRlimits = Rlimits{NoFile: 1024, SigPending: 1024, MsgQueue: 819200}

// withDefaults fills zero fields from DefaultRlimits.
func (r Rlimits) withDefaults() Rlimits {
	if r.NoFile == 0 {
		r.NoFile = DefaultRlimits.NoFile
	}
	if r.SigPending == 0 {
		r.SigPending = DefaultRlimits.SigPending
	}
	if r.MsgQueue == 0 {
		r.MsgQueue = DefaultRlimits.MsgQueue
	}
	return r
}

// MinNoFile is the smallest descriptor limit a program is started with:
// Python opens a few files of its own as it starts.
const MinNoFile = 16

// A Moment is a named instant in CLOCK_MONOTONIC nanoseconds.
type Moment struct {
	Name string
	At   int64
}

// MomentNow is the moment name, now, on the clock a trace uses.
func MomentNow(name string) Moment { return Moment{Name: name, At: monotonic()} }

// File is a file written into the sandbox's scratch area.
type File struct {
	Path string // absolute path inside the sandbox, in a scratch area
	Data []byte
	Mode os.FileMode
}

// message is err's text for the run's result, its fields spelled as the
// caller calls them.
func (s *Spec) message(err error) string { return field.Message(err, s.FieldNames) }

// SetupTimeout bounds how long the jail may take to start the program;
// a healthy set-up takes milliseconds.
const SetupTimeout = 10 * time.Second

// Validate checks a spec before anything is created, so a bad request fails
// with one clear line and leaves nothing behind.
func (s *Spec) Validate() error {
	if len(s.Argv) == 0 {
		return errors.New("nothing to run: no program given")
	}
	for _, a := range s.Argv {
		if strings.IndexByte(a, 0) >= 0 {
			return field.Errorf("Args", "an argument contains a NUL byte, which exec cannot pass")
		}
	}
	for _, e := range s.Env {
		if k, _, ok := strings.Cut(e, "="); !ok || k == "" || strings.IndexByte(e, 0) >= 0 {
			return field.Errorf("Env", "environment entry %q is not KEY=VALUE", e)
		}
	}
	if err := checkSandboxPath("working directory", s.Workdir); err != nil {
		return field.Errorf("Workdir", "%v", err)
	}
	if s.Workdir == "/" || isSystemDir(s.Workdir) {
		return field.Errorf("Workdir", "working directory %s would hide part of the root; use /tmp or a new directory such as /work", s.Workdir)
	}
	for _, f := range s.Files {
		if err := checkSandboxPath("file", f.Path); err != nil {
			return field.Errorf("Files", "%v", err)
		}
		if !underTmp(f.Path) && !strings.HasPrefix(f.Path, s.Workdir+"/") {
			return field.Errorf("Files", "file %s is outside the writable areas; put it under /tmp or the working directory %s", f.Path, s.Workdir)
		}
	}
	if err := s.validateFetch(); err != nil {
		return err
	}
	if s.TmpfsSize <= 0 {
		return field.Errorf("TmpfsSize", "{TmpfsSize} must be positive")
	}
	if s.Cgroup != nil && s.Cgroup.Limits.Memory > 0 && s.TmpfsSize > s.Cgroup.Limits.Memory {
		return field.Errorf("TmpfsSize", "{TmpfsSize} (%d bytes) exceeds {Memory} (%d bytes): tmpfs pages count against the memory limit; lower {TmpfsSize} or raise {Memory}", s.TmpfsSize, s.Cgroup.Limits.Memory)
	}
	if s.Timeout <= 0 {
		return field.Errorf("Timeout", "{Timeout} must be positive")
	}
	if s.CPUTime < 0 {
		return field.Errorf("CPUTime", "{CPUTime} must not be negative")
	}
	if s.CPUTime > 0 && s.Cgroup == nil {
		return field.Errorf("CPUTime", "{CPUTime} needs a cgroup and cannot be used with {NoCgroup}")
	}
	if n := s.Rlimits.NoFile; n != 0 && n < MinNoFile {
		return field.Errorf("NoFile", "{NoFile} %d: give at least %d (Python opens some files as it starts)", n, MinNoFile)
	}
	if s.OutputLimit <= 0 {
		return field.Errorf("OutputLimit", "{OutputLimit} must be positive")
	}
	if s.Hostname == "" || len(s.Hostname) > 64 {
		return field.Errorf("Hostname", "hostname must be 1 to 64 characters")
	}
	if s.RootDir != "" {
		if !path.IsAbs(s.RootDir) || path.Clean(s.RootDir) != s.RootDir {
			return field.Errorf("RootFS", "{RootFS} %s: give an absolute, clean path", s.RootDir)
		}
		if !underTmp(s.Workdir) {
			if err := rootfs.CheckMountPoint(s.RootDir, s.Workdir); err != nil {
				return field.Errorf("Workdir", "working directory %s: %v (or use one under /tmp)", s.Workdir, err)
			}
		}
		if len(s.RootFiles) > 0 {
			if err := rootfs.CheckMountPoint(s.RootDir, path.Dir(RootFilesDir)); err != nil {
				return fmt.Errorf("%w (the run's policy files go under %s)", err, RootFilesDir)
			}
		}
	}
	if err := s.validateRootFiles(); err != nil {
		return err
	}
	if s.Compile != nil {
		// The program is the binary its compile step makes, in the
		// scratch area, not in the root; the step's own Argv[0] is
		// checked with it.
		return nil
	}
	return rootfs.CheckPython(s.RootDir, s.Argv[0])
}

// validateFetch checks that each file to fetch lies in a scratch area,
// as a file written in must, and that the supervisor can reach it.
func (s *Spec) validateFetch() error {
	if len(s.Fetch) == 0 {
		return nil
	}
	if hostIDs().rootless {
		return field.Errorf("Fetch", "{Fetch}: files can be fetched only when microbox runs as root (a rootless supervisor cannot reach the jail's scratch area); print what you need to stdout instead")
	}
	if s.FetchMaxFile <= 0 || s.FetchMaxTotal <= 0 {
		return field.Errorf("Fetch", "{Fetch}: the ceilings on fetched bytes must be positive")
	}
	for _, f := range s.Fetch {
		if err := checkSandboxPath("file to fetch", f.Path); err != nil {
			return field.Errorf("Fetch", "{Fetch} %q: %v", f.Name, err)
		}
		if !strings.HasPrefix(f.Path, "/tmp/") && !strings.HasPrefix(f.Path, s.Workdir+"/") {
			return field.Errorf("Fetch", "{Fetch} %q is %s, outside the writable areas: name a file under /tmp or the working directory %s", f.Name, f.Path, s.Workdir)
		}
	}
	return nil
}

// RootFilesDir is where RootFiles go: a directory the program can read
// but not write, in either kind of root.
const RootFilesDir = "/run/microbox"

// validateRootFiles checks that RootFiles stay under RootFilesDir and that
// a prepared root has a real /run directory to mount their tmpfs on (a
// symlink would send the mount elsewhere).
func (s *Spec) validateRootFiles() error {
	for _, f := range s.RootFiles {
		if err := checkSandboxPath("root file", f.Path); err != nil {
			return err
		}
		if !strings.HasPrefix(f.Path, RootFilesDir+"/") {
			return fmt.Errorf("root file %s must lie under %s", f.Path, RootFilesDir)
		}
	}
	run := path.Dir(RootFilesDir)
	if len(s.RootFiles) > 0 && (s.Workdir == run || strings.HasPrefix(s.Workdir, run+"/")) {
		// Its tmpfs would hide them: the policy would silently not load.
		return fmt.Errorf("working directory %s would hide microbox's files in %s; use one outside %s", s.Workdir, RootFilesDir, run)
	}
	if s.RootDir == "" || len(s.RootFiles) == 0 {
		return nil
	}
	if fi, err := os.Lstat(s.RootDir + run); err != nil || !fi.IsDir() {
		return fmt.Errorf("rootfs %s has no %s directory to mount microbox's policy files on; create it (mkdir -p %s%s)", s.RootDir, run, s.RootDir, run)
	}
	return nil
}

func checkSandboxPath(what, p string) error {
	if !path.IsAbs(p) || path.Clean(p) != p {
		return fmt.Errorf("%s %q must be an absolute, clean path inside the sandbox", what, p)
	}
	if strings.IndexByte(p, 0) >= 0 {
		return fmt.Errorf("%s path contains a NUL byte", what)
	}
	return nil
}

// isSystemDir reports whether p is or lies in a directory the root needs.
func isSystemDir(p string) bool {
	for _, d := range []string{"/usr", "/etc", "/proc", "/dev", "/bin", "/sbin", "/lib", "/lib64"} {
		if p == d || strings.HasPrefix(p, d+"/") {
			return true
		}
	}
	return false
}
