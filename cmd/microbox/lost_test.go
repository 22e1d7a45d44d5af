package main

// Results never lost: exec whose result cannot be written says so and
// exits 125 (in-process and through a server); a batch writes each
// result line whole or not at all, and one stopped by a signal writes only
// finished results, which --resume (or --skip) completes with every task
// run exactly once.

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/microbox/microbox/result"
)

// exec's stdout on a full device (/dev/full): the result (--json) or the
// program's streamed output is lost, so the exit status is 125, not the
// verdict's 0, with one line on stderr saying what was lost and why. A
// run that owed nothing on stdout is not failed for it.
func TestExecResultNotWritten(t *testing.T) {
	socket, _ := testServer(t)
	for _, where := range []struct{ name, socket string }{{"in-process", ""}, {"server", socket}} {
		for _, c := range []struct {
			args []string
			want int
			lost string
		}{
			{[]string{"--json", "-c", "print(1)"}, result.ExitSandboxError, "the result could not be written"},
			{[]string{"-c", "print(1)"}, result.ExitSandboxError, "the program's stdout could not be written"},
			{[]string{"-c", "raise SystemExit(3)"}, 3, ""},
		} {
			name := where.name + " " + strings.Join(c.args, " ")
			full, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			cmd := client(where.socket, c.args...)
			var stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = full, &stderr
			err = cmd.Run()
			full.Close()
			code := 0
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			msg := stderr.String()
			if code != c.want {
				t.Errorf("%s: exit %d, want %d; stderr %q", name, code, c.want, msg)
			}
			if c.lost == "" {
				if msg != "" {
					t.Errorf("%s: stderr %q, want none", name, msg)
				}
				continue
			}
			if strings.Count(msg, "\n") != 1 || !strings.HasSuffix(msg, "\n") ||
				!strings.Contains(msg, c.lost) || !strings.Contains(msg, "no space left on device") {
				t.Errorf("%s: stderr %q, want one line with %q and the cause", name, msg, c.lost)
			}
		}
	}
}

// tinyTmpfs mounts a tmpfs of size bytes in a directory of the test's own,
// unmounted when the test ends.
func tinyTmpfs(t *testing.T, size int) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "full")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=%d", size)); err != nil {
		t.Skipf("mount a tmpfs (root needed): %v", err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, 0); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}

// A batch whose results disk fills stops with exit 125, leaves no partial
// line (whether the results go to -o FILE or to a stdout redirected to a
// file), and its message names the task of the file's last line.
func TestBatchFullDiskLeavesWholeLines(t *testing.T) {
	var tasks []any
	for i := range 30 {
		tasks = append(tasks, obj{"id": fmt.Sprintf("t%d", i), "code": "print('x' * 3000)"})
	}
	in := jsonl(t, tasks...)
	for _, toStdout := range []bool{false, true} {
		name := filepath.Join(tinyTmpfs(t, 48<<10), "results.jsonl")
		args := []string{"-o", name}
		if toStdout {
			args = []string{"--progress", "never"} // "-o -"
		}
		cmd := exec.Command(microbox, append([]string{"batch", "--jobs", "2"}, args...)...)
		cmd.Stdin = strings.NewReader(in)
		stdout, err := os.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		var stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = stdout, &stderr
		err = cmd.Run()
		stdout.Close()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		}
		if code != result.ExitSandboxError || !strings.Contains(stderr.String(), "no space left on device") {
			t.Fatalf("stdout %v: exit %d (%v), stderr %s; want %d and the full disk", toStdout, code, err, stderr.String(), result.ExitSandboxError)
		}
		out, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		if len(out) == 0 || !bytes.HasSuffix(out, []byte("\n")) {
			t.Fatalf("stdout %v: the results end in a partial line (or there are none): ...%q", toStdout, out[max(0, len(out)-80):])
		}
		lines := decodeLines(t, out)
		last := lines[len(lines)-1]
		want := fmt.Sprintf("task with id %s on input line %d", last.ID, last.Line)
		if msg := stderr.String(); len(lines) == len(tasks) || strings.Count(msg, "\n") != 1 || !strings.Contains(msg, want) {
			t.Errorf("stdout %v: %d whole results; stderr %q, want one line naming the %s", toStdout, len(lines), msg, want)
		}
	}
}

// A batch stopped by SIGTERM writes only the results of the runs that
// finished: none says "interrupted". --resume on its results file then
// runs every other task once (tasks without an id, or sharing one,
// included), and runs nothing when every task has its result; --skip past
// the last line does the same on a copy.
func TestBatchResumeAfterSIGTERM(t *testing.T) {
	var tasks []any
	for i := range 12 {
		sleep := 0.6 // the stop comes while these run
		if i < 3 {
			sleep = 0
		}
		tasks = append(tasks, obj{"id": i % 10, "code": fmt.Sprintf("import time; time.sleep(%g); print(%d)", sleep, i)})
	}
	tasks = append(tasks, obj{"code": "print('no id')"}, "not a task")
	dir := t.TempDir()
	taskFile, out := filepath.Join(dir, "tasks.jsonl"), filepath.Join(dir, "results.jsonl")
	if err := os.WriteFile(taskFile, []byte(jsonl(t, tasks...)), 0o644); err != nil {
		t.Fatal(err)
	}
	stopBatchAfter(t, 3, "batch", "--jobs", "2", "-o", out, taskFile)
	first := readResults(t, out)
	if len(first) < 3 || len(first) >= len(tasks) {
		t.Fatalf("%d results before the stop, want some but not all of %d", len(first), len(tasks))
	}
	for _, r := range first {
		if r.Status != result.StatusOK {
			t.Errorf("line %d: %s %v written for a run the stop cut short", r.Line, r.Status, deref(r.Error))
		}
	}
	skipCopy := filepath.Join(dir, "skip.jsonl")
	copyResults(t, out, skipCopy)

	_, code := runMicrobox(t, "", "batch", "--jobs", "2", "--resume", "-o", out, taskFile)
	checkEachOnce(t, "--resume", code, readResults(t, out), len(tasks))
	_, code = runMicrobox(t, "", "batch", "--resume", "-o", out, taskFile)
	checkEachOnce(t, "--resume again", code, readResults(t, out), len(tasks))

	skip := first[len(first)-1].Line
	more, code := runMicrobox(t, "", "batch", "--jobs", "2", "--skip", fmt.Sprint(skip), taskFile)
	f, err := os.OpenFile(skipCopy, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write(more)
	f.Close()
	checkEachOnce(t, "--skip", code, readResults(t, skipCopy), len(tasks))
}

// stopBatchAfter starts microbox args, waits for n result lines in its
// results file (the last argument but one) and two programs running, and
// stops it with SIGTERM.
func stopBatchAfter(t *testing.T, n int, args ...string) {
	t.Helper()
	cmd := exec.Command(microbox, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	out := args[len(args)-2]
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		data, _ := os.ReadFile(out)
		if bytes.Count(data, []byte("\n")) >= n {
			break
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("no %d results: %s", n, stderr.String())
		}
	}
	waitForJails(t, cmd.Process.Pid, 2)
	cmd.Process.Signal(syscall.SIGTERM)
	err := cmd.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 128+int(syscall.SIGTERM) {
		t.Fatalf("exit %v, want %d; stderr %s", err, 128+int(syscall.SIGTERM), stderr.String())
	}
}

func readResults(t *testing.T, name string) []batchLine {
	t.Helper()
	data, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	if len(data) > 0 && !bytes.HasSuffix(data, []byte("\n")) {
		t.Fatalf("%s ends in a partial line", name)
	}
	return decodeLines(t, data)
}

func copyResults(t *testing.T, from, to string) {
	t.Helper()
	data, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// checkEachOnce checks that a batch that ended with code left exactly one
// result for each of n tasks (input lines 1..n), each its task's own, none
// interrupted.
func checkEachOnce(t *testing.T, how string, code int, lines []batchLine, n int) {
	t.Helper()
	if code != 0 {
		t.Errorf("%s: exit %d", how, code)
	}
	seen := map[int]int{}
	for _, r := range lines {
		seen[r.Line]++
		var want string
		switch {
		case r.Line == n: // "not a task"
			if r.Status != result.StatusSandboxError || r.Error == nil || !strings.Contains(*r.Error, "not a valid task") {
				t.Errorf("%s: line %d: %s %v", how, r.Line, r.Status, deref(r.Error))
			}
			continue
		case r.Line == n-1:
			want = "no id\n"
		default:
			want = fmt.Sprintf("%d\n", r.Line-1)
		}
		if r.Status != result.StatusOK || r.Stdout != want {
			t.Errorf("%s: line %d: %s %q %v, want ok %q", how, r.Line, r.Status, r.Stdout, deref(r.Error), want)
		}
	}
	for line := 1; line <= n; line++ {
		if seen[line] != 1 {
			t.Errorf("%s: input line %d has %d results, want 1", how, line, seen[line])
		}
	}
}

// An evaluation whose results disk is full writes no results file at all
// (it is put in place whole or not at all), leaves no temporary file, and
// says that no results were written.
func TestEvalFullDiskWritesNoResults(t *testing.T) {
	dir := tinyTmpfs(t, 4096)
	if err := os.WriteFile(filepath.Join(dir, "filler"), make([]byte, 4096), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "results.jsonl")
	cmd := exec.Command(microbox, "eval", "stdio", "-k", "1", "--problems", filepath.Join(evalTestdata, "stdio_problems.jsonl"),
		"--timeout", "5s", "--cpu-time", "1s", "--mem", "64M", "-o", out, filepath.Join(evalTestdata, "stdio_samples.jsonl"))
	_, stderr, code := runCmd(t, cmd)
	if code != result.ExitSandboxError || !strings.Contains(string(stderr), "no space left on device") ||
		!strings.Contains(string(stderr), "no results were written") {
		t.Errorf("exit %d, stderr %s; want %d, the full disk and that no results were written", code, stderr, result.ExitSandboxError)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("files left beside the filler: %v", entries)
	}
}
