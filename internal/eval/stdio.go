package eval

import (
	"fmt"
	"strings"

	"github.com/microbox/microbox/internal/batch"
	"github.com/microbox/microbox/result"
)

// StdioOptions are eval stdio's.
type StdioOptions struct {
	Compare    Compare
	StopOnFail bool
	// OutputLimit is the runs' cap on each of stdout and stderr; a test
	// whose expected output is long gets a higher cap (stdoutCap), so
	// that a right answer is never cut.
	OutputLimit int64
}

// StdioProblems are a stdio problems file's: those that can be judged,
// and why the others cannot.
type StdioProblems struct {
	tests   map[string][]IOTest
	LeftOut map[string]string // by id: why it is left out
}

// ReadStdioProblems reads a problems file in any of the layouts
// StdioLayouts lists.
func ReadStdioProblems(name string) (*StdioProblems, error) {
	ps := &StdioProblems{tests: map[string][]IOTest{}, LeftOut: map[string]string{}}
	err := readJSONLines(name, func(line []byte) error {
		p, err := parseStdioProblem(line)
		if err != nil {
			return err
		}
		if _, dup := ps.tests[p.id]; dup || ps.LeftOut[p.id] != "" {
			return fmt.Errorf("problem %q appears twice: give each problem a task_id of its own", p.id)
		}
		if p.leftOut != "" {
			ps.LeftOut[p.id] = p.leftOut
		} else {
			ps.tests[p.id] = p.tests
		}
		return nil
	})
	if err == nil && len(ps.tests) == 0 {
		err = fmt.Errorf("%s: no problem with stdin/stdout tests in it", name)
	}
	return ps, err
}

// LoadStdio reads the problems and the samples, each of which must name a
// problem with stdin/stdout tests. Each test of a sample is one run of its
// completion, fed the test's input; its stdout is compared with the
// test's output as o.Compare says.
func LoadStdio(problemsFile, samplesFile string, o StdioOptions) (*Set, *StdioProblems, error) {
	if err := o.Compare.Check(); err != nil {
		return nil, nil, err
	}
	problems, err := ReadStdioProblems(problemsFile)
	if err != nil {
		return nil, nil, err
	}
	samples, err := readSamples(samplesFile, func(id string) error {
		if why := problems.LeftOut[id]; why != "" {
			return fmt.Errorf("task_id %q cannot be judged by stdin and stdout: %s; leave its samples out", id, why)
		}
		if problems.tests[id] == nil {
			return fmt.Errorf("task_id %q is not in the problems file", id)
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	set := &Set{Samples: samples, stopOnFail: o.StopOnFail,
		tests: func(s *Sample) int { return len(problems.tests[s.TaskID]) },
		plan: func(s *Sample) []run {
			tests := problems.tests[s.TaskID]
			runs := make([]run, len(tests))
			for i := range tests {
				runs[i] = o.run(s, i, &tests[i])
			}
			return runs
		},
	}
	return set, problems, nil
}

// run is test i of a sample: the completion, fed the test's input.
func (o *StdioOptions) run(s *Sample, i int, t *IOTest) run {
	task := &batch.Task{Code: &s.Completion, Stdin: &t.Input}
	if limit := stdoutCap(len(t.Output)); limit > o.OutputLimit {
		task.OutputLimit = batch.Bytes(limit)
	}
	return run{task: task, first: i, count: 1, judge: func(r *result.Result, tests []TestVerdict) string {
		tests[0] = o.judge(r, t.Output)
		return ""
	}}
}

// stdoutCap is the least output cap of a test whose expected output is
// want bytes long: twice that and 64 KiB, so that a right answer, with
// other whitespace, is never cut.
func stdoutCap(want int) int64 { return 2*int64(want) + 64<<10 }

// judge judges one run of a test: a run that exited 0 by its stdout, any
// other by how it ended.
func (o *StdioOptions) judge(r *result.Result, want string) TestVerdict {
	t := runTest(r)
	switch r.Status {
	case result.StatusOK:
		if ok, diff := o.Compare.Match(r.Stdout, want); ok {
			t.Status = TestPassed
		} else {
			t.Status, t.Message = TestWrongAnswer, diff
		}
	case result.StatusNonzero:
		// A crash: its traceback's last line says which exception.
		t.Status, t.Message = string(r.Status), lastLine(r.Stderr)
		if t.Message == "" {
			t.Message = fmt.Sprintf("exited with status %s", text(r.ExitCode))
		}
	default:
		ended := endedTest(r)
		t.Status, t.Message = ended.Status, ended.Message
	}
	return t
}

// lastLine is the last non-blank line of s, trimmed, and cut to a few
// hundred bytes.
func lastLine(s string) string {
	const most = 300
	s = strings.TrimRightFunc(s, isSpace)
	s = strings.TrimSpace(s[strings.LastIndexByte(s, '\n')+1:])
	if len(s) > most {
		s = strings.ToValidUTF8(s[:most], "") + "..."
	}
	return s
}
