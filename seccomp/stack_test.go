package seccomp

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"
)

// TestPrograms: a stack splits back into the programs it was made of, in
// order, and a stack that does not add up is refused.
func TestPrograms(t *testing.T) {
	a, b := bytes.Repeat([]byte{1}, 16), bytes.Repeat([]byte{2}, 8)
	got, err := Programs(appendProgram(appendProgram(nil, a), b))
	if err != nil || len(got) != 2 || !bytes.Equal(got[0], a) || !bytes.Equal(got[1], b) {
		t.Fatalf("Programs = %q, %v; want [a b]", got, err)
	}
	header := func(n, pad uint32) []byte {
		return binary.NativeEndian.AppendUint32(binary.NativeEndian.AppendUint32(nil, n), pad)
	}
	for name, stack := range map[string][]byte{
		"empty":             nil,
		"no instructions":   header(0, 0),
		"truncated program": append(header(3, 0), a...),
		"bad header":        append(header(1, 1), b...),
		"truncated header":  append(appendProgram(nil, b), 1, 0),
		"five programs":     bytes.Repeat(appendProgram(nil, b), 5),
		"too long":          append(header(4097, 0), make([]byte, 4097*8)...),
	} {
		if _, err := Programs(stack); err == nil || !strings.HasPrefix(err.Error(), "seccomp filter stack: ") {
			t.Errorf("%s: %v, want an error", name, err)
		}
	}
}
