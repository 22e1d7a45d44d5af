package seccomp

import (
	"encoding/binary"
	"fmt"
)

// A compiled policy is a stack of classic-BPF programs, oldest first, in
// one byte string: for each program, an 8-byte header (its length in
// instructions as a native-endian uint32, then four zero bytes) and its
// instructions (struct sock_filter, 8 bytes each, native endianness).
// Whoever loads it must load every program, in order, each with its own
// seccomp(SECCOMP_SET_MODE_FILTER): Programs splits it.
const stackHeader = 8

// maxPrograms bounds a stack, for its loaders (nsinit's plan): a policy
// has at most three filters.
const maxPrograms = 4

// appendProgram appends BPF program prog to stack.
func appendProgram(stack, prog []byte) []byte {
	stack = binary.NativeEndian.AppendUint32(stack, uint32(len(prog)/8))
	stack = binary.NativeEndian.AppendUint32(stack, 0)
	return append(stack, prog...)
}

// Programs splits a compiled stack into its BPF programs, oldest first,
// the order in which they are loaded. The programs share stack's memory.
func Programs(stack []byte) ([][]byte, error) {
	var progs [][]byte
	for rest := stack; len(rest) > 0; {
		if len(rest) < stackHeader || binary.NativeEndian.Uint32(rest[4:]) != 0 {
			return nil, fmt.Errorf("seccomp filter stack: bad header at byte %d", len(stack)-len(rest))
		}
		n := int(binary.NativeEndian.Uint32(rest))
		if n == 0 || n > 4096 || len(rest)-stackHeader < n*8 {
			return nil, fmt.Errorf("seccomp filter stack: program of %d instructions at byte %d", n, len(stack)-len(rest))
		}
		progs = append(progs, rest[stackHeader:stackHeader+n*8])
		rest = rest[stackHeader+n*8:]
	}
	if len(progs) == 0 || len(progs) > maxPrograms {
		return nil, fmt.Errorf("seccomp filter stack: %d programs, want 1 to %d", len(progs), maxPrograms)
	}
	return progs, nil
}
