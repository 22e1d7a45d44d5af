package audit

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/microbox/microbox/field"
	"github.com/microbox/microbox/nsjail"
	"github.com/microbox/microbox/result"
)

// Concurrent writers, each with a line far above PIPE_BUF: every line
// arrives whole (one write(2) per line on an O_APPEND file).
func TestAuditConcurrentWriters(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	const writers, lines = 8, 25
	big := strings.Repeat("x", 64<<10)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range lines {
				l, err := Open(Options{AuditLog: path, AuditInclude: []string{"output"}}, &nsjail.Options{}, 1, Policy{})
				if err != nil {
					t.Error(err)
					return
				}
				code := fmt.Sprintf("%d-%d", w, i)
				s := &nsjail.Spec{Argv: []string{"/usr/bin/python3", "-c", code}}
				out := Outcome{Result: &result.Result{Status: result.StatusOK, Stdout: big}}
				if err := l.Write(s, []byte(code), out); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	recs := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	seen := map[string]bool{}
	for n, line := range recs {
		var rec record
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("line %d is not one JSON object (%v): %.200s", n+1, err, line)
		}
		seen[rec.CodeSHA256] = true
	}
	if len(recs) != writers*lines || len(seen) != writers*lines {
		t.Fatalf("%d lines, %d distinct, want %d", len(recs), len(seen), writers*lines)
	}
}

// The log is named by the options, else by the caller's environment, and
// relative names start in the caller's directory; the program is named by
// its host file. What cannot be logged refuses the run, naming the field.
func TestOpen(t *testing.T) {
	dir := t.TempDir()
	base := &nsjail.Options{Dir: dir, File: "main.py", Getenv: func(k string) string {
		if k == Env {
			return "env.jsonl"
		}
		return ""
	}}
	l, err := Open(Options{}, base, 7, Policy{})
	if err != nil || l == nil {
		t.Fatalf("log %v, error %v", l, err)
	}
	l.f.Close()
	if l.program != filepath.Join(dir, "main.py") || l.pid != 7 || l.CapturesOutput() {
		t.Fatalf("program %q pid %d output %v", l.program, l.pid, l.output)
	}
	if _, err := os.Stat(filepath.Join(dir, "env.jsonl")); err != nil {
		t.Fatalf("the log from the environment: %v", err)
	}
	noEnv := &nsjail.Options{Getenv: func(string) string { return "" }}
	if l, err := Open(Options{}, noEnv, 1, Policy{}); l != nil || err != nil {
		t.Fatalf("no log asked for: log %v, error %v", l, err)
	}
	for _, c := range []struct {
		o    Options
		want string
	}{
		{Options{AuditInclude: []string{"code"}}, "AuditInclude"},
		{Options{AuditLog: filepath.Join(dir, "x"), AuditInclude: []string{"env"}}, "AuditInclude"},
		{Options{AuditLog: filepath.Join(dir, "missing", "x")}, "AuditLog"},
	} {
		var fe *field.Error
		if _, err := Open(c.o, noEnv, 1, Policy{}); !errors.As(err, &fe) || fe.Name != c.want {
			t.Errorf("%+v: error %v, want one naming %s", c.o, err, c.want)
		}
	}
}
