package main

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// SandboxFusion's /run_code, against request/response pairs written from
// its documentation (testdata/sandboxfusion): code written for
// SandboxFusion gets the answers it expects, field by field.
func TestSandboxFusionPairs(t *testing.T) {
	files, err := filepath.Glob("testdata/sandboxfusion/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no recorded pairs: %v", err)
	}
	s := startAPI(t)
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			var pair struct {
				Request  json.RawMessage
				Status   int
				Response map[string]any
			}
			if err := json.Unmarshal(data, &pair); err != nil {
				t.Fatal(err)
			}
			code, body := s.post(t, "/run_code", string(pair.Request))
			var got map[string]any
			if err := json.Unmarshal(body, &got); err != nil {
				t.Fatalf("%d %s: %v", code, body, err)
			}
			for _, key := range []string{"run_result", "compile_result"} {
				if run, ok := got[key].(map[string]any); ok {
					if secs, ok := run["execution_time"].(float64); ok && secs > 0 {
						run["execution_time"] = "T"
					}
				}
			}
			if code != pair.Status || !reflect.DeepEqual(got, pair.Response) {
				t.Errorf("got %d %s\nwant %d %v", code, body, pair.Status, pair.Response)
			}
		})
	}
}

// Files sent to /run_code base64-encoded arrive byte for byte, every byte
// value included (JSON strings would turn each byte from 0x80 up into
// U+FFFD).
func TestSandboxFusionBinaryFiles(t *testing.T) {
	s := startAPI(t)
	blob := make([]byte, 1024)
	for i := range blob {
		blob[i] = byte(i)
	}
	sum := sha256.Sum256(blob)
	req, _ := json.Marshal(map[string]any{
		"language": "python",
		"code":     "import hashlib; d = open('blob.bin', 'rb').read(); print(len(d), hashlib.sha256(d).hexdigest())",
		"files":    map[string]string{"blob.bin": base64.StdEncoding.EncodeToString(blob)},
	})
	code, body := s.post(t, "/run_code", string(req))
	var got struct {
		Status    string
		RunResult struct{ Stdout string } `json:"run_result"`
	}
	if err := json.Unmarshal(body, &got); err != nil || code != 200 {
		t.Fatalf("%d %s: %v", code, body, err)
	}
	if want := fmt.Sprintf("1024 %x\n", sum); got.Status != "Success" || got.RunResult.Stdout != want {
		t.Errorf("status %s stdout %q, want %q", got.Status, got.RunResult.Stdout, want)
	}
}

// A compile error on /run_code is SandboxFusion's: Failed, the compiler's
// return code and messages in compile_result, and no run_result (the
// program did not run).
func TestSandboxFusionCompileError(t *testing.T) {
	s := startAPI(t)
	code, body := s.post(t, "/run_code", `{"code": "int main() { return undeclared; }", "language": "cpp"}`)
	var got struct {
		Status        string
		CompileResult *struct {
			Status     string
			ReturnCode *int `json:"return_code"`
			Stderr     string
		} `json:"compile_result"`
		RunResult *struct{} `json:"run_result"`
	}
	if err := json.Unmarshal(body, &got); err != nil || code != 200 {
		t.Fatalf("%d %s: %v", code, body, err)
	}
	c := got.CompileResult
	if got.Status != "Failed" || got.RunResult != nil || c == nil || c.Status != "Finished" ||
		c.ReturnCode == nil || *c.ReturnCode == 0 || !strings.Contains(c.Stderr, "undeclared") {
		t.Errorf("compile error: %s", body)
	}
}
