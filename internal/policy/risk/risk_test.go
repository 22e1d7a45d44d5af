package risk

import (
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
)

func TestRiskLevels(t *testing.T) {
	for score, want := range map[int]string{0: "none", 1: "low", 9: "low", 10: "medium", 29: "medium", 30: "high", 59: "high", 60: "critical", 500: "critical"} {
		if got := level(score); got != want {
			t.Errorf("level(%d) = %q, want %q", score, got, want)
		}
	}
}

// Each construct counts once however often it occurs; unknown findings
// (not in the table) are ignored; the costliest come first.
func TestRiskScore(t *testing.T) {
	var out analyzerOutput
	json.Unmarshal([]byte(`{"findings": [
		{"rule": "import", "name": "os", "count": 3, "line": 1, "col": 0},
		{"rule": "builtin", "name": "eval", "count": 2, "line": 5, "col": 4},
		{"rule": "import", "name": "numpy", "count": 1, "line": 2, "col": 0},
		{"rule": "attribute", "name": "__subclasses__", "count": 1, "line": 9, "col": 1}]}`), &out)
	rep := scoreFindings(out)
	if rep.Score != 10+15+20 || rep.Level != "high" {
		t.Fatalf("score %d level %s", rep.Score, rep.Level)
	}
	if len(rep.Findings) != 3 || rep.Findings[0].Name != "__subclasses__" || rep.Findings[2].Count != 3 {
		t.Fatalf("findings %+v", rep.Findings)
	}
}

// The analyzer is told every rule's names, and each rule once.
func TestAnalyzerRules(t *testing.T) {
	var byRule map[string][]string
	if err := json.Unmarshal([]byte(analyzerRules()), &byRule); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, r := range rules {
		key := r.kind + " " + r.name
		if seen[key] {
			t.Errorf("rule %s listed twice", key)
		}
		seen[key] = true
		if r.kind != "loop" && !strings.Contains(strings.Join(byRule[r.kind], " ")+" ", r.name+" ") {
			t.Errorf("rule %s not passed to the analyzer", key)
		}
	}
}

// People read the report as a score, then one line per construct; the
// summary names the costliest three.
func TestReportText(t *testing.T) {
	rep := &Report{Score: 45, Level: "high", Findings: []Finding{
		{Rule: "attribute", Name: "__subclasses__", Points: 20, Count: 1, Line: 9},
		{Rule: "builtin", Name: "eval", Points: 15, Count: 2, Line: 5},
		{Rule: "import", Name: "os", Points: 10, Count: 1, Line: 1},
		{Rule: "loop", Name: "while True", Points: 5, Count: 1, Line: 12}}}
	var b strings.Builder
	rep.WriteText(&b)
	want := "risk score 45 (high)\n" +
		"   +20  line 9     attribute __subclasses__\n" +
		"   +15  line 5     builtin eval (2 times)\n" +
		"   +10  line 1     import os\n" +
		"    +5  line 12    loop while True\n"
	if b.String() != want {
		t.Errorf("text %q, want %q", b.String(), want)
	}
	if got, want := rep.Summary(), "attribute __subclasses__ (+20, line 9), builtin eval (+15, line 5), import os (+10, line 1), ..."; got != want {
		t.Errorf("summary %q, want %q", got, want)
	}
	b.Reset()
	(&Report{SyntaxError: &SyntaxError{Message: "invalid syntax", Line: 2, Col: 3}}).WriteText(&b)
	if b.String() != "syntax error: invalid syntax (line 2, column 3)\n" {
		t.Errorf("syntax error text %q", b.String())
	}
}

// The analyzer runs in a sandbox: it finds what the rules name, reports a
// syntax error as one, and code it cannot get through is an
// AnalysisError.
func TestAnalyze(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for the sandbox's id maps (CI runs as root)")
	}
	base, err := (&Options{NoCgroup: true}).Base()
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Analyze(t.Context(), base, []byte("import os\neval('1')\n"))
	if err != nil || rep.Score != 25 || rep.Level != "medium" || len(rep.Findings) != 2 {
		t.Fatalf("report %+v, error %v", rep, err)
	}
	rep, err = Analyze(t.Context(), base, []byte("def (:"))
	if err != nil || rep.SyntaxError == nil || rep.Score != 0 {
		t.Fatalf("syntax error: report %+v, error %v", rep, err)
	}
	var aerr *AnalysisError
	if _, err = Analyze(t.Context(), base, []byte(strings.Repeat("-", 3000)+"1")); !errors.As(err, &aerr) {
		t.Fatalf("deep nesting: error %v, want an AnalysisError", err)
	}
}
