// Package risk is the static risk report on a program, made before it
// runs (microbox check, and a run's MaxRisk). The program's source is
// parsed by Python's own ast module in a sandbox of its own
// (analyzer.py), never on the host; the analyzer only finds the constructs
// rules names, and the points, score and level are decided here, where
// they are documented.
//
// This is a heuristic report, not a security boundary: the sandbox is.
package risk

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/microbox/microbox/internal/policy/helper"
	"github.com/microbox/microbox/nsjail"
	"github.com/microbox/microbox/result"
)

//go:embed analyzer.py
var analyzerSource string

// Report is what the analysis says about a program before it runs: the
// risky constructs found, their points and the total's level.
type Report struct {
	Score    int       `json:"score"`
	Level    string    `json:"level"`
	Findings []Finding `json:"findings"`
	// SyntaxError is set when the code does not parse; Score is then 0.
	SyntaxError *SyntaxError `json:"syntax_error"`
}

// Finding is one distinct risky construct: the first place it occurs
// and how many times it does. Points count once per construct.
type Finding struct {
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

// rule is one construct the analyzer looks for and what it costs.
type rule struct {
	kind   string // import, builtin, call, attribute, loop
	name   string // the module, function, attribute or loop
	points int
}

// rules is the documented table (README, "Risk report"). Imports are
// matched by top-level package, so os covers os.path.
var rules = []rule{
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

// levels are the thresholds, highest first: a score of at least min
// has that level.
var levels = []struct {
	min   int
	level string
}{{60, "critical"}, {30, "high"}, {10, "medium"}, {1, "low"}, {0, "none"}}

func level(score int) string {
	for _, l := range levels {
		if score >= l.min {
			return l.level
		}
	}
	return "none"
}

// analyzerRules is the analyzer's argument: the names to look for, by rule.
func analyzerRules() string {
	byRule := map[string][]string{"import": {}, "builtin": {}, "call": {}, "attribute": {}}
	for _, r := range rules {
		if r.kind != "loop" {
			byRule[r.kind] = append(byRule[r.kind], r.name)
		}
	}
	b, _ := json.Marshal(byRule)
	return string(b)
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

// AnalysisError is an analysis that did not finish because of the code
// (it made the parser time out or run out of memory, say) rather than the
// sandbox. Unknown risk is not low: a caller with a threshold refuses the
// code.
type AnalysisError struct{ msg string }

func (e *AnalysisError) Error() string { return e.msg }

// Analyze runs the analyzer on code in a sandbox shaped like base (a
// helper run) and scores what it found. A sandbox that cannot start is a
// plain error; code the analyzer cannot get through is an *AnalysisError.
func Analyze(ctx context.Context, base nsjail.Options, code []byte) (*Report, error) {
	res, err := helper.Run(ctx, base, code, analyzerSource, analyzerRules())
	if err != nil {
		return nil, err
	}
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
		return nil, &AnalysisError{"the risk analyzer could not finish: " + why}
	}
	var out analyzerOutput
	if err := json.Unmarshal([]byte(res.Stdout), &out); err != nil {
		return nil, fmt.Errorf("risk analysis: unreadable analyzer output: %w", err)
	}
	return scoreFindings(out), nil
}

// scoreFindings turns the analyzer's findings into a report: points from
// rules, counted once per construct, highest first.
func scoreFindings(out analyzerOutput) *Report {
	rep := &Report{Findings: []Finding{}, SyntaxError: out.SyntaxError}
	for _, f := range out.Findings {
		points, ok := rulePoints(f.Rule, f.Name)
		if !ok {
			continue
		}
		rep.Findings = append(rep.Findings, Finding{Rule: f.Rule, Name: f.Name, Points: points,
			Count: f.Count, Line: f.Line, Col: f.Col})
		rep.Score += points
	}
	slices.SortStableFunc(rep.Findings, func(a, b Finding) int {
		if a.Points != b.Points {
			return b.Points - a.Points
		}
		return a.Line - b.Line
	})
	rep.Level = level(rep.Score)
	return rep
}

func rulePoints(kind, name string) (int, bool) {
	for _, r := range rules {
		if r.kind == kind && r.name == name {
			return r.points, true
		}
	}
	return 0, false
}

// WriteText writes the report for people: the score and level, then one
// line per construct.
func (rep *Report) WriteText(w io.Writer) {
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

// Summary is one line naming the costliest constructs.
func (rep *Report) Summary() string {
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
