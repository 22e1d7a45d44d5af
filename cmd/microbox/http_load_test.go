package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/microbox/microbox/internal/policy"
	"github.com/microbox/microbox/result"
)

// loadCase is one kind of program the load test sends: its task for
// client c's run n, and the check of its result.
type loadCase struct {
	name  string
	task  func(c, n int) map[string]any
	check func(c, n int, r *policy.Result) string
}

// verdict checks a result's status and stdout.
func verdict(status result.Status, stdout func(c, n int) string) func(c, n int, r *policy.Result) string {
	return func(c, n int, r *policy.Result) string {
		if r.Status != status || (stdout != nil && r.Stdout != stdout(c, n)) {
			return fmt.Sprintf("status %s stdout %.80q error %s, want %s", r.Status, r.Stdout, deref(r.Error), status)
		}
		return ""
	}
}

var loadCases = []loadCase{
	{"ok", func(c, n int) map[string]any { return map[string]any{"code": fmt.Sprintf("print(%d * %d)", c, n)} },
		verdict(result.StatusOK, func(c, n int) string { return fmt.Sprintf("%d\n", c*n) })},
	{"timeout", func(c, n int) map[string]any { return map[string]any{"code": "while True: pass", "timeout": 1} },
		verdict(result.StatusTimeout, func(int, int) string { return "" })},
	{"memory", func(c, n int) map[string]any {
		return map[string]any{"code": "print('start', flush=True); b = bytearray(1 << 30)", "mem": "64M"}
	}, verdict(result.StatusMemory, func(int, int) string { return "start\n" })},
	{"output limit", func(c, n int) map[string]any {
		return map[string]any{"code": "print('x' * 100000)", "output_limit": "1K"}
	}, func(c, n int, r *policy.Result) string {
		if r.Status != result.StatusOutputLimit || !r.StdoutTruncated || r.Stdout == "" || len(r.Stdout) > 1024 || strings.Trim(r.Stdout, "x") != "" {
			return fmt.Sprintf("status %s truncated %v stdout of %d bytes", r.Status, r.StdoutTruncated, len(r.Stdout))
		}
		return ""
	}},
	{"fork bomb", func(c, n int) map[string]any {
		return map[string]any{"pids": 16, "timeout": 10, "code": `import os, time
try:
    while True:
        if os.fork() == 0:
            time.sleep(60)
            os._exit(0)
except OSError:
    print("capped")`}
	}, verdict(result.StatusOK, func(int, int) string { return "capped\n" })},
	{"crash", func(c, n int) map[string]any {
		return map[string]any{"code": "import os, signal; print('bye', flush=True); os.kill(os.getpid(), signal.SIGSEGV)"}
	}, func(c, n int, r *policy.Result) string {
		if r.Status != result.StatusSignaled || r.Signal == nil || *r.Signal != "SIGSEGV" || r.Stdout != "bye\n" {
			return fmt.Sprintf("status %s signal %v stdout %q", r.Status, deref(r.Signal), r.Stdout)
		}
		return ""
	}},
	{"stdin", func(c, n int) map[string]any {
		return map[string]any{"code": "import sys; print(sys.stdin.read()[::-1])", "stdin": fmt.Sprintf("%d-%d", c, n)}
	}, verdict(result.StatusOK, func(c, n int) string { return reverse(fmt.Sprintf("%d-%d", c, n)) + "\n" })},
}

func reverse(s string) string {
	b := []byte(s)
	for i, j := 0, len(b)-1; i < j; i, j = i+1, j-1 {
		b[i], b[j] = b[j], b[i]
	}
	return string(b)
}

// serverUsage is what the server holds: its resident memory, open
// descriptors and goroutines, from its /metrics.
type serverUsage struct{ rss, fds, goroutines float64 }

func usage(t *testing.T, s *apiServer) serverUsage {
	m := scrape(t, s)
	return serverUsage{m.value("process_resident_memory_bytes", "", ""), m.value("process_open_fds", "", ""), m.value("go_goroutines", "", "")}
}

// within reports whether u is back to start, give or take the slack.
func (u serverUsage) within(start serverUsage) bool {
	return u.rss <= start.rss+16<<20 && u.fds <= start.fds+4 && u.goroutines <= start.goroutines+8
}

// 32 clients at once, each sending every kind of program in turn
// (loadCases) over its own kept-alive connection: every verdict and
// stdout is the program's, and once it is over, the server's memory,
// descriptors and goroutines are back where they started.
func TestHTTPLoad(t *testing.T) {
	const clients, rounds = 32, 2
	s := startAPI(t, "--http-concurrency", "4", "--http-queue", "64")
	for _, c := range loadCases { // the warm jails, and the runtime's first growth
		s.runTask(t, mustJSON(t, c.task(0, 0)))
	}
	start := usage(t, s)
	deadline := time.Now().Add(3 * time.Minute)
	var wg sync.WaitGroup
	errs := make(chan string, clients*rounds*len(loadCases))
	for c := range clients {
		wg.Go(func() {
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}, Timeout: 2 * time.Minute}
			defer client.CloseIdleConnections()
			for n := range rounds * len(loadCases) {
				lc := loadCases[(c+n)%len(loadCases)]
				if time.Now().After(deadline) {
					errs <- "the load test ran out of time"
					return
				}
				if e := loadRun(client, s, lc, c, n); e != "" {
					errs <- fmt.Sprintf("client %d, run %d (%s): %s", c, n, lc.name, e)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	var now serverUsage
	for settle := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		if now = usage(t, s); now.within(start) || time.Now().After(settle) {
			break
		}
	}
	t.Logf("server before: %+v, after: %+v", start, now)
	if !now.within(start) {
		t.Errorf("the server holds more than before the load: %+v, was %+v (slack: 16 MiB, 4 descriptors, 8 goroutines)", now, start)
	}
}

// loadRun sends one task of lc and checks its answer.
func loadRun(client *http.Client, s *apiServer, lc loadCase, c, n int) string {
	task, _ := json.Marshal(lc.task(c, n))
	resp, err := client.Post(s.url+"/v1/runs", "application/json", strings.NewReader(string(task)))
	if err != nil {
		return err.Error()
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var r policy.Result
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &r) != nil {
		return fmt.Sprintf("%d %.300s", resp.StatusCode, body)
	}
	return lc.check(c, n, &r)
}

func mustJSON(t *testing.T, v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
