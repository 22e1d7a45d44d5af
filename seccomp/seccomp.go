// Package seccomp builds microbox's system-call filter with libseccomp.
//
// The sandbox runs untrusted Python. Namespaces and cgroups bound what the
// program can reach; this filter bounds how much of the kernel it can talk
// to, so that a kernel bug behind a rarely used system call (io_uring, bpf,
// user namespaces, the mount API, ...) is out of the program's reach.
//
// A Policy is data: OCI runtime-spec LinuxSeccomp filters (the format of
// Docker's profiles), either microbox's curated CPython allowlist (Default,
// a stack of three) or a profile read from a file (LoadProfile, one).
// Compile turns it into raw classic-BPF programs (a Stack) that microbox's
// init loads with seccomp(SECCOMP_SET_MODE_FILTER), oldest first, as the
// last step before the program's process execs the interpreter (in a jail
// started ahead, before the run comes: the process then waits under them
// for its arguments, nsjail/nsinit/pid1.c); Program gives them for a mode,
// the default ones precompiled.
//
// Whatever the policy, every compiled filter only admits the native
// architecture: a system call made through another ABI (i386 int 0x80, x32)
// kills the process, because rules written for one system-call table mean
// nothing for another.
package seccomp

import (
	"bytes"
	"fmt"
	"slices"
	"sync"

	"github.com/opencontainers/runtime-spec/specs-go"
	libseccomp "github.com/seccomp/libseccomp-golang"
)

// Mode selects the filter a sandbox runs under.
type Mode string

// The modes, as written on microbox's command line.
const (
	ModeDefault Mode = "default" // the curated CPython allowlist
	ModeLog     Mode = "log"     // the allowlist, refusals allowed but logged
	ModeOff     Mode = "off"     // no filter at all
	ModeProfile Mode = "profile" // a user's OCI/Docker JSON profile
)

// ParseMode checks that s names a mode.
func ParseMode(s string) (Mode, error) {
	switch m := Mode(s); m {
	case ModeDefault, ModeLog, ModeOff, ModeProfile:
		return m, nil
	}
	return "", fmt.Errorf("seccomp mode %q: want default, log, off or profile", s)
}

// ForMode returns the policy for mode m; profile is the JSON file that
// ModeProfile reads. It returns nil, nil for ModeOff: no filter.
func ForMode(m Mode, profile string) (*Policy, error) {
	switch m {
	case ModeDefault:
		return Default(), nil
	case ModeLog:
		return Default().Log(), nil
	case ModeOff:
		return nil, nil
	case ModeProfile:
		return LoadProfile(profile)
	}
	return nil, fmt.Errorf("seccomp mode %q: want default, log, off or profile", m)
}

// Program returns the compiled filters (see Compile) for mode m; profile is the
// JSON file that ModeProfile reads. It returns nil, nil for ModeOff: no
// filter.
//
// ModeDefault costs nothing on x86_64: the default policy is shipped
// precompiled (default_amd64.bpf, the bytes Default().Compile() gives with
// the libseccomp of record). Other architectures' default and the log
// mode compile once a process; a profile, at each call.
//
// A profile that cannot be read or used is reported as a *ProfileError:
// the caller's input, not a fault of the sandbox.
func Program(m Mode, profile string) ([]byte, error) {
	switch m {
	case ModeOff:
		return nil, nil
	case ModeDefault, ModeLog:
		prog, err := ownProgram(m)
		return slices.Clone(prog), err
	}
	p, err := ForMode(m, profile)
	if err != nil {
		return nil, &ProfileError{Err: err}
	}
	return p.Compile()
}

// ProfileError is a mode or profile that cannot be used; Error is the
// underlying error's message unchanged.
type ProfileError struct{ Err error }

func (e *ProfileError) Error() string { return e.Err.Error() }
func (e *ProfileError) Unwrap() error { return e.Err }

// Policy is a system-call filter as data: one filter (Spec), or a stack
// of them (Below, then Spec).
//
// Each filter has runc's semantics (conditions of a rule must all hold,
// unless two are on the same argument: then each is an alternative),
// except that only the native architecture is admitted: Architectures is
// not used and calls through other ABIs are killed. Being OCI data, each
// filter marshals to a profile that LoadProfile reads back.
//
// A stack has the kernel's semantics for several loaded filters: every
// filter judges every call, and the most restrictive answer wins (kill,
// then errno, then allow); between two errno answers, the newest
// filter's errno.
type Policy struct {
	// Name says where the policy came from, for reports and logs.
	Name string
	// Spec holds the default action and the rules of the policy's only
	// filter, or of its newest.
	Spec specs.LinuxSeccomp
	// Below are the filters loaded before Spec, oldest first; none for a
	// profile.
	Below []specs.LinuxSeccomp
}

// filters returns p's filters, oldest first.
func (p *Policy) filters() []specs.LinuxSeccomp {
	return append(slices.Clone(p.Below), p.Spec)
}

// Log returns a copy of p whose refusals are allowed but logged
// (SECCOMP_RET_LOG), to author a policy: the program runs to the end and
// the audit log lists every call the policy would have refused (a call
// any filter of a stack refuses). Calls from a foreign architecture are
// still killed: no CPython build makes them.
func (p *Policy) Log() *Policy {
	q := &Policy{Name: p.Name + " (log)", Spec: logSpec(p.Spec)}
	for _, s := range p.Below {
		q.Below = append(q.Below, logSpec(s))
	}
	return q
}

// logSpec is s with every action but allow turned into log.
func logSpec(s specs.LinuxSeccomp) specs.LinuxSeccomp {
	s.DefaultAction = logged(s.DefaultAction)
	s.DefaultErrnoRet = nil
	rules := make([]specs.LinuxSyscall, len(s.Syscalls))
	for i, r := range s.Syscalls {
		r.Action, r.ErrnoRet = logged(r.Action), nil
		rules[i] = r
	}
	s.Syscalls = rules
	return s
}

// logged maps every action but Allow to Log.
func logged(a specs.LinuxSeccompAction) specs.LinuxSeccompAction {
	if a == specs.ActAllow {
		return a
	}
	return specs.ActLog
}

// SyscallName returns the name of system call number nr on the native
// architecture, or "" if libseccomp does not know it. It is for reports:
// a process killed by the filter shows the number in its siginfo and in the
// audit log.
func SyscallName(nr int) string {
	name, err := libseccomp.ScmpSyscall(nr).GetName()
	if err != nil {
		return ""
	}
	return name
}

// ownProgram is mode m's stack (default or log): the default one as
// shipped, where it is, else each compiled once in the process (a server
// or batch worker runs many; a compile costs some milliseconds).
func ownProgram(m Mode) ([]byte, error) {
	if m == ModeDefault && embeddedDefault != nil {
		return embeddedDefault, nil
	}
	return compiledOwn[m]()
}

var compiledOwn = map[Mode]func() ([]byte, error){
	ModeDefault: sync.OnceValues(func() ([]byte, error) { return Default().Compile() }),
	ModeLog:     sync.OnceValues(func() ([]byte, error) { return Default().Log().Compile() }),
}

// Own reports whether stack is what microbox's own mode m loads (nil for
// off or no mode, the default policy, or its log mode): those filters allow what a
// process does while it waits under them for its program (read, openat
// and dup2 for its stdin, prlimit64 on itself, execve), so a jail started
// ahead may load them before its run comes (nsjail/nsinit/pid1.c:
// prepare_program). A caller's profile might refuse those calls, and so
// might bytes that only carry an own mode's name.
func Own(stack []byte, m Mode) bool {
	switch m {
	case ModeOff, "": // no filter (a spec of no mode carries none)
		return stack == nil
	case ModeDefault, ModeLog:
		own, err := ownProgram(m)
		return err == nil && stack != nil && bytes.Equal(stack, own)
	}
	return false
}
