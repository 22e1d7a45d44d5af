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
