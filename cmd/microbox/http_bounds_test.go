package main

// Tests of the HTTP API's bounds on the server itself (docs/server.md,
// "The server's memory"): its memory per run whatever the output, bodies
// being read, kept results and their expiry, and run slots that a caller
// who does not read its answer cannot hold.

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/microbox/microbox/internal/service"
)

// pid is the server's process id (`microbox serve` execs the server
// build, so the child is the server).
func (s *apiServer) pid() int { return s.cmd.Process.Pid }

// An answer of NUL bytes at the output limit (each six bytes of JSON)
// keeps the server within its stated bound: 16 × the output limit per run,
// and a constant (docs/server.md). Encoded whole, 2 × 16 MiB took it from
// 16 to 977 MiB.
func TestHTTPAnswerMemoryBound(t *testing.T) {
	const limit = 16 << 20
	s := startAPI(t, "--http-concurrency", "1", "--max-output-limit", "16M", "--max-mem", "512M", "--max-timeout", "60s")
	s.runTask(t, `{"code": "print(1)"}`) // the server's own start-up, out of the count
	before := statusKiB(s.pid(), "VmHWM")
	task := fmt.Sprintf(`{"code": "import sys; sys.stdout.buffer.write(bytes(%d)); sys.stderr.buffer.write(bytes(%d))", "output_limit": %d, "mem": "512M", "timeout": 60}`, limit, limit, limit)
	r := s.runTask(t, task)
	if r.Status != "ok" || len(r.Stdout) != limit || len(r.Stderr) != limit || strings.Trim(r.Stdout, "\x00") != "" {
		t.Fatalf("NUL output: %s, %d and %d bytes", r.Status, len(r.Stdout), len(r.Stderr))
	}
	grown := (statusKiB(s.pid(), "VmHWM") - before) << 10
	if bound := int64(16*limit + 16<<20); grown > bound {
		t.Errorf("the server grew %d MiB for one run of 2 × %d MiB of NUL output, over its bound of %d MiB", grown>>20, limit>>20, bound>>20)
	}
	t.Logf("the server grew %d MiB", grown>>20)
}

// A caller that never reads its answer holds its connection, not a run
// slot: with one slot and a queue of one, the next runs go as if it were
// not there (the first runs, the second queues, only the third is 429),
// and after --http-write-timeout its connection is closed.
func TestHTTPCallerThatDoesNotRead(t *testing.T) {
	s := startAPI(t, "--http-concurrency", "1", "--http-queue", "1", "--http-write-timeout", "1s", "--max-output-limit", "4M", "--max-timeout", "120s")
	small := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		return c.Control(func(fd uintptr) { syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
	}}
	conn, err := small.Dial("tcp", strings.TrimPrefix(s.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	task := `{"code": "import sys; sys.stdout.buffer.write(bytes(4 << 20))", "output_limit": "4M"}` // 24 MiB of JSON
	fmt.Fprintf(conn, "POST /v1/runs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: %d\r\n\r\n%s", len(task), task)
	waitFor(t, "the unread run's verdict", func() bool { return scrape(t, s).value("microbox_runs_total", "", "ok") == 1 })

	ids := make([]string, 2)
	for i, task := range []string{`{"code": "import time; time.sleep(60)", "timeout": 120}`, `{"code": "print(2)"}`} {
		code, body := s.post(t, "/v1/runs?wait=false", task)
		var st service.Status
		if code != http.StatusAccepted || json.Unmarshal(body, &st) != nil {
			t.Fatalf("run %d behind a caller that does not read: %d %s", i+1, code, body)
		}
		ids[i] = st.ID
		defer s.do(t, http.MethodDelete, "/v1/runs/"+st.ID, "", nil)
	}
	code, body := s.post(t, "/v1/runs?wait=false", `{"code": "print(3)"}`)
	wantError(t, code, body, http.StatusTooManyRequests, "busy")
	for i, want := range []service.State{service.StateRunning, service.StateQueued} {
		waitFor(t, fmt.Sprintf("run %d %s", i+1, want), func() bool {
			_, body := s.do(t, http.MethodGet, "/v1/runs/"+ids[i], "", nil)
			return strings.Contains(string(body), `"state":"`+string(want)+`"`)
		})
	}

	// Its handler gave up (its 200 is counted): the connection is closed
	// before the whole answer.
	waitFor(t, "the unread answer's end", func() bool { return requestsCounted(t, s, "/v1/runs", 200) == 1 })
	conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err == nil {
		var n int64
		n, err = io.Copy(io.Discard, resp.Body)
		if err == nil {
			t.Errorf("the caller that did not read got its whole answer (%d bytes) after the write timeout", n)
		}
	}
}

// requestsCounted is /metrics' count of requests to path answered code.
func requestsCounted(t *testing.T, s *apiServer, path string, code int) float64 {
	_, body := s.do(t, http.MethodGet, "/metrics", "", nil)
	re := regexp.MustCompile(`(?m)^microbox_http_requests_total\{code="` + strconv.Itoa(code) + `",path="` + regexp.QuoteMeta(path) + `"\} (\S+)$`)
	m := re.FindSubmatch(body)
	if m == nil {
		return 0
	}
	n, _ := strconv.ParseFloat(string(m[1]), 64)
	return n
}

// waitFor polls ok until it holds; the test fails if it never does.
func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if ok() {
			return
		}
	}
	t.Fatalf("never: %s", what)
}

// Bodies that do not finish hold no more than --http-body-budget (twice
// --http-max-body by default): past it, requests are refused at once with
// 429, their bodies unread. Read whole, 24 unfinished bodies of 8 MiB
// added 199 MiB.
func TestHTTPBodyBudget(t *testing.T) {
	const maxBody, sent = 8 << 20, 7 << 20
	s := startAPI(t, "--http-max-body", "8M", "--http-read-timeout", "60s")
	s.runTask(t, `{"code": "print(1)"}`)
	before := statusKiB(s.pid(), "VmHWM")
	reading, conns := unfinishedBodies(t, s, 24, sent, func(int) string {
		return fmt.Sprintf("POST /v1/runs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: %d\r\n\r\n{\"code\": \"", maxBody)
	})
	grown := (statusKiB(s.pid(), "VmHWM") - before) << 10
	if bound := int64(2*maxBody + 16<<20); grown > bound {
		t.Errorf("24 unfinished bodies of 8 MiB grew the server %d MiB, over the budget's bound of %d MiB", grown>>20, bound>>20)
	}
	if reading > 2 {
		t.Errorf("the server read %d unfinished bodies of 8 MiB at once, over its budget of 16 MiB", reading)
	}
	t.Logf("the server grew %d MiB reading %d bodies", grown>>20, reading)
	for _, c := range conns {
		c.Close()
	}
	waitFor(t, "the budget back once the callers left", func() bool {
		code, _ := s.post(t, "/v1/runs", `{"code": "print(1)"}`)
		return code == http.StatusOK
	})
}

// startRuns starts n runs of task with ?wait=false at once, and waits
// until each is done (or its result already dropped).
func startRuns(t *testing.T, s *apiServer, n int, task string) []string {
	var ids []string
	for range n {
		code, body := s.post(t, "/v1/runs?wait=false", task)
		var st service.Status
		if code != http.StatusAccepted || json.Unmarshal(body, &st) != nil {
			t.Fatalf("wait=false: %d %s", code, body)
		}
		ids = append(ids, st.ID)
	}
	for _, id := range ids {
		waitFor(t, "run "+id+" done", func() bool {
			code, body := s.do(t, http.MethodGet, "/v1/runs/"+id, "", nil)
			return code == http.StatusNotFound || strings.Contains(string(body), `"state":"done"`)
		})
	}
	return ids
}

// oneMiBTask prints 1 MiB.
const oneMiBTask = `{"code": "import sys; sys.stdout.write('x' * (1 << 20))", "output_limit": "1M"}`

// Results of runs started with ?wait=false are bounded in bytes
// (--http-keep-bytes) beside their count, the oldest going first.
func TestHTTPKeptResultsBounded(t *testing.T) {
	s := startAPI(t, "--http-keep-bytes", "8M", "--http-queue", "40")
	ids := startRuns(t, s, 40, oneMiBTask)
	kept := 0
	for _, id := range ids {
		if code, _ := s.do(t, http.MethodGet, "/v1/runs/"+id, "", nil); code == http.StatusOK {
			kept++
		}
	}
	if kept < 1 || kept > 8 {
		t.Errorf("%d results of 1 MiB kept under --http-keep-bytes 8M", kept)
	}
	if b := scrape(t, s).value("microbox_kept_result_bytes", "", ""); b < 1<<20 || b > 8<<20 {
		t.Errorf("microbox_kept_result_bytes %v under --http-keep-bytes 8M", b)
	}
}

// Once expired, results are let go and their memory goes back to the
// system, with no request to notice that they expired.
func TestHTTPExpiredResultsFreed(t *testing.T) {
	s := startAPI(t, "--http-keep", "5s", "--http-queue", "40")
	s.runTask(t, `{"code": "print(1)"}`)
	before := statusKiB(s.pid(), "VmRSS")
	ids := startRuns(t, s, 40, oneMiBTask)
	t.Logf("the server grew %d MiB with 40 results", (statusKiB(s.pid(), "VmRSS")-before)>>10)
	waitFor(t, "the memory of expired results back", func() bool { // no request meanwhile
		return statusKiB(s.pid(), "VmRSS")-before < 8<<10
	})
	t.Logf("then %d MiB", (statusKiB(s.pid(), "VmRSS")-before)>>10)
	waitFor(t, "the last result expired", func() bool {
		code, _ := s.do(t, http.MethodGet, "/v1/runs/"+ids[39], "", nil)
		return code == http.StatusNotFound
	})
}

// A request refused for a full server costs nothing of what building its
// run would: admission comes before its redact patterns compile (600
// patterns of 15 bytes are over 200 MiB compiled).
func TestHTTPRefusedRequestCompilesNothing(t *testing.T) {
	s := startAPI(t, "--http-concurrency", "1", "--http-queue", "0", "--max-timeout", "120s")
	code, body := s.post(t, "/v1/runs?wait=false", `{"code": "import time; time.sleep(60)", "timeout": 120}`)
	var st service.Status
	if code != http.StatusAccepted || json.Unmarshal(body, &st) != nil {
		t.Fatalf("wait=false: %d %s", code, body)
	}
	defer s.do(t, http.MethodDelete, "/v1/runs/"+st.ID, "", nil)
	var patterns []string
	for i := range 600 {
		patterns = append(patterns, fmt.Sprintf("P%d=(a|b){1000}", i))
	}
	task, _ := json.Marshal(map[string]any{"code": "print(1)", "redact_patterns": patterns})
	before := statusKiB(s.pid(), "VmHWM")
	code, body = s.post(t, "/v1/runs", string(task))
	if code != http.StatusTooManyRequests && code != http.StatusBadRequest {
		t.Fatalf("a task on a full server: %d %s", code, body)
	}
	if grown := (statusKiB(s.pid(), "VmHWM") - before) << 10; grown > 16<<20 {
		t.Errorf("a refused request (%d) grew the server %d MiB", code, grown>>20)
	}
}

// A caller that sends its next run as soon as it has the last one's
// answer finds the slot free: with one slot and no queue, runs back to
// back are never refused (the slot is given back when the run ends, not
// after the jail's teardown, which goes on beside the answer).
func TestHTTPRunsBackToBackNeverBusy(t *testing.T) {
	s := startAPI(t, "--http-concurrency", "1", "--http-queue", "0")
	for i := range 20 {
		if code, body := s.post(t, "/v1/runs", `{"code": "print(1)"}`); code != http.StatusOK {
			t.Fatalf("run %d of a caller running one at a time: %d %s", i+1, code, body)
		}
	}
}

// unfinishedBodies sends n requests at once, each head(i) and then sent
// bytes of a body it never finishes, and counts those the server goes on
// reading (no answer within 2 s), returning the connections for the
// test to close (they close when it ends anyway); one answered otherwise
// than 429 is an error.
func unfinishedBodies(t *testing.T, s *apiServer, n, sent int, head func(i int) string) (reading int, conns []net.Conn) {
	t.Helper()
	var wg sync.WaitGroup
	var mu sync.Mutex
	for i := range n {
		conn, err := net.Dial("tcp", strings.TrimPrefix(s.url, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		conns = append(conns, conn)
		wg.Go(func() {
			conn.SetDeadline(time.Now().Add(30 * time.Second))
			if _, err := io.WriteString(conn, head(i)+strings.Repeat("x", sent)); err != nil {
				return // refused: the server closed the connection
			}
			conn.SetReadDeadline(time.Now().Add(2 * time.Second))
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() { // no answer: the server waits for the rest
				mu.Lock()
				reading++
				mu.Unlock()
			} else if err == nil && resp.StatusCode != http.StatusTooManyRequests {
				t.Errorf("an unfinished body was answered %s", resp.Status)
			}
		})
	}
	wg.Wait()
	return reading, conns
}
