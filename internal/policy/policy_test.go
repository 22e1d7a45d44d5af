package policy

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/microbox/microbox/field"
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
