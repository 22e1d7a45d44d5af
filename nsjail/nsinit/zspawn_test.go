package nsinit

import (
	"testing"

	"golang.org/x/arch/x86/x86asm"
)

// zspawn's code runs at another address, in a template that has none of
// this binary's other code or data: every jump and call it makes, and
// every address it takes or reads relative to itself, must stay inside it;
// it may read no absolute address. (A constant the compiler put in the
// binary's data, or a call to the C library, fails here rather than as a
// template that crashes.)
func TestZygoteSpawnIsSelfContained(t *testing.T) {
	s := ZygoteSpawn()
	code, entry := s.Code, s.Entry
	if len(code) == 0 || entry < 0 || entry >= len(code) {
		t.Fatalf("zspawn's section: %d bytes, entry at %d", len(code), entry)
	}
	inside := func(at int64) bool { return at >= 0 && at < int64(len(code)) }
	syscalls := 0
	for pc := 0; pc < len(code); {
		inst, err := x86asm.Decode(code[pc:], 64)
		if err != nil {
			t.Fatalf("at %#x: %v", pc, err)
		}
		next := int64(pc + inst.Len)
		for _, a := range inst.Args {
			switch a := a.(type) {
			case x86asm.Rel:
				if !inside(next + int64(a)) {
					t.Errorf("at %#x: %v reaches %#x, outside its %d bytes", pc, inst, next+int64(a), len(code))
				}
			case x86asm.Mem:
				switch {
				case a.Base == x86asm.RIP:
					if !inside(next + a.Disp) {
						t.Errorf("at %#x: %v addresses %#x, outside its %d bytes", pc, inst, next+a.Disp, len(code))
					}
				case a.Base == 0 && a.Index == 0 && a.Segment == 0:
					t.Errorf("at %#x: %v reads an absolute address", pc, inst)
				}
			}
		}
		if inst.Op == x86asm.SYSCALL {
			syscalls++
		}
		pc = int(next)
	}
	if syscalls < 10 {
		t.Errorf("decoded %d system calls in zspawn's %d bytes: not its code", syscalls, len(code))
	}
}
