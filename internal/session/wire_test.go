package session

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strings"
	"testing"
)

// The wire's names are declared twice, here and in runner.py's first
// lines; they must be the same.
func TestRunnerSpeaksTheWire(t *testing.T) {
	ops := fmt.Sprintf("OP_CELL, OP_PUT, OP_GET, OP_DELETE, OP_LIST = %q, %q, %q, %q, %q\n", opCell, opPut, opGet, opDelete, opList)
	if !strings.Contains(runnerSource, ops) {
		t.Errorf("runner.py does not declare the ops as wire.go does: want the line %q", ops)
	}
	if want := fmt.Sprintf("MAX_LISTED = %d\n", maxListed); !strings.Contains(runnerSource, want) {
		t.Errorf("runner.py's MAX_LISTED is not maxListed: want %q", want)
	}
}

// A path outside the working directory, or not a plain one, is refused
// before it reaches the interpreter.
func TestCheckPath(t *testing.T) {
	for _, p := range []string{"", "/etc/passwd", "..", "../x", "a/../../x", "a//b", "./a", "a/.", "a\x00b", "\xff", strings.Repeat("a", maxPath+1)} {
		if err := CheckPath(p); err == nil || !IsBadInput(err) {
			t.Errorf("CheckPath(%q) = %v, want a bad input", p, err)
		}
	}
	for _, p := range []string{"a", "data/in.csv", "a b/c..d/.e", "ü/ñ"} {
		if err := CheckPath(p); err != nil {
			t.Errorf("CheckPath(%q) = %v, want nil", p, err)
		}
	}
}

// A frame's announced length is the interpreter's word: an interpreter
// that announces the most a session allows and sends a few bytes costs
// the server about those bytes, not the announced length, and a whole
// frame still reads back as sent.
func TestReadFrameAllocatesWhatArrives(t *testing.T) {
	const announced = 100 << 20
	short := append(binary.BigEndian.AppendUint32(nil, announced), `{"ok":true}`...)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := readFrame(bufio.NewReader(bytes.NewReader(short)), announced)
	runtime.ReadMemStats(&after)
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("a frame cut short: %v, want %v", err, io.ErrUnexpectedEOF)
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 1<<20 {
		t.Errorf("a frame announcing %d bytes and sending 11 allocated %d bytes", announced, grew)
	}
	// A frame that does arrive whole costs about its length: the buffer
	// doubles as bytes come, but never past the length announced.
	const big = 8<<20 + 1
	full := append(binary.BigEndian.AppendUint32(nil, big), bytes.Repeat([]byte("x"), big)...)
	runtime.ReadMemStats(&before)
	got, err := readFrame(bufio.NewReader(bytes.NewReader(full)), big)
	runtime.ReadMemStats(&after)
	if err != nil || len(got) != big {
		t.Fatalf("a whole frame of %d bytes: %d bytes, %v", big, len(got), err)
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 5*big/2 || cap(got) > big+big/8 {
		t.Errorf("a whole frame of %d bytes allocated %d bytes and kept %d", big, grew, cap(got))
	}
	whole := append(binary.BigEndian.AppendUint32(nil, 11), `{"ok":true}`...)
	if got, err := readFrame(bufio.NewReader(bytes.NewReader(whole)), 64); err != nil || string(got) != `{"ok":true}` {
		t.Errorf("a whole frame: %q, %v", got, err)
	}
	if _, err := readFrame(bufio.NewReader(bytes.NewReader(whole)), 10); !errors.Is(err, errFrameTooLarge) {
		t.Errorf("a frame over the session's most: %v, want %v", err, errFrameTooLarge)
	}
}
