package main

// The golden test holds the JSON contract still: each case's stdout (and
// for the cases that say so, stderr and the exit status) must be
// byte-identical to what testdata/golden recorded, once the values that
// vary from run to run (times, memory, temporary paths) are masked.
// After a deliberate change to the contract, rerun with -update and
// review the diff.

import (
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/microbox/microbox/nsjail"
)

var updateGolden = flag.Bool("update", false, "rewrite testdata/golden from this binary's output")

// goldenCase is one command line whose output is recorded.
type goldenCase struct {
	name  string
	args  []string
	stdin string
	// files are written into the case's directory (which becomes the
	// working directory) before the command runs.
	files map[string]string
	// result names a file the command writes (eval's results), recorded
	// too.
	result string
}

func goldenCases() []goldenCase {
	bad := `{"id": 1, "code": "print(sum(range(10)))"}
{"id": "shout", "code": "import sys; print(sys.stdin.read().upper())", "stdin": "hello", "timeout": "2s"}
{"id": [3], "file": "prog.py", "files": {"data.txt": "42\n"}, "env": {"DEBUG": "1"}, "mem": "128M"}
{"id": 4, "code": "while True: pass", "timeout": 0.3}
this line is not JSON
{"id": 6, "code": "print(1)", "timout": "1s"}
{"id": 7, "code": "print(1)", "file": "prog.py"}
{"id": 8}
{"id": 9, "code": "print(1)", "mem": "12Q"}
{"id": 10, "code": "print(1)", "timeout": 0}
{"id": 11, "code": "print(1)", "mem": 1000000}
{"id": 12, "code": "print(1)", "files": {"/etc/x": "y"}}
{"id": 13, "code": "print(1)", "env": {"": "y"}}
{"id": 14, "code": "print(1)", "cpus": -1}
{"id": 15, "code": "import sys; sys.exit(7)", "args": ["a", "b"]}
{"id": 16, "code": "print('x' * 100)", "output_limit": 10}
{"id": 17, "file": "missing.py"}

{"id": 18, "code": "import sys; print(sys.argv)", "args": ["--json"]}
`
	exec := func(name string, args ...string) goldenCase {
		return goldenCase{name: "exec_" + name, args: append([]string{"exec"}, args...)}
	}
	cases := []goldenCase{
		exec("ok", "--json", "-c", "print(1)"),
		exec("nonzero", "--json", "-c", "import sys; print('out'); print('err', file=sys.stderr); sys.exit(3)"),
		exec("exception", "--json", "-c", "def f():\n    raise ValueError('boom')\nf()"),
		exec("signaled", "--json", "-c", "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)"),
		exec("timeout", "--json", "--timeout", "200ms", "-c", "while True: pass"),
		exec("cpu_time", "--json", "--cpu-time", "200ms", "-c", "while True: pass"),
		exec("memory", "--json", "--mem", "32M", "--tmpfs-size", "16M", "-c", "x = bytearray(64 << 20)"),
		exec("output_limit", "--json", "--output-limit", "10", "-c", "print('x' * 100)"),
		exec("stderr_limit", "--json", "--output-limit", "10", "-c", "import sys; sys.stderr.write('y' * 100)"),
		exec("utf8", "--json", "-c", "import sys; sys.stdout.buffer.write(b'a\\xffb\\n'); print('é')"),
		exec("stdin", "--json", "-c", "import sys; print(sys.stdin.read().upper())"),
		exec("file", "--json", "prog.py", "x", "--json"),
		exec("files_env_workdir", "--json", "--env", "A=B", "--env", "LANG=C", "--workdir", "/work", "--file", "data.txt", "--file", "data.txt:/tmp/d/e.txt",
			"-c", "import os; print(os.environ['A'], os.environ['LANG'], os.getcwd(), sorted(os.listdir()), open('/tmp/d/e.txt').read())"),
		exec("plain", "-c", "print(2)"),
		exec("plain_nonzero", "-c", "import sys; sys.exit(4)"),
		exec("plain_timeout", "--timeout", "100ms", "-c", "import time; time.sleep(5)"),
		exec("bad_mem", "--json", "--mem", "12Q", "-c", "1"),
		exec("bad_timeout", "--json", "--timeout", "-1s", "-c", "1"),
		exec("bad_duration", "--json", "--cpu-time", "soon", "-c", "1"),
		exec("bad_cpus", "--json", "--cpus", "0", "-c", "1"),
		exec("bad_pids", "--json", "--pids", "0", "-c", "1"),
		exec("tmpfs_over_mem", "--json", "--tmpfs-size", "1G", "-c", "1"),
		exec("no_cgroup_mem", "--json", "--no-cgroup", "--mem", "1G", "-c", "1"),
		exec("no_cgroup_cpu_time", "--json", "--no-cgroup", "--cpu-time", "1s", "-c", "1"),
		exec("no_cgroup_ok", "--json", "--no-cgroup", "-c", "print(1)"),
		exec("missing_file", "--json", "missing.py"),
		exec("no_program", "--json"),
		exec("unknown_flag", "--json", "--frobnicate", "-c", "1"),
		exec("bad_env", "--json", "--env", "NOEQUALS", "-c", "1"),
		exec("bad_seccomp", "--json", "--seccomp", "bogus", "-c", "1"),
		exec("seccomp_profile_mix", "--json", "--seccomp", "off", "--seccomp-profile", "p.json", "-c", "1"),
		exec("seccomp_off", "--json", "--seccomp", "off", "-c", "print(1)"),
		exec("missing_rootfs", "--json", "--rootfs", "/nonexistent-microbox-root", "-c", "1"),
		exec("system_workdir", "--json", "--workdir", "/usr/lib", "-c", "1"),
		exec("relative_workdir", "--json", "--workdir", "work", "-c", "1"),
		exec("bad_hostname", "--json", "--hostname", strings.Repeat("h", 65), "-c", "1"),
		exec("bad_cgroup_parent", "--json", "--cgroup-parent", "relative/group", "-c", "1"),
		exec("redact", "--json", "--redact", "-c", "print('key sk-abcdefghijklmnopqrstuvwxyz0123 mail a@example.com')"),
		exec("redact_pattern", "--json", "--redact-pattern", "TICKET=T-[0-9]+", "-c", "print('see T-1234')"),
		exec("bad_redact_pattern", "--json", "--redact-pattern", "x", "-c", "1"),
		exec("risk_rejected", "--json", "--max-risk", "5", "-c", "import os\nos.system('ls')\neval('1')"),
		exec("risk_ok", "--json", "--max-risk", "100", "-c", "import os\nprint(len(os.listdir('/')) > 0)"),
		exec("risk_syntax", "--json", "--max-risk", "0", "-c", "def (:"),
		exec("bad_max_risk", "--json", "--max-risk", "-1", "-c", "1"),
		exec("deny_modules", "--json", "--deny-modules", "socket", "-c", "import socket"),
		exec("allow_modules", "--json", "--allow-modules", "json,math", "-c", "import math, json; print(math.pi); import os"),
		exec("bad_module", "--json", "--deny-modules", "1os", "-c", "1"),
		exec("guard_humaneval", "--json", "--guard", "humaneval", "-c", "import os; os.remove('/tmp/x')"),
		exec("bad_guard", "--json", "--guard", "nope", "-c", "1"),
		{name: "batch", args: []string{"batch", "--jobs", "2", "tasks.jsonl"}, files: map[string]string{"tasks.jsonl": bad}},
		{name: "batch_completed_stdin", args: []string{"batch", "--jobs", "1", "--order", "completed"}, stdin: `{"id": "a", "code": "print(1)"}` + "\n" + `{"id": "b", "code": "print(2)"}` + "\n"},
		{name: "batch_no_cgroup", args: []string{"batch", "--no-cgroup", "tasks.jsonl"}, files: map[string]string{"tasks.jsonl": `{"id": 1, "code": "print(1)"}
{"id": 2, "code": "print(1)", "mem": "64M"}
{"id": 3, "code": "print(1)", "cpu_time": "1s"}
`}},
		{name: "batch_bad_order", args: []string{"batch", "--order", "random", "tasks.jsonl"}, files: map[string]string{"tasks.jsonl": "{}\n"}},
		{name: "batch_missing_input", args: []string{"batch", "missing.jsonl"}},
		{name: "eval_humaneval", args: []string{"eval", "humaneval", "--problems", "problems.jsonl", "--jobs", "2", "-k", "1,2", "samples.jsonl"},
			files: map[string]string{
				"problems.jsonl": `{"task_id": "test/0", "prompt": "def return1():\n", "canonical_solution": "    return 1", "test": "def check(candidate):\n    assert candidate() == 1", "entry_point": "return1"}
{"task_id": "test/1", "prompt": "def add(a, b):\n", "canonical_solution": "    return a + b", "test": "def check(candidate):\n    assert candidate(1, 2) == 3\n    assert candidate(2, 2) == 4", "entry_point": "add"}
`,
				"samples.jsonl": `{"task_id": "test/0", "completion": "    import subprocess\n    subprocess.check_output('rm -rf tmp')"}
{"task_id": "test/0", "completion": "    return input('enter a number')"}
{"task_id": "test/0", "completion": "    return 1", "extra": {"kept": [1, 2]}}
{"task_id": "test/1", "completion": "    return a - b"}
{"task_id": "test/1", "completion": "    return a + b"}
{"task_id": "test/1", "completion": "    print('x' * 2000000)\n    return a + b"}
{"task_id": "test/1", "completion": "    import os\n    os._exit(3)"}
{"task_id": "test/1", "completion": "    while True: pass"}
`},
			result: "samples.jsonl_results.jsonl"},
		{name: "eval_stdio", args: []string{"eval", "stdio", "--problems", "problems.jsonl", "--jobs", "2", "-k", "1", "samples.jsonl"},
			files: map[string]string{
				"problems.jsonl": `{"task_id": "add", "tests": [{"input": "1 2\n", "output": "3\n"}, {"input": "10 -4\n", "output": "6\n"}]}
{"problem_id": 7, "input_output": "{\"inputs\": [\"2\\n\"], \"outputs\": [\"4\\n\"]}"}
`,
				"samples.jsonl": `{"task_id": "add", "completion": "a, b = map(int, input().split())\nprint(a + b)"}
{"task_id": "add", "completion": "a, b = map(int, input().split())\nprint(a * b)"}
{"task_id": "add", "completion": "a, b = map(int, input().split())\nprint(a + b if a < 10 else a / 0)"}
{"task_id": 7, "completion": "print(int(input()) ** 2)", "model": "kept"}
`},
			result: "samples.jsonl_results.jsonl"},
		{name: "eval_mbpp", args: []string{"eval", "mbpp", "--problems", "mbpp.jsonl", "--jobs", "2", "-k", "1", "samples.jsonl"},
			files: map[string]string{
				"mbpp.jsonl": `{"task_id": 1, "text": "Add two numbers.", "code": "def add(a, b):\n    return a + b", "test_setup_code": "", "test_list": ["assert add(1, 2) == 3", "assert add(2, 2) == 4", "assert add(-1, 1) == 0"], "challenge_test_list": []}
`,
				"samples.jsonl": `{"task_id": 1, "completion": "def add(a, b):\n    return a + b"}
{"task_id": 1, "completion": "def add(a, b):\n    return a + b if a != 2 else 5"}
{"task_id": 1, "completion": "def add(a, b):\n    return a + b +"}
`},
			result: "samples.jsonl_results.jsonl"},
		{name: "eval_missing_problems", args: []string{"eval", "humaneval", "samples.jsonl"}, files: map[string]string{"samples.jsonl": "{}\n"}},
		{name: "eval_incomplete", args: []string{"eval", "humaneval", "--problems", "problems.jsonl", "samples.jsonl"}, files: map[string]string{
			"problems.jsonl": `{"task_id": "a", "prompt": "", "test": "", "entry_point": "f"}
{"task_id": "b", "prompt": "", "test": "", "entry_point": "f"}
`,
			"samples.jsonl": `{"task_id": "a", "completion": ""}` + "\n"}},
		{name: "check_json", args: []string{"check", "--json", "-c", "import os, subprocess\nos.system('ls')\neval('1')\nwhile True:\n    x = ().__class__.__subclasses__()"}},
		{name: "check_text", args: []string{"check", "-c", "import socket\nexec('x=1')"}},
		{name: "check_syntax", args: []string{"check", "--json", "-c", "def (:"}},
		{name: "check_file", args: []string{"check", "--json", "prog.py"}},
		{name: "check_nothing", args: []string{"check"}},
	}
	for i := range cases {
		if cases[i].files == nil {
			cases[i].files = map[string]string{}
		}
		cases[i].files["prog.py"] = "import sys\nprint('prog', sys.argv[1:])\n"
		cases[i].files["data.txt"] = "42\n"
		if cases[i].name == "exec_stdin" {
			cases[i].stdin = "hello\n"
		}
	}
	return cases
}

// volatile matches what differs from run to run in a result: times,
// memory, the trace.
var volatile = regexp.MustCompile(`"(wall_time_ms|cpu_time_ms|peak_memory_bytes|setup_time_ms)": ?(-?[0-9][0-9.e+-]*)`)

// elapsed matches the human-readable times microbox prints on stderr.
var elapsed = regexp.MustCompile(`(after |in )[0-9.]+ ?(ms|s)\b|\([0-9.]+ samples/s|\([0-9.]+ tests/s`)

// mask replaces the values that vary between runs, keeping their kind.
func mask(s, dir string) string {
	s = strings.ReplaceAll(s, dir, "$DIR")
	s = volatile.ReplaceAllString(s, `"$1":N`)
	return elapsed.ReplaceAllString(s, "${1}T")
}

func TestGolden(t *testing.T) {
	skipInZygoteMode(t, "results say start; TestGoldenZygote holds the forked runs to the same files")
	for _, c := range goldenCases() {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			got := runGolden(t, c, nil)
			file := filepath.Join("testdata", "golden", c.name+".golden")
			if *updateGolden {
				if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(file, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			if want := readGolden(t, c); got != want {
				t.Errorf("%v: output differs from %s\n--- got\n%s\n--- want\n%s", c.args, file, got, want)
			}
		})
	}
}

// runGolden runs a case, with env added to the environment, and returns
// its recorded output, masked.
func runGolden(t *testing.T, c goldenCase, env []string) string {
	t.Helper()
	dir := t.TempDir()
	for name, data := range c.files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(microbox, c.args...)
	cmd.Dir = dir
	cmd.Stdin = strings.NewReader(c.stdin)
	cmd.Env = append(append(os.Environ(), "MICROBOX_ROOTFS=", "NO_COLOR=1"), env...)
	stdout, stderr, code := runCmd(t, cmd)
	got := "exit " + strconv.Itoa(code) + "\n--- stdout\n" + string(stdout) + "--- stderr\n" + string(stderr)
	if c.result != "" {
		data, err := os.ReadFile(filepath.Join(dir, c.result))
		if err != nil {
			t.Fatalf("%s: %v", c.result, err)
		}
		got += "--- " + c.result + "\n" + string(data)
	}
	return mask(got, dir)
}

func readGolden(t *testing.T, c goldenCase) string {
	t.Helper()
	file := filepath.Join("testdata", "golden", c.name+".golden")
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("%v (run go test -run TestGolden -update to record it)", err)
	}
	return string(want)
}

// zygoteStart is the field a run forked from a template adds.
var (
	zygoteStart = regexp.MustCompile(`, ?"start": ?"zygote"`)
	coldStart   = regexp.MustCompile(`"start": ?"cold"`)
)

// TestGoldenZygote runs the cases again with --zygote, exec's through a
// server (whose templates they fork from) and batch's and eval's in their
// own pools: every run must fork from a template, and the output must be
// the cold run's to the byte otherwise. The module and guard layers'
// cases, and those that set a variable read at the interpreter's start
// (LANG=C has Python coerce its locale and turn on UTF-8 mode), are
// refused by name instead: the interpreter started before them.
func TestGoldenZygote(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: a template's children each get a host uid range (CI runs as root)")
	}
	socket, _ := testServer(t)
	policy := regexp.MustCompile(`^--(deny-modules|allow-modules|guard)$`)
	for _, c := range goldenCases() {
		if len(c.args) == 0 || c.args[0] == "check" {
			continue
		}
		at := 1
		if c.args[0] == "eval" {
			at = 2
		}
		layered := slices.ContainsFunc(c.args, policy.MatchString) && !strings.HasPrefix(c.name, "exec_bad_")
		startVar := startEnvArg(c.args)
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			want := readGolden(t, c)
			c.args = slices.Insert(slices.Clone(c.args), at, "--zygote")
			got := runGolden(t, c, []string{socketEnv + "=" + socket})
			if layered {
				if !strings.Contains(got, "--zygote: a zygote run cannot have the policy layers' files") {
					t.Errorf("%v: not refused:\n%s", c.args, got)
				}
				return
			}
			if startVar != "" {
				if !strings.Contains(got, "--zygote: environment variable "+startVar+" cannot take effect") {
					t.Errorf("%v: not refused by name:\n%s", c.args, got)
				}
				return
			}
			ran := strings.Contains(got, `"wall_time_ms":N`) && !strings.Contains(want, `"status":"sandbox_error"`) &&
				!strings.Contains(want, `"status":"rejected"`)
			if coldStart.MatchString(got) || ran && !zygoteStart.MatchString(got) {
				t.Errorf("%v: not every run forked from a template:\n%s", c.args, got)
			}
			if got = zygoteStart.ReplaceAllString(got, ""); got != want {
				t.Errorf("%v: output differs from the cold run's\n--- got\n%s\n--- want\n%s", c.args, got, want)
			}
		})
	}
}

// startEnvArg is the first variable args' --env sets that the interpreter
// reads only at its start, other than as the base environment has it.
func startEnvArg(args []string) string {
	base, _ := nsjail.BaseEnv(nil)
	for i, a := range args[:max(len(args)-1, 0)] {
		k, _, _ := strings.Cut(args[i+1], "=")
		if a == "--env" && !slices.Contains(base, args[i+1]) && startEnv.MatchString(k) {
			return k
		}
	}
	return ""
}

var startEnv = regexp.MustCompile(`^(PYTHON.*|LD_.*|GLIBC_.*|MALLOC_.*|LANG|LC_ALL|LC_CTYPE)$`)
