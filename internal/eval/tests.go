package eval

import (
	"fmt"
	"strings"

	"github.com/microbox/microbox/result"
)

// A test's status is "passed", "wrong_answer", one of microbox's run
// statuses (result.Status: "nonzero" for a crash, "timeout", "memory",
// ...), or "not_run". A run status other than ok is the test's own when
// the test ended that way.
const (
	TestPassed      = "passed"
	TestWrongAnswer = "wrong_answer"
	TestNotRun      = "not_run"
)

// TestVerdict is how one test of a sample fared, as the results file
// writes it.
type TestVerdict struct {
	Status     string  `json:"status"`
	WallTimeMs float64 `json:"wall_time_ms"`
	// CPU time and peak memory are a run's: present when the test had a
	// run of its own (eval stdio, eval humaneval).
	CPUTimeMs       *float64 `json:"cpu_time_ms,omitempty"`
	PeakMemoryBytes *int64   `json:"peak_memory_bytes,omitempty"`
	// Start is the run's start (with --zygote: zygote or cold).
	Start string `json:"start,omitempty"`
	// Message says why a test did not pass, in one line when it can.
	Message string `json:"message,omitempty"`
}

// Messages of tests that did not run.
const (
	notRunStopped = "not run: an earlier test failed"
	notRunEnded   = "not run: the run ended before it"
)

// runTest is the verdict of a test that was a run of its own, from the
// run's accounting; its status and message are the caller's.
func runTest(r *result.Result) TestVerdict {
	return TestVerdict{WallTimeMs: r.WallTimeMs, CPUTimeMs: r.CPUTimeMs, PeakMemoryBytes: r.PeakMemoryBytes, Start: r.Start}
}

// endedTest is the verdict of a test during which its run ended without
// the test's own verdict: the run's status (a run that exited 0 there
// exited before the test finished: "nonzero", a crash), said as
// humaneval_judge.json says it, or for a timeout, which limit it was.
func endedTest(r *result.Result) TestVerdict {
	t := TestVerdict{Status: string(r.Status), Message: strings.TrimPrefix(statusText(r), failedPrefix)}
	switch r.Status {
	case result.StatusOK:
		t.Status = string(result.StatusNonzero)
	case result.StatusTimeout:
		t.Message = r.Limit + " time limit"
	}
	return t
}

// failedPrefix begins every human-eval result string but "passed" and
// "timed out".
const failedPrefix = "failed: "

// sampleResult is a sample's result string, in human-eval's words:
// "passed", "timed out" when its first failing test timed out, else
// "failed: " and what failed (with the test's number when the problem has
// more than one).
func sampleResult(tests []TestVerdict) string {
	for i, t := range tests {
		if t.Status == TestPassed {
			continue
		}
		if t.Status == string(result.StatusTimeout) {
			return "timed out"
		}
		what := t.Status
		if t.Message != "" {
			what += ": " + t.Message
		}
		if len(tests) > 1 {
			what = fmt.Sprintf("test %d of %d: %s", i+1, len(tests), what)
		}
		return failedPrefix + what
	}
	return "passed"
}

// stopAtFirstFailure marks every test after the first that did not pass
// as not run. Under parallel runs a later test may have run already; it
// is reported not run all the same, so verdicts do not depend on --jobs.
func stopAtFirstFailure(tests []TestVerdict) {
	for i, t := range tests {
		if t.Status != TestPassed {
			for j := i + 1; j < len(tests); j++ {
				tests[j] = TestVerdict{Status: TestNotRun, Message: notRunStopped}
			}
			return
		}
	}
}

// passedFraction is the fraction of tests that passed.
func passedFraction(tests []TestVerdict) float64 {
	if len(tests) == 0 {
		return 0
	}
	n := 0
	for _, t := range tests {
		if t.Status == TestPassed {
			n++
		}
	}
	return float64(n) / float64(len(tests))
}
