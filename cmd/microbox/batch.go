package main

// `microbox batch`: many programs, one supervisor. Tasks arrive as JSON
// lines, run on a fixed number of workers (each run in its own jail, as
// `exec` would run it) and leave as JSON lines: exec's result plus the
// task's id.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/microbox/microbox/cgroup"
	"github.com/microbox/microbox/field"
	"github.com/microbox/microbox/internal/interrupt"
	"github.com/microbox/microbox/nsjail"
	"github.com/microbox/microbox/result"
)

// batchFlags are `microbox batch`'s options: exec's sandbox flags, which
// are every task's defaults, and the batch's own.
type batchFlags struct {
	execFlags
	pool     poolFlags
	output   string
	order    string
	inFlight int
}

// poolFlags are the options batch and eval share.
type poolFlags struct {
	jobs     int
	progress string
	pin      bool
}

// Values of --order.
const (
	orderInput     = "input"
	orderCompleted = "completed"
)

func batchCommand() *cobra.Command {
	f := &batchFlags{}
	c := &cobra.Command{
		Use:   "batch [flags] [TASKS.jsonl]",
		Short: "Run many programs, one JSON task per line in, one JSON result per line out",
		Long: `Run many programs in one microbox process, each in a fresh sandbox.

Tasks are JSON objects, one per line (from TASKS.jsonl, or stdin when it is
absent or "-"):

  {"id": any JSON, "code": "..." | "file": "path", "stdin": "...", "args": [...],
   "files": {"name": "content"}, "env": {"K": "V"}, "mem": "256M",
   "timeout": "3s", "cpu_time": "1s", "cpus": 1, "pids": 128, "output_limit": "1M"}

Unset fields take the values of the flags below (exec's flags, exec's
defaults). Sizes and durations may also be numbers (bytes, seconds). Each
result is exec's --json object with the task's "id" and input "line" first.
A line that is not a valid task gets a sandbox_error result naming the
problem; the batch goes on. Blank lines are skipped.

Exit status: 0 when every task got its result, 125 when the batch could
not start or its input or output failed, 128+N when signal N (Ctrl-C)
stopped it: runs in progress are killed (their results say sandbox_error,
"interrupted"), tasks not yet started get no result, results so far are
flushed, and no process or cgroup is left behind.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			return runBatch(f, c, args)
		},
	}
	f.sandboxFlags(c)
	f.pool.register(c)
	fl := c.Flags()
	fl.StringVarP(&f.output, "output", "o", "-", `write results to this file ("-": stdout)`)
	fl.StringVar(&f.order, "order", orderInput, "result order: input (the tasks' order) or completed (as runs finish)")
	fl.IntVar(&f.inFlight, "max-pending", 1024, "with --order input, how many tasks may be started or held ahead of the oldest unfinished one (bounds memory)")
	return c
}

// register adds the pool's flags to c.
func (p *poolFlags) register(c *cobra.Command) {
	fl := c.Flags()
	fl.IntVarP(&p.jobs, "jobs", "j", runtime.NumCPU(), "runs at once (each gets --cpus of CPU bandwidth)")
	fl.StringVar(&p.progress, "progress", "auto", "progress bar on stderr: auto (when stderr is a terminal and results do not go to it), always, never")
	fl.BoolVar(&p.pin, "pin", true, "when --jobs is at most the number of CPUs, pin each worker's runs to a CPU of their own (--pin=false: let the kernel place them)")
}

// check validates the pool's flags.
func (p *poolFlags) check() error {
	if p.jobs < 1 {
		return usagef("--jobs %d: give at least 1", p.jobs)
	}
	switch p.progress {
	case "auto", "always", "never":
		return nil
	}
	return usagef("--progress %q: want auto, always or never", p.progress)
}

// showProgress decides whether to draw a progress bar; resultsToTTY says
// whether the results themselves go to a terminal, where a bar would
// garble them.
func (p *poolFlags) showProgress(resultsToTTY bool) bool {
	switch p.progress {
	case "always":
		return true
	case "never":
		return false
	}
	return isTerminal(os.Stderr) && !resultsToTTY
}

func isTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// base is the options every task starts from: the command line's limits,
// files and environment, prepared once for the whole batch (root chosen,
// filter compiled, files read).
func (f *execFlags) base(c *cobra.Command) (nsjail.Options, error) {
	o, err := f.options(c)
	if err != nil {
		return o, err
	}
	o.Capture = true
	return o, flagError(o.Prepare())
}

func runBatch(f *batchFlags, c *cobra.Command, args []string) error {
	if err := f.pool.check(); err != nil {
		return err
	}
	if f.order != orderInput && f.order != orderCompleted {
		return usagef("--order %q: want input or completed", f.order)
	}
	if f.inFlight < 1 {
		return usagef("--max-pending %d: give at least 1", f.inFlight)
	}
	base, err := f.base(c)
	if err != nil {
		return err
	}
	in, total, err := openTasks(args)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := createOutput(f.output)
	if err != nil {
		return err
	}
	sigCtx, stop := interrupt.Context(context.Background())
	defer stop()
	ctx, cancel := context.WithCancelCause(sigCtx)
	defer cancel(nil)
	p, err := newPool(ctx, base, f.pool)
	if err != nil {
		return err
	}
	bar := newProgress(f.pool.showProgress(f.output == "-" && isTerminal(os.Stdout)), total, "runs", statusOrder)
	err = streamBatch(ctx, cancel, p, in, out, bar, f.order == orderInput, f.inFlight)
	bar.finish(ctx.Err() != nil)
	if cerr := out.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("write results: %w", cerr)
	}
	if err != nil {
		return err
	}
	if sig := interrupt.Cause(ctx); sig != 0 {
		os.Exit(128 + int(sig))
	}
	return nil
}

// openTasks opens the task file ("-" or none: stdin) and counts its tasks
// when it is a regular file, for the progress bar's ETA; -1 when unknown.
func openTasks(args []string) (*os.File, int64, error) {
	in := os.Stdin
	if len(args) == 1 && args[0] != "-" {
		var err error
		if in, err = os.Open(args[0]); err != nil {
			return nil, 0, usagef("%s: %v; give the path of a JSONL task file, or - for stdin", args[0], unwrapPath(err))
		}
	}
	return in, countTasks(in), nil
}

// countTasks counts the non-blank lines from f's offset to its end and
// seeks back; -1 if f is not a regular file.
func countTasks(f *os.File) int64 {
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return -1
	}
	start, err := f.Seek(0, io.SeekCurrent)
	if err != nil {
		return -1
	}
	defer f.Seek(start, io.SeekStart)
	r := bufio.NewReaderSize(f, 1<<16)
	var n int64
	blank := true
	for {
		// A line longer than the buffer comes in several chunks.
		chunk, err := r.ReadSlice('\n')
		blank = blank && len(bytes.TrimSpace(chunk)) == 0
		if err == bufio.ErrBufferFull {
			continue
		}
		if !blank {
			n++
		}
		blank = true
		if err == io.EOF {
			return n
		}
		if err != nil {
			return -1
		}
	}
}

// unwrapPath drops the path from an *os.PathError, which the caller's
// message already names.
func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// createOutput opens the results file ("-": stdout).
func createOutput(name string) (io.WriteCloser, error) {
	if name == "-" {
		return nopCloser{os.Stdout}, nil
	}
	f, err := os.Create(name)
	if err != nil {
		return nil, usagef("--output %s: %v", name, unwrapPath(err))
	}
	return f, nil
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }

// ---------------------------------------------------------------------------
// Tasks.

// task is one line of batch input; a nil field takes the command line's
// value.
type task struct {
	ID          json.RawMessage   `json:"id"`
	Code        *string           `json:"code"`
	File        *string           `json:"file"`
	Stdin       *string           `json:"stdin"`
	Args        []string          `json:"args"`
	Files       map[string]string `json:"files"`
	Env         map[string]string `json:"env"`
	Mem         *quantity         `json:"mem"`
	Timeout     *quantity         `json:"timeout"`
	CPUTime     *quantity         `json:"cpu_time"`
	CPUs        *float64          `json:"cpus"`
	Pids        *int64            `json:"pids"`
	OutputLimit *quantity         `json:"output_limit"`
}

// quantity is a size or a duration, written as a string ("256M", "3s") or
// as a number (bytes, seconds).
type quantity struct {
	text   string
	number *float64
}

func (q *quantity) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		return json.Unmarshal(b, &q.text)
	}
	var n float64
	if err := json.Unmarshal(b, &n); err != nil {
		return errors.New(`want a string such as "3s" or "256M", or a number of seconds or bytes`)
	}
	q.number = &n
	return nil
}

// duration reads q as the duration of Options' field name; a number is
// seconds.
func (q *quantity) duration(name string) (time.Duration, error) {
	if q.number == nil {
		return nsjail.ParseDuration(name, q.text)
	}
	n := *q.number
	if n < 0 || math.IsInf(n, 0) || n*float64(time.Second) > math.MaxInt64 {
		return 0, field.Errorf(name, "{"+name+"} %v: give a non-negative number of seconds", n)
	}
	return time.Duration(n * float64(time.Second)), nil
}

// size reads q as the size of Options' field name; a number is bytes.
func (q *quantity) size(name string) (int64, error) {
	if q.number == nil {
		return nsjail.ParseSize(name, q.text)
	}
	n := *q.number
	if n <= 0 || n != math.Trunc(n) || n > math.MaxInt64/2 {
		return 0, field.Errorf(name, "{"+name+"} %v: give a positive whole number of bytes", n)
	}
	return int64(n), nil
}

// decodeTask parses one input line strictly: one JSON object, known
// fields only (a misspelt limit must not silently fall back to the
// default). The id is returned even when the rest is invalid, so that the
// error result can be matched to its task.
func decodeTask(line []byte) (*task, json.RawMessage, error) {
	invalid := func(err error) error {
		return fmt.Errorf("not a valid task: %s", strings.TrimPrefix(err.Error(), "json: "))
	}
	var value json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(line))
	if err := dec.Decode(&value); err != nil {
		return nil, nil, invalid(err)
	}
	var idOnly struct {
		ID json.RawMessage `json:"id"`
	}
	json.Unmarshal(value, &idOnly)
	if _, err := dec.Token(); err != io.EOF {
		return nil, idOnly.ID, invalid(errors.New("more than one JSON value on the line"))
	}
	strict := json.NewDecoder(bytes.NewReader(value))
	strict.DisallowUnknownFields()
	t := &task{}
	if err := strict.Decode(t); err != nil {
		return nil, idOnly.ID, invalid(err)
	}
	return t, t.ID, nil
}

// taskKeys are the fields of Options a task sets, by its JSON keys.
var taskKeys = map[string]string{
	"Code": "code", "File": "file", "Args": "args", "Files": "files", "Env": "env",
	"Memory": "mem", "Timeout": "timeout", "CPUTime": "cpu_time", "CPUs": "cpus",
	"Pids": "pids", "OutputLimit": "output_limit",
}

// fieldName spells a field of Options in a task's error: as the task's
// key when the task set it, else as the batch's flag.
func (t *task) fieldName(f string) string {
	set := map[string]bool{
		"Code": t.Code != nil, "File": t.File != nil, "Args": t.Args != nil, "Files": t.Files != nil,
		"Env": t.Env != nil, "Memory": t.Mem != nil, "Timeout": t.Timeout != nil,
		"CPUTime": t.CPUTime != nil, "CPUs": t.CPUs != nil, "Pids": t.Pids != nil,
		"OutputLimit": t.OutputLimit != nil,
	}
	if key, ok := taskKeys[f]; ok && (set[f] || f == "Code" || f == "File") {
		return `"` + key + `"`
	}
	return flagName(f)
}

// taskSpec applies a task to a copy of the batch's base options and
// returns its run's Spec.
func taskSpec(base nsjail.Options, t *task) (*nsjail.Spec, error) {
	o := base
	o.FieldNames = t.fieldName
	o.Env = slices.Clone(base.Env)
	o.Files = slices.Clone(base.Files)
	o.Code, o.Args = t.Code, t.Args
	if t.File != nil {
		if *t.File == "" {
			return nil, errors.New(`"file" is empty: give the path of an existing file`)
		}
		o.File = *t.File
	}
	if err := taskFiles(&o, t.Files); err != nil {
		return nil, err
	}
	if err := taskEnv(&o, t.Env); err != nil {
		return nil, err
	}
	if err := taskLimits(&o, t); err != nil {
		return nil, err
	}
	if t.Stdin != nil {
		o.Stdin = strings.NewReader(*t.Stdin)
	}
	return o.Spec()
}

// taskFiles adds the task's files: a relative name is put in the working
// directory, an absolute one where it says (under /tmp or the working
// directory; the jail checks).
func taskFiles(o *nsjail.Options, files map[string]string) error {
	for _, name := range sortedKeys(files) {
		if name == "" {
			return errors.New(`"files": a file name is empty`)
		}
		dst := name
		if !path.IsAbs(name) {
			dst = path.Join(o.Workdir, name)
		}
		o.Files = append(o.Files, nsjail.File{Path: dst, Data: []byte(files[name]), Mode: 0o644})
	}
	return nil
}

// taskEnv adds the task's variables over the command line's environment.
func taskEnv(o *nsjail.Options, env map[string]string) error {
	for _, k := range sortedKeys(env) {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return fmt.Errorf(`"env": %q is not a variable name`, k)
		}
		o.Env = append(o.Env, k+"="+env[k])
	}
	return nil
}

// taskLimits applies the task's limits (Options refuses those that need
// a cgroup when the batch runs without one).
func taskLimits(o *nsjail.Options, t *task) error {
	var err error
	for _, q := range []struct {
		q    *quantity
		name string
		d    *time.Duration
		n    *int64
	}{
		{t.Timeout, "Timeout", &o.Timeout, nil}, {t.CPUTime, "CPUTime", &o.CPUTime, nil},
		{t.OutputLimit, "OutputLimit", nil, &o.OutputLimit}, {t.Mem, "Memory", nil, &o.Memory},
	} {
		switch {
		case q.q == nil:
		case q.d != nil:
			*q.d, err = q.q.duration(q.name)
		default:
			*q.n, err = q.q.size(q.name)
		}
		if err != nil {
			return err
		}
	}
	if t.CPUs != nil {
		o.CPUs = *t.CPUs
	}
	if t.Pids != nil {
		o.Pids = *t.Pids
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// ---------------------------------------------------------------------------
// The pool: a fixed number of workers, each running one jail at a time.

// item is one task on its way through a batch.
type item struct {
	seq  int    // position among the tasks, from 0: the output order
	line int    // line number in the input (batch), copied into the result
	raw  []byte // the task's line, decoded by the worker; or
	task *task  // the task already decoded (eval)

	res     *batchResult // set by the worker
	skipped bool         // the batch was interrupted before it started
}

// label is what the progress bar counts the item as: its status, or ""
// if it never ran.
func (it *item) label() string {
	if it.skipped {
		return ""
	}
	return string(it.res.Status)
}

// batchResult is one line of batch output: exec's JSON result, after the
// task's id and input line.
type batchResult struct {
	ID   json.RawMessage `json:"id"`
	Line int             `json:"line,omitempty"`
	*result.Result
}

// pool runs items on a fixed number of workers.
type pool struct {
	ctx  context.Context
	base nsjail.Options // prepared
	jobs int
	cpus []int // with --pin, worker i's runs go to cpus[i]
}

// newPool prepares a pool; runs whose microbox died earlier leave cgroups
// behind, which are removed once here, not before every run.
func newPool(ctx context.Context, base nsjail.Options, pf poolFlags) (*pool, error) {
	if !base.NoCgroup {
		cgroup.GC(base.CgroupParent)
	}
	p := &pool{ctx: ctx, base: base, jobs: pf.jobs}
	if pf.pin {
		cpus, err := allowedCPUs()
		if err != nil {
			return nil, err
		}
		// With more workers than CPUs, some would share one: the kernel
		// balances that better than a fixed assignment.
		if pf.jobs <= len(cpus) {
			p.cpus = cpus
		}
	}
	return p, nil
}

// allowedCPUs lists the CPUs this process may run on.
func allowedCPUs() ([]int, error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return nil, fmt.Errorf("--pin: read the allowed CPUs: %w", err)
	}
	var cpus []int
	for cpu := range len(set) * 64 {
		if set.IsSet(cpu) {
			cpus = append(cpus, cpu)
		}
	}
	return cpus, nil
}

// start runs the items from todo and sends each, with its result, to the
// channel it returns, which is closed once todo is closed and drained.
// Fair shares: each run's cgroup caps it at --cpus, and with --pin each
// worker's runs have a CPU of their own. The cap alone bounds a run's
// average, not its bursts: a run of many processes can spend its quota on
// every CPU at once early in each CFS period, slowing its neighbours by a
// quarter or more (BENCHMARKS.md); pinned, it cannot leave its CPU.
func (p *pool) start(todo <-chan *item) <-chan *item {
	done := make(chan *item, p.jobs)
	var wg sync.WaitGroup
	for w := range p.jobs {
		wg.Go(func() {
			if p.cpus != nil {
				pinWorker(p.cpus[w])
			}
			// A spawner per worker, started from its thread: a jail then
			// costs a clone rather than an exec of microbox. If it cannot
			// start, each run tries on its own and reports why.
			sp, err := nsjail.NewSpawner()
			if err == nil {
				defer sp.Close()
			}
			for it := range todo {
				p.runItem(it, sp)
				done <- it
			}
		})
	}
	go func() {
		wg.Wait()
		close(done)
	}()
	return done
}

// pinWorker ties the calling goroutine to its OS thread and that thread to
// cpu. The worker's spawner is started from that thread, and the jails it
// clones, with their programs, inherit the affinity. It is a placement, not a boundary: a
// program may widen its own affinity (cpu.max still caps what it uses).
// The thread is never unlocked, so it ends with the worker instead of
// returning pinned to the runtime's pool.
func pinWorker(cpu int) {
	runtime.LockOSThread()
	var set unix.CPUSet
	set.Set(cpu)
	unix.SchedSetaffinity(0, &set)
}

// runItem decodes and runs one task with the spawner sp (nil: one of its
// own); a task that cannot run gets a sandbox_error result saying why.
func (p *pool) runItem(it *item, sp *nsjail.Spawner) {
	if p.ctx.Err() != nil {
		it.skipped = true
		return
	}
	t, id := it.task, json.RawMessage(nil)
	var err error
	if t == nil {
		t, id, err = decodeTask(it.raw)
	} else {
		id = t.ID
	}
	it.res = &batchResult{ID: id, Line: it.line}
	var s *nsjail.Spec
	if err == nil {
		s, err = taskSpec(p.base, t)
	}
	if err != nil {
		var name func(string) string // no task: no field to name
		if t != nil {
			name = t.fieldName
		}
		it.res.Result = result.SandboxError(field.Message(err, name))
	} else if sp != nil {
		it.res.Result = sp.Run(p.ctx, s)
	} else {
		it.res.Result = nsjail.Run(p.ctx, s)
	}
	if it.res.Seccomp == "" { // a spec refused before the jail was made
		it.res.Seccomp = p.base.SeccompMode()
	}
}

// ---------------------------------------------------------------------------
// Streaming: lines in, results out.

// streamBatch feeds the lines of in to the pool and writes the results to
// out, in input order or as they complete. With input order, at most
// window tasks are started or held ahead of the oldest unwritten one, so
// memory stays bounded however slow one task is.
func streamBatch(ctx context.Context, stop context.CancelCauseFunc, p *pool, in io.Reader, out io.Writer, bar *progress, ordered bool, window int) error {
	slots := make(chan struct{}, window)
	todo := make(chan *item)
	readErr := make(chan error, 1)
	go func() { readErr <- feedLines(ctx, in, todo, slots, bar) }()
	done := p.start(todo)
	w := newResultWriter(out, ordered)
	var writeErr error
	for it := range done {
		bar.add(it.label())
		if writeErr != nil {
			<-slots
			continue
		}
		n, err := w.put(it, len(done) == 0)
		for range n {
			<-slots
		}
		if err != nil {
			// Nobody is reading the results: stop the batch.
			writeErr = fmt.Errorf("write results: %w", err)
			stop(writeErr)
		}
	}
	if writeErr == nil {
		writeErr = w.flush()
	}
	if err := <-readErr; err != nil && writeErr == nil {
		return err
	}
	return writeErr
}

// feedLines sends each non-blank line of in as an item, taking a slot for
// each, until in ends or ctx is done; then it closes todo.
func feedLines(ctx context.Context, in io.Reader, todo chan<- *item, slots chan struct{}, bar *progress) error {
	defer close(todo)
	lines := make(chan lineOrErr)
	go readLines(ctx, in, lines)
	seq := 0
	for {
		var l lineOrErr
		select {
		case l = <-lines:
		case <-ctx.Done():
			return nil
		}
		if l.err == io.EOF {
			bar.setTotal(int64(seq))
			return nil
		}
		if l.err != nil {
			return fmt.Errorf("read tasks: %w", l.err)
		}
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			return nil
		}
		select {
		case todo <- &item{seq: seq, line: l.n, raw: l.text}:
			seq++
		case <-ctx.Done():
			<-slots
			return nil
		}
	}
}

type lineOrErr struct {
	n    int
	text []byte
	err  error
}

// readLines sends the non-blank lines of in, then its error (io.EOF at the
// end). It runs apart from feedLines so that an interrupt is not held up
// by a read from a silent stdin.
func readLines(ctx context.Context, in io.Reader, out chan<- lineOrErr) {
	r := bufio.NewReaderSize(in, 1<<16)
	for n := 1; ; n++ {
		text, err := r.ReadBytes('\n')
		if len(bytes.TrimSpace(text)) > 0 {
			select {
			case out <- lineOrErr{n: n, text: text}:
			case <-ctx.Done():
				return
			}
		}
		if err != nil {
			select {
			case out <- lineOrErr{err: err}:
			case <-ctx.Done():
			}
			return
		}
	}
}

// resultWriter writes results as JSON lines, in input order (holding those
// that finish early) or as they come.
type resultWriter struct {
	w       *bufio.Writer
	enc     *json.Encoder
	ordered bool
	next    int
	held    map[int]*item
}

func newResultWriter(out io.Writer, ordered bool) *resultWriter {
	bw := bufio.NewWriterSize(out, 1<<16)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	return &resultWriter{w: bw, enc: enc, ordered: ordered, held: map[int]*item{}}
}

// put takes a finished item and writes what can be written now; it
// returns how many items left the writer (written, or skipped because the
// batch stopped before they ran). It flushes when idle is set (no other
// result is waiting), so a reader streaming results sees each promptly.
func (w *resultWriter) put(it *item, idle bool) (int, error) {
	n := 0
	if !w.ordered {
		n = 1
		if err := w.write(it); err != nil {
			return n, err
		}
	} else {
		w.held[it.seq] = it
		for {
			next, ok := w.held[w.next]
			if !ok {
				break
			}
			delete(w.held, w.next)
			w.next++
			n++
			if err := w.write(next); err != nil {
				return n, err
			}
		}
	}
	if idle {
		return n, w.flush()
	}
	return n, nil
}

func (w *resultWriter) write(it *item) error {
	if it.skipped {
		return nil
	}
	return w.enc.Encode(it.res)
}

func (w *resultWriter) flush() error { return w.w.Flush() }
