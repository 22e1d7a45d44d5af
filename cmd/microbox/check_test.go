package main

// The risk report (package risk) through the real binary: microbox check
// and exec --max-risk.

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/microbox/microbox/internal/policy/risk"
	"github.com/microbox/microbox/result"
)

const riskyProgram = `import os, subprocess
from os import path
e = eval
eval("1 + 1")
x = ().__class__.__base__.__subclasses__()
g = getattr(len, "__globals__", None)
while True:
    break
import importlib
importlib.import_module("json")
`

// microbox check, through the real binary: the analyzer runs in the
// sandbox and the report says what it found.
func TestCheckCommand(t *testing.T) {
	file := filepath.Join(t.TempDir(), "risky.py")
	os.WriteFile(file, []byte(riskyProgram), 0o644)
	out, code := runMicrobox(t, "", "check", "--json", file)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, out)
	}
	var rep risk.Report
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	got := map[string]int{}
	for _, f := range rep.Findings {
		got[f.Rule+" "+f.Name] = f.Count
	}
	want := map[string]int{
		"import os": 2, "import subprocess": 1, "builtin eval": 2, "attribute __class__": 1,
		"attribute __base__": 1, "attribute __subclasses__": 1, "builtin getattr": 1,
		"attribute __globals__": 1, "loop while True": 1, "import importlib": 1, "call import_module": 1,
	}
	for k, n := range want {
		if got[k] != n {
			t.Errorf("%s: count %d, want %d (all: %v)", k, got[k], n, got)
		}
	}
	if rep.Score != 10+15+15+5+10+20+5+20+5+10+15 || rep.Level != "critical" || rep.SyntaxError != nil {
		t.Errorf("score %d level %s syntax %v", rep.Score, rep.Level, rep.SyntaxError)
	}
	// Plain text for people.
	out, code = runMicrobox(t, "", "check", "-c", "import socket")
	if code != 0 || !strings.HasPrefix(string(out), "risk score 15 (medium)\n") || !strings.Contains(string(out), "import socket") {
		t.Fatalf("exit %d: %q", code, out)
	}
	out, _ = runMicrobox(t, "", "check", "-c", "print(sum(range(10)))")
	if string(out) != "risk score 0 (none)\n" {
		t.Fatalf("harmless code: %q", out)
	}
}

// A syntax error is reported as one, with exit status 1.
func TestCheckSyntaxError(t *testing.T) {
	out, code := runMicrobox(t, "", "check", "--json", "-c", "def f(:\n  pass")
	var rep risk.Report
	if err := json.Unmarshal(out, &rep); err != nil || code != 1 {
		t.Fatalf("exit %d: %s", code, out)
	}
	if rep.SyntaxError == nil || rep.SyntaxError.Line != 1 || rep.Score != 0 {
		t.Fatalf("report %+v", rep)
	}
	// Null bytes are a syntax error too, not a crash.
	file := filepath.Join(t.TempDir(), "nul.py")
	os.WriteFile(file, []byte("x = 1\x00\n"), 0o644)
	out, code = runMicrobox(t, "", "check", file)
	if code != 1 || !strings.HasPrefix(string(out), "syntax error:") {
		t.Fatalf("exit %d: %q", code, out)
	}
}

func TestMaxRisk(t *testing.T) {
	// Above the threshold: not run, status rejected, the report attached.
	r := py(t, "import subprocess\nprint('ran')", "--max-risk", "10")
	wantStatus(t, r, result.StatusRejected)
	if r.Stdout != "" || r.Risk == nil || r.Risk.Score != 15 || r.Error == nil || !strings.Contains(*r.Error, "import subprocess") {
		t.Fatalf("stdout %q risk %+v error %v", r.Stdout, r.Risk, deref(r.Error))
	}
	// At or below it: run, with the report.
	r = py(t, "import os\nprint('ran')", "--max-risk", "10")
	wantStatus(t, r, result.StatusOK)
	if r.Stdout != "ran\n" || r.Risk == nil || r.Risk.Score != 10 {
		t.Fatalf("stdout %q risk %+v", r.Stdout, r.Risk)
	}
	// A syntax error runs, and Python reports it as it would.
	r = py(t, "print(", "--max-risk", "0")
	wantStatus(t, r, result.StatusNonzero)
	if !strings.Contains(r.Stderr, "SyntaxError") || r.Risk == nil || r.Risk.SyntaxError == nil {
		t.Fatalf("stderr %q risk %+v", r.Stderr, r.Risk)
	}
	// Without --json: exit status 121 and one line on stderr.
	if _, code := runMicrobox(t, "", "exec", "--max-risk", "0", "-c", "eval('1')"); code != result.ExitRejected {
		t.Fatalf("exit %d, want %d", code, result.ExitRejected)
	}
	// The program's stdin is the program's, not the analyzer's.
	r = execJSON(t, "7\n", "--max-risk", "5", "-c", "print(int(input()) * 6)")
	if r.Stdout != "42\n" {
		t.Fatalf("stdin: stdout %q", r.Stdout)
	}
	// Code the analyzer cannot get through (here, nesting too deep for
	// ast) is refused, not waved through.
	r = py(t, strings.Repeat("-", 3000)+"1", "--max-risk", "100")
	wantStatus(t, r, result.StatusRejected)
	if r.Error == nil || !strings.Contains(*r.Error, "RecursionError") {
		t.Fatalf("error %v", deref(r.Error))
	}
}

func TestMaxRiskBadInput(t *testing.T) {
	r := execJSON(t, "", "--max-risk", "-1", "-c", "1")
	wantStatus(t, r, result.StatusSandboxError)
}
