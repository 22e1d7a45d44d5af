package main

// With -session every Python case runs as the second cell of a session
// (docs/sessions.md) of a `microbox-server serve --http` the harness
// starts with the canary environment and the two leaked descriptors: a
// first cell sets a global, then the case's file is the second cell, its
// header's stdin the cell's. The session's limits are the header's
// (--mem, --timeout as "mem", "timeout"). The session is deleted after
// the case, and the host checks run as for one-shot runs.
//
// A cell has no exit status, so its answer maps to the README's verdicts:
//
//	cell status ok, or error SystemExit 0     ok
//	error SystemExit N, or another exception   nonzero (exit code N, else 1)
//	error MemoryError                          memory
//	timeout (interrupted, session kept)        timeout
//	ended: reason timeout or cpu_time          timeout
//	ended: reason memory                       memory
//	ended: reason output_limit                 output_limit
//	ended: reason exited, "exited with status 0"  ok (os._exit(0))
//	ended: reason exited, "exited with status N"  nonzero
//	ended: reason exited, "killed by SIG..."      signaled
//	ended: any other reason                    sandbox_error
//
// A cell's output is cut at the output
// limit rather than ending it, so `output_limit` is also met by a cell
// whose stdout or stderr came back truncated. C cases are not cells and
// are skipped.
//
// The cell is the interpreter, so it holds the interpreter's own
// descriptors: its socket to the server, /dev/null, its output pipes.
// fs_inherited_fds reports each as an escape; those lines are dropped
// (ownDescriptor), and its ESCAPED with them when nothing else is left.
// The descriptors the harness leaks are a file and a directory, which no
// line dropped can be.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// interruptGrace is how long a cell past its timeout has to come back
// after its KeyboardInterrupt (session.InterruptGrace).
const interruptGrace = 2 * time.Second

// cellAnswer is the part of a cell's answer the harness uses.
type cellAnswer struct {
	Status          string `json:"status"`
	Stdout          string `json:"stdout"`
	Stderr          string `json:"stderr"`
	StdoutTruncated bool   `json:"stdout_truncated"`
	StderrTruncated bool   `json:"stderr_truncated"`
	Error           *struct {
		Name  string `json:"name"`
		Value string `json:"value"`
	} `json:"error"`
	Session struct {
		State  string `json:"state"`
		Reason string `json:"reason"`
		Error  string `json:"error"`
	} `json:"session"`
}

var serving = regexp.MustCompile(`serving the HTTP API on (http://\S+)`)

// startHTTPServer starts `microbox-server serve --http` on the loopback
// with the canary environment and the leaked descriptors, and returns
// once it listens; stop ends it and waits.
func (h *harness) startHTTPServer() (stop func(), err error) {
	dir, err := os.MkdirTemp("", "microbox-redteam-serve-")
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(h.opts.server, "serve", "--socket", filepath.Join(dir, "exec.sock"),
		"--http", "127.0.0.1:0", "--warm", "0")
	cmd.Env = append(os.Environ(), canaryEnv+"="+h.fx.token)
	cmd.ExtraFiles = h.fx.extra
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	h.ourPids[cmd.Process.Pid] = true
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cmd.Process.Signal(syscall.SIGTERM)
			cmd.Wait()
			os.RemoveAll(dir)
		})
	}
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		if m := serving.FindStringSubmatch(sc.Text()); m != nil {
			go io.Copy(os.Stderr, stderr)
			h.api = m[1]
			return stop, nil
		}
		fmt.Fprintln(os.Stderr, sc.Text())
	}
	stop()
	return nil, fmt.Errorf("%s serve --http did not start", h.opts.server)
}

// sessionRun runs the case as a session's second cell and judges it.
func (h *harness) sessionRun(c *testCase) []string {
	client := &http.Client{Timeout: c.watchdog()}
	opts, err := sessionOptions(c.limits)
	if err != nil {
		return []string{err.Error()}
	}
	var info struct{ ID string }
	if err := h.call(client, "POST", "/v1/sessions", opts, http.StatusCreated, &info); err != nil {
		return []string{"could not open a session: " + err.Error()}
	}
	defer h.call(client, "DELETE", "/v1/sessions/"+info.ID, nil, 0, nil)
	var first cellAnswer
	if err := h.call(client, "POST", "/v1/sessions/"+info.ID+"/cells", map[string]string{"code": "redteam_first_cell = 1"}, http.StatusOK, &first); err != nil || first.Status != "ok" {
		return []string{fmt.Sprintf("first cell: %v (status %q)", err, first.Status)}
	}
	code, err := os.ReadFile(c.path)
	if err != nil {
		return []string{err.Error()}
	}
	cell := map[string]any{"code": string(code)}
	if c.stdin != nil {
		cell["stdin"] = string(c.stdin)
	}
	var ans cellAnswer
	began := time.Now()
	if err := h.call(client, "POST", "/v1/sessions/"+info.ID+"/cells", cell, http.StatusOK, &ans); err != nil {
		return []string{"the case's cell: " + err.Error()}
	}
	reasons := checkCell(c, &ans)
	if took := time.Since(began); took > c.timeout+interruptGrace+2*time.Second {
		reasons = append(reasons, fmt.Sprintf("the cell answered after %.2f s, later than the timeout %s + %s + 2 s", took.Seconds(), c.timeout, interruptGrace))
	}
	reasons = append(reasons, checkEscapes(withoutOwnDescriptors(ans.Stdout))...)
	reasons = append(reasons, h.checkReports(ans.Stdout)...)
	if strings.HasPrefix(c.name, "benign_") {
		reasons = append(reasons, checkBenign(ans.Stdout)...)
	}
	if len(reasons) > 0 && h.opts.verbose {
		fmt.Printf("    cell status %s, session %s %s %s, error %+v\n    --- stdout ---\n%s\n    --- stderr ---\n%s\n", ans.Status,
			ans.Session.State, ans.Session.Reason, ans.Session.Error, ans.Error, head([]byte(ans.Stdout), 4096), head([]byte(ans.Stderr), 4096))
	}
	return reasons
}

// ownDescriptor matches fs_inherited_fds's line for a descriptor of the
// interpreter's own: a socket, a pipe or /dev/null.
var ownDescriptor = regexp.MustCompile(`^escape: fd \d+ inherited \((sock -> socket:\[\d+\]|fifo -> pipe:\[\d+\]|chr -> /dev/null)\)$`)

// withoutOwnDescriptors drops the lines ownDescriptor matches, and the
// ESCAPED verdict when they were all the escapes there were.
func withoutOwnDescriptors(stdout string) string {
	var kept []string
	dropped, others := false, false
	for _, l := range lines(stdout) {
		switch {
		case ownDescriptor.MatchString(l):
			dropped = true
			continue
		case strings.HasPrefix(l, "escape:"):
			others = true
		}
		kept = append(kept, l)
	}
	if dropped && !others {
		kept = slices.DeleteFunc(kept, func(l string) bool { return l == "ESCAPED" })
	}
	return strings.Join(kept, "\n")
}

// sessionOptions turns a header's limits (--mem 256M --timeout 5s) into a
// session's create request ({"mem": "256M", "timeout": "5s"}).
func sessionOptions(limits []string) (map[string]string, error) {
	opts := map[string]string{}
	for i := 0; i < len(limits); i++ {
		name, ok := strings.CutPrefix(limits[i], "--")
		if !ok || (i+1 == len(limits) && !strings.Contains(name, "=")) {
			return nil, fmt.Errorf("limits: %q is not `--NAME VALUE`", limits[i])
		}
		if k, v, ok := strings.Cut(name, "="); ok {
			opts[strings.ReplaceAll(k, "-", "_")] = v
			continue
		}
		opts[strings.ReplaceAll(name, "-", "_")] = limits[i+1]
		i++
	}
	return opts, nil
}

// cellVerdict maps a cell's answer to the README's verdicts (see the top
// of this file).
func cellVerdict(a *cellAnswer) (verdict string, exitCode int) {
	switch a.Status {
	case "ok":
		return "ok", 0
	case "timeout":
		return "timeout", 0
	case "error":
		if a.Error == nil {
			return "nonzero", 1
		}
		switch a.Error.Name {
		case "MemoryError":
			return "memory", 0
		case "SystemExit":
			if a.Error.Value == "" || a.Error.Value == "0" || a.Error.Value == "None" {
				return "ok", 0
			}
			if n, err := strconv.Atoi(a.Error.Value); err == nil {
				return "nonzero", n
			}
		}
		return "nonzero", 1
	case "ended":
		switch a.Session.Reason {
		case "timeout", "cpu_time":
			return "timeout", 0
		case "memory", "output_limit":
			return a.Session.Reason, 0
		case "exited":
			return exitedVerdict(a.Session.Error)
		}
	}
	return "sandbox_error", 0
}

var (
	exitedStatus = regexp.MustCompile(`exited with status (\d+)`)
	killedBy     = regexp.MustCompile(`killed by SIG`)
)

// exitedVerdict reads how the interpreter ended from the session's error
// ("the interpreter exited with status 3", "... was killed by SIGSEGV").
func exitedVerdict(detail string) (string, int) {
	if m := exitedStatus.FindStringSubmatch(detail); m != nil {
		n, _ := strconv.Atoi(m[1])
		if n == 0 {
			return "ok", 0
		}
		return "nonzero", n
	}
	if killedBy.MatchString(detail) {
		return "signaled", 0
	}
	return "sandbox_error", 0
}

// checkCell compares the cell's verdict with the case's expectation.
func checkCell(c *testCase, a *cellAnswer) []string {
	v, code := cellVerdict(a)
	detail := fmt.Sprintf("cell status %s", a.Status)
	if a.Session.State == "ended" {
		detail += fmt.Sprintf(", session ended: %s %s", a.Session.Reason, a.Session.Error)
	}
	if a.Error != nil {
		detail += fmt.Sprintf(", %s: %s", a.Error.Name, head([]byte(a.Error.Value), 120))
	}
	met := func(want string) bool {
		switch want {
		case "any_but_escape":
			return v != "sandbox_error"
		case "output_limit":
			return v == want || a.StdoutTruncated || a.StderrTruncated
		}
		return v == want
	}
	var reasons []string
	if v == "sandbox_error" {
		reasons = append(reasons, "verdict sandbox_error ("+detail+")")
	} else if !met(c.expect) {
		reasons = append(reasons, fmt.Sprintf("verdict %s (%s), want %s", v, detail, c.expect))
	}
	if c.name == "verdict_exit_code" && code != 42 {
		reasons = append(reasons, fmt.Sprintf("exit code %d (%s), want 42", code, detail))
	}
	return reasons
}

// call sends a request to the server and decodes its JSON answer, which
// must have the status want (0: any).
func (h *harness) call(client *http.Client, method, path string, body any, want int, out any) error {
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, h.api+path, r)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxStdout))
	if err != nil {
		return err
	}
	if want != 0 && resp.StatusCode != want {
		return fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, head(data, 300))
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(data, out)
}
