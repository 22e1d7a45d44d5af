package main

// Tests of `microbox eval stdio` and `microbox eval mbpp`, the real binary,
// on internal/eval's test problems: each sample there says what it does
// ("note") and the status of each of its tests it must get ("want"; under
// other flags, "want_tokens", "want_float", "want_exact", "want_stop",
// "want_challenge"). Comparison, layouts and records are tested as units
// in internal/eval.

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/microbox/microbox/result"
)

// evalTestdata holds internal/eval's test problems and samples.
const evalTestdata = "../../internal/eval/testdata"

// modeRow is one line of a stdio or mbpp results file.
type modeRow struct {
	TaskID         json.RawMessage     `json:"task_id"`
	Note           string              `json:"note"`
	Want           map[string][]string `json:"-"`
	Result         string              `json:"result"`
	Passed         bool                `json:"passed"`
	Status         string              `json:"status"`
	PassedFraction float64             `json:"passed_fraction"`
	Tests          []struct {
		Status     string   `json:"status"`
		WallTimeMs float64  `json:"wall_time_ms"`
		CPUTimeMs  *float64 `json:"cpu_time_ms"`
		Message    string   `json:"message"`
	} `json:"tests"`
}

func (r *modeRow) statuses() []string {
	var s []string
	for _, t := range r.Tests {
		s = append(s, t.Status)
	}
	return s
}

// verdicts are a results file's test statuses and messages, the part of
// it that must not depend on --jobs or a server.
func verdicts(rows []modeRow) []string {
	var out []string
	for _, r := range rows {
		line := r.Note + ": " + r.Result
		for _, t := range r.Tests {
			line += " | " + t.Status + " " + t.Message
		}
		out = append(out, line)
	}
	return out
}

// samplesWith writes the samples of file that want something under key
// ("want" for all) to a file of the test's own.
func samplesWith(t *testing.T, file, key string) string {
	t.Helper()
	var kept []string
	for _, line := range strings.Split(strings.TrimSpace(readFile(t, file)), "\n") {
		var m map[string]json.RawMessage
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatal(err)
		}
		if m[key] != nil {
			kept = append(kept, line)
		}
	}
	name := filepath.Join(t.TempDir(), key+".jsonl")
	if err := os.WriteFile(name, []byte(strings.Join(kept, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return name
}

func readFile(t *testing.T, name string) string {
	t.Helper()
	data, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// evalMode runs `microbox eval MODE ARGS... SAMPLES` with the environment
// env added, and returns its results (nil unless it exited 0), stderr and
// exit status.
func evalMode(t *testing.T, env []string, mode, samples string, args ...string) ([]modeRow, string, int) {
	t.Helper()
	out := samples + ".results"
	cmd := exec.Command(microbox, append(append([]string{"eval", mode, "-k", "1", "-o", out}, args...), samples)...)
	cmd.Env = append(os.Environ(), env...)
	_, errOut, code := runCmd(t, cmd)
	if code != 0 {
		return nil, string(errOut), code
	}
	return readJSONL[modeRow](t, out), string(errOut), code
}

// UnmarshalJSON reads a row, with the sample's "want..." lists.
func (r *modeRow) UnmarshalJSON(b []byte) error {
	type plain modeRow
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(b, (*plain)(r)); err != nil {
		return err
	}
	if err := json.Unmarshal(b, &fields); err != nil {
		return err
	}
	r.Want = map[string][]string{}
	for k, v := range fields {
		if strings.HasPrefix(k, "want") {
			var w []string
			if err := json.Unmarshal(v, &w); err != nil {
				return err
			}
			r.Want[k] = w
		}
	}
	return nil
}

// checkWants checks each row's test statuses against its want under key,
// and what the row says of them.
func checkWants(t *testing.T, rows []modeRow, key string) {
	t.Helper()
	if len(rows) == 0 {
		t.Fatal("no results")
	}
	for _, r := range rows {
		want := r.Want[key]
		if got := r.statuses(); !slices.Equal(got, want) {
			t.Errorf("%s (%s): tests %v, want %v; %+v", r.Note, key, got, want, r.Tests)
		}
		passed := 0
		for _, s := range want {
			if s == "passed" {
				passed++
			}
		}
		allPassed := passed == len(want)
		if r.Passed != allPassed || (r.Result == "passed") != allPassed || r.PassedFraction != float64(passed)/float64(len(want)) {
			t.Errorf("%s (%s): passed %v, result %q, passed_fraction %v; want %d of %d passed", r.Note, key, r.Passed, r.Result, r.PassedFraction, passed, len(want))
		}
		for i, tv := range r.Tests {
			if tv.Status != "passed" && tv.Status != "timeout" && tv.Message == "" {
				t.Errorf("%s: test %d (%s) says nothing of why", r.Note, i+1, tv.Status)
			}
		}
	}
}

// Every published layout read, and every way a test ends: identical
// verdicts one run at a time and four at a time with a server listening
// (`make unit` runs this suite again with every command under a server,
// which covers the other two combinations).
func TestEvalStdio(t *testing.T) {
	problems := filepath.Join(evalTestdata, "stdio_problems.jsonl")
	samples := samplesWith(t, filepath.Join(evalTestdata, "stdio_samples.jsonl"), "want")
	// The hanging sample spins: --cpu-time ends it in a second of CPU,
	// while the wall-clock limit leaves a loaded machine time to OOM-kill
	// the sample that runs out of memory.
	flags := []string{"--problems", problems, "--timeout", "5s", "--cpu-time", "1s", "--mem", "64M"}

	one, stderr, code := evalMode(t, nil, "stdio", samples, append(flags, "--jobs", "1")...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	checkWants(t, one, "want")
	if !strings.Contains(stderr, "3 problems left out") {
		t.Errorf("the call-based and test-less problems are not reported left out: %s", stderr)
	}
	for _, r := range one {
		for i, tv := range r.Tests {
			if tv.CPUTimeMs == nil || tv.WallTimeMs <= 0 {
				t.Errorf("%s: test %d has no accounting: %+v", r.Note, i+1, tv)
			}
		}
	}

	socket, _ := testServer(t)
	four, stderr, code := evalMode(t, []string{socketEnv + "=" + socket}, "stdio", samples, append(flags, "--jobs", "4")...)
	if code != 0 {
		t.Fatalf("--jobs 4 with a server: exit %d: %s", code, stderr)
	}
	if a, b := verdicts(one), verdicts(four); !slices.Equal(a, b) {
		t.Errorf("verdicts differ:\n--jobs 1: %q\n--jobs 4, with a server: %q", a, b)
	}
}

// The other comparison rules, and --stop-on-fail.
func TestEvalStdioFlags(t *testing.T) {
	problems := filepath.Join(evalTestdata, "stdio_problems.jsonl")
	all := filepath.Join(evalTestdata, "stdio_samples.jsonl")
	for _, c := range []struct {
		key   string
		flags []string
	}{
		{"want_tokens", []string{"--compare", "tokens"}},
		{"want_exact", []string{"--compare", "exact"}},
		{"want_float", []string{"--float-tolerance", "1e-6"}},
		{"want_stop", []string{"--stop-on-fail", "--jobs", "4"}},
	} {
		rows, stderr, code := evalMode(t, nil, "stdio", samplesWith(t, all, c.key), append(c.flags, "--problems", problems)...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", c.flags, code, stderr)
		}
		checkWants(t, rows, c.key)
	}
}

// MBPP: a verdict per assert, whatever the completion does to the run
// (one run per sample: --jobs changes only which samples run together).
func TestEvalMBPP(t *testing.T) {
	problems := filepath.Join(evalTestdata, "mbpp_problems.jsonl")
	all := filepath.Join(evalTestdata, "mbpp_samples.jsonl")
	flags := []string{"--problems", problems, "--timeout", "1s", "--mem", "64M"}
	rows, stderr, code := evalMode(t, nil, "mbpp", samplesWith(t, all, "want"), append(flags, "--jobs", "4")...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	checkWants(t, rows, "want")
	for _, c := range []struct {
		key   string
		flags []string
	}{
		{"want_challenge", []string{"--challenge-tests"}},
		{"want_stop", []string{"--stop-on-fail"}},
	} {
		rows, stderr, code := evalMode(t, nil, "mbpp", samplesWith(t, all, c.key), append(c.flags, flags...)...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", c.flags, code, stderr)
		}
		checkWants(t, rows, c.key)
	}
}

// Bad input is refused before anything runs, with one line and 125, and
// no results file.
func TestEvalModesBadInput(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(text), 0o644)
		return p
	}
	stdio := filepath.Join(evalTestdata, "stdio_problems.jsonl")
	mbpp := filepath.Join(evalTestdata, "mbpp_problems.jsonl")
	good := write("good.jsonl", `{"task_id": "add", "completion": "print(3)"}`+"\n")
	for _, c := range []struct {
		mode string
		args []string
		want string
	}{
		{"stdio", []string{good}, "--problems: give the problems file"},
		{"stdio", []string{"--problems", stdio, "--compare", "fuzzy", good}, `--compare "fuzzy": want exact, lines or tokens`},
		{"stdio", []string{"--problems", stdio, "--compare", "exact", "--float-tolerance", "1e-6", good}, "--float-tolerance compares numbers as tokens"},
		{"stdio", []string{"--problems", stdio, "--float-tolerance", "-1", good}, "--float-tolerance -1: give a tolerance of 0 or more"},
		{"stdio", []string{"--problems", stdio, write("fn.jsonl", `{"task_id": 4002, "completion": ""}`+"\n")}, `task_id "4002" cannot be judged by stdin and stdout: it is call-based (fn_name "f")`},
		{"stdio", []string{"--problems", stdio, write("none.jsonl", `{"task_id": "nope", "completion": ""}`+"\n")}, `task_id "nope" is not in the problems file`},
		{"stdio", []string{"--problems", write("bad.jsonl", `{"task_id": "x", "tests": [{"input": "1"}]}`+"\n"), good}, `problem "x": test 1: give both "input" and "output"`},
		{"stdio", []string{"--problems", write("nolayout.jsonl", `{"task_id": "x", "question": "?"}`+"\n"), good}, `problem "x" has no tests`},
		{"stdio", []string{"--problems", write("dup.jsonl", `{"task_id": "x", "tests": [{"input": "", "output": ""}]}`+"\n"+`{"name": "x", "public_tests": {"input": [""], "output": [""]}}`+"\n"), good}, `problem "x" appears twice`},
		{"mbpp", []string{"--problems", mbpp, "--total-timeout", "soon", good}, `--total-timeout "soon": give a duration`},
		{"mbpp", []string{"--problems", mbpp, good}, `task_id add is not in the problems file`},
		{"mbpp", []string{"--problems", write("notests.jsonl", `{"task_id": 9, "test_list": []}`+"\n"), good}, "problem 9 has no test_list"},
	} {
		out := filepath.Join(dir, "out.jsonl")
		cmd := exec.Command(microbox, append([]string{"eval", c.mode, "-o", out}, c.args...)...)
		_, errOut, code := runCmd(t, cmd)
		lines := strings.Split(strings.TrimSpace(string(errOut)), "\n")
		if code != result.ExitSandboxError || len(lines) != 1 || !strings.Contains(lines[0], c.want) {
			t.Errorf("%s %v: exit %d, stderr %q; want %d and one line with %q", c.mode, c.args, code, errOut, result.ExitSandboxError, c.want)
		}
		if _, err := os.Stat(out); err == nil {
			t.Errorf("%s %v: a results file was left", c.mode, c.args)
		}
	}
}

// exec's policy flags apply to each run of eval stdio and mbpp, and judge
// the program, not eval's harness; --redact is refused.
func TestEvalPolicyFlags(t *testing.T) {
	dir := t.TempDir()
	stdioProblems := filepath.Join(evalTestdata, "stdio_problems.jsonl")
	samples := filepath.Join(dir, "s.jsonl")
	os.WriteFile(samples, []byte(`{"task_id": "lcb_rev", "completion": "import socket\nprint(input()[::-1])", "note": "imports socket"}
{"task_id": "lcb_rev", "completion": "print(input()[::-1])", "note": "right"}
{"task_id": "lcb_rev", "completion": "import ctypes\nprint(input()[::-1])", "note": "risky"}
`), 0o644)
	audit := filepath.Join(dir, "audit.jsonl")
	rows, stderr, code := evalMode(t, nil, "stdio", samples, "--problems", stdioProblems,
		"--deny-modules", "socket", "--max-risk", "20", "--audit-log", audit)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	want := [][]string{{"nonzero"}, {"passed"}, {"rejected"}}
	for i, r := range rows {
		if got := slices.Compact(r.statuses()); !slices.Equal(got, want[i]) {
			t.Errorf("%s: %v, want every test %v", r.Note, r.statuses(), want[i])
		}
	}
	if n := strings.Count(readFile(t, audit), "\n"); n != 9 {
		t.Errorf("%d audit lines, want one for each of 9 runs", n)
	}

	// MBPP: the harness runs under an allow-list that would refuse its
	// own imports, and the risk check judges the completion.
	mbppSamples := filepath.Join(dir, "m.jsonl")
	os.WriteFile(mbppSamples, []byte(`{"task_id": 2, "completion": "def count():\n    return len(ITEMS)", "note": "right"}
{"task_id": 2, "completion": "import os\ndef count():\n    return len(ITEMS)", "note": "imports os"}
{"task_id": 2, "completion": "import ctypes\ndef count():\n    return len(ITEMS)", "note": "risky"}
`), 0o644)
	rows, stderr, code = evalMode(t, nil, "mbpp", mbppSamples, "--problems", filepath.Join(evalTestdata, "mbpp_problems.jsonl"),
		"--allow-modules", "math", "--max-risk", "20")
	if code != 0 {
		t.Fatalf("mbpp: exit %d: %s", code, stderr)
	}
	want = [][]string{{"passed"}, {"nonzero"}, {"rejected"}}
	for i, r := range rows {
		if got := slices.Compact(r.statuses()); !slices.Equal(got, want[i]) {
			t.Errorf("mbpp %s: %+v, want every test %v", r.Note, r.Tests, want[i])
		}
	}

	if _, stderr, code := evalMode(t, nil, "stdio", samples, "--problems", stdioProblems, "--redact"); code != result.ExitSandboxError || !strings.Contains(stderr, "leave --redact out") {
		t.Errorf("--redact: exit %d, %s", code, stderr)
	}
}

// A stopped evaluation writes nothing, leaves no temporary file, and
// exits 128+N.
func TestEvalInterrupted(t *testing.T) {
	dir := t.TempDir()
	samples := filepath.Join(dir, "s.jsonl")
	os.WriteFile(samples, []byte(`{"task_id": "add", "completion": "while True: pass"}`+"\n"), 0o644)
	cmd := exec.Command(microbox, "eval", "stdio", "--problems", filepath.Join(evalTestdata, "stdio_problems.jsonl"),
		"--timeout", "30s", "-o", filepath.Join(dir, "out.jsonl"), samples)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// The temporary results file is made just before signals are caught;
	// the sample then spins until the signal.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if left, _ := os.ReadDir(dir); len(left) > 1 || time.Now().After(deadline) {
			break
		}
	}
	time.Sleep(500 * time.Millisecond)
	cmd.Process.Signal(syscall.SIGTERM)
	err := cmd.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 128+int(syscall.SIGTERM) {
		t.Fatalf("exit %v, want %d", err, 128+int(syscall.SIGTERM))
	}
	if left, _ := os.ReadDir(dir); len(left) != 1 {
		t.Errorf("files left: %v", left)
	}
}

// The same contest-style problems solved in C++ (eval stdio --lang cpp):
// every way a test ends, as in Python, and a sample that does not compile
// is compile_error on every test; each sample is compiled once, not once
// per test.
func TestEvalStdioCpp(t *testing.T) {
	problems := filepath.Join(evalTestdata, "stdio_problems.jsonl")
	all := filepath.Join(evalTestdata, "stdio_samples_cpp.jsonl")
	flags := []string{"--lang", "cpp", "--problems", problems, "--timeout", "5s", "--cpu-time", "1s", "--mem", "64M", "--tmpfs-size", "16M"}
	for _, c := range []struct {
		key   string
		flags []string
	}{
		{"want", nil},
		{"want_exact", []string{"--compare", "exact"}},
		{"want_stop", []string{"--stop-on-fail", "--jobs", "4"}},
	} {
		rows, stderr, code := evalMode(t, nil, "stdio", samplesWith(t, all, c.key), append(c.flags, flags...)...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", c.flags, code, stderr)
		}
		checkWants(t, rows, c.key)
		for _, r := range rows {
			for _, tv := range r.Tests {
				if tv.Status == "compile_error" && !strings.HasPrefix(tv.Message, "compile_error: the compile step failed") {
					t.Errorf("%s: a compile error's message %q", r.Note, tv.Message)
				}
			}
		}
	}
}
