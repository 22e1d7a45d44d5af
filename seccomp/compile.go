package seccomp

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/opencontainers/runtime-spec/specs-go"
	libseccomp "github.com/seccomp/libseccomp-golang"
	"golang.org/x/sys/unix"
)

// Compile returns p as a stack of classic-BPF programs, one per filter,
// oldest first (see Programs for the format): what
// seccomp(SECCOMP_SET_MODE_FILTER) takes, a program at a time, through
// struct sock_fprog.
//
// Every filter admits only the native architecture: every other one,
// including x32 on x86_64, meets the bad-architecture action, KILL_PROCESS.
// (Adding an architecture to a libseccomp filter would subject its calls to
// the same rules by name, and no sandboxed program needs a second ABI.)
//
// Syscall names libseccomp does not know are skipped (see LoadProfile).
func (p *Policy) Compile() ([]byte, error) {
	var stack []byte
	for _, s := range p.filters() {
		if err := checkExecve(&s); err != nil {
			return nil, fmt.Errorf("seccomp policy %s: %w", p.Name, err)
		}
		prog, err := compileFilter(&s)
		if err != nil {
			return nil, err
		}
		stack = appendProgram(stack, prog)
	}
	return stack, nil
}

// compileFilter returns filter s as one BPF program.
func compileFilter(s *specs.LinuxSeccomp) ([]byte, error) {
	def, err := action(s.DefaultAction, s.DefaultErrnoRet)
	if err != nil {
		return nil, fmt.Errorf("seccomp default action: %w", err)
	}
	f, err := libseccomp.NewFilter(def)
	if err != nil {
		return nil, fmt.Errorf("new seccomp filter: %w", err)
	}
	defer f.Release()
	if err := f.SetBadArchAction(libseccomp.ActKillProcess); err != nil {
		return nil, fmt.Errorf("set seccomp bad-architecture action: %w", err)
	}
	// A binary tree of syscall numbers instead of a linear scan: with some
	// 300 calls listed, the conditional ones (ioctl, clone, socket) are
	// reached in a dozen comparisons, not hundreds. (Unconditionally
	// allowed calls skip the program on kernels >= 5.11, which cache them.)
	if err := f.SetOptimize(2); err != nil {
		return nil, fmt.Errorf("set seccomp filter optimization: %w", err)
	}
	for i := range s.Syscalls {
		if err := addRule(f, def, &s.Syscalls[i]); err != nil {
			return nil, err
		}
	}
	return export(f)
}

// addRule adds one rule for each of r's names that libseccomp knows.
// A rule whose action is the default one is skipped: it changes nothing
// (an unconditional rule would swallow it anyway), and libseccomp refuses
// it. Docker's clone3 rule and every refusal under Log() are such rules.
func addRule(f *libseccomp.ScmpFilter, def libseccomp.ScmpAction, r *specs.LinuxSyscall) error {
	act, err := action(r.Action, r.ErrnoRet)
	if err != nil {
		return fmt.Errorf("compile seccomp rule for %s: %w", strings.Join(r.Names, ","), err)
	}
	if act == def {
		return nil
	}
	for _, name := range r.Names {
		nr, err := libseccomp.GetSyscallFromName(name)
		if err != nil {
			continue // newer than this libseccomp: the default action applies
		}
		conds, err := conditions(r.Args)
		if err != nil {
			return fmt.Errorf("compile seccomp rule for %s: %w", name, err)
		}
		for _, c := range conds {
			// AddRuleConditional (not ...Exact) quietly drops calls this
			// architecture lacks, so one list serves several.
			if err := f.AddRuleConditional(nr, act, c); err != nil {
				return fmt.Errorf("compile seccomp rule for %s: %w", name, err)
			}
		}
	}
	return nil
}

// conditions turns a rule's arguments into libseccomp condition lists, one
// list per libseccomp rule. Conditions on distinct arguments must all hold.
// libseccomp refuses two conditions on one argument in a rule, so when
// arguments repeat, every condition becomes a rule of its own (the
// conditions are then alternatives), as runc does.
func conditions(args []specs.LinuxSeccompArg) ([][]libseccomp.ScmpCondition, error) {
	perIndex := map[uint]int{}
	for _, a := range args {
		perIndex[a.Index]++
	}
	alternatives := len(perIndex) < len(args)
	var all []libseccomp.ScmpCondition
	for _, a := range args {
		op, err := operator(a.Op)
		if err != nil {
			return nil, err
		}
		// For SCMP_CMP_MASKED_EQ, Value is the mask and ValueTwo the datum
		// (libseccomp's datum_a and datum_b); other operators ignore ValueTwo.
		c, err := libseccomp.MakeCondition(a.Index, op, a.Value, a.ValueTwo)
		if err != nil {
			return nil, fmt.Errorf("argument %d %s: %w", a.Index, a.Op, err)
		}
		all = append(all, c)
	}
	if !alternatives {
		return [][]libseccomp.ScmpCondition{all}, nil
	}
	out := make([][]libseccomp.ScmpCondition, len(all))
	for i, c := range all {
		out[i] = []libseccomp.ScmpCondition{c}
	}
	return out, nil
}

// action maps an OCI action to libseccomp's. errno defaults to EPERM, as
// in runc.
func action(a specs.LinuxSeccompAction, errno *uint) (libseccomp.ScmpAction, error) {
	switch a {
	case specs.ActAllow:
		return libseccomp.ActAllow, nil
	case specs.ActErrno:
		e := uint(unix.EPERM)
		if errno != nil {
			e = *errno
		}
		if e > 4095 {
			return 0, fmt.Errorf("errno %d out of range", e)
		}
		return libseccomp.ActErrno.SetReturnCode(int16(e)), nil
	case specs.ActKill, specs.ActKillThread:
		return libseccomp.ActKillThread, nil
	case specs.ActKillProcess:
		return libseccomp.ActKillProcess, nil
	case specs.ActTrap:
		return libseccomp.ActTrap, nil
	case specs.ActLog:
		return libseccomp.ActLog, nil
	case specs.ActTrace:
		return 0, errors.New("SCMP_ACT_TRACE needs a tracer, and the sandbox has none")
	case specs.ActNotify:
		return 0, errors.New("SCMP_ACT_NOTIFY needs a listener, and the sandbox has none")
	}
	return 0, fmt.Errorf("unknown action %q", a)
}

func operator(op specs.LinuxSeccompOperator) (libseccomp.ScmpCompareOp, error) {
	switch op {
	case specs.OpNotEqual:
		return libseccomp.CompareNotEqual, nil
	case specs.OpLessThan:
		return libseccomp.CompareLess, nil
	case specs.OpLessEqual:
		return libseccomp.CompareLessOrEqual, nil
	case specs.OpEqualTo:
		return libseccomp.CompareEqual, nil
	case specs.OpGreaterEqual:
		return libseccomp.CompareGreaterEqual, nil
	case specs.OpGreaterThan:
		return libseccomp.CompareGreater, nil
	case specs.OpMaskedEqual:
		return libseccomp.CompareMaskedEqual, nil
	}
	return 0, fmt.Errorf("unknown operator %q", op)
}

// export writes the filter's BPF to a memfd and reads it back: libseccomp
// 2.5 exports only to a file descriptor (seccomp_export_bpf_mem is 2.6),
// and a memfd, unlike a pipe, cannot fill up and block the writer.
func export(f *libseccomp.ScmpFilter) ([]byte, error) {
	fd, err := unix.MemfdCreate("microbox-seccomp", unix.MFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("export seccomp filter: memfd: %w", err)
	}
	file := os.NewFile(uintptr(fd), "microbox-seccomp")
	defer file.Close()
	if err := f.ExportBPF(file); err != nil {
		return nil, fmt.Errorf("export seccomp filter: %w", err)
	}
	if _, err := file.Seek(0, io.SeekStart); err != nil {
		return nil, fmt.Errorf("export seccomp filter: rewind: %w", err)
	}
	prog, err := io.ReadAll(file)
	if err != nil {
		return nil, fmt.Errorf("export seccomp filter: read back: %w", err)
	}
	if len(prog) == 0 || len(prog)%8 != 0 {
		return nil, fmt.Errorf("export seccomp filter: %d bytes is not a BPF program", len(prog))
	}
	return prog, nil
}

// checkExecve makes sure filter s lets execve through: microbox's init
// loads the filters and execs the program next, so a policy that refuses
// execve can only fail, and better here with a clear message.
func checkExecve(s *specs.LinuxSeccomp) error {
	verdict := s.DefaultAction
	for _, r := range s.Syscalls {
		if !slices.Contains(r.Names, "execve") {
			continue
		}
		if len(r.Args) > 0 {
			return errors.New("execve must be allowed unconditionally: microbox execs the program under the filter")
		}
		verdict = r.Action
	}
	if verdict != specs.ActAllow && verdict != specs.ActLog {
		return fmt.Errorf("execve is not allowed (action %s): microbox execs the program under the filter", verdict)
	}
	return nil
}
