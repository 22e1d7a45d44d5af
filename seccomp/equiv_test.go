package seccomp

import (
	"encoding/binary"
	"errors"
	"io/fs"
	"math/rand/v2"
	"os"
	"slices"
	"testing"

	libseccomp "github.com/seccomp/libseccomp-golang"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// referenceFile pins the default policy's decisions for its version: a
// compiled stack whose decisions the default policy's must keep, however
// it is compiled, until PolicyVersion changes. microbox-cpython-5's is the
// single filter of 1,920 instructions that this version shipped as before
// it became a stack (every argument it refuses spelt out as rules). A new
// version's is written by -update, from Default() as it then compiles.
var referenceFile = "testdata/decisions-" + PolicyVersion + ".bpf"

// seccompData is struct seccomp_data as the BPF programs see it: the
// x/net/bpf machine loads 32-bit words big-endian, so each word is stored
// so, at its offset in the (little-endian) kernel struct: nr, arch, the
// instruction pointer, then each argument's low word before its high one.
func seccompData(arch uint32, nr int32, args [6]uint64) []byte {
	b := make([]byte, 64)
	binary.BigEndian.PutUint32(b[0:], uint32(nr))
	binary.BigEndian.PutUint32(b[4:], arch)
	for i, a := range args {
		binary.BigEndian.PutUint32(b[16+8*i:], uint32(a))
		binary.BigEndian.PutUint32(b[20+8*i:], uint32(a>>32))
	}
	return b
}

// machines returns a BPF interpreter for each program of a stack.
func machines(t *testing.T, stack []byte) []*bpf.VM {
	t.Helper()
	progs, err := Programs(stack)
	if err != nil {
		t.Fatal(err)
	}
	var vms []*bpf.VM
	for _, prog := range progs {
		var ins []bpf.Instruction
		for _, in := range decode(prog) {
			ins = append(ins, bpf.RawInstruction{Op: in.code, Jt: in.jt, Jf: in.jf, K: in.k}.Disassemble())
		}
		vm, err := bpf.NewVM(ins)
		if err != nil {
			t.Fatal(err)
		}
		vms = append(vms, vm)
	}
	return vms
}

// decide returns the kernel's verdict on data under the stacked filters
// vms (oldest first), as seccomp_run_filters makes it: newest first, a
// filter's answer replaces the one so far only if its action is strictly
// more restrictive (the actions compared as signed numbers, so that
// KILL_PROCESS, 0x80000000, is the most restrictive). So between two
// errno answers the newest filter's errno wins.
func decide(t *testing.T, vms []*bpf.VM, data []byte) uint32 {
	ret := uint32(unix.SECCOMP_RET_ALLOW)
	for i := len(vms) - 1; i >= 0; i-- {
		r, err := vms[i].Run(data)
		if err != nil {
			t.Fatal(err)
		}
		if cur := uint32(r); int32(cur&unix.SECCOMP_RET_ACTION_FULL) < int32(ret&unix.SECCOMP_RET_ACTION_FULL) {
			ret = cur
		}
	}
	return ret
}

// argumentWords are candidate argument values: every constant the
// programs compare with or mask by, each with every one of its 64 bits
// flipped in turn, with its upper word set to all ones, 1 and its own
// complement, and a few extremes.
func argumentWords(stacks ...[]byte) []uint64 {
	seen := map[uint64]bool{}
	var words []uint64
	add := func(w uint64) {
		if !seen[w] {
			seen[w] = true
			words = append(words, w)
		}
	}
	for _, w := range []uint64{0, 1, ^uint64(0), 0xffffffff, 1 << 32, 1 << 63, 0x80000000} {
		add(w)
	}
	for _, stack := range stacks {
		progs, _ := Programs(stack)
		for _, prog := range progs {
			for _, in := range decode(prog) {
				if in.code&0x07 != 0x05 && in.code != 0x54 { // BPF_JMP, BPF_ALU|BPF_AND|BPF_K
					continue
				}
				k := uint64(in.k)
				for _, w := range []uint64{k, k | 0xffffffff<<32, k | 1<<32, k | uint64(^in.k)<<32} {
					add(w)
				}
				for bit := range 64 {
					add(k ^ 1<<bit)
				}
			}
		}
	}
	return words
}

// TestDefaultMatchesReference compares, in a BPF interpreter, the
// default policy's stack with the pinned decisions of its version
// (referenceFile), for every system-call number up to 1,024 and
// some beyond (x32's, -1, huge ones), with argument values drawn from
// every constant either program compares with, their one-bit neighbours
// and variants of their upper 32 bits. The action and the errno must be
// the same for every one. Foreign architectures too: both kill.
func TestDefaultMatchesReference(t *testing.T) {
	if arch, _ := libseccomp.GetNativeArch(); arch != libseccomp.ArchAMD64 {
		t.Skipf("the reference filter is x86_64's; this is %s", arch)
	}
	stack, err := Default().Compile()
	if err != nil {
		t.Fatal(err)
	}
	ref, err := os.ReadFile(referenceFile)
	if errors.Is(err, fs.ErrNotExist) && *update {
		if err := os.WriteFile(referenceFile, stack, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s: the decisions of %s from now on", referenceFile, PolicyVersion)
		return
	}
	if err != nil {
		t.Fatalf("%v: the decisions of %s are not pinned; once they are what they should be, write them with\n"+
			"\tgo test ./seccomp -run TestDefaultMatchesReference -update", err, PolicyVersion)
	}
	n := compareStacks(t, ref, stack, 300)
	t.Logf("%d calls compared: the same decisions", n)
}

// TestCompareStacksFindsDifferences: the comparison of
// TestDefaultMatchesReference is sharp enough to see each filter of the
// stack go missing, and a single allowed argument value of personality
// turn into a refusal.
func TestCompareStacksFindsDifferences(t *testing.T) {
	stack, progs := defaultStack(t)
	var variants [][]byte
	for skip := range progs {
		var v []byte
		for i, prog := range progs {
			if i != skip {
				v = appendProgram(v, prog)
			}
		}
		variants = append(variants, v)
	}
	p := Default()
	for i, r := range p.Below[0].Syscalls {
		if r.Names[0] == "personality" && len(r.Args) == 1 && r.Args[0].ValueTwo == addrNoRandomize {
			p.Below[0].Syscalls = slices.Delete(p.Below[0].Syscalls, i, i+1)
			break
		}
	}
	narrower, err := p.Compile()
	if err != nil {
		t.Fatal(err)
	}
	variants = append(variants, narrower)
	for i, v := range variants {
		if differ(t, stack, v, 20) == 0 {
			t.Errorf("variant %d: no difference found", i)
		}
	}
}

// compareStacks fails the test on the first call that stacks a and b
// decide differently, and returns the number of calls compared.
func compareStacks(t *testing.T, a, b []byte, perCall int) int {
	t.Helper()
	n, diffs := compare(t, a, b, perCall, func(data []byte, x, y uint32) {
		var args [6]uint64
		for i := range args {
			args[i] = uint64(binary.BigEndian.Uint32(data[20+8*i:]))<<32 | uint64(binary.BigEndian.Uint32(data[16+8*i:]))
		}
		t.Fatalf("nr %d arch %#x args %#x: reference %#x, stack %#x",
			int32(binary.BigEndian.Uint32(data)), binary.BigEndian.Uint32(data[4:]), args, x, y)
	})
	if diffs != 0 {
		t.Fatalf("%d differences", diffs)
	}
	return n
}

// differ returns how many calls stacks a and b decide differently.
func differ(t *testing.T, a, b []byte, perCall int) int {
	_, diffs := compare(t, a, b, perCall, func([]byte, uint32, uint32) {})
	return diffs
}

// compare runs stacks a and b on the calls (see
// TestDefaultMatchesReference) and reports each difference to mismatch.
func compare(t *testing.T, a, b []byte, perCall int, mismatch func(data []byte, x, y uint32)) (n, diffs int) {
	va, vb := machines(t, a), machines(t, b)
	words := argumentWords(a, b)
	rng := rand.New(rand.NewPCG(34, 1920))
	var nrs []int32
	for nr := range int32(1024) {
		nrs = append(nrs, nr)
	}
	nrs = append(nrs, -1, 0x40000000|unix.SYS_GETPID, 0x40000000|unix.SYS_IOCTL, 0x3fffffff, 0x7fffffff, -2)
	check := func(arch uint32, nr int32, args [6]uint64) {
		data := seccompData(arch, nr, args)
		n++
		if x, y := decide(t, va, data), decide(t, vb, data); x != y {
			diffs++
			mismatch(data, x, y)
		}
	}
	for _, nr := range nrs {
		check(unix.AUDIT_ARCH_I386, nr, [6]uint64{})
		check(unix.AUDIT_ARCH_X86_64, nr, [6]uint64{})
		for range perCall {
			var args [6]uint64
			for i := range args {
				if rng.IntN(8) == 0 {
					args[i] = rng.Uint64()
				} else {
					args[i] = words[rng.IntN(len(words))]
				}
			}
			check(unix.AUDIT_ARCH_X86_64, nr, args)
		}
	}
	// The conditional calls: every combination of the values their rules
	// compare each argument with (and upper-word variants of these), then
	// from those combinations, one argument at a time through every
	// candidate word and through those values' one-bit neighbours.
	for _, c := range conditional() {
		nr, err := libseccomp.GetSyscallFromName(c.name)
		if err != nil || nr < 0 {
			continue
		}
		exact, near := ruleWords(c)
		combos := [][6]uint64{{}}
		for i := range 6 {
			if len(exact[i]) == 0 {
				continue
			}
			var next [][6]uint64
			for _, v := range combos {
				for _, w := range exact[i] {
					v[i] = w
					next = append(next, v)
				}
			}
			combos = next
		}
		for _, v := range combos {
			check(unix.AUDIT_ARCH_X86_64, int32(nr), v)
		}
		// Every candidate word, the reference's constants included, in
		// each argument in turn.
		for i := range 6 {
			for _, w := range words {
				v := combos[rng.IntN(len(combos))]
				v[i] = w
				check(unix.AUDIT_ARCH_X86_64, int32(nr), v)
			}
		}
		for range 40 {
			base := combos[rng.IntN(len(combos))]
			for i := range 6 {
				for _, w := range near[i] {
					v := base
					v[i] = w
					check(unix.AUDIT_ARCH_X86_64, int32(nr), v)
				}
			}
		}
	}
	return n, diffs
}

// ruleWords returns, per argument, the values c's rules compare it with
// (masked and not, with upper words 0, 1, all ones and the complement's),
// and these values' one-bit neighbours.
func ruleWords(c argRules) (exact, near [6][]uint64) {
	for _, r := range c.rules {
		for _, a := range r.Args {
			for _, v := range []uint64{a.ValueTwo, a.ValueTwo | ^a.Value&0xffffffff} {
				for _, w := range []uint64{v, v | 1<<32, v | 0xffffffff<<32, v | (^v)<<32} {
					if !slices.Contains(exact[a.Index], w) {
						exact[a.Index] = append(exact[a.Index], w)
					}
				}
				for bit := range 64 {
					near[a.Index] = append(near[a.Index], v^1<<bit)
				}
			}
		}
	}
	return exact, near
}
