package main

// Tests of `microbox batch`, the real binary (built in TestMain): runs,
// malformed lines, ordering, pinning and Ctrl-C. Tasks and the pool are
// tested as units in internal/batch.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/microbox/microbox/nsjail"
	"github.com/microbox/microbox/result"
)

// batchLine is one result line as a caller decodes it.
type batchLine struct {
	ID   json.RawMessage `json:"id"`
	Line int             `json:"line"`
	result.Result
}

// runBatch runs `microbox batch ARGS` with tasks on stdin and returns the
// decoded result lines and the exit code.
func runBatchCmd(t *testing.T, tasks string, args ...string) ([]batchLine, int) {
	t.Helper()
	out, code := runMicrobox(t, tasks, append([]string{"batch"}, args...)...)
	return decodeLines(t, out), code
}

func decodeLines(t *testing.T, out []byte) []batchLine {
	t.Helper()
	var lines []batchLine
	for _, l := range bytes.Split(bytes.TrimSpace(out), []byte("\n")) {
		if len(l) == 0 {
			continue
		}
		var r batchLine
		if err := json.Unmarshal(l, &r); err != nil {
			t.Fatalf("result line is not JSON (%v): %s", err, l)
		}
		lines = append(lines, r)
	}
	return lines
}

// jsonl renders tasks as JSON lines.
func jsonl(t *testing.T, tasks ...any) string {
	t.Helper()
	var b strings.Builder
	for _, task := range tasks {
		if s, ok := task.(string); ok { // a raw line, possibly malformed
			b.WriteString(s + "\n")
			continue
		}
		line, err := json.Marshal(task)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(append(line, '\n'))
	}
	return b.String()
}

type obj = map[string]any

func TestBatchRunsTasksInInputOrder(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "prog.py")
	os.WriteFile(script, []byte("import sys; print('file', sys.argv[1:])\n"), 0o644)
	tasks := jsonl(t,
		obj{"id": 1, "code": "import time; time.sleep(0.5); print('slow')"},
		obj{"id": "two", "code": "import sys; print(sys.stdin.read().upper(), sys.argv[1:])", "stdin": "abc", "args": []string{"x", "--y"}},
		obj{"id": obj{"k": []int{3}}, "file": script, "args": []string{"a"}},
		obj{"id": 4, "code": "print(open('data.txt').read(), open('/tmp/sub/b.txt').read())", "files": obj{"data.txt": "hello", "/tmp/sub/b.txt": "bee"}},
		obj{"id": 5, "code": "import os; print(os.environ['A'], os.environ['LANG'])", "env": obj{"A": "1", "LANG": "C"}},
		obj{"id": 6, "code": "raise SystemExit(7)"},
		obj{"id": 7, "code": "while True: pass", "timeout": "300ms"},
		obj{"id": 8, "code": "while True: pass", "timeout": 0.3},
		obj{"id": 9, "code": "b = bytearray(200 << 20)", "mem": "64M", "timeout": "5s"},
		obj{"id": 10, "code": "print('x' * 100)", "output_limit": 10},
		obj{"code": "print('no id')"},
	)
	lines, code := runBatchCmd(t, tasks, "--jobs", "2", "--tmpfs-size", "16M")
	if code != 0 || len(lines) != 11 {
		t.Fatalf("exit %d, %d results, want 0 and 11", code, len(lines))
	}
	want := []struct {
		id     string
		status result.Status
		stdout string
	}{
		{`1`, result.StatusOK, "slow\n"},
		{`"two"`, result.StatusOK, "ABC ['x', '--y']\n"},
		{`{"k":[3]}`, result.StatusOK, "file ['a']\n"},
		{`4`, result.StatusOK, "hello bee\n"},
		{`5`, result.StatusOK, "1 C\n"},
		{`6`, result.StatusNonzero, ""},
		{`7`, result.StatusTimeout, ""},
		{`8`, result.StatusTimeout, ""},
		{`9`, result.StatusMemory, ""},
		{`10`, result.StatusOutputLimit, "xxxxxxxxxx"},
		{`null`, result.StatusOK, "no id\n"},
	}
	for i, w := range want {
		r := lines[i]
		if string(r.ID) != w.id || r.Line != i+1 || r.Status != w.status || r.Stdout != w.stdout {
			t.Errorf("result %d: id %s line %d status %q stdout %q error %v; want id %s line %d status %q stdout %q",
				i, r.ID, r.Line, r.Status, r.Stdout, deref(r.Error), w.id, i+1, w.status, w.stdout)
		}
	}
	// Accounting is there to show starvation: wall and CPU time per run.
	if r := lines[0]; r.CPUTimeMs == nil || r.WallTimeMs < 500 || r.PeakMemoryBytes == nil {
		t.Errorf("accounting: wall %.0f cpu %v peak %v", r.WallTimeMs, deref(r.CPUTimeMs), deref(r.PeakMemoryBytes))
	}
}

// A line that is not a valid task gets a sandbox_error result naming the
// problem, in its place; the batch goes on.
func TestBatchMalformedLines(t *testing.T) {
	tasks := jsonl(t,
		`this is not json`,
		obj{"id": 2, "code": "print(2)"},
		`{"id": 3, "code": "print(3)"`,
		obj{"id": 4, "timout": "1s", "code": "print(4)"},
		obj{"id": 5},
		obj{"id": 6, "code": "1", "file": "x.py"},
		obj{"id": 7, "code": "1", "timeout": "soon"},
		obj{"id": 8, "code": "1", "mem": -5},
		obj{"id": 9, "file": "/no/such/file.py"},
		obj{"id": 10, "code": "1", "env": obj{"A=B": "c"}},
		obj{"id": 11, "code": "1", "files": obj{"/etc/passwd": "x"}},
		`[1, 2, 3]`,
		`{"id": 13, "code": "1"} {"id": 14}`,
		obj{"id": 15, "code": 42},
		"",
		"   ",
		obj{"id": 16, "code": "print(16)"},
	)
	lines, code := runBatchCmd(t, tasks)
	if code != 0 {
		t.Fatalf("exit %d, want 0: malformed lines must not abort the batch", code)
	}
	want := map[string]string{ // id -> part of the error; "" for ok
		"null#1":  "invalid character",
		"2":       "",
		"null#3":  "unexpected EOF",
		"4":       `unknown field "timout"`,
		"5":       "no program",
		"6":       "either",
		"7":       `"timeout"`,
		"8":       `"mem"`,
		"9":       "no such file",
		"10":      "not a variable name",
		"11":      "outside the writable areas",
		"null#12": "cannot unmarshal array",
		"13":      "more than one JSON value",
		"15":      "code",
		"16":      "",
	}
	if len(lines) != len(want) {
		t.Fatalf("%d results, want %d (blank lines skipped, one per other line)", len(lines), len(want))
	}
	for _, r := range lines {
		key := string(r.ID)
		if key == "null" {
			key = fmt.Sprintf("null#%d", r.Line)
		}
		frag, ok := want[key]
		switch {
		case !ok:
			t.Errorf("unexpected result id %s line %d", r.ID, r.Line)
		case frag == "" && r.Status != result.StatusOK:
			t.Errorf("id %s: status %q error %v, want ok", key, r.Status, deref(r.Error))
		case frag != "" && (r.Status != result.StatusSandboxError || r.Error == nil || !strings.Contains(*r.Error, frag)):
			t.Errorf("id %s: status %q error %v, want sandbox_error mentioning %q", key, r.Status, deref(r.Error), frag)
		}
	}
}

// With --order completed, results come as runs finish; with the default
// input order they are held back until their turn.
func TestBatchOrderCompleted(t *testing.T) {
	tasks := jsonl(t,
		obj{"id": "slow", "code": "import time; time.sleep(1.5)"},
		obj{"id": "fast1", "code": "pass"},
		obj{"id": "fast2", "code": "pass"},
	)
	lines, code := runBatchCmd(t, tasks, "--jobs", "2", "--order", "completed")
	if code != 0 || len(lines) != 3 {
		t.Fatalf("exit %d, %d results", code, len(lines))
	}
	if string(lines[2].ID) != `"slow"` {
		t.Errorf("completed order: %s %s %s, want the slow task last", lines[0].ID, lines[1].ID, lines[2].ID)
	}
	lines, _ = runBatchCmd(t, tasks, "--jobs", "2")
	if string(lines[0].ID) != `"slow"` || lines[0].Line != 1 || lines[2].Line != 3 {
		t.Errorf("input order: %s %s %s", lines[0].ID, lines[1].ID, lines[2].ID)
	}
}

// The command line's flags are every task's defaults; a task overrides
// them, up to the ceilings.
func TestBatchFlagsAreDefaults(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "shared.txt")
	os.WriteFile(data, []byte("shared"), 0o644)
	tasks := jsonl(t,
		obj{"id": 1, "code": "import os; print(open('shared.txt').read(), os.environ['K'])"},
		obj{"id": 2, "code": "import os; print(os.environ['K'])", "env": obj{"K": "task"}},
		obj{"id": 3, "code": "import time; time.sleep(2)"},
		obj{"id": 4, "code": "import time; time.sleep(0.5)", "timeout": "5s"},
	)
	lines, code := runBatchCmd(t, tasks, "--timeout", "300ms", "--max-timeout", "5s", "--env", "K=flag", "--file", data)
	if code != 0 || len(lines) != 4 {
		t.Fatalf("exit %d, %d results", code, len(lines))
	}
	checks := []struct {
		status result.Status
		stdout string
	}{{result.StatusOK, "shared flag\n"}, {result.StatusOK, "task\n"}, {result.StatusTimeout, ""}, {result.StatusOK, ""}}
	for i, c := range checks {
		if lines[i].Status != c.status || lines[i].Stdout != c.stdout {
			t.Errorf("task %d: status %q stdout %q error %v, want %q %q", i+1, lines[i].Status, lines[i].Stdout, deref(lines[i].Error), c.status, c.stdout)
		}
	}
}

// Tasks from a file, results to a file; bad flags and a missing task file
// are refused before anything runs.
func TestBatchFilesAndBadInput(t *testing.T) {
	dir := t.TempDir()
	in, out := filepath.Join(dir, "tasks.jsonl"), filepath.Join(dir, "results.jsonl")
	os.WriteFile(in, []byte(jsonl(t, obj{"id": 1, "code": "print(1)"}, obj{"id": 2, "code": "print(2)"})), 0o644)
	stdout, code := runMicrobox(t, "", "batch", "-o", out, in)
	if code != 0 || len(stdout) != 0 {
		t.Fatalf("exit %d, stdout %q", code, stdout)
	}
	data, _ := os.ReadFile(out)
	if lines := decodeLines(t, data); len(lines) != 2 || lines[1].Stdout != "2\n" {
		t.Fatalf("results file: %s", data)
	}
	for _, args := range [][]string{
		{"batch", filepath.Join(dir, "missing.jsonl")},
		{"batch", "--jobs", "0"},
		{"batch", "--order", "sideways"},
		{"batch", "--mem", "12Q"},
		{"batch", "--progress", "sometimes"},
		{"batch", "-o", filepath.Join(dir, "no", "such", "dir.jsonl"), in},
	} {
		if _, code := runMicrobox(t, "", args...); code != result.ExitSandboxError {
			t.Errorf("%v: exit %d, want %d", args, code, result.ExitSandboxError)
		}
	}
}

// Ctrl-C stops the batch cleanly: finished results are flushed, runs in
// progress are killed and get no result (a resume runs them), nothing
// else starts, no process or cgroup is left behind, and microbox exits
// 128+SIGINT.
func TestBatchInterrupt(t *testing.T) {
	var tasks []any
	for i := range 12 {
		code := "print('done', flush=True)"
		if i >= 2 {
			code = "import time; print('started', flush=True); time.sleep(60)"
		}
		tasks = append(tasks, obj{"id": i, "code": code, "timeout": "120s"})
	}
	cmd := exec.Command(microbox, "batch", "--jobs", "2", "--max-timeout", "120s")
	cmd.Stdin = strings.NewReader(jsonl(t, tasks...))
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// The two quick tasks finish and are flushed while the batch runs.
	sc := bufio.NewScanner(stdout)
	var got []byte
	for range 2 {
		if !sc.Scan() {
			t.Fatalf("batch ended before its first results: %v %s", sc.Err(), stderr.String())
		}
		got = append(append(got, sc.Bytes()...), '\n')
	}
	waitForJails(t, cmd.Process.Pid, 2)
	jails := descendants(t, cmd.Process.Pid)
	cmd.Process.Signal(syscall.SIGINT)
	for sc.Scan() {
		got = append(append(got, sc.Bytes()...), '\n')
	}
	err = cmd.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 128+int(syscall.SIGINT) {
		t.Fatalf("exit %v, want %d; stderr %s", err, 128+int(syscall.SIGINT), stderr.String())
	}
	lines := decodeLines(t, got)
	if len(lines) != 2 {
		t.Fatalf("%d results, want the 2 finished only:\n%s", len(lines), got)
	}
	for i, r := range lines {
		if r.Status != result.StatusOK || r.Stdout != "done\n" {
			t.Errorf("result %d: %q %q", i, r.Status, r.Stdout)
		}
	}
	for _, pid := range jails {
		if alive(pid) {
			t.Errorf("jail process %d outlived the interrupted batch", pid)
		}
	}
	if left := cgroupsOf(cmd.Process.Pid); len(left) > 0 {
		t.Errorf("cgroups left behind: %v", left)
	}
}

// waitForJails waits until pid has n jailed programs running (sandboxed
// python3 processes among its descendants).
func waitForJails(t *testing.T, pid, n int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		found := 0
		for _, p := range jailPids(t, pid) {
			if comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", p)); strings.TrimSpace(string(comm)) == "python3" {
				found++
			}
		}
		if found >= n {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%d jailed programs did not start", n)
}

// cgroupsOf lists the run cgroups made by the microbox process pid (their
// names carry it), so concurrent runs of other processes do not count.
func cgroupsOf(pid int) []string {
	var mine []string
	for _, p := range runCgroups() {
		if strings.HasPrefix(filepath.Base(p), fmt.Sprintf("microbox-jail-%d-", pid)) {
			mine = append(mine, p)
		}
	}
	return mine
}

// A progress bar can be forced when stderr is not a terminal; it ends with
// a summary line with the rate and the counts per status.
func TestBatchProgressSummary(t *testing.T) {
	cmd := exec.Command(microbox, "batch", "--progress", "always")
	cmd.Stdin = strings.NewReader(jsonl(t, obj{"code": "pass"}, obj{"code": "raise SystemExit(1)"}, obj{"code": "pass"}))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatal(err, stderr.String())
	}
	if !strings.Contains(stderr.String(), "3 runs in") || !strings.Contains(stderr.String(), "ok 2, nonzero 1") {
		t.Fatalf("stderr: %q", stderr.String())
	}
	// Quiet when not asked and not on a terminal.
	cmd = exec.Command(microbox, "batch")
	cmd.Stdin = strings.NewReader(jsonl(t, obj{"code": "pass"}))
	stderr.Reset()
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil || stderr.Len() != 0 {
		t.Fatalf("err %v, stderr %q: want quiet", err, stderr.String())
	}
}

// By default each worker's runs are pinned to a CPU of their own (when
// --jobs is at most the CPUs); --pin=false leaves placement to the kernel.
func TestBatchPinsWorkers(t *testing.T) {
	var allowed unix.CPUSet
	if err := unix.SchedGetaffinity(0, &allowed); err != nil {
		t.Fatal(err)
	}
	affinity := obj{"code": "import os; print(sorted(os.sched_getaffinity(0)))"}
	lines, _ := runBatchCmd(t, jsonl(t, affinity), "--jobs", "1", "--pin=false")
	var cpus []int
	if len(lines) != 1 || json.Unmarshal([]byte(lines[0].Stdout), &cpus) != nil || len(cpus) != allowed.Count() {
		t.Fatalf("not pinned: %+v, want the %d CPUs this process may use", lines, allowed.Count())
	}
	// A forked run too: its template is started once the worker's
	// thread is no longer pinned, by the worker's pinned spawner.
	for _, flags := range [][]string{{"--jobs", "1"}, {"--jobs", "1", "--zygote"}} {
		lines, _ = runBatchCmd(t, jsonl(t, affinity), flags...)
		if want := fmt.Sprintf("[%d]\n", cpus[0]); len(lines) != 1 || lines[0].Stdout != want {
			t.Fatalf("pinned (%v): %+v, want affinity %q", flags, lines, want)
		}
	}
}

// Code of any size up to nsjail.MaxCode runs (past the 128 KiB an argument
// may be), as -c would run it; past it, the task gets a clear error.
func TestBatchLongCode(t *testing.T) {
	mib := "x = 1\n#" + strings.Repeat("w", 1<<20) + "\nimport sys\nprint(sys.argv[0], __name__, x)\n"
	ten := "#" + strings.Repeat("y", 10<<20) + "\nprint('ten')\n"
	over := "#" + strings.Repeat("z", nsjail.MaxCode)
	lines, code := runBatchCmd(t, jsonl(t,
		map[string]any{"id": 1, "code": mib},
		map[string]any{"id": 2, "code": ten},
		map[string]any{"id": 3, "code": over}), "--jobs", "1")
	if code != 0 || len(lines) != 3 {
		t.Fatalf("exit %d, %d results", code, len(lines))
	}
	if r := lines[0]; r.Status != result.StatusOK || r.Stdout != "-c __main__ 1\n" {
		t.Errorf("1 MiB of code: status %s stdout %q stderr %q error %v", r.Status, r.Stdout, r.Stderr, deref(r.Error))
	}
	if r := lines[1]; r.Status != result.StatusOK || r.Stdout != "ten\n" {
		t.Errorf("10 MiB of code: status %s stdout %q error %v", r.Status, r.Stdout, deref(r.Error))
	}
	if r := lines[2]; r.Status != result.StatusSandboxError || r.Error == nil || !strings.Contains(*r.Error, `"code" is`) {
		t.Errorf("code over the limit: status %s error %v", r.Status, deref(r.Error))
	}
}

// A stopped batch goes on with --skip: the results keep the input's own
// line numbers.
func TestBatchSkip(t *testing.T) {
	tasks := jsonl(t, map[string]any{"id": 1, "code": "print(1)"}, map[string]any{"id": 2, "code": "print(2)"}) +
		"\n" + jsonl(t, map[string]any{"id": 3, "code": "print(3)"})
	lines, code := runBatchCmd(t, tasks, "--skip", "2")
	if code != 0 || len(lines) != 1 || string(lines[0].ID) != "3" || lines[0].Line != 4 || lines[0].Stdout != "3\n" {
		t.Fatalf("exit %d results %+v", code, lines)
	}
}

// An ordered batch holds at most --max-held bytes of results (and one per
// job) behind a slow task, whatever the tasks print: invalid UTF-8, which
// grows when replaced, is cut back to the output limit.
func TestBatchMemoryBounded(t *testing.T) {
	var b strings.Builder
	b.WriteString(jsonl(t, map[string]any{"id": 0, "code": "import time; time.sleep(8)"}))
	for i := 1; i <= 100; i++ {
		b.WriteString(jsonl(t, map[string]any{"id": i, "code": "import sys; sys.stdout.buffer.write(b'\\xffa' * (1 << 19))"}))
	}
	cmd := exec.Command(microbox, "batch", "--jobs", "2", "--max-held", "32M", "--timeout", "20s")
	cmd.Stdin = strings.NewReader(b.String())
	var out bytes.Buffer
	cmd.Stdout = &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// batch's own high-water mark (wait4's would count its children's).
	var hwm int64
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	for running := true; running; {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			running = false
		case <-time.After(50 * time.Millisecond):
			if kb := statusKiB(cmd.Process.Pid, "VmHWM"); kb > hwm {
				hwm = kb
			}
		}
	}
	lines := decodeLines(t, out.Bytes())
	if len(lines) != 101 {
		t.Fatalf("%d results", len(lines))
	}
	for _, r := range lines[1:] {
		if len(r.Stdout) > 1<<20 || !r.StdoutTruncated {
			t.Fatalf("result %s: %d bytes of stdout (truncated %v), over the 1M limit", r.ID, len(r.Stdout), r.StdoutTruncated)
		}
	}
	if hwm > 128<<10 {
		t.Fatalf("batch reached %d MiB resident, over its bound (32 MiB held, a result per job, and itself; 400 MiB before the bound)", hwm>>10)
	}
	t.Logf("batch's peak RSS: %d MiB", hwm>>10)
}

// statusKiB is a "Name: N kB" field of /proc/pid/status; 0 if unreadable.
func statusKiB(pid int, name string) int64 {
	data, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == name+":" {
			n, _ := strconv.ParseInt(f[1], 10, 64)
			return n
		}
	}
	return 0
}
