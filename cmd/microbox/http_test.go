package main

// Tests of the HTTP API (`microbox serve --http`, internal/httpapi), over
// a real listener with net/http's client: verdicts as exec's for the same
// inputs, background runs, kill, admission, access, bad requests, a caller
// that goes away and a server that stops with runs in flight.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/microbox/microbox/internal/policy"
	"github.com/microbox/microbox/internal/service"
	"github.com/microbox/microbox/result"
)

// apiServer is a `microbox serve --http` of one test's own.
type apiServer struct {
	url string
	cmd *exec.Cmd
	log *syncBuffer
}

// syncBuffer is a server's log, written by one goroutine, read by tests.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

var apiListening = regexp.MustCompile(`serving the HTTP API on http://(\S+)`)

// startAPI starts `microbox serve --http 127.0.0.1:0` with args, and
// waits until it listens; when the test ends, it is stopped and must
// leave no cgroup behind.
func startAPI(t *testing.T, args ...string) *apiServer {
	t.Helper()
	return startAPIVia(t, nil, args...)
}

// startAPIVia is startAPI with the server started through prefix, a
// command that ends by executing its arguments (unshare, sh -c '... exec
// "$@"'); nil: none.
func startAPIVia(t *testing.T, prefix []string, args ...string) *apiServer {
	t.Helper()
	socket := filepath.Join(t.TempDir(), "s", "exec.sock")
	argv := append(append(append([]string(nil), prefix...), microbox, "serve", "--socket", socket, "--http", "127.0.0.1:0", "--warm", "1"), args...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), "MICROBOX_ROOTFS=")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &apiServer{cmd: cmd, log: &syncBuffer{}}
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			fmt.Fprintln(s.log, sc.Text())
			if m := apiListening.FindStringSubmatch(sc.Text()); m != nil {
				found <- m[1]
			}
		}
	}()
	select {
	case addr := <-found:
		s.url = "http://" + addr
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("microbox serve --http did not listen:\n%s", s.log)
	}
	t.Cleanup(func() {
		s.stop(t)
		assertNoRunCgroups(t)
	})
	return s
}

// stop ends the server with SIGTERM, as an operator would.
func (s *apiServer) stop(t *testing.T) {
	if s.cmd.ProcessState != nil {
		return
	}
	s.cmd.Process.Signal(syscall.SIGTERM)
	if err := s.cmd.Wait(); err != nil {
		t.Errorf("microbox serve: %v\n%s", err, s.log)
	}
}

// post sends body to path and returns the status and the answer.
func (s *apiServer) post(t *testing.T, path, body string) (int, []byte) {
	t.Helper()
	return s.do(t, http.MethodPost, path, body, nil)
}

func (s *apiServer) do(t *testing.T, method, path, body string, header http.Header) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, s.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, data
}

// runTask posts a task to /v1/runs and decodes the result.
func (s *apiServer) runTask(t *testing.T, task string) policy.Result {
	t.Helper()
	code, body := s.post(t, "/v1/runs", task)
	if code != http.StatusOK {
		t.Fatalf("POST /v1/runs %s: %d %s", task, code, body)
	}
	var r policy.Result
	if err := json.Unmarshal(body, &r); err != nil {
		t.Fatalf("answer %s: %v", body, err)
	}
	return r
}

// wantError checks a refusal: the status, one line of JSON naming the
// problem.
func wantError(t *testing.T, code int, body []byte, wantCode int, want string) {
	t.Helper()
	var e struct{ Error string }
	if code != wantCode || json.Unmarshal(body, &e) != nil || !strings.Contains(e.Error, want) ||
		bytes.Count(bytes.TrimSpace(body), []byte("\n")) != 0 {
		t.Errorf("got %d %s, want %d and one line of JSON with %q", code, body, wantCode, want)
	}
}

// taskFlags are exec's flags a task has keys for, and the keys.
var taskFlags = map[string]string{
	"--timeout": "timeout", "--cpu-time": "cpu_time", "--mem": "mem", "--output-limit": "output_limit",
	"--tmpfs-size": "tmpfs_size", "--workdir": "workdir", "--guard": "guard", "--max-risk": "max_risk",
	"--env": "env", "--deny-modules": "deny_modules", "--allow-modules": "allow_modules",
	"--redact-pattern": "redact_patterns", "--redact": "redact", "--cpus": "cpus", "--pids": "pids",
}

// execTask is exec's arguments as an API task, or why they have none: a
// host file, or a setting that is the server's, not a run's.
func execTask(args []string, stdin string) (map[string]any, string) {
	task := map[string]any{}
	if stdin != "" {
		task["stdin"] = stdin
	}
	for i := 0; i < len(args); i++ {
		a := args[i]
		next := func() string { i++; return args[i] }
		switch key := taskFlags[a]; {
		case a == "--json":
		case a == "-c":
			task["code"] = next()
		case a == "--redact":
			task["redact"] = true
		case a == "--max-risk" || a == "--cpus" || a == "--pids":
			n, err := strconv.ParseFloat(next(), 64)
			if err != nil {
				return nil, a + " " + args[i] + " is not a number a task can hold"
			}
			task[key] = n
		case a == "--env":
			k, v, ok := strings.Cut(next(), "=")
			if !ok {
				return nil, "--env " + args[i] + ": a task's env is a map of names to values"
			}
			env, _ := task[key].(map[string]string)
			if env == nil {
				env = map[string]string{}
			}
			env[k] = v
			task[key] = env
		case a == "--deny-modules" || a == "--allow-modules":
			task[key] = strings.Split(next(), ",")
		case a == "--redact-pattern":
			list, _ := task[key].([]string)
			task[key] = append(list, next())
		case key != "":
			task[key] = next()
		default:
			return nil, a + " is a host file or the server's setting, not a task's"
		}
	}
	return task, ""
}

// notRun matches a result of input refused before anything ran.
func notRun(r policy.Result) bool {
	return r.Status == result.StatusSandboxError && r.WallTimeMs == 0 && r.Cgroup == "none"
}

// The exec suite's recorded cases (golden_test.go), through the API: every
// one a task can express gets exec's verdict, byte for byte once times
// are masked and flags spelled as keys; input exec refuses, the API
// refuses with 400, naming the same field.
func TestHTTPVerdictsMatchExec(t *testing.T) {
	s := startAPI(t, "--http-queue", "64")
	spell := strings.NewReplacer()
	var pairs []string
	for flag, key := range taskFlags {
		pairs = append(pairs, flag, `\"`+key+`\"`) // in a JSON string
	}
	spell = strings.NewReplacer(pairs...)
	for _, c := range goldenCases() {
		if len(c.args) < 2 || c.args[0] != "exec" || c.args[1] != "--json" {
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			task, why := execTask(c.args[1:], c.stdin)
			if why != "" {
				t.Skipf("no task for this case: %s", why)
			}
			t.Parallel()
			dir := t.TempDir()
			cmd := exec.Command(microbox, c.args...)
			cmd.Dir, cmd.Stdin = dir, strings.NewReader(c.stdin)
			cmd.Env = append(os.Environ(), "MICROBOX_ROOTFS=")
			want := jsonResult(t, cmd)
			body, _ := json.Marshal(task)
			code, got := s.post(t, "/v1/runs", string(body))
			if notRun(want) {
				if code != http.StatusBadRequest {
					t.Fatalf("exec refused it (%s), the API answered %d %s", deref(want.Error), code, got)
				}
				if flag := regexp.MustCompile(`--[a-z-]+`).FindString(*want.Error); taskFlags[flag] != "" && !strings.Contains(string(got), taskFlags[flag]) {
					t.Errorf("exec's refusal names %s, the API's %s", flag, got)
				}
				return
			}
			if code != http.StatusOK {
				t.Fatalf("exec ran it (%s), the API answered %d %s", want.Status, code, got)
			}
			wantJSON, _ := json.Marshal(want)
			var gotResult policy.Result
			if err := json.Unmarshal(got, &gotResult); err != nil {
				t.Fatal(err)
			}
			gotJSON, _ := json.Marshal(gotResult)
			if w, g := spell.Replace(mask(string(wantJSON), dir)), mask(string(gotJSON), dir); w != g {
				t.Errorf("exec %v and the API differ:\nexec %s\nAPI  %s", c.args, w, g)
			}
		})
	}
}

// A run started with ?wait=false: its id at once, its state, then its
// result; a kill ends it with a verdict naming who did; an unknown id is
// 404.
func TestHTTPBackgroundRunAndKill(t *testing.T) {
	s := startAPI(t, "--max-timeout", "120s") // its sleeper asks for 120 s
	code, body := s.post(t, "/v1/runs?wait=false", `{"code": "print(6 * 7)"}`)
	var st service.Status
	if code != http.StatusAccepted || json.Unmarshal(body, &st) != nil || st.ID == "" {
		t.Fatalf("wait=false: %d %s", code, body)
	}
	waitState := func(id string, want service.State) service.Status {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			code, body := s.do(t, http.MethodGet, "/v1/runs/"+id, "", nil)
			var st service.Status
			if code != http.StatusOK || json.Unmarshal(body, &st) != nil {
				t.Fatalf("GET /v1/runs/%s: %d %s", id, code, body)
			}
			if st.State == want {
				return st
			}
		}
		t.Fatalf("run %s never %s", id, want)
		return service.Status{}
	}
	done := waitState(st.ID, service.StateDone)
	if done.Result == nil || done.Result.Status != result.StatusOK || done.Result.Stdout != "42\n" {
		t.Fatalf("result %+v", done.Result)
	}
	_, body = s.post(t, "/v1/runs?wait=false", `{"code": "import time; time.sleep(60)", "timeout": 120}`)
	json.Unmarshal(body, &st)
	waitState(st.ID, service.StateRunning)
	start := time.Now()
	code, body = s.do(t, http.MethodDelete, "/v1/runs/"+st.ID, "", nil)
	var killed service.Status
	if code != http.StatusOK || json.Unmarshal(body, &killed) != nil || killed.Result == nil {
		t.Fatalf("DELETE: %d %s", code, body)
	}
	if killed.Result.Status != result.StatusSandboxError || !strings.Contains(deref(killed.Result.Error).(string), "killed by DELETE /v1/runs/"+st.ID) {
		t.Errorf("killed run's verdict %s %v, want sandbox_error naming the DELETE", killed.Result.Status, deref(killed.Result.Error))
	}
	if time.Since(start) > 20*time.Second {
		t.Errorf("the kill took %v", time.Since(start))
	}
	for _, id := range []string{"0123456789abcdef0123456789abcdef", "nope"} {
		code, body = s.do(t, http.MethodGet, "/v1/runs/"+id, "", nil)
		wantError(t, code, body, http.StatusNotFound, "no run")
		code, body = s.do(t, http.MethodDelete, "/v1/runs/"+id, "", nil)
		wantError(t, code, body, http.StatusNotFound, "no run")
	}
	assertNoRunCgroups(t)
}

// With every slot taken and the queue full, a run is refused at once:
// 429 and Retry-After, never a backlog without end. A queued run waits.
func TestHTTPBusy(t *testing.T) {
	s := startAPI(t, "--http-concurrency", "1", "--http-queue", "1", "--max-timeout", "120s")
	_, body := s.post(t, "/v1/runs?wait=false", `{"code": "import time; time.sleep(60)", "timeout": 120}`)
	var first service.Status
	json.Unmarshal(body, &first)
	code, body := s.post(t, "/v1/runs?wait=false", `{"code": "print(2)"}`)
	var second service.Status
	if code != http.StatusAccepted || json.Unmarshal(body, &second) != nil {
		t.Fatalf("a run the queue has room for: %d %s", code, body)
	}
	req, _ := http.NewRequest(http.MethodPost, s.url+"/v1/runs", strings.NewReader(`{"code": "print(3)"}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	wantError(t, resp.StatusCode, body, http.StatusTooManyRequests, "busy")
	if resp.Header.Get("Retry-After") == "" {
		t.Error("429 without Retry-After")
	}
	code, body = s.do(t, http.MethodGet, "/v1/runs/"+second.ID, "", nil)
	if !strings.Contains(string(body), `"state":"queued"`) {
		t.Errorf("the second run is not queued behind the first: %d %s", code, body)
	}
	s.do(t, http.MethodDelete, "/v1/runs/"+first.ID, "", nil)
	code, body = s.do(t, http.MethodDelete, "/v1/runs/"+second.ID, "", nil)
	if code != http.StatusOK {
		t.Fatalf("DELETE of the second: %d %s", code, body)
	}
}

// Off loopback the server refuses to start without a token; with one,
// every request but /healthz must carry it.
func TestHTTPAccess(t *testing.T) {
	cmd := exec.Command(microbox, "serve", "--socket", filepath.Join(t.TempDir(), "s", "e.sock"), "--http", "0.0.0.0:0")
	_, errOut, code := runCmd(t, cmd)
	if code != result.ExitSandboxError || !strings.Contains(string(errOut), "--http-token-file") || bytes.Count(bytes.TrimSpace(errOut), []byte("\n")) != 0 {
		t.Errorf("serve --http 0.0.0.0:0 without a token: exit %d, %s; want a one-line refusal naming --http-token-file", code, errOut)
	}
	tokenFile := filepath.Join(t.TempDir(), "token")
	token := "0123456789abcdef0123456789abcdef"
	os.WriteFile(tokenFile, []byte(token+"\n"), 0o644)
	cmd = exec.Command(microbox, "serve", "--socket", filepath.Join(t.TempDir(), "s", "e.sock"), "--http", "127.0.0.1:0", "--http-token-file", tokenFile)
	if _, errOut, code := runCmd(t, cmd); code != result.ExitSandboxError || !strings.Contains(string(errOut), "chmod 600") {
		t.Errorf("a token file others may read: exit %d, %s", code, errOut)
	}
	os.Chmod(tokenFile, 0o600)
	s := startAPI(t, "--http-token-file", tokenFile)
	task := `{"code": "print(1)"}`
	for _, h := range []http.Header{nil, {"Authorization": {"Bearer wrong"}}, {"Authorization": {token}}} {
		code, body := s.do(t, http.MethodPost, "/v1/runs", task, h)
		wantError(t, code, body, http.StatusUnauthorized, "bearer token")
	}
	if code, body := s.do(t, http.MethodPost, "/v1/runs", task, http.Header{"Authorization": {"Bearer " + token}}); code != http.StatusOK {
		t.Errorf("with the token: %d %s", code, body)
	}
	if code, _ := s.do(t, http.MethodGet, "/healthz", "", nil); code != http.StatusOK {
		t.Errorf("/healthz without the token: %d", code)
	}
	if code, _ := s.do(t, http.MethodGet, "/metrics", "", nil); code != http.StatusUnauthorized {
		t.Errorf("/metrics without the token: %d", code)
	}
}

// Bad requests: one line of JSON each, with a status of its own, and
// nothing run.
func TestHTTPBadRequests(t *testing.T) {
	s := startAPI(t, "--http-max-body", "1K", "--http-read-timeout", "1s")
	for _, c := range []struct {
		method, path, body string
		code               int
		want               string
	}{
		{"POST", "/v1/runs", `{"code": "print(1)"`, 400, "not a valid task"},
		{"POST", "/v1/runs", `{"code": "print(1)", "timout": "1s"}`, 400, `unknown field "timout"`},
		{"POST", "/v1/runs", `{"code": "print(1)", "mem": "12Q"}`, 400, `"mem" "12Q"`},
		{"POST", "/v1/runs", `{"file": "/etc/shadow"}`, 400, `"file" names a file on the server's host`},
		{"POST", "/v1/runs", `{"code": "` + strings.Repeat("x", 2000) + `"}`, 413, "over 1024 bytes"},
		{"POST", "/v1/runs?wait=maybe", `{"code": "1"}`, 400, "wait="},
		{"POST", "/v1/runs", `{"code": "1", "tmpfs_size": "64M", "mem": "32M"}`, 400, `"tmpfs_size" (67108864 bytes) exceeds "mem"`},
		{"GET", "/v1/runs", "", 405, "use POST"},
		{"POST", "/v2/everything", "", 404, "no such endpoint"},
		{"POST", "/v1/batch?order=random", "", 400, "order="},
		{"POST", "/run_code", `{"code": "1", "language": "cpp"}`, 400, "Python only"},
		{"POST", "/run_code", `{"code": "1", "language": "python", "fetch_files": ["../etc/passwd"]}`, 400, "outside the writable areas"},
	} {
		code, body := s.do(t, c.method, c.path, c.body, nil)
		wantError(t, code, body, c.code, c.want)
	}
	// A host name other than the loopback's (DNS rebinding) and a
	// browser's cross-origin request are refused.
	req, _ := http.NewRequest(http.MethodGet, s.url+"/healthz", nil)
	req.Host = "evil.example"
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	wantError(t, resp.StatusCode, body, http.StatusForbidden, "loopback")
	code, body := s.do(t, http.MethodPost, "/v1/runs", `{"code": "1"}`, http.Header{"Sec-Fetch-Site": {"cross-site"}, "Origin": {"https://evil.example"}})
	wantError(t, code, body, http.StatusForbidden, "cross-origin")
	// A body that does not come within the read timeout: 408.
	conn, err := net.Dial("tcp", strings.TrimPrefix(s.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /v1/runs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\n{")
	conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	resp, err = http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("a slow body: %v", err)
	}
	body, _ = io.ReadAll(resp.Body)
	wantError(t, resp.StatusCode, body, http.StatusRequestTimeout, "did not arrive")
}

// A caller that goes away mid-run: the run is killed and leaves nothing;
// its verdict (in the metrics) says who ended it.
func TestHTTPClientDisconnects(t *testing.T) {
	s := startAPI(t, "--max-timeout", "120s")
	conn, err := net.Dial("tcp", strings.TrimPrefix(s.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	task := `{"code": "import time; time.sleep(60)", "timeout": 120}`
	fmt.Fprintf(conn, "POST /v1/runs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: %d\r\n\r\n%s", len(task), task)
	waitHealth(t, s, func(h health) bool { return h.Running == 1 })
	conn.Close()
	waitHealth(t, s, func(h health) bool { return h.Running == 0 })
	m := scrape(t, s)
	if got := m.value("microbox_runs_total", "status", "sandbox_error"); got != 1 {
		t.Errorf("sandbox_error verdicts %v, want the killed run's", got)
	}
	assertNoRunCgroups(t)
}

type health struct{ Running, Queued int }

// waitHealth polls /healthz until ok says so.
func waitHealth(t *testing.T, s *apiServer, ok func(health) bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		_, body := s.do(t, http.MethodGet, "/healthz", "", nil)
		var h health
		if json.Unmarshal(body, &h) == nil && ok(h) {
			return
		}
	}
	t.Fatal("/healthz never said so")
}

// SIGTERM with runs in flight: each caller gets a verdict saying the
// server stopped, the server exits 0, and nothing is left behind.
func TestHTTPServerStopsWithRunsInFlight(t *testing.T) {
	s := startAPI(t, "--http-concurrency", "2", "--max-timeout", "120s")
	results := make(chan string, 2)
	for range 2 {
		go func() {
			resp, err := http.Post(s.url+"/v1/runs", "application/json", strings.NewReader(`{"code": "import time; time.sleep(60)", "timeout": 120}`))
			if err != nil {
				results <- err.Error()
				return
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			results <- fmt.Sprintf("%d %s", resp.StatusCode, body)
		}()
	}
	waitHealth(t, s, func(h health) bool { return h.Running == 2 })
	s.cmd.Process.Signal(syscall.SIGTERM)
	for range 2 {
		select {
		case r := <-results:
			if !strings.HasPrefix(r, "200 ") || !strings.Contains(r, `"status":"sandbox_error"`) || !strings.Contains(r, "the server is stopping") {
				t.Errorf("a run in flight at SIGTERM: %s", r)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("no answer after SIGTERM")
		}
	}
	if err := s.cmd.Wait(); err != nil {
		t.Errorf("server: %v\n%s", err, s.log)
	}
	assertNoRunCgroups(t)
}

// POST /v1/batch: JSON lines in, results out as they finish, the batch
// contract (ids, lines, a bad line's sandbox_error), policy fields too.
func TestHTTPBatch(t *testing.T) {
	s := startAPI(t)
	in := `{"id": "slow", "code": "import time; time.sleep(1); print('slow')"}
{"id": "fast", "code": "print('fast')"}
not json
{"id": "f", "file": "/etc/passwd"}
{"id": "red", "code": "print('mail a@example.com')", "redact": true}
`
	code, body := s.post(t, "/v1/batch?jobs=2", in)
	if code != http.StatusOK {
		t.Fatalf("%d %s", code, body)
	}
	lines := strings.Split(strings.TrimSpace(string(body)), "\n")
	if len(lines) != 5 {
		t.Fatalf("%d results:\n%s", len(lines), body)
	}
	byID := map[string]map[string]any{}
	for _, l := range lines {
		var r map[string]any
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("%q: %v", l, err)
		}
		byID[fmt.Sprint(r["id"])] = r
	}
	if strings.Contains(lines[0], `"slow"`) {
		t.Errorf("the slow task's result came first: results are not written as they finish")
	}
	for id, want := range map[string]string{"slow": "ok", "fast": "ok", "<nil>": "sandbox_error", "f": "sandbox_error", "red": "ok"} {
		if byID[id]["status"] != want {
			t.Errorf("task %s: %v, want %s", id, byID[id], want)
		}
	}
	if byID["red"]["stdout"] != "mail [REDACTED_EMAIL]\n" {
		t.Errorf("redacted task's stdout %v", byID["red"]["stdout"])
	}
	code, body = s.post(t, "/v1/batch?order=input", "{\"id\": 1, \"code\": \"print(1)\"}\n{\"id\": 2, \"code\": \"print(2)\"}\n")
	if code != http.StatusOK || !regexp.MustCompile(`(?s)^\{"id":1,.*\n\{"id":2,`).Match(body) {
		t.Errorf("order=input: %d %s", code, body)
	}
}

// metricsScrape is /metrics, parsed with Prometheus's own text parser.
type metricsScrape map[string]*dto

type dto = struct {
	samples map[string]float64 // by label value of the one label, "" without
}

func (m metricsScrape) value(name, label, value string) float64 {
	if f := m[name]; f != nil {
		return f.samples[value]
	}
	return -1
}

func scrape(t *testing.T, s *apiServer) metricsScrape {
	t.Helper()
	code, body := s.do(t, http.MethodGet, "/metrics", "", nil)
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d %s", code, body)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("/metrics does not parse: %v\n%s", err, body)
	}
	m := metricsScrape{}
	for name, f := range families {
		d := &dto{samples: map[string]float64{}}
		for _, metric := range f.Metric {
			key := ""
			if len(metric.Label) > 0 {
				key = metric.Label[0].GetValue()
			}
			switch {
			case metric.Counter != nil:
				d.samples[key] = metric.Counter.GetValue()
			case metric.Gauge != nil:
				d.samples[key] = metric.Gauge.GetValue()
			case metric.Histogram != nil:
				d.samples[key] = float64(metric.Histogram.GetSampleCount())
			}
		}
		m[name] = d
	}
	return m
}

// /metrics counts verdicts (the API's and the exec socket's alike), the
// durations, queue, runs in flight and jails waiting.
func TestHTTPMetrics(t *testing.T) {
	s := startAPI(t)
	s.runTask(t, `{"code": "print(1)"}`)
	s.runTask(t, `{"code": "import sys; sys.exit(3)"}`)
	socket := serveSocket(s)
	if out, _, code := runCmd(t, client(socket, "--json", "-c", "print(2)")); code != 0 {
		t.Fatalf("exec through the socket: %d %s", code, out)
	}
	m := scrape(t, s)
	for _, c := range []struct {
		name, label string
		want        float64
	}{
		{"microbox_runs_total", "ok", 2}, {"microbox_runs_total", "nonzero", 1}, {"microbox_runs_total", "timeout", 0},
		{"microbox_run_duration_seconds", "", 3}, {"microbox_setup_duration_seconds", "", 3},
		{"microbox_queue_length", "", 0}, {"microbox_runs_in_flight", "", 0},
	} {
		if got := m.value(c.name, "", c.label); got != c.want {
			t.Errorf("%s{%s} = %v, want %v", c.name, c.label, got, c.want)
		}
	}
	if m.value("microbox_warm_jails", "", "") < 0 || m.value("microbox_stale_cgroups_collected_total", "", "") < 0 {
		t.Errorf("a gauge is missing:\n%v", m)
	}
}

var execSocketLine = regexp.MustCompile(`serving exec on (\S+)`)

// serveSocket is the exec socket of a test's server.
func serveSocket(s *apiServer) string {
	m := execSocketLine.FindStringSubmatch(s.log.String())
	if m == nil {
		return ""
	}
	return m[1]
}
