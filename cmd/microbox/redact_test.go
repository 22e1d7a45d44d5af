package main

// Output redaction (package redact) through the real binary.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/microbox/microbox/internal/policy/redact"
	"github.com/microbox/microbox/result"
)

func TestRedactIntegration(t *testing.T) {
	code := `
import sys
print("key sk-proj-abcdefghijklmnopqrstuvwx12 for bob@example.com")
print("dsn mysql://root:toor@10.1.2.3/db", file=sys.stderr)
print("-----BEGIN EC PRIVATE KEY-----\nMHcCAQEE\n-----END EC PRIVATE KEY-----")
print("custom ticket=T-12345")`
	r := py(t, code, "--redact", "--redact-pattern", `ticket=T-\d+`)
	wantStatus(t, r, result.StatusOK)
	wantOut := "key [REDACTED_API_KEY] for [REDACTED_EMAIL]\n[REDACTED_PRIVATE_KEY]\ncustom ticket=[REDACTED_TICKET]\n"
	if r.Stdout != wantOut || r.Stderr != "dsn [REDACTED_CONNECTION_STRING]\n" {
		t.Fatalf("stdout %q stderr %q", r.Stdout, r.Stderr)
	}
	got := map[string]int{}
	for _, d := range r.Redactions {
		got[d.Kind] = d.Count
	}
	if fmt.Sprint(got) != "map[api_key:1 connection_string:1 email:1 private_key:1 ticket:1]" {
		t.Fatalf("redactions %v", r.Redactions)
	}
	// Without --json the output streams through the same masks.
	out, code2 := runMicrobox(t, "", "exec", "--redact", "-c", "print('a@b.io'); print('x', flush=True); print('10.0.0.9')")
	if code2 != 0 || string(out) != "[REDACTED_EMAIL]\nx\n[REDACTED_PRIVATE_IP]\n" {
		t.Fatalf("streamed: exit %d %q", code2, out)
	}
	// Nothing found: nothing listed; no --redact: nothing masked.
	if r := py(t, "print('hello')", "--redact"); r.Redactions != nil {
		t.Fatalf("redactions %v", r.Redactions)
	}
	if r := py(t, "print('a@b.io')"); r.Stdout != "a@b.io\n" {
		t.Fatalf("masked without --redact: %q", r.Stdout)
	}
}

// The output cap counts the program's raw bytes; redaction happens after.
func TestRedactKeepsOutputCap(t *testing.T) {
	r := py(t, "print('a@b.io ' * 100)", "--redact", "--output-limit", "70")
	wantStatus(t, r, result.StatusOutputLimit)
	if !r.StdoutTruncated || r.Limit != result.LimitStdout {
		t.Fatalf("truncated %v limit %q", r.StdoutTruncated, r.Limit)
	}
	// 70 raw bytes are ten addresses; the masked text is longer.
	if got := strings.Count(r.Stdout, "[REDACTED_EMAIL]"); got != 10 || len(r.Redactions) != 1 || r.Redactions[0].Count != 10 {
		t.Fatalf("stdout %q redactions %v", r.Stdout, r.Redactions)
	}
}

// A server's redaction is bounded by its --redact-budget: a custom pattern
// whose search over a large output costs minutes of the server's CPU
// (two large compiled programs) is stopped at the budget, the output
// withheld (never sent unmasked), and the result, the error and the
// server's log say why; a cheap pattern over the same output is masked as
// ever. A caller that leaves stops the redaction of its run, whatever is
// left of the budget.
func TestRedactBudgetThroughServer(t *testing.T) {
	big := `print("abcdefghijklmnopqrstuvwxy\n" * 120000 + "z")` // 3 MB
	slow := []string{`slow=[\s\S]{0,1000}[\s\S]{0,1000}z`}
	s := startAPI(t, "--redact-budget", "300ms", "--output-limit", "4M")
	task, _ := json.Marshal(map[string]any{"code": big, "redact_patterns": slow})
	start := time.Now()
	r := s.runTask(t, string(task))
	if took := time.Since(start); took > 30*time.Second {
		t.Errorf("answered after %v", took)
	}
	if r.Status != result.StatusOK || !r.RedactionStopped || r.Stdout != redact.Withheld || r.Redactions != nil ||
		r.Error == nil || !strings.Contains(*r.Error, "the server's --redact-budget 300ms") {
		t.Fatalf("status %s, stopped %v, stdout %.60q, error %v", r.Status, r.RedactionStopped, r.Stdout, deref(r.Error))
	}
	// The server logs it before it answers, but the test reads the log
	// through a pipe, which may lag behind the answer.
	waitFor(t, "the server's log to say redaction stopped", func() bool {
		return strings.Contains(s.log.String(), "redaction stopped")
	})
	task, _ = json.Marshal(map[string]any{"code": big, "redact_patterns": []string{`end=y\nz`}})
	if r := s.runTask(t, string(task)); r.RedactionStopped || r.Error != nil || !strings.HasSuffix(r.Stdout, "x[REDACTED_END]\n") {
		t.Fatalf("cheap pattern: stopped %v, error %v, stdout ends %q", r.RedactionStopped, deref(r.Error), r.Stdout[max(len(r.Stdout)-40, 0):])
	}

	s = startAPI(t, "--redact-budget", "10m", "--output-limit", "4M")
	task, _ = json.Marshal(map[string]any{"code": big, "redact_patterns": slow})
	client := &http.Client{Timeout: 2 * time.Second} // then it leaves
	if resp, err := client.Post(s.url+"/v1/runs", "application/json", bytes.NewReader(task)); err == nil {
		resp.Body.Close()
		t.Fatalf("answered %s before the caller left: the output is not costly enough", resp.Status)
	}
	deadline := time.Now().Add(20 * time.Second) // the whole search takes minutes
	for !strings.Contains(s.log.String(), "redaction stopped: the caller closed its connection") {
		if time.Now().After(deadline) {
			t.Fatalf("redaction went on after the caller left:\n%s", s.log)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
