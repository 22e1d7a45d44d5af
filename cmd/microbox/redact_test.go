package main

// Output redaction (package redact) through the real binary.

import (
	"fmt"
	"strings"
	"testing"

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
