package nsjail

import (
	"testing"

	"github.com/microbox/microbox/result"
)

// A program that wrote past the output limit and exited before the
// supervisor's kill (its exit reported first) is judged output_limit all
// the same, on the stream it overran; within the limit, its exit decides.
func TestOutputLimitWhenTheExitCameFirst(t *testing.T) {
	for _, c := range []struct {
		out, err int
		status   result.Status
		limit    string
	}{
		{5, 5, result.StatusOK, ""},
		{100, 5, result.StatusOutputLimit, result.LimitStdout},
		{5, 100, result.StatusOutputLimit, result.LimitStderr},
	} {
		stdout, stderr := newCapture(10, nil, true), newCapture(10, nil, true)
		stdout.take(make([]byte, c.out))
		stderr.take(make([]byte, c.err))
		sv := &supervisor{gotExit: true} // exit status 0
		r := sv.judge(nil, stdout, stderr)
		if r.Status != c.status || r.Limit != c.limit {
			t.Errorf("stdout %d, stderr %d bytes: %s (%s), want %s (%s)", c.out, c.err, r.Status, r.Limit, c.status, c.limit)
		}
	}
}

// With OutputTruncate, output past the limit is cut and the verdict is the
// program's own: the limit neither ends the run nor judges it.
func TestOutputTruncateKeepsTheVerdict(t *testing.T) {
	stdout, stderr := newCapture(10, nil, true), newCapture(10, nil, true)
	stdout.truncate, stderr.truncate = true, true
	stdout.take(make([]byte, 100))
	stderr.take(make([]byte, 5))
	select {
	case <-stdout.exceeded:
		t.Error("past the limit with truncate: the run was to be ended")
	default:
	}
	sv := &supervisor{gotExit: true} // exit status 0
	r := sv.judge(nil, stdout, stderr)
	if r.Status != result.StatusOK || len(r.Stdout) != 10 || !r.StdoutTruncated || r.StderrTruncated {
		t.Errorf("got %s, %d bytes (truncated %v, stderr %v); want ok, 10 bytes, stdout truncated only", r.Status, len(r.Stdout), r.StdoutTruncated, r.StderrTruncated)
	}
}
