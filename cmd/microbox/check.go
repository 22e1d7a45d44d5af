package main

// The risk report: `microbox check` and `exec --max-risk N`. The program's
// source is parsed by Python's own ast module in a sandbox of its own
// (pyguard/analyzer.py), never on the host; the analyzer only finds the
// constructs riskRules names, and the points, score and level are decided
// here, where they are documented.

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/microbox/microbox/cgroup"
	"github.com/microbox/microbox/internal/interrupt"
	"github.com/microbox/microbox/nsjail"
	"github.com/microbox/microbox/result"
)

//go:embed pyguard/analyzer.py
var analyzerSource string

// RiskReport is what `microbox check` says about a program before it runs:
// the risky constructs found, their points and the total's level.
type RiskReport struct {
	Score    int           `json:"score"`
	Level    string        `json:"level"`
	Findings []RiskFinding `json:"findings"`
	// SyntaxError is set when the code does not parse; Score is then 0.
	SyntaxError *SyntaxError `json:"syntax_error"`
}

// RiskFinding is one distinct risky construct: the first place it occurs
// and how many times it does. Points count once per construct.
type RiskFinding struct {
	Rule   string `json:"rule"`
	Name   string `json:"name"`
	Points int    `json:"points"`
	Count  int    `json:"count"`
	Line   int    `json:"line"`
	Col    int    `json:"col"`
}

// SyntaxError is where and why the code failed to parse.
type SyntaxError struct {
	Message string `json:"message"`
	Line    int    `json:"line"`
	Col     int    `json:"col"`
}

// riskRule is one construct the analyzer looks for and what it costs.
type riskRule struct {
	rule   string // import, builtin, call, attribute, loop
	name   string // the module, function, attribute or loop
	points int
}

// riskRules is the documented table (README, "Risk report"). Imports are
// matched by top-level package, so os covers os.path.
var riskRules = []riskRule{
	// Native code and process control: the shortest ways out of Python.
	{"import", "ctypes", 25}, {"import", "_ctypes", 25}, {"import", "cffi", 25},
	{"import", "subprocess", 15}, {"import", "_posixsubprocess", 15}, {"import", "pty", 15},
	{"import", "posix", 15}, {"import", "socket", 15}, {"import", "_socket", 15},
	{"import", "os", 10}, {"import", "multiprocessing", 10}, {"import", "signal", 10},
	{"import", "shutil", 10}, {"import", "importlib", 10}, {"import", "builtins", 10},
	{"import", "urllib", 10}, {"import", "http", 10}, {"import", "ftplib", 10},
	{"import", "smtplib", 10}, {"import", "requests", 10}, {"import", "asyncio", 5},
	{"import", "sys", 5}, {"import", "inspect", 5}, {"import", "gc", 5},
	{"import", "pickle", 5}, {"import", "marshal", 5}, {"import", "code", 5},
	{"import", "resource", 5}, {"import", "mmap", 5}, {"import", "threading", 3},
	// Dynamic code and reflection.
	{"builtin", "eval", 15}, {"builtin", "exec", 15}, {"builtin", "__import__", 15},
	{"builtin", "compile", 10}, {"builtin", "breakpoint", 5},
	{"builtin", "getattr", 5}, {"builtin", "setattr", 5}, {"builtin", "delattr", 5},
	{"builtin", "globals", 5}, {"builtin", "locals", 3}, {"builtin", "vars", 3},
	{"builtin", "open", 3},
	{"call", "import_module", 15},
	// The attributes sandbox escapes walk (also as strings, for getattr).
	{"attribute", "__subclasses__", 20}, {"attribute", "__globals__", 20},
	{"attribute", "__builtins__", 20}, {"attribute", "__code__", 15},
	{"attribute", "__import__", 15}, {"attribute", "f_globals", 15},
	{"attribute", "f_locals", 15}, {"attribute", "f_builtins", 15},
	{"attribute", "f_back", 15}, {"attribute", "gi_frame", 15},
	{"attribute", "tb_frame", 15}, {"attribute", "cr_frame", 15},
	{"attribute", "__closure__", 10}, {"attribute", "__bases__", 10},
	{"attribute", "__base__", 10}, {"attribute", "__mro__", 10},
	{"attribute", "__getattribute__", 10}, {"attribute", "__reduce__", 10},
	{"attribute", "__reduce_ex__", 10}, {"attribute", "__loader__", 10},
	{"attribute", "__spec__", 10}, {"attribute", "__class__", 5},
	{"attribute", "__dict__", 5},
	// A loop that only ends by break or by the time limit.
	{"loop", "while True", 5},
}

// riskLevels are the thresholds, highest first: a score of at least min
// has that level.
var riskLevels = []struct {
	min   int
	level string
}{{60, "critical"}, {30, "high"}, {10, "medium"}, {1, "low"}, {0, "none"}}

func riskLevel(score int) string {
	for _, l := range riskLevels {
		if score >= l.min {
			return l.level
		}
	}
	return "none"
}

// riskTimeout bounds one analysis: parsing even megabytes of code takes
// well under a second.
const riskTimeout = 5 * time.Second

// analyzerRules is the analyzer's argument: the names to look for, by rule.
func analyzerRules() string {
	byRule := map[string][]string{"import": {}, "builtin": {}, "call": {}, "attribute": {}}
	for _, r := range riskRules {
		if r.rule != "loop" {
			byRule[r.rule] = append(byRule[r.rule], r.name)
		}
	}
	b, _ := json.Marshal(byRule)
	return string(b)
}

// analyzerOptions are the sandboxed run that analyzes code: the code on
// stdin, the rules as the analyzer's argument.
func analyzerOptions(base nsjail.Options, code []byte) nsjail.Options {
	return helperOptions(base, code, analyzerSource, analyzerRules())
}

// helperOptions are a sandboxed run of microbox's own Python code (the
// risk analyzer, the guard's compilation) on behalf of a run of base: the
// same root, interpreter, cgroup, limits and seccomp filter (so the code
// is handled by the Python that would run the program), input on stdin,
// output captured, and the interpreter isolated from the environment (-I)
// and from site (-S).
func helperOptions(base nsjail.Options, stdin []byte, code string, args ...string) nsjail.Options {
	o := base
	o.Code, o.File, o.Args, o.PythonFlags = &code, "", args, []string{"-I", "-S"}
	o.Stdin, o.Stdout, o.Stderr, o.Capture = bytes.NewReader(stdin), nil, nil, true
	o.OutputLimit, o.Timeout, o.CPUTime = 4<<20, riskTimeout, 0
	o.Workdir, o.Env, o.HostFiles, o.Files = "/tmp", nil, nil, nil
	o.Trace, o.Before = false, nil
	return o
}

// analyzerOutput is what analyzer.py prints.
type analyzerOutput struct {
	Findings []struct {
		Rule  string `json:"rule"`
		Name  string `json:"name"`
		Count int    `json:"count"`
		Line  int    `json:"line"`
		Col   int    `json:"col"`
	} `json:"findings"`
	SyntaxError *SyntaxError `json:"syntax_error"`
}

// analysisError is an analysis that did not finish because of the code
// (it made the parser time out or run out of memory, say) rather than the
// sandbox. --max-risk treats it as a refusal: unknown risk is not low.
type analysisError struct{ msg string }

func (e *analysisError) Error() string { return e.msg }

// analyzeRisk runs the analyzer on code in a sandbox shaped like base and
// scores what it found. A sandbox that cannot start is a plain error; code
// the analyzer cannot get through is an *analysisError.
func analyzeRisk(ctx context.Context, base nsjail.Options, code []byte) (*RiskReport, error) {
	o := analyzerOptions(base, code)
	s, err := o.Spec()
	if err != nil {
		return nil, err
	}
	res := nsjail.Run(ctx, s)
	switch res.Status {
	case result.StatusOK:
	case result.StatusSandboxError:
		return nil, fmt.Errorf("risk analysis: %s", *res.Error)
	default:
		why := string(res.Status)
		if res.Limit != "" {
			why += " (" + res.Limit + " limit)"
		}
		if tail := result.LastLine(res.Stderr); tail != "" {
			why += ": " + tail
		}
		return nil, &analysisError{"the risk analyzer could not finish: " + why}
	}
	var out analyzerOutput
	if err := json.Unmarshal([]byte(res.Stdout), &out); err != nil {
		return nil, fmt.Errorf("risk analysis: unreadable analyzer output: %w", err)
	}
	return scoreFindings(out), nil
}

// scoreFindings turns the analyzer's findings into a report: points from
// riskRules, counted once per construct, highest first.
func scoreFindings(out analyzerOutput) *RiskReport {
	rep := &RiskReport{Findings: []RiskFinding{}, SyntaxError: out.SyntaxError}
	for _, f := range out.Findings {
		points, ok := rulePoints(f.Rule, f.Name)
		if !ok {
			continue
		}
		rep.Findings = append(rep.Findings, RiskFinding{Rule: f.Rule, Name: f.Name, Points: points,
			Count: f.Count, Line: f.Line, Col: f.Col})
		rep.Score += points
	}
	slices.SortStableFunc(rep.Findings, func(a, b RiskFinding) int {
		if a.Points != b.Points {
			return b.Points - a.Points
		}
		return a.Line - b.Line
	})
	rep.Level = riskLevel(rep.Score)
	return rep
}

func rulePoints(rule, name string) (int, bool) {
	for _, r := range riskRules {
		if r.rule == rule && r.name == name {
			return r.points, true
		}
	}
	return 0, false
}

// programSource is the code a spec runs: the -c string, or the contents of
// the script file it copies in.
func programSource(s *nsjail.Spec) ([]byte, bool) {
	for i := 1; i < len(s.Argv); i++ {
		a := s.Argv[i]
		switch {
		case a == "-c" && i+1 < len(s.Argv):
			return []byte(s.Argv[i+1]), true
		case strings.HasPrefix(a, "-"):
			continue
		}
		for _, f := range s.Files {
			if f.Path == a {
				return f.Data, true
			}
		}
		return nil, false
	}
	return nil, false
}

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
	base, err := f.options()
	if err != nil {
		return err
	}
	ctx, stop := interrupt.Context(context.Background())
	defer stop()
	if !base.NoCgroup {
		cgroup.GC(base.CgroupParent)
	}
	rep, err := analyzeRisk(ctx, base, code)
	if err != nil {
		return flagError(err)
	}
	if f.json {
		printJSON(rep)
	} else {
		printRisk(os.Stdout, rep)
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

// options are the sandbox the analysis runs in: exec's defaults and
// root, a tighter process limit and scratch area, the default filter.
func (f *riskCheckFlags) options() (nsjail.Options, error) {
	o := nsjail.Defaults()
	o.FieldNames = flagName
	o.RootFS, o.Python, o.TmpfsSize, o.Pids = f.rootfs, f.python, 16<<20, 16
	o.NoCgroup, o.CgroupParent = f.noCgroup, f.cgroupParent
	if f.noCgroup {
		o.Memory, o.CPUs, o.Pids = 0, 0, 0
	}
	// The root exec would choose, so that the same parser judges the code.
	return o, flagError(o.Prepare())
}

// printRisk writes a report for people: the score and level, then one
// line per construct.
func printRisk(w *os.File, rep *RiskReport) {
	if se := rep.SyntaxError; se != nil {
		fmt.Fprintf(w, "syntax error: %s (line %d, column %d)\n", se.Message, se.Line, se.Col)
		return
	}
	fmt.Fprintf(w, "risk score %d (%s)\n", rep.Score, rep.Level)
	for _, f := range rep.Findings {
		times := ""
		if f.Count > 1 {
			times = fmt.Sprintf(" (%d times)", f.Count)
		}
		fmt.Fprintf(w, "  %+4d  line %-5d %s %s%s\n", f.Points, f.Line, f.Rule, f.Name, times)
	}
}

// riskSummary is one line naming the costliest constructs, for stderr.
func riskSummary(rep *RiskReport) string {
	var parts []string
	for i, f := range rep.Findings {
		if i == 3 {
			parts = append(parts, "...")
			break
		}
		parts = append(parts, fmt.Sprintf("%s %s (+%d, line %d)", f.Rule, f.Name, f.Points, f.Line))
	}
	return strings.Join(parts, ", ")
}
