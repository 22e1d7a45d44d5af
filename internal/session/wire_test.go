package session

import (
	"fmt"
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
