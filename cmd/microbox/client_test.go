package main

import (
	"context"
	"debug/elf"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/arch/x86/x86asm"

	"github.com/microbox/microbox/internal/interrupt"
)

// catchChildEnv, set, makes the test binary TestCatchInterrupts's child:
// it installs the handler for good, so the test runs it in a process of
// its own (TestMain skips the suite's set-up there).
const catchChildEnv = "MICROBOX_TEST_CATCH_CHILD"

// catchInterrupts turns a signal into its context's cause through the C
// handler and the pipe (client.c); a later signal is drained, and neither
// kills the process.
func TestCatchInterrupts(t *testing.T) {
	if os.Getenv(catchChildEnv) == "" {
		child := exec.Command(os.Args[0], "-test.run=^TestCatchInterrupts$", "-test.v")
		child.Env = append(os.Environ(), catchChildEnv+"=1")
		out, err := child.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "--- PASS: TestCatchInterrupts") {
			t.Fatalf("child: %v\n%s", err, out)
		}
		return
	}
	ctx, stop, err := catchInterrupts()
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	syscall.Kill(os.Getpid(), syscall.SIGHUP)
	select {
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("SIGHUP did not cancel the context")
	}
	if sig := interrupt.Cause(ctx); sig != syscall.SIGHUP {
		t.Errorf("cause %v, want SIGHUP", context.Cause(ctx))
	}
	syscall.Kill(os.Getpid(), syscall.SIGTERM)
	time.Sleep(50 * time.Millisecond) // delivered and drained, or this process is gone
	if sig := interrupt.Cause(ctx); sig != syscall.SIGHUP {
		t.Errorf("cause %v after a second signal, want the first (SIGHUP)", context.Cause(ctx))
	}
}

// The client runs before the C library has started (client.c): the
// binary's entry point is its mbxentry, and its code, the section
// mbx_entry, calls and jumps nowhere outside itself but to the C library's
// _start, which it ends with. A call the compiler made to memcpy or
// memset (not resolved yet then), or to any libc function, fails here
// rather than as a crash of every served exec.
func TestClientRunsBeforeLibc(t *testing.T) {
	f, err := elf.Open(microbox)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	syms, err := f.Symbols()
	if err != nil {
		t.Fatal(err)
	}
	addr := map[string]uint64{}
	for _, s := range syms {
		addr[s.Name] = s.Value
	}
	if f.Entry != addr["mbxentry"] || f.Entry == 0 {
		t.Errorf("the entry point is %#x, mbxentry %#x", f.Entry, addr["mbxentry"])
	}
	sec := f.Section("mbx_entry")
	if sec == nil {
		t.Fatal("no mbx_entry section")
	}
	code, err := sec.Data()
	if err != nil {
		t.Fatal(err)
	}
	start, end := sec.Addr, sec.Addr+uint64(len(code))
	if f.Entry < start || f.Entry >= end {
		t.Errorf("the entry point %#x is outside mbx_entry [%#x, %#x)", f.Entry, start, end)
	}
	toStart, syscalls := 0, 0
	for pc := uint64(0); pc < uint64(len(code)); {
		inst, err := x86asm.Decode(code[pc:], 64)
		if err != nil {
			t.Fatalf("at %#x: %v", start+pc, err)
		}
		next := start + pc + uint64(inst.Len)
		for _, a := range inst.Args {
			switch a := a.(type) {
			case x86asm.Rel:
				switch to := next + uint64(int64(a)); {
				case to == addr["_start"] && inst.Op == x86asm.JMP:
					toStart++
				case to < start || to >= end:
					t.Errorf("at %#x: %v reaches %#x, outside mbx_entry", start+pc, inst, to)
				}
			case x86asm.Mem: // data anywhere but thread-local; code only through a call or jump above
				if inst.Op == x86asm.CALL || inst.Op == x86asm.JMP {
					t.Errorf("at %#x: %v: an indirect call or jump", start+pc, inst)
				}
				if a.Segment == x86asm.FS || a.Segment == x86asm.GS {
					t.Errorf("at %#x: %v: thread-local storage, not set up before the C library's start", start+pc, inst)
				}
			case x86asm.Reg:
				if inst.Op == x86asm.CALL || inst.Op == x86asm.JMP {
					t.Errorf("at %#x: %v: an indirect call or jump", start+pc, inst)
				}
			}
		}
		if inst.Op == x86asm.SYSCALL {
			syscalls++
		}
		pc = next - start
	}
	if toStart != 1 {
		t.Errorf("mbx_entry jumps to _start %d times, want once", toStart)
	}
	if syscalls < 10 {
		t.Errorf("decoded %d system calls in mbx_entry's %d bytes: not its code", syscalls, len(code))
	}
}
