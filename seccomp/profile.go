package seccomp

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/opencontainers/runtime-spec/specs-go"
	libseccomp "github.com/seccomp/libseccomp-golang"
	"golang.org/x/sys/unix"
)

// profile mirrors specs.LinuxSeccomp plus the fields Docker's profiles add
// (archMap, and per rule comment, includes, excludes). It exists so that
// decoding can refuse unknown fields: a misspelt field must not silently
// weaken a filter.
type profile struct {
	DefaultAction    specs.LinuxSeccompAction `json:"defaultAction"`
	DefaultErrnoRet  *uint                    `json:"defaultErrnoRet"`
	Architectures    []specs.Arch             `json:"architectures"`
	ArchMap          []archMap                `json:"archMap"`
	Flags            []specs.LinuxSeccompFlag `json:"flags"`
	ListenerPath     string                   `json:"listenerPath"`
	ListenerMetadata string                   `json:"listenerMetadata"`
	Syscalls         []profileRule            `json:"syscalls"`
}

// archMap is Docker's list of an architecture and the ABIs it also runs.
type archMap struct {
	Arch      specs.Arch   `json:"architecture"`
	SubArches []specs.Arch `json:"subArchitectures"`
}

type profileRule struct {
	Names    []string                 `json:"names"`
	Action   specs.LinuxSeccompAction `json:"action"`
	ErrnoRet *uint                    `json:"errnoRet"`
	Args     []specs.LinuxSeccompArg  `json:"args"`
	Comment  string                   `json:"comment"`
	Includes *ruleFilter              `json:"includes"`
	Excludes *ruleFilter              `json:"excludes"`
}

// ruleFilter is Docker's condition on a rule: includes apply the rule only
// where all hold, excludes skip it where any holds.
type ruleFilter struct {
	Caps      []string `json:"caps"`
	Arches    []string `json:"arches"`
	MinKernel string   `json:"minKernel"`
}

// LoadProfile reads an OCI runtime-spec LinuxSeccomp JSON profile, in
// Docker's dialect too: Docker's default profile loads as is.
//
// Fields the sandbox cannot honour are errors naming the field: unknown
// fields, flags, listenerPath and listenerMetadata, the actions
// SCMP_ACT_TRACE and SCMP_ACT_NOTIFY (no tracer, no listener), and a
// policy that does not allow execve (microbox execs the program under the
// filter).
//
// Architectures: only the native one is admitted, whatever
// architectures or archMap list (other ABIs are killed; see Compile); a
// profile whose architectures omit the native one is an error. Docker's
// includes and excludes are evaluated for this machine: the native
// architecture, the running kernel's version, and no capabilities at all
// (the sandboxed program holds none), so a rule that includes a capability
// never applies and excludes by capability never skip a rule.
//
// Syscall names that libseccomp does not know are skipped without error,
// as Docker does: its profile names calls newer than some libseccomp
// releases, and the profile's default action covers them.
func LoadProfile(path string) (*Policy, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("load seccomp profile: %w", err)
	}
	defer f.Close()
	dec := json.NewDecoder(f)
	dec.DisallowUnknownFields()
	var prof profile
	if err := dec.Decode(&prof); err != nil {
		return nil, fmt.Errorf("load seccomp profile %s: %w", path, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("load seccomp profile %s: data after the profile object", path)
	}
	p, err := prof.policy(path)
	if err != nil {
		return nil, fmt.Errorf("load seccomp profile %s: %w", path, err)
	}
	return p, nil
}

// policy converts a decoded profile, applying includes and excludes.
func (prof *profile) policy(name string) (*Policy, error) {
	if err := prof.check(); err != nil {
		return nil, err
	}
	p := &Policy{Name: name, Spec: specs.LinuxSeccomp{
		DefaultAction:   prof.DefaultAction,
		DefaultErrnoRet: prof.DefaultErrnoRet,
	}}
	for i, r := range prof.Syscalls {
		if err := r.check(); err != nil {
			return nil, fmt.Errorf("syscalls[%d] %v: %w", i, r.Names, err)
		}
		ok, err := r.applies()
		if err != nil {
			return nil, fmt.Errorf("syscalls[%d] %v: %w", i, r.Names, err)
		}
		if ok {
			p.Spec.Syscalls = append(p.Spec.Syscalls, specs.LinuxSyscall{
				Names: r.Names, Action: r.Action, ErrnoRet: r.ErrnoRet, Args: r.Args,
			})
		}
	}
	if err := checkExecve(&p.Spec); err != nil {
		return nil, err
	}
	return p, nil
}

// check refuses the top-level fields the sandbox cannot honour.
func (prof *profile) check() error {
	switch {
	case prof.DefaultAction == "":
		return errors.New("field defaultAction is missing")
	case len(prof.Flags) > 0:
		return errors.New("field flags is not supported: microbox's init loads the filter without flags")
	case prof.ListenerPath != "" || prof.ListenerMetadata != "":
		return errors.New("fields listenerPath and listenerMetadata are not supported: the sandbox has no seccomp agent")
	}
	if _, err := action(prof.DefaultAction, prof.DefaultErrnoRet); err != nil {
		return fmt.Errorf("field defaultAction: %w", err)
	}
	if len(prof.Architectures) == 0 {
		return nil
	}
	for _, a := range prof.Architectures {
		if isNative(string(a)) {
			return nil
		}
	}
	return fmt.Errorf("field architectures %v omits this machine's architecture", prof.Architectures)
}

// check refuses a rule the sandbox cannot honour.
func (r *profileRule) check() error {
	if len(r.Names) == 0 {
		return errors.New("field names is empty")
	}
	if r.ErrnoRet != nil && r.Action != specs.ActErrno {
		return fmt.Errorf("field errnoRet needs action SCMP_ACT_ERRNO, not %s", r.Action)
	}
	if _, err := action(r.Action, r.ErrnoRet); err != nil {
		return fmt.Errorf("field action: %w", err)
	}
	for _, a := range r.Args {
		if _, err := operator(a.Op); err != nil {
			return fmt.Errorf("field args: %w", err)
		}
	}
	return nil
}

// applies evaluates Docker's includes and excludes on this machine, for a
// program without capabilities.
func (r *profileRule) applies() (bool, error) {
	if ex := r.Excludes; ex != nil {
		if anyNative(ex.Arches) {
			return false, nil
		}
		if ex.MinKernel != "" {
			newer, err := kernelAtLeast(ex.MinKernel)
			if err != nil || newer {
				return false, err
			}
		}
		// ex.Caps: the program holds no capability, so none excludes.
	}
	if in := r.Includes; in != nil {
		if len(in.Caps) > 0 {
			return false, nil // needs a capability the program lacks
		}
		if len(in.Arches) > 0 && !anyNative(in.Arches) {
			return false, nil
		}
		newer, err := kernelAtLeast(in.MinKernel)
		if err != nil || !newer {
			return false, err
		}
	}
	return true, nil
}

// isNative reports whether an architecture name, in OCI (SCMP_ARCH_X86_64)
// or Docker/Go (amd64, x32, arm64) spelling, is the native one. x32 is not:
// libseccomp treats it as an architecture of its own.
func isNative(name string) bool {
	name = strings.TrimPrefix(strings.ToLower(name), "scmp_arch_")
	a, err := libseccomp.GetArchFromString(name)
	if err != nil {
		return false
	}
	native, err := libseccomp.GetNativeArch()
	return err == nil && a == native
}

func anyNative(names []string) bool {
	for _, n := range names {
		if isNative(n) {
			return true
		}
	}
	return false
}

// kernelAtLeast reports whether the running kernel is at least version min
// ("4.8"); an empty min always holds.
func kernelAtLeast(min string) (bool, error) {
	if min == "" {
		return true, nil
	}
	want, err := majorMinor(min)
	if err != nil {
		return false, fmt.Errorf("minKernel: %w", err)
	}
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return false, fmt.Errorf("minKernel: uname: %w", err)
	}
	have, err := majorMinor(unix.ByteSliceToString(u.Release[:]))
	if err != nil {
		return false, fmt.Errorf("minKernel: running kernel: %w", err)
	}
	return have[0] > want[0] || (have[0] == want[0] && have[1] >= want[1]), nil
}

// majorMinor parses the start of a kernel release ("6.1.0-18-amd64").
func majorMinor(v string) ([2]int, error) {
	var out [2]int
	fields := strings.SplitN(v, ".", 3)
	if len(fields) < 2 {
		return out, fmt.Errorf("version %q is not major.minor", v)
	}
	for i := range out {
		digits := fields[i]
		if end := strings.IndexFunc(digits, notDigit); end >= 0 {
			digits = digits[:end] // "18-rc1"
		}
		n, err := strconv.Atoi(digits)
		if err != nil {
			return out, fmt.Errorf("version %q is not major.minor", v)
		}
		out[i] = n
	}
	return out, nil
}

func notDigit(r rune) bool { return r < '0' || r > '9' }
