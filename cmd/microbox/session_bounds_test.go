package main

// Tests of the server's bounds against a hostile caller of sessions:
// what a caller sends to a session's files is held within the server's
// --http-body-budget, like any other body.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/microbox/microbox/result"
)

// File bodies that do not finish (PUT /v1/sessions/{id}/files/{path})
// hold no more than --http-body-budget: past it they are refused at once
// with 429, their bodies unread. Without it each PUT's file was read
// into memory whatever the others held, before it waited for its
// session: 24 callers held 24 files.
func TestHTTPSessionFileBodyBudget(t *testing.T) {
	const maxFile, sent = 8 << 20, 7 << 20
	s := startAPI(t, "--http-max-body", "8M", "--max-session-file-bytes", "8M", "--http-read-timeout", "60s")
	id := s.createSession(t, `{}`)
	reading, conns := unfinishedBodies(t, s, 24, sent, func(i int) string {
		return fmt.Sprintf("PUT /v1/sessions/%s/files/f%d HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: %d\r\n\r\n", id, i, maxFile)
	})
	if reading > 2 {
		t.Errorf("the server read %d unfinished files of 8 MiB at once, over its body budget of 16 MiB", reading)
	}
	for _, c := range conns {
		c.Close()
	}
	waitFor(t, "the budget back once the callers left", func() bool {
		code, _ := s.do(t, http.MethodPut, "/v1/sessions/"+id+"/files/last", "x", nil)
		return code == http.StatusOK
	})
}

// /run_jupyter's files and fetch_files are bounded as a run's are: at
// most --max-files files in, --max-fetch names out, and --max-fetch-bytes of files in the answer, which
// holds them all at once; past it a file is left out, as one not there
// is. Hard links gave one file of the scratch area as many names as the
// caller liked: 8 names of 30 MB grew the server 1.4 GB.
func TestHTTPRunJupyterFetchBounds(t *testing.T) {
	s := startAPI(t, "--max-fetch", "4", "--max-fetch-bytes", "1M", "--max-files", "2")
	names := []string{"big", "h1", "h2", "h3"}
	cell := "import os\nopen('big', 'wb').write(b'a' * 600000)\nfor n in ('h1', 'h2', 'h3'): os.link('big', n)"
	req, _ := json.Marshal(map[string]any{"cells": []string{cell}, "fetch_files": names})
	code, answer := s.post(t, "/run_jupyter", string(req))
	var res struct {
		Status string
		Files  map[string]string
	}
	if code != http.StatusOK || json.Unmarshal(answer, &res) != nil || res.Status != "Success" {
		t.Fatalf("run_jupyter: %d %.300s", code, answer)
	}
	if len(res.Files) != 1 {
		t.Errorf("run_jupyter fetched %d files of 600000 bytes within --max-fetch-bytes 1M, want 1", len(res.Files))
	}
	req, _ = json.Marshal(map[string]any{"cells": []string{"1"}, "fetch_files": append(names, "h4")})
	code, answer = s.post(t, "/run_jupyter", string(req))
	wantError(t, code, answer, http.StatusBadRequest, "fetch_files names 5 files, over this server's ceiling 4")
	req, _ = json.Marshal(map[string]any{"cells": []string{"1"}, "files": map[string]string{"a": "", "b": "", "c": ""}})
	code, answer = s.post(t, "/run_jupyter", string(req))
	wantError(t, code, answer, http.StatusBadRequest, "files has 3 files, over this server's ceiling 2")
}

// A file near --max-session-file-bytes comes out of a session of the
// default memory whole, the session alive: its interpreter wrote its
// reply as four copies of the file (bytes, base64, JSON, the frame)
// beside the file in the scratch area, and the memory limit ended the
// session (410) instead.
func TestHTTPSessionGetLargeFile(t *testing.T) {
	const size = 60 << 20
	s := startAPI(t, "--max-mem", "256M")
	id := s.createSession(t, `{"mem": "256M"}`)
	if r := s.cell(t, id, map[string]any{"code": fmt.Sprintf("open('big', 'wb').write(bytes(range(256)) * %d)", size/256)}); r.Status != "ok" {
		t.Fatalf("write the file: %+v", r)
	}
	code, answer := s.do(t, http.MethodGet, "/v1/sessions/"+id+"/files/big", "", nil)
	if code != http.StatusOK || len(answer) != size || answer[size-1] != 255 || answer[1000] != byte(1000%256) {
		t.Fatalf("GET a file of %d bytes: %d, %d bytes %.200q", size, code, len(answer), answer)
	}
	if r := s.cell(t, id, map[string]any{"code": "6 * 7"}); r.Value == nil || *r.Value != "42" {
		t.Errorf("the session after the file: %+v", r)
	}
}

// A reply a cell's code writes to the wire itself, even one that echoes
// its request's seq, cannot answer a later request: the real reply it
// leaves behind ends the session (410) instead of answering the next
// request (a file's GET answered 200 with a cell's reply: no bytes).
func TestHTTPSessionForgedReplyLeftBehind(t *testing.T) {
	s := startAPI(t)
	id := s.createSession(t, `{"mem": "64M"}`)
	if code, answer := s.do(t, http.MethodPut, "/v1/sessions/"+id+"/files/f", "the file", nil); code != http.StatusOK {
		t.Fatalf("PUT: %d %s", code, answer)
	}
	forge := "import os, struct, sys, json\nf = sys._getframe()\nwhile f.f_code.co_name != 'main': f = f.f_back\n" +
		"b = json.dumps({'seq': f.f_locals['req'].get('seq'), 'stdout': 'forged'}).encode()\n" +
		"os.write(f.f_globals['CTL'], struct.pack('>I', len(b)) + b)"
	s.cell(t, id, map[string]any{"code": forge})
	code, answer := s.do(t, http.MethodGet, "/v1/sessions/"+id+"/files/f", "", nil)
	if code != http.StatusGone || !strings.Contains(string(answer), "answered another request") {
		t.Errorf("GET after a forged reply: %d %q, want 410: the session ended", code, answer)
	}
}

// A session's largest file fits in the body budget, which holds a PUT's
// file whole while it waits: a --max-session-file-bytes given above it is
// refused at start-up, and a default one is held to it, a larger file
// getting 413 naming the budget. Before, a file between the two got 429
// on every try, however long the caller waited.
func TestHTTPSessionFileFitsBodyBudget(t *testing.T) {
	for _, budget := range [][]string{{"--http-body-budget", "2M"}, nil} {
		socket := filepath.Join(t.TempDir(), "exec.sock")
		// A server that starts anyway is ended: the test then fails, not hangs.
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		args := append([]string{"serve", "--socket", socket, "--http", "127.0.0.1:0", "--http-max-body", "1M", "--max-session-file-bytes", "3M"}, budget...)
		_, errOut, code := runCmd(t, exec.CommandContext(ctx, microbox, args...))
		cancel()
		msg := strings.TrimSpace(string(errOut))
		if code != result.ExitSandboxError || strings.Contains(msg, "\n") ||
			!strings.Contains(msg, "--max-session-file-bytes 3M is above the body budget (2097152 bytes") || !strings.Contains(msg, "raise --http-body-budget") {
			t.Errorf("%v: exit %d, %q; want %d and one line naming both flags and the fix", args, code, msg, result.ExitSandboxError)
		}
	}
	s := startAPI(t, "--http-max-body", "1M", "--http-read-timeout", "60s") // a budget of 2M; files up to 64M by default
	id := s.createSession(t, `{}`)
	code, answer := s.do(t, http.MethodPut, "/v1/sessions/"+id+"/files/big", strings.Repeat("x", 5<<19), nil)
	wantError(t, code, answer, http.StatusRequestEntityTooLarge, "the file is 2621440 bytes, over the server's --http-body-budget 2097152")
	// The same while another body holds part of the budget: still 413,
	// never 429 (try again) for a file the server would never take.
	reading, conns := unfinishedBodies(t, s, 1, 1000, func(int) string {
		return fmt.Sprintf("PUT /v1/sessions/%s/files/slow HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: %d\r\n\r\n", id, 1<<20)
	})
	if reading != 1 {
		t.Fatalf("the server is reading %d unfinished files, want 1", reading)
	}
	code, answer = s.do(t, http.MethodPut, "/v1/sessions/"+id+"/files/big", strings.Repeat("x", 5<<19), nil)
	wantError(t, code, answer, http.StatusRequestEntityTooLarge, "the file is 2621440 bytes, over the server's --http-body-budget 2097152")
	conns[0].Close()
	waitFor(t, "a 1.5 MiB file within the budget taken once the slow caller left", func() bool {
		code, _ := s.do(t, http.MethodPut, "/v1/sessions/"+id+"/files/fits", strings.Repeat("x", 3<<19), nil)
		return code == http.StatusOK
	})
}
