package main

import (
	"cmp"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// SandboxFusion's /run_code, against request/response pairs written from
// its documentation and code (testdata/sandboxfusion, whose README says
// the format): code written for SandboxFusion gets the answers it
// expects, field by field.
func TestSandboxFusionPairs(t *testing.T) {
	files, err := filepath.Glob("testdata/sandboxfusion/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no recorded pairs: %v", err)
	}
	t.Setenv("MY_POD_NAME", "sandbox-pod-0") // SandboxFusion's variable for executor_pod_name
	s := startAPI(t)
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			var pair fusionPair
			if err := json.Unmarshal(data, &pair); err != nil {
				t.Fatal(err)
			}
			pair.check(t, s)
		})
	}
}

// fusionPair is one recorded pair: a request (POST /run_code unless
// method and path say otherwise; body, when set, is sent as it is, for
// what is no JSON), the status and the response expected
// (execution_time as "T" when it is a number, the run's and the compile step's), and properties of fields
// too long or too variable to write out: at each dotted path, the string
// there has length bytes and matches pattern, and the response has "~".
type fusionPair struct {
	Method, Path string
	Request      json.RawMessage
	Body         *string
	Status       int
	Response     any
	Properties   map[string]struct {
		Length  *int
		Pattern string
	}
}

func (p *fusionPair) check(t *testing.T, s *apiServer) {
	t.Helper()
	method, path := cmp.Or(p.Method, http.MethodPost), cmp.Or(p.Path, "/run_code")
	send := string(p.Request)
	if p.Body != nil {
		send = *p.Body
	}
	code, body := s.do(t, method, path, send, nil)
	var got any
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatalf("%d %s: %v", code, body, err)
	}
	for _, key := range []string{"run_result", "compile_result"} {
		if run, ok := dig(got, key).(map[string]any); ok {
			if secs, ok := run["execution_time"].(float64); ok && secs > 0 {
				run["execution_time"] = "T"
			}
		}
	}
	for path, want := range p.Properties {
		keys := strings.Split(path, ".")
		parent, _ := dig(got, keys[:len(keys)-1]...).(map[string]any)
		v, ok := parent[keys[len(keys)-1]].(string)
		if !ok {
			t.Errorf("%s: not a string in %s", path, body)
			continue
		}
		if want.Length != nil && len(v) != *want.Length {
			t.Errorf("%s: %d bytes, want %d", path, len(v), *want.Length)
		}
		if !regexp.MustCompile(want.Pattern).MatchString(v) {
			t.Errorf("%s: %.200q does not match %s", path, v, want.Pattern)
		}
		parent[keys[len(keys)-1]] = "~"
	}
	if code != p.Status || !reflect.DeepEqual(got, p.Response) {
		want, _ := json.Marshal(p.Response)
		t.Errorf("got %d %.2000s\nwant %d %s", code, body, p.Status, want)
	}
}

// dig is the value at keys in nested JSON objects (nil if none).
func dig(v any, keys ...string) any {
	for _, k := range keys {
		m, _ := v.(map[string]any)
		v = m[k]
	}
	return v
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

// Keys /run_code does not know are ignored, as SandboxFusion ignores
// them, and logged once each for the server's life; past maxLogged names
// no more are logged (a caller inventing names cannot fill the log).
func TestSandboxFusionUnknownFieldsLogged(t *testing.T) {
	const maxLogged = 64 // internal/httpapi's maxLoggedKeys
	s := startAPI(t)
	send := func(keys ...string) {
		t.Helper()
		req := map[string]any{"code": "pass", "language": "python"}
		for _, k := range keys {
			req[k] = 1
		}
		body, _ := json.Marshal(req)
		if code, answer := s.post(t, "/run_code", string(body)); code != http.StatusOK {
			t.Fatalf("%d %s", code, answer)
		}
	}
	send("cpu_limit")
	send("cpu_limit", "gpu")
	var many []string
	for i := range maxLogged + 6 {
		many = append(many, fmt.Sprintf("k%02d", i))
	}
	send(many...)
	send("late")
	lines := waitLog(t, s, "no more will be")
	ignored := regexp.MustCompile(`ignored the unknown field "([^"]+)"`)
	count := map[string]int{}
	for _, m := range ignored.FindAllStringSubmatch(lines, -1) {
		count[m[1]]++
	}
	if count["cpu_limit"] != 1 || count["gpu"] != 1 || count["late"] != 0 || len(count) != maxLogged {
		t.Errorf("logged %v (%d names); want cpu_limit and gpu once each, %d names in all, late not at all:\n%s", count, len(count), maxLogged, lines)
	}
}

// executor_pod_name is the node's name: SandboxFusion's MY_POD_NAME, else
// POD_NAME or NODE_NAME as a Kubernetes manifest sets them, else the host
// name.
func TestSandboxFusionPodName(t *testing.T) {
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{}, host},
		{map[string]string{"NODE_NAME": "node-a"}, "node-a"},
		{map[string]string{"NODE_NAME": "node-a", "POD_NAME": "pod-b"}, "pod-b"},
		{map[string]string{"POD_NAME": "pod-b", "MY_POD_NAME": "sandbox-c"}, "sandbox-c"},
	} {
		for _, k := range []string{"MY_POD_NAME", "POD_NAME", "NODE_NAME"} {
			t.Setenv(k, c.env[k])
		}
		s := startAPI(t)
		_, body := s.post(t, "/run_code", `{"code": "pass", "language": "python"}`)
		var got struct {
			Pod *string `json:"executor_pod_name"`
		}
		if err := json.Unmarshal(body, &got); err != nil || got.Pod == nil || *got.Pod != c.want {
			t.Errorf("with %v: %s; want executor_pod_name %q", c.env, body, c.want)
		}
		s.stop(t)
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
