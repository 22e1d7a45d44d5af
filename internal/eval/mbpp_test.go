package eval

import (
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/microbox/microbox/result"
)

func statuses(tests []TestVerdict) []string {
	var s []string
	for _, t := range tests {
		s = append(s, t.Status)
	}
	return s
}

// The harness's records, as judgeMBPP reads them from runs that ended
// every way.
func TestJudgeMBPP(t *testing.T) {
	const nonce = "0123abcd"
	rec := func(what, status, msg string) string {
		return "\n" + mbppMarker + nonce + " " + what + " " + status + " 1.5 " + strconv.Itoa(len(msg)) + ":" + msg + "\n"
	}
	setup := rec("setup", "passed", "")
	ok, mem, tmo := result.StatusOK, result.StatusMemory, result.StatusTimeout
	for _, c := range []struct {
		name   string
		status result.Status
		stdout string
		want   []string
		msg    string // the second test's message
	}{
		{"all reported", ok, setup + rec("0", "passed", "") + rec("1", "wrong_answer", "AssertionError") + rec("2", "nonzero", "ValueError: x"),
			[]string{"passed", "wrong_answer", "nonzero"}, "AssertionError"},
		{"killed in the second", mem, setup + rec("0", "passed", ""), []string{"passed", "memory", "not_run"}, "memory limit exceeded"},
		{"exited in the second", ok, setup + rec("0", "passed", ""), []string{"passed", "nonzero", "not_run"}, "the program exited before its test finished"},
		{"the completion raised", ok, rec("setup", "nonzero", "SyntaxError: bad"), []string{"nonzero", "nonzero", "nonzero"}, "before the tests: SyntaxError: bad"},
		{"killed before the asserts", tmo, "", []string{"timeout", "timeout", "timeout"}, "before the tests: wall time limit"},
		// Records without the run's nonce are the program's: ignored.
		{"forged", ok, strings.ReplaceAll(setup+rec("0", "passed", "")+rec("1", "passed", "")+rec("2", "passed", ""), nonce, "99999999"),
			[]string{"nonzero", "nonzero", "nonzero"}, "before the tests: the program exited before its test finished"},
		// A record whose length runs past the output is not one.
		{"cut short", ok, setup + rec("0", "passed", "") + strings.TrimSuffix(rec("1", "passed", "abcdef"), "def\n"),
			[]string{"passed", "nonzero", "not_run"}, "the program exited before its test finished"},
	} {
		tests := make([]TestVerdict, 3)
		r := &result.Result{Status: c.status, Stdout: "noise" + c.stdout, WallTimeMs: 100}
		if c.status == tmo {
			r.Limit = result.LimitWall
		}
		judgeMBPP(r, nonce, tests)
		if got := statuses(tests); !slices.Equal(got, c.want) || tests[1].Message != c.msg {
			t.Errorf("%s: %v %q, want %v %q", c.name, got, tests[1].Message, c.want, c.msg)
		}
	}
}

// The harness and its reader agree: the input eval writes, run by python3
// outside any sandbox (the asserts here are harmless), gives the records
// judgeMBPP reads.
func TestMBPPHarness(t *testing.T) {
	const python = "/usr/bin/python3"
	if _, err := os.Stat(python); err != nil {
		t.Skipf("no %s to run the harness with", python)
	}
	o := &MBPPOptions{Timeout: 500 * time.Millisecond}
	p := &mbppTests{setup: "K = 2", tests: []string{
		"assert f(1) == 2", "assert f(2) == 5", "assert f(0) == 0", "while True: pass", "assert g()",
	}}
	completion := "import sys\nprint('noise')\nsys.stderr.write('more')\ndef f(x):\n    if x == 0: raise KeyError('k')\n    return x * K"
	code := mbppCode()
	r := o.run(&code, &Sample{Completion: completion}, p)
	if r.task.Timeout == nil || r.count != 5 {
		t.Fatalf("run %+v", r)
	}
	cmd := exec.Command(python, "-c", *r.task.Code)
	cmd.Stdin = strings.NewReader(*r.task.Stdin)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if strings.Contains(string(out), "noise") {
		t.Errorf("the program's output was not thrown away: %q", out)
	}
	tests := make([]TestVerdict, 5)
	r.judge(&result.Result{Status: result.StatusOK, Stdout: string(out)}, tests)
	want := []string{"passed", "wrong_answer", "nonzero", "timeout", "nonzero"}
	msgs := []string{"", "AssertionError", "KeyError: 'k'", "", "NameError: name 'g' is not defined"}
	for i := range want {
		if tests[i].Status != want[i] || tests[i].Message != msgs[i] {
			t.Errorf("test %d: %+v, want %s %q", i+1, tests[i], want[i], msgs[i])
		}
	}
	if tests[3].WallTimeMs < 500 {
		t.Errorf("the hanging assert took %v ms, less than its limit", tests[3].WallTimeMs)
	}
}
