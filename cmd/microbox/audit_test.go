package main

// The audit log (package audit) through the real binary.

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/microbox/microbox/internal/policy/audit"
	"github.com/microbox/microbox/result"
)

// readAudit decodes every line of an audit log, failing on any line that
// is not one whole JSON object.
func readAudit(t *testing.T, path string) []map[string]any {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var recs []map[string]any
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var rec map[string]any
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatalf("line %d is not one JSON object (%v): %.200s", len(recs)+1, err, sc.Text())
		}
		recs = append(recs, rec)
	}
	return recs
}

func sha(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

func TestAuditLog(t *testing.T) {
	log := filepath.Join(t.TempDir(), "audit.jsonl")
	code := "print('secret output')"
	r := py(t, code, "--audit-log", log, "--mem", "128M", "--timeout", "3s")
	wantStatus(t, r, result.StatusOK)
	// From the environment, and a second line appended.
	cmd := exec.Command(microbox, "exec", "--timeout", "1s", "-c", "while True: pass")
	cmd.Env = append(os.Environ(), audit.Env+"="+log)
	cmd.Run()

	recs := readAudit(t, log)
	if len(recs) != 2 {
		t.Fatalf("%d lines, want 2", len(recs))
	}
	first, second := recs[0], recs[1]
	if first["code_sha256"] != sha(code) || first["status"] != "ok" || first["program"] != "-c" ||
		first["uid"] != float64(os.Getuid()) || first["time"] == "" {
		t.Fatalf("first line %v", first)
	}
	limits := first["limits"].(map[string]any)
	if limits["memory_bytes"] != float64(128<<20) || limits["timeout_ms"] != float64(3000) {
		t.Fatalf("limits %v", limits)
	}
	if second["status"] != "timeout" || second["limit"] != "wall" {
		t.Fatalf("second line %v", second)
	}
	// Never the code or the output unless asked.
	data, _ := os.ReadFile(log)
	if bytes.Contains(data, []byte("secret output")) {
		t.Fatalf("the log holds the code or its output: %s", data)
	}
	fi, _ := os.Stat(log)
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("log mode %v, want 0600", fi.Mode())
	}
}

// With --audit-include the line holds the code and the (redacted) output.
func TestAuditInclude(t *testing.T) {
	log := filepath.Join(t.TempDir(), "audit.jsonl")
	file := filepath.Join(t.TempDir(), "main.py")
	os.WriteFile(file, []byte("print('mail bob@example.com')\n"), 0o644)
	runMicrobox(t, "", "exec", "--audit-log", log, "--audit-include", "code,output", "--redact", "--max-risk", "50", file)
	recs := readAudit(t, log)
	if len(recs) != 1 {
		t.Fatalf("%d lines", len(recs))
	}
	rec := recs[0]
	if rec["code"] != "print('mail bob@example.com')\n" || rec["stdout"] != "mail [REDACTED_EMAIL]\n" || rec["program"] != file {
		t.Fatalf("line %v", rec)
	}
	if rec["risk_score"] != float64(0) || fmt.Sprint(rec["redactions"]) != "[map[count:1 kind:email]]" {
		t.Fatalf("risk %v redactions %v", rec["risk_score"], rec["redactions"])
	}
	policy := rec["policy"].(map[string]any)
	if policy["redact"] != true || policy["max_risk"] != float64(50) {
		t.Fatalf("policy %v", policy)
	}
}

// Rejected runs are logged too; a log that cannot be opened refuses the
// run before it starts.
func TestAuditRefusals(t *testing.T) {
	log := filepath.Join(t.TempDir(), "audit.jsonl")
	r := py(t, "import ctypes", "--audit-log", log, "--max-risk", "0", "--deny-modules", "ctypes")
	wantStatus(t, r, result.StatusRejected)
	recs := readAudit(t, log)
	if len(recs) != 1 || recs[0]["status"] != "rejected" || recs[0]["risk_score"] != float64(25) {
		t.Fatalf("lines %v", recs)
	}
	if p := recs[0]["policy"].(map[string]any); fmt.Sprint(p["deny_modules"]) != "[ctypes]" {
		t.Fatalf("policy %v", p)
	}
	out, code := runMicrobox(t, "", "exec", "--audit-log", "/nonexistent/dir/audit.jsonl", "-c", "print('ran')")
	if code != result.ExitSandboxError || len(out) != 0 {
		t.Fatalf("exit %d stdout %q", code, out)
	}
	r = execJSON(t, "", "--audit-include", "code", "-c", "1")
	wantStatus(t, r, result.StatusSandboxError) // include without a log
}
