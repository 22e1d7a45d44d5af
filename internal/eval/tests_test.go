package eval

import (
	"slices"
	"testing"
)

// A sample's result string and fraction from its tests' verdicts, and
// --stop-on-fail's rule.
func TestSampleVerdict(t *testing.T) {
	p := TestVerdict{Status: TestPassed}
	wa := TestVerdict{Status: TestWrongAnswer, Message: `line 1: got "2", want "3"`}
	tmo := TestVerdict{Status: "timeout", Message: "wall time limit"}
	for _, c := range []struct {
		tests    []TestVerdict
		result   string
		fraction float64
	}{
		{[]TestVerdict{p, p}, "passed", 1},
		{[]TestVerdict{p, wa, tmo}, `failed: test 2 of 3: wrong_answer: line 1: got "2", want "3"`, 1.0 / 3},
		{[]TestVerdict{p, tmo, wa}, "timed out", 1.0 / 3},
		{[]TestVerdict{{Status: "memory"}}, "failed: memory", 0},
	} {
		v := Verdict{Tests: c.tests}
		v.finish()
		if v.Result != c.result || v.Passed != (c.result == "passed") || v.PassedFraction != c.fraction {
			t.Errorf("%v: %q %v %v, want %q %v", c.tests, v.Result, v.Passed, v.PassedFraction, c.result, c.fraction)
		}
	}
	tests := []TestVerdict{p, wa, p, tmo}
	stopAtFirstFailure(tests)
	if got := statuses(tests); !slices.Equal(got, []string{TestPassed, TestWrongAnswer, TestNotRun, TestNotRun}) || tests[2].Message != notRunStopped {
		t.Errorf("stopped: %+v", tests)
	}
}
