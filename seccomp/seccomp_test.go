package seccomp

import (
	"encoding/binary"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/opencontainers/runtime-spec/specs-go"
	libseccomp "github.com/seccomp/libseccomp-golang"
	"golang.org/x/sys/unix"
)

// TestDefaultNamesKnown catches typos: Compile skips names libseccomp does
// not know, so a misspelt call would silently fall to ENOSYS.
func TestDefaultNamesKnown(t *testing.T) {
	for _, r := range Default().Spec.Syscalls {
		for _, name := range r.Names {
			if _, err := libseccomp.GetSyscallFromName(name); err != nil {
				t.Errorf("%s: %v", name, err)
			}
		}
	}
}

// TestDefaultListsDisjoint: a call is allowed, refused, or conditional,
// never two of these (libseccomp would reject the conflict anyway).
func TestDefaultListsDisjoint(t *testing.T) {
	seen := map[string]string{}
	note := func(name, where string) {
		if prev, ok := seen[name]; ok && prev != where {
			t.Errorf("%s is both %s and %s", name, prev, where)
		}
		seen[name] = where
	}
	for _, n := range groupNames(allowlist()) {
		note(n, "allowed")
	}
	for _, n := range groupNames(refused()) {
		note(n, "refused")
	}
	for _, c := range conditional() {
		note(c.name, "conditional")
		for _, r := range c.rules {
			if r.Names[0] != c.name {
				t.Errorf("%s's rules include one for %s", c.name, r.Names[0])
			}
		}
	}
	note("clone3", "ENOSYS")
	for _, g := range append(allowlist(), refused()...) {
		t.Logf("%3d  %s", len(g.names), g.why)
	}
	t.Logf("%d allowed, %d refused, %d conditional calls", len(groupNames(allowlist())), len(groupNames(refused())), len(conditional()))
}

// TestConditionalRules checks the argument rules in Go, without a kernel:
// for many argument words, the rules of a call that lists allowed
// arguments match exactly the allowed ones, and those of a call that
// lists refused arguments exactly the refused ones, all with that action.
func TestConditionalRules(t *testing.T) {
	lo := func(x uint64) uint32 { return uint32(x) }
	tcpUDP := func(a [6]uint64) bool {
		switch lo(a[1]) & 0xf {
		case unix.SOCK_STREAM:
			return lo(a[2]) == 0 || lo(a[2]) == unix.IPPROTO_TCP
		case unix.SOCK_DGRAM:
			return lo(a[2]) == 0 || lo(a[2]) == unix.IPPROTO_UDP
		}
		return false
	}
	cases := []struct {
		name    string
		args    []int                  // the arguments the rules look at
		allowed func(a [6]uint64) bool // else EPERM
	}{
		{"clone", []int{0}, func(a [6]uint64) bool { return a[0]&nsFlags == 0 }},
		{"ioctl", []int{1}, func(a [6]uint64) bool { return lo(a[1]) != unix.TIOCSTI && lo(a[1]) != unix.TIOCLINUX }},
		{"socket", []int{0, 1, 2}, func(a [6]uint64) bool {
			switch lo(a[0]) {
			case unix.AF_UNIX:
				return true
			case unix.AF_INET, unix.AF_INET6:
				return tcpUDP(a)
			}
			return false
		}},
		{"socketpair", []int{0}, func(a [6]uint64) bool { return lo(a[0]) == unix.AF_UNIX }},
		{"mknodat", []int{2}, func(a [6]uint64) bool {
			return slices.Contains([]uint64{0, unix.S_IFREG, unix.S_IFIFO}, a[2]&unix.S_IFMT)
		}},
		{"mknod", []int{1}, func(a [6]uint64) bool {
			return slices.Contains([]uint64{0, unix.S_IFREG, unix.S_IFIFO}, a[1]&unix.S_IFMT)
		}},
		{"personality", []int{0}, func(a [6]uint64) bool {
			return slices.Contains([]uint32{0, addrNoRandomize, 0xffffffff}, lo(a[0]))
		}},
		{"prlimit64", []int{0}, func(a [6]uint64) bool { return lo(a[0]) == 0 }},
		{"fcntl", []int{1}, func(a [6]uint64) bool { return lo(a[1]) != unix.F_NOTIFY }},
		{"preadv2", []int{5}, func(a [6]uint64) bool { return a[5]&unix.RWF_NOWAIT == 0 }},
		{"setsockopt", []int{1, 2}, func(a [6]uint64) bool {
			switch lo(a[1]) {
			case unix.SOL_SOCKET:
				return !slices.Contains([]uint32{unix.SO_ATTACH_FILTER, unix.SO_ATTACH_BPF,
					unix.SO_ATTACH_REUSEPORT_CBPF, unix.SO_ATTACH_REUSEPORT_EBPF}, lo(a[2]))
			case unix.IPPROTO_TCP:
				return lo(a[2]) != unix.TCP_ULP
			}
			return true
		}},
	}
	rng := rand.New(rand.NewPCG(1, 2))
	interesting := []uint64{0, ^uint64(0), unix.TIOCSTI, unix.TIOCSTI | 1<<32, unix.TIOCLINUX,
		unix.AF_PACKET, unix.AF_NETLINK, unix.AF_VSOCK, unix.AF_INET | 1<<32, unix.AF_PACKET | 1<<32,
		unix.AF_UNIX, unix.AF_INET, unix.AF_INET6, unix.SOCK_STREAM, unix.SOCK_DGRAM, unix.SOCK_RAW,
		unix.SOCK_STREAM | unix.SOCK_NONBLOCK | unix.SOCK_CLOEXEC, unix.IPPROTO_TCP, unix.IPPROTO_UDP,
		unix.IPPROTO_MPTCP, unix.IPPROTO_UDPLITE, unix.IPPROTO_SCTP, unix.SOL_SOCKET, unix.SO_ATTACH_FILTER,
		unix.SO_ATTACH_BPF, unix.TCP_ULP, unix.F_NOTIFY, unix.RWF_NOWAIT,
		unix.S_IFCHR | 0o600, unix.S_IFBLK, unix.S_IFIFO | 0o644, unix.S_IFSOCK, unix.CLONE_NEWUSER,
		unix.CLONE_VM | unix.CLONE_THREAD | unix.CLONE_SIGHAND, unix.CLONE_NEWTIME,
		addrNoRandomize, addrNoRandomize | 1<<32, 0x0400000, 0xffffffff, 0xffffffff_00000000}
	for _, c := range cases {
		call := conditionalRules(c.name)
		rules := call.rules
		if rules == nil {
			t.Fatalf("no rules for %s", c.name)
		}
		listed := specs.ActErrno
		if call.only {
			listed = specs.ActAllow
		}
		// Candidate words per argument: the interesting ones, each
		// rule's word and its one-bit neighbours, and random ones.
		cands := map[uint][]uint64{}
		for _, i := range c.args {
			cands[uint(i)] = slices.Clone(interesting)
		}
		for _, r := range rules {
			for _, a := range r.Args {
				v := uint32(a.ValueTwo)
				for bit := range 33 {
					cands[a.Index] = append(cands[a.Index], uint64(v)^(uint64(1)<<bit>>1))
				}
			}
		}
		pick := func(i uint) uint64 {
			if rng.IntN(3) == 0 {
				return []uint64{rng.Uint64(), rng.Uint64() & 0xffff, rng.Uint64() & 0xffffffff}[rng.IntN(3)]
			}
			return cands[i][rng.IntN(len(cands[i]))]
		}
		for range 60000 {
			var a [6]uint64
			for _, i := range c.args {
				a[i] = pick(uint(i))
			}
			matched := false
			for _, r := range rules {
				match := r.Action == listed
				for _, arg := range r.Args {
					match = match && a[arg.Index]&arg.Value == arg.ValueTwo
				}
				matched = matched || match
			}
			if matched != (c.allowed(a) == call.only) {
				t.Fatalf("%s(%#x): a %s rule matches: %v; allowed: %v", c.name, a, listed, matched, c.allowed(a))
			}
		}
		t.Logf("%s: %d rules", c.name, len(rules))
	}
}

func conditionalRules(name string) argRules {
	for _, c := range conditional() {
		if c.name == name {
			return c
		}
	}
	return argRules{}
}

// TestCompileChecksArch reads the head of the program: it must load
// seccomp_data.arch, compare it with the native AUDIT_ARCH and kill the
// process otherwise. That is how i386 int 0x80 calls die (see also
// TestFilterInt80Killed, which makes one).
func TestCompileChecksArch(t *testing.T) {
	_, progs := defaultStack(t)
	for i, prog := range progs {
		t.Logf("default policy, filter %d: %d BPF instructions", i, len(prog)/8)
		checkArch(t, prog)
	}
}

// checkArch checks the head of one program.
func checkArch(t *testing.T, prog []byte) {
	t.Helper()
	if len(prog)%8 != 0 || len(prog)/8 > 4096 {
		t.Fatalf("%d bytes is not a loadable BPF program", len(prog))
	}
	ins := decode(prog)
	const ldAbsW, jeqK, ret = 0x20, 0x15, 0x06
	if ins[0].code != ldAbsW || ins[0].k != 4 { // offsetof(struct seccomp_data, arch)
		t.Fatalf("first instruction %+v does not load the arch", ins[0])
	}
	if ins[1].code != jeqK || ins[1].k != nativeAuditArch(t) {
		t.Fatalf("second instruction %+v does not compare with the native arch", ins[1])
	}
	miss := ins[2+int(ins[1].jf)]
	if miss.code != ret || miss.k != unix.SECCOMP_RET_KILL_PROCESS {
		t.Fatalf("a foreign arch meets %+v, want ret KILL_PROCESS", miss)
	}
}

type insn struct {
	code   uint16
	jt, jf uint8
	k      uint32
}

func decode(prog []byte) []insn {
	out := make([]insn, len(prog)/8)
	for i := range out {
		b := prog[i*8:]
		out[i] = insn{binary.NativeEndian.Uint16(b), b[2], b[3], binary.NativeEndian.Uint32(b[4:])}
	}
	return out
}

func nativeAuditArch(t *testing.T) uint32 {
	arch, err := libseccomp.GetNativeArch()
	if err != nil {
		t.Fatal(err)
	}
	switch arch {
	case libseccomp.ArchAMD64:
		return unix.AUDIT_ARCH_X86_64
	case libseccomp.ArchARM64:
		return unix.AUDIT_ARCH_AARCH64
	}
	t.Skipf("no AUDIT_ARCH known for %s", arch)
	return 0
}

func TestLogTurnsRefusalsIntoLog(t *testing.T) {
	p := Default()
	q := p.Log()
	filters, logged := p.filters(), q.filters()
	if len(logged) != len(filters) {
		t.Fatalf("%d filters logged, want %d", len(logged), len(filters))
	}
	for j, s := range logged {
		orig := filters[j]
		want := specs.ActLog
		if orig.DefaultAction == specs.ActAllow {
			want = specs.ActAllow
		}
		if s.DefaultAction != want || s.DefaultErrnoRet != nil {
			t.Errorf("filter %d: default action %s, want %s", j, s.DefaultAction, want)
		}
		for i, r := range s.Syscalls {
			want := specs.ActLog
			if orig.Syscalls[i].Action == specs.ActAllow {
				want = specs.ActAllow
			}
			if r.Action != want || r.ErrnoRet != nil {
				t.Fatalf("filter %d, %v: %s errno %v, want %s", j, r.Names, r.Action, r.ErrnoRet, want)
			}
		}
	}
	if p.Spec.DefaultAction != specs.ActErrno || p.Below[0].Syscalls[0].Action != specs.ActAllow ||
		p.Below[1].Syscalls[0].Action != specs.ActErrno {
		t.Error("Log modified the original policy")
	}
	if _, err := q.Compile(); err != nil {
		t.Fatal(err)
	}
}

func TestModes(t *testing.T) {
	for _, s := range []string{"default", "log", "off"} {
		m, err := ParseMode(s)
		if err != nil {
			t.Fatal(err)
		}
		p, err := ForMode(m, "")
		if (p == nil) != (m == ModeOff) || err != nil {
			t.Errorf("ForMode(%s) = %v, %v", m, p, err)
		}
	}
	if _, err := ParseMode("strict"); err == nil {
		t.Error("ParseMode accepted strict")
	}
	if p, err := ForMode(ModeProfile, "testdata/deny-getpid.json"); err != nil || p == nil {
		t.Errorf("ForMode(profile) = %v, %v", p, err)
	}
}

func TestSyscallName(t *testing.T) {
	if got := SyscallName(int(unix.SYS_GETPID)); got != "getpid" {
		t.Errorf("SyscallName(SYS_GETPID) = %q", got)
	}
	if got := SyscallName(99999); got != "" {
		t.Errorf("SyscallName(99999) = %q, want empty", got)
	}
}

// BenchmarkCompile measures what the caller pays per sandbox run when it
// compiles the default policy each time.
func BenchmarkCompile(b *testing.B) {
	for b.Loop() {
		if _, err := Default().Compile(); err != nil {
			b.Fatal(err)
		}
	}
}

// defaultStack is the default policy compiled: its stack, and the stack's
// programs, one per filter, oldest first.
func defaultStack(t *testing.T) (stack []byte, progs [][]byte) {
	t.Helper()
	stack, err := Default().Compile()
	if err != nil {
		t.Fatal(err)
	}
	if progs, err = Programs(stack); err != nil {
		t.Fatal(err)
	}
	return stack, progs
}

// Own holds a stack to the mode it names: microbox's own filters for
// default and log, none for off; bytes that are not that mode's, and any
// profile, are not microbox's own.
func TestOwn(t *testing.T) {
	def, err := Program(ModeDefault, "")
	if err != nil {
		t.Fatal(err)
	}
	log, err := Program(ModeLog, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		stack []byte
		mode  Mode
		own   bool
	}{
		{nil, ModeOff, true},
		{nil, "", true},
		{def, "", false},
		{def, ModeDefault, true},
		{log, ModeLog, true},
		{def, ModeLog, false},
		{log, ModeDefault, false},
		{nil, ModeDefault, false},
		{def, ModeOff, false},
		{make([]byte, len(def)), ModeDefault, false},
		{def, ModeProfile, false},
	} {
		if got := Own(c.stack, c.mode); got != c.own {
			t.Errorf("Own(%d bytes, %s) = %v, want %v", len(c.stack), c.mode, got, c.own)
		}
	}
}
