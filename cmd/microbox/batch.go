package main

// `microbox batch`: many programs, one supervisor (package batch). Tasks
// arrive as JSON lines, run on a fixed number of workers and leave as JSON
// lines: exec's result plus the task's id.

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/microbox/microbox/internal/batch"
	"github.com/microbox/microbox/internal/interrupt"
	"github.com/microbox/microbox/internal/policy"
	"github.com/microbox/microbox/internal/progress"
	"github.com/microbox/microbox/nsjail"
)

// batchFlags are `microbox batch`'s options: exec's sandbox flags, which
// are every task's defaults, and the batch's own.
type batchFlags struct {
	execFlags
	ceilings ceilingFlags
	pool     poolFlags
	output   string
	order    string
	inFlight int
	maxHeld  string
	skip     int
	resume   bool
	budget   budgetFlag
}

// poolFlags are the options batch and eval share.
type poolFlags struct {
	jobs     int
	progress string
	pin      bool
	shard    string
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
   "timeout": "3s", "cpu_time": "1s", "cpus": 1, "pids": 128, "output_limit": "1M",
   "tmpfs_size": "64M", "workdir": "/tmp", "deny_modules": [...], "allow_modules": [...],
   "guard": "humaneval", "redact": true, "redact_patterns": ["NAME=REGEX"], "max_risk": N,
   "zygote": true, "zygote_fallback": true, "preload": ["numpy"]}

` + taskKeysHelp() + `

Unset fields take the values of the flags below (exec's flags, exec's
defaults), which are also ceilings: a task may lower a limit, not raise it
past its --max-* flag (by default the flag's own value); a line over a
ceiling gets a result whose error names the key, the value and the
ceiling. Sizes and durations may also be numbers (bytes, seconds). Each
result is exec's --json object with the task's "id" and input "line" first.
A line that is not a valid task gets a sandbox_error result naming the
problem; the batch goes on. Blank lines are skipped.

With --order input (the default), results are held until every earlier
task's is written: at most --max-pending tasks and --max-held bytes of
results (their output, each stream capped by --output-limit) are kept
ahead of the oldest unfinished task; past either, no task starts until it
ends. So batch holds at most --max-held plus one result per job, whatever
the tasks print. Each result line is written whole or not at all. A
stopped batch (Ctrl-C, a kill, a full disk) is gone on with by --resume -o
FILE: the tasks without a result in FILE (matched by "line" and "id") run,
each once, their results appended. With input order the results written are
those of the first tasks, so --skip LINE, the "line" of the last result,
appending to the same results file, does the same. --shard I/N runs
every Nth task (for N machines sharing one batch); the shards' results
merge by "line" (jq -s 'sort_by(.line)[]' shard-*.jsonl). A task's "file"
entries are read with microbox's own rights: task input must be trusted.

Exit status: 0 when every task got its result, 125 when the batch could
not start or its input or output failed (a full disk: the message names
the last task written), 128+N when signal N (Ctrl-C) stopped it: runs in
progress are killed and, like tasks not yet started, get no result, the
results of those that finished are written, and no process or cgroup is
left behind.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			return runBatch(f, c, args)
		},
	}
	f.sandboxFlags(c)
	f.ceilings.register(c, "batch")
	f.pool.register(c)
	fl := c.Flags()
	fl.StringVarP(&f.output, "output", "o", "-", `write results to this file ("-": stdout)`)
	fl.StringVar(&f.order, "order", orderInput, "result order: input (the tasks' order) or completed (as runs finish)")
	fl.IntVar(&f.inFlight, "max-pending", 1024, "with --order input, how many tasks may be started or held ahead of the oldest unfinished one (bounds memory)")
	fl.StringVar(&f.maxHeld, "max-held", "256M", "with --order input, how many bytes of results may be held ahead of the oldest unfinished task (bounds memory)")
	f.budget.register(fl)
	fl.IntVar(&f.skip, "skip", 0, "pass over the input's first N lines (to go on after a stopped batch's last result, whose \"line\" is N); results keep the input's line numbers")
	fl.BoolVar(&f.resume, "resume", false, "go on with the results file of -o: run only the tasks it has no result for (matched by input line and id), appending")
	return c
}

// taskKeysHelp lists a task line's keys, from their declaration.
func taskKeysHelp() string {
	var keys []string
	for _, f := range batch.FieldsIn(batch.InLine) {
		keys = append(keys, f.Key)
	}
	return "Keys: " + strings.Join(keys, ", ") + "."
}

// register adds the pool's flags to c.
func (p *poolFlags) register(c *cobra.Command) {
	fl := c.Flags()
	fl.IntVarP(&p.jobs, "jobs", "j", runtime.NumCPU(), "runs at once (each gets --cpus of CPU bandwidth)")
	fl.StringVar(&p.progress, "progress", "auto", "progress bar on stderr: auto (when stderr is a terminal and results do not go to it), always, never")
	fl.BoolVar(&p.pin, "pin", true, "when --jobs is at most the number of CPUs, pin each worker's runs to a CPU of their own (--pin=false: let the kernel place them)")
	fl.StringVar(&p.shard, "shard", "", "run only shard I/N of the tasks: task k (from 0) is shard k mod N's, so N machines given 0/N ... N-1/N run each task once (a Kubernetes Indexed Job: --shard $(JOB_COMPLETION_INDEX)/N)")
}

// parseShard is --shard's shard (the whole batch when it is not given).
func (p *poolFlags) parseShard() (batch.Shard, error) {
	if p.shard == "" {
		return batch.Shard{}, nil
	}
	s, err := batch.ParseShard(p.shard)
	return s, flagError(err)
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

// newPool is the pool of workers whose tasks start from base and, if
// given, the policy layers (eval's), within limits; the layers a task asks for keep the
// module policy's bytecode in the user's cache, as exec does.
func (p *poolFlags) newPool(base nsjail.Options, given *policy.Options, limits batch.Limits) (*batch.WorkerPool, error) {
	layers := policy.Options{}
	if given != nil {
		layers = *given
	}
	layers.PID, layers.CacheDir = os.Getpid(), processInvocation().cacheDir()
	pool, err := batch.NewWorkerPool(base, batch.PoolOptions{Jobs: p.jobs, Pin: p.pin, Layers: layers, Limits: limits})
	return pool, flagError(err)
}

// bar is the progress bar of total runs (-1: unknown) counted in unit,
// drawn on stderr if asked, or by default if stderr is a terminal and the
// results do not go to one (resultsToTTY), where a bar would garble them.
func (p *poolFlags) bar(resultsToTTY bool, total int64, unit string, labels []string) *progress.Bar {
	var out io.Writer // nil: not drawn
	if p.progress == "always" || p.progress == "auto" && progress.IsTerminal(os.Stderr) && !resultsToTTY {
		out = os.Stderr
	}
	return progress.New(out, total, unit, labels)
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
	if f.skip < 0 {
		return usagef("--skip %d: give a number of lines, 0 or more", f.skip)
	}
	maxHeld, err := nsjail.ParseSize("MaxHeld", f.maxHeld)
	if err != nil {
		return flagError(err)
	}
	shard, err := f.pool.parseShard()
	if err != nil {
		return err
	}
	base, err := f.base(c)
	if err != nil {
		return err
	}
	limits, err := f.ceilings.limits(c, base)
	if err != nil {
		return err
	}
	name := "-"
	if len(args) == 1 {
		name = args[0]
	}
	files, err := f.open(name, shard)
	if err != nil {
		return err
	}
	defer files.in.Close()
	in, total, out, done := files.in, files.total, files.out, files.done
	ctx, stop := interrupt.Context(context.Background())
	defer stop()
	p, err := f.pool.newPool(base, &policy.Options{RedactBudget: time.Duration(f.budget)}, limits)
	if err != nil {
		return err
	}
	bar := f.pool.bar(f.output == "-" && progress.IsTerminal(os.Stdout), total, "runs", batch.StatusLabels())
	err = p.Stream(ctx, in, out, batch.StreamOptions{Ordered: f.order == orderInput, MaxPending: f.inFlight,
		MaxHeld: maxHeld, Skip: f.skip, Shard: shard, Progress: bar, Done: done, FinishedOnly: true})
	if cerr := out.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("write results: %w", cerr)
	}
	if err != nil {
		return flagError(err)
	}
	if sig := interrupt.Cause(ctx); sig != 0 {
		os.Exit(128 + int(sig))
	}
	return nil
}
