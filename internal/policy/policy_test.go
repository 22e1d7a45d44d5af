package policy

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/microbox/microbox/field"
	"github.com/microbox/microbox/internal/policy/redact"
	"github.com/microbox/microbox/nsjail"
	"github.com/microbox/microbox/result"
)

func TestProgramSource(t *testing.T) {
	s := &nsjail.Spec{Argv: []string{"/usr/bin/python3", "-c", "print(1)", "arg"}}
	if code, ok := programSource(s); !ok || string(code) != "print(1)" {
		t.Fatalf("-c: %q %v", code, ok)
	}
	s = &nsjail.Spec{Argv: []string{"/usr/bin/python3", "/tmp/main.py", "-c"},
		Files: []nsjail.File{{Path: "/tmp/data"}, {Path: "/tmp/main.py", Data: []byte("x = 1")}}}
	if code, ok := programSource(s); !ok || string(code) != "x = 1" {
		t.Fatalf("file: %q %v", code, ok)
	}
}

// The layers run the spec with the caller's runner, mask its output and
// log the run; the result's JSON has the layers' fields after the run's.
func TestRun(t *testing.T) {
	log := filepath.Join(t.TempDir(), "audit.jsonl")
	o := &Options{Redact: true, AuditLog: log, AuditInclude: []string{"output"}, PID: 42}
	s := &nsjail.Spec{Argv: []string{"/usr/bin/python3", "-c", "print('a@b.io')"}}
	ly, err := o.Prepare(context.Background(), nsjail.Options{}, s)
	if err != nil {
		t.Fatal(err)
	}
	if !s.Capture {
		t.Fatal("output logged but not captured")
	}
	ran := 0
	run := func(_ context.Context, got *nsjail.Spec) *result.Result {
		ran++
		code := 0
		return &result.Result{Status: result.StatusOK, ExitCode: &code, Stdout: "a@b.io\n"}
	}
	res, err := ly.Run(context.Background(), run, s)
	if err != nil || ran != 1 {
		t.Fatalf("ran %d times, error %v", ran, err)
	}
	b, _ := json.Marshal(res)
	if !strings.HasPrefix(string(b), `{"status":"ok",`) ||
		!strings.HasSuffix(string(b), `"redactions":[{"kind":"email","count":1}]}`) || res.Stdout != "[REDACTED_EMAIL]\n" {
		t.Fatalf("result %s", b)
	}
	line, _ := os.ReadFile(log)
	var rec struct {
		PID    int    `json:"pid"`
		Stdout string `json:"stdout"`
		Policy struct {
			Redact bool `json:"redact"`
		} `json:"policy"`
	}
	if err := json.Unmarshal(line, &rec); err != nil || rec.PID != 42 || rec.Stdout != "[REDACTED_EMAIL]\n" || !rec.Policy.Redact {
		t.Fatalf("audit line %s (%v)", line, err)
	}
}

// Bad options name their field; run-time messages spell it as the run's
// caller does.
func TestErrorsNameFields(t *testing.T) {
	neg := -1
	for _, c := range []struct {
		o    Options
		want string
	}{
		{Options{MaxRisk: &neg}, "MaxRisk"},
		{Options{DenyModules: []string{"1os"}}, "DenyModules"},
		{Options{Guard: "docker"}, "Guard"},
		{Options{RedactPatterns: []string{"x"}}, "RedactPatterns"},
		{Options{AuditInclude: []string{"code"}}, "AuditInclude"},
	} {
		base := nsjail.Options{Getenv: func(string) string { return "" }}
		s := &nsjail.Spec{Argv: []string{"/usr/bin/python3", "-c", "1"}, Workdir: "/tmp"}
		var fe *field.Error
		if _, err := c.o.Prepare(context.Background(), base, s); !errors.As(err, &fe) || fe.Name != c.want {
			t.Errorf("%+v: error %v, want one naming %s", c.o, err, c.want)
		}
	}
	zero := 0
	ly, err := (&Options{MaxRisk: &zero}).Prepare(context.Background(), nsjail.Options{
		FieldNames: func(f string) string { return map[string]string{"MaxRisk": "--max-risk"}[f] }}, &nsjail.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	res, _ := ly.Run(context.Background(), nil, &nsjail.Spec{Argv: []string{"/usr/bin/python3", "missing.py"}})
	if res.Status != result.StatusSandboxError || *res.Error != "--max-risk: cannot find the program's source" {
		t.Fatalf("status %s error %q", res.Status, *res.Error)
	}
}

// costlyPattern costs tens of microseconds a byte of output that holds a
// "z" (its compiled program has two thousand instructions).
const costlyPattern = `slow=[\s\S]{0,1000}z`

var costlyOutput = strings.Repeat("abcdefghijklmnopqrstuvwxy\n", 40<<10) + "z"

// prepareCostly is a run with a costly custom pattern and the budget.
func prepareCostly(t *testing.T, budget time.Duration) (*Layers, *nsjail.Spec) {
	t.Helper()
	o := &Options{RedactPatterns: []string{costlyPattern}, RedactBudget: budget}
	s := &nsjail.Spec{Argv: []string{"/usr/bin/python3", "-c", "1"}}
	ly, err := o.Prepare(context.Background(), nsjail.Options{
		FieldNames: func(f string) string { return map[string]string{"RedactBudget": "--redact-budget"}[f] }}, s)
	if err != nil {
		t.Fatal(err)
	}
	return ly, s
}

func costlyRun(context.Context, *nsjail.Spec) *result.Result {
	return &result.Result{Status: result.StatusOK, Stdout: costlyOutput, Stderr: "a@b.io\n"}
}

// Redaction that runs out of its budget withholds the output, and the
// result and the error say so, naming the budget as the run's caller
// spells it; the verdict stands.
func TestRunRedactBudget(t *testing.T) {
	const budget = 100 * time.Millisecond
	ly, s := prepareCostly(t, budget)
	start := time.Now()
	res, err := ly.Run(context.Background(), costlyRun, s)
	if took := time.Since(start); took > 10*budget {
		t.Errorf("took %v for a budget of %v", took, budget)
	}
	if err == nil || !strings.Contains(err.Error(), "--redact-budget 100ms") {
		t.Errorf("error %v, want one naming --redact-budget 100ms", err)
	}
	if !res.RedactionStopped || res.Error == nil || *res.Error != err.Error() || res.Status != result.StatusOK ||
		res.Stdout != redact.Withheld || res.Stderr != redact.Withheld || res.Redactions != nil {
		b, _ := json.Marshal(res)
		t.Fatalf("result %.300s", b)
	}
	if _, err := (&Options{Redact: true, RedactBudget: -time.Second}).Prepare(context.Background(), nsjail.Options{}, s); err == nil {
		t.Error("a negative budget accepted")
	}
}

// The caller leaving (ctx ending) stops redaction at once, whatever is
// left of the budget.
func TestRunRedactStopsWhenCallerLeaves(t *testing.T) {
	ly, s := prepareCostly(t, time.Hour)
	ctx, cancel := context.WithCancelCause(context.Background())
	gone := errors.New("the caller left")
	run := func(ctx context.Context, s *nsjail.Spec) *result.Result {
		time.AfterFunc(50*time.Millisecond, func() { cancel(gone) })
		return costlyRun(ctx, s)
	}
	start := time.Now()
	res, err := ly.Run(ctx, run, s)
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("returned %v after it began, 50 ms before the caller left", took)
	}
	if err == nil || !strings.Contains(err.Error(), "the caller left") || !res.RedactionStopped || res.Stdout != redact.Withheld {
		t.Fatalf("error %v, stopped %v, stdout %.40q", err, res.RedactionStopped, res.Stdout)
	}
}
