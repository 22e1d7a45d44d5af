package main

// `microbox check`: the risk report on a program (package risk), without
// running it.

import (
	"context"
	"os"

	"github.com/spf13/cobra"

	"github.com/microbox/microbox/cgroup"
	"github.com/microbox/microbox/internal/interrupt"
	"github.com/microbox/microbox/internal/policy/risk"
	"github.com/microbox/microbox/nsjail"
)

// riskCheckFlags are `microbox check`'s options: the root and interpreter
// the code would run on, and the cgroup to analyze it under.
type riskCheckFlags struct {
	json         bool
	code         string
	python       string
	rootfs       string
	noCgroup     bool
	cgroupParent string
}

func checkCommand() *cobra.Command {
	f := &riskCheckFlags{}
	c := &cobra.Command{
		Use:   "check [flags] (FILE.py | -c CODE)",
		Short: "Report a program's risky constructs, with a score, without running it",
		Long: `Parse a program with Python's own ast module, inside a sandbox, and report
its risky constructs (imports of os, subprocess, socket, ctypes..., eval and
exec, dunder attributes such as __globals__ and __subclasses__, reflection,
while True) with points, a total score and a level: none, low (1-9), medium
(10-29), high (30-59), critical (60+). The program is never run.

This is a heuristic report, not a security boundary: the sandbox is.

Exit status: 0 when the code was analyzed, 1 when it has a syntax error,
125 when it could not be analyzed.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			return runRiskCheck(f, c, args)
		},
	}
	fl := c.Flags()
	fl.BoolVar(&f.json, "json", false, "print the report as one JSON object")
	fl.StringVarP(&f.code, "code", "c", "", "check this code instead of a file")
	fl.StringVar(&f.python, "python", "/usr/bin/python3", "interpreter path inside the root (its parser decides what is valid)")
	fl.StringVar(&f.rootfs, "rootfs", "", "prepared root filesystem, chosen as exec chooses it (default: $MICROBOX_ROOTFS, else /var/lib/microbox/rootfs if it exists, else the host's /usr)")
	fl.BoolVar(&f.noCgroup, "no-cgroup", false, "analyze without a cgroup (no memory limit on the parser)")
	fl.StringVar(&f.cgroupParent, "cgroup-parent", "", "cgroup under which the analysis's cgroup is made")
	return c
}

func runRiskCheck(f *riskCheckFlags, c *cobra.Command, args []string) error {
	code, err := f.source(c, args)
	if err != nil {
		return err
	}
	o := risk.Options{RootFS: f.rootfs, Python: f.python, NoCgroup: f.noCgroup, CgroupParent: f.cgroupParent,
		FieldNames: flagName}
	base, err := o.Base()
	if err != nil {
		return flagError(err)
	}
	ctx, stop := interrupt.Context(context.Background())
	defer stop()
	if !base.NoCgroup {
		cgroup.GC(base.CgroupParent)
	}
	rep, err := risk.Analyze(ctx, base, code)
	if err != nil {
		return flagError(err)
	}
	if f.json {
		printJSON(rep)
	} else {
		rep.WriteText(os.Stdout)
	}
	if rep.SyntaxError != nil {
		os.Exit(1)
	}
	return nil
}

// source reads the code to check.
func (f *riskCheckFlags) source(c *cobra.Command, args []string) ([]byte, error) {
	if c.Flags().Changed("code") {
		if len(args) > 0 {
			return nil, usagef("give a file or -c CODE, not both")
		}
		return []byte(f.code), nil
	}
	if len(args) == 0 {
		return nil, usagef("nothing to check: give a Python file or -c CODE (see microbox check --help)")
	}
	data, err := nsjail.ReadHostFile(args[0], args[0])
	return data, flagError(err)
}
