package main

// The run options that say what exceeding a limit does in the program
// (nsjail.Options' OutputMode and MemoryRlimit), as tasks of the HTTP
// API set them: /run_code sets both; /v1 keeps its verdicts unless a task
// asks.

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// runTask posts a task to /v1/runs and returns its result.
func runTask(t *testing.T, s *apiServer, task map[string]any) map[string]any {
	t.Helper()
	body, _ := json.Marshal(task)
	code, answer := s.post(t, "/v1/runs", string(body))
	var res map[string]any
	if err := json.Unmarshal(answer, &res); err != nil || code != http.StatusOK {
		t.Fatalf("%v: %d %s", task, code, answer)
	}
	return res
}

// output_mode truncate keeps the first output_limit bytes of each stream
// and lets the run end on its own, saying each was cut; by default
// writing past the limit still ends the run (output_limit).
func TestHTTPOutputModeTruncate(t *testing.T) {
	s := startAPI(t)
	code := "import sys\nsys.stdout.write('x' * 5000)\nsys.stdout.flush()\nsys.stderr.write('y' * 5000)\nsys.exit(3)"
	res := runTask(t, s, map[string]any{"code": code, "output_limit": 1000, "output_mode": "truncate"})
	if res["status"] != "nonzero" || res["exit_code"] != 3.0 || res["stdout"] != strings.Repeat("x", 1000) ||
		res["stderr"] != strings.Repeat("y", 1000) || res["stdout_truncated"] != true || res["stderr_truncated"] != true {
		t.Errorf("truncate: %v; want nonzero (3), 1000 bytes of each stream, both truncated", res)
	}
	if res := runTask(t, s, map[string]any{"code": code, "output_limit": 1000}); res["status"] != "output_limit" {
		t.Errorf("default: %v; want output_limit", res)
	}
	_, answer := s.post(t, "/v1/runs", `{"code": "pass", "output_mode": "cut"}`)
	if !strings.Contains(string(answer), `\"output_mode\" \"cut\": give kill`) {
		t.Errorf("output_mode cut: %s; want a refusal naming output_mode and its values", answer)
	}
}

// memory_rlimit makes an allocation past the memory limit fail in the
// program (MemoryError, exit 1), cold or forked from a zygote's template;
// without it the cgroup kills the run (memory); with it, a run that
// exceeds the cgroup's limit another way (processes each under the
// rlimit, together over the limit) is still killed for it.
func TestHTTPMemoryRlimit(t *testing.T) {
	s := startAPI(t)
	alloc := "print('before', flush=True)\nb = bytearray(200 << 20)\nprint('after')"
	for _, zygote := range []bool{false, true} {
		res := runTask(t, s, map[string]any{"code": alloc, "mem": "128M", "memory_rlimit": true, "zygote": zygote})
		if res["status"] != "nonzero" || res["exit_code"] != 1.0 || res["stdout"] != "before\n" ||
			!strings.HasSuffix(res["stderr"].(string), "\nMemoryError\n") {
			t.Errorf("memory_rlimit (zygote %v): %v; want exit 1 with a MemoryError", zygote, res)
		}
	}
	if res := runTask(t, s, map[string]any{"code": alloc, "mem": "128M"}); res["status"] != "memory" {
		t.Errorf("without memory_rlimit: %v; want memory", res)
	}
	forks := `import os, time
for _ in range(3):
    if os.fork() == 0:
        b = bytearray(60 << 20)
        for i in range(0, len(b), 4096):
            b[i] = 1
        time.sleep(2)
        os._exit(0)
for _ in range(3):
    os.wait()
`
	if res := runTask(t, s, map[string]any{"code": forks, "mem": "128M", "memory_rlimit": true}); res["status"] != "memory" {
		t.Errorf("three processes of 60M each under 128M, memory_rlimit: %v; want memory", res)
	}
}
