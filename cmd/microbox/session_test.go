package main

// Tests of sessions (internal/session) over `microbox serve --http`'s
// real listener: state across cells, a cell's timeout that keeps its
// session and one that ends it, memory, the idle TTL and the lifetime,
// files byte for byte and paths refused, many sessions at once, the cap,
// and nothing left on the host after DELETE, an end and a server's stop.

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/microbox/microbox/cgroup"
	"github.com/microbox/microbox/internal/session"
)

// createSession posts a session and returns its id.
func (s *apiServer) createSession(t *testing.T, body string) string {
	t.Helper()
	code, answer := s.post(t, "/v1/sessions", body)
	if code != http.StatusCreated {
		t.Fatalf("POST /v1/sessions %s: %d %s", body, code, answer)
	}
	var info session.Info
	if err := json.Unmarshal(answer, &info); err != nil || info.ID == "" || info.State != "alive" {
		t.Fatalf("POST /v1/sessions: %s (%v)", answer, err)
	}
	return info.ID
}

// cell runs a cell and decodes its answer.
func (s *apiServer) cell(t *testing.T, id string, req map[string]any) session.CellResult {
	t.Helper()
	body, _ := json.Marshal(req)
	code, answer := s.post(t, "/v1/sessions/"+id+"/cells", string(body))
	if code != http.StatusOK {
		t.Fatalf("cell %s: %d %s", body, code, answer)
	}
	var r session.CellResult
	if err := json.Unmarshal(answer, &r); err != nil {
		t.Fatalf("cell answer %s: %v", answer, err)
	}
	return r
}

// sessionInfo is GET /v1/sessions/{id}.
func (s *apiServer) sessionInfo(t *testing.T, id string) session.Info {
	t.Helper()
	code, answer := s.do(t, http.MethodGet, "/v1/sessions/"+id, "", nil)
	var info session.Info
	if code != http.StatusOK || json.Unmarshal(answer, &info) != nil {
		t.Fatalf("GET session: %d %s", code, answer)
	}
	return info
}

// jailHold is what a session's jail holds on the host: its processes and
// its cgroups.
type jailHold struct {
	pids   []int
	groups []string
}

// newJails are the server's jail processes that were not in before, and
// the run cgroups that hold them.
func (s *apiServer) newJails(t *testing.T, before []int) jailHold {
	t.Helper()
	var h jailHold
	for _, p := range jailPids(t, s.cmd.Process.Pid) {
		if !slices.Contains(before, p) {
			h.pids = append(h.pids, p)
		}
	}
	if len(h.pids) == 0 {
		t.Fatal("found no new jail process of the server's")
	}
	filepath.WalkDir("/sys/fs/cgroup", func(p string, d os.DirEntry, err error) error {
		if err != nil || !d.IsDir() || !cgroup.IsRunGroup(d.Name()) {
			return nil
		}
		procs, _ := os.ReadFile(filepath.Join(p, "cgroup.procs"))
		for _, f := range strings.Fields(string(procs)) {
			if n, _ := strconv.Atoi(f); slices.Contains(h.pids, n) {
				h.groups = append(h.groups, p)
				break
			}
		}
		return filepath.SkipDir
	})
	if len(h.groups) == 0 {
		t.Fatalf("found no run cgroup holding the session's processes %v", h.pids)
	}
	return h
}

// assertGone fails unless the processes and cgroups of h are gone.
func (h jailHold) assertGone(t *testing.T) {
	t.Helper()
	for _, p := range h.pids {
		if alive(p) {
			t.Errorf("process %d of an ended session is still alive", p)
		}
	}
	for _, g := range h.groups {
		if _, err := os.Stat(g); !os.IsNotExist(err) {
			t.Errorf("cgroup %s of an ended session is still there", g)
		}
	}
}

// openSession creates a session and notes what it holds on the host.
func (s *apiServer) openSession(t *testing.T, body string) (string, jailHold) {
	t.Helper()
	before := jailPids(t, s.cmd.Process.Pid)
	id := s.createSession(t, body)
	return id, s.newJails(t, before)
}

// awaitEnd polls the session until it has ended and returns how.
func (s *apiServer) awaitEnd(t *testing.T, id string) session.Info {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if info := s.sessionInfo(t, id); info.State == "ended" {
			return info
		}
	}
	t.Fatalf("session %s did not end", id)
	return session.Info{}
}

// A session keeps its globals from cell to cell; a cell answers its
// output, its trailing expression's repr, its exception with the
// traceback from the cell on, and reads its own stdin.
func TestHTTPSessionStateAcrossCells(t *testing.T) {
	s := startAPI(t)
	id, hold := s.openSession(t, `{"mem": "128M"}`)
	if r := s.cell(t, id, map[string]any{"code": "x = 41\ndef f(n):\n    return n * 2\nprint('hello')"}); r.Status != session.CellOK || r.Stdout != "hello\n" || r.Value != nil {
		t.Errorf("first cell: %+v", r)
	}
	if r := s.cell(t, id, map[string]any{"code": "f(x + 1) // 2"}); r.Status != session.CellOK || r.Value == nil || *r.Value != "42" {
		t.Errorf("second cell: want value 42, got %+v", r)
	}
	if r := s.cell(t, id, map[string]any{"code": "'a' + input() + input()", "stdin": "b\nc\n"}); r.Value == nil || *r.Value != "'abc'" {
		t.Errorf("stdin cell: %+v", r)
	}
	if r := s.cell(t, id, map[string]any{"code": "import os, sys\nos.system('echo child')\nprint('err', file=sys.stderr)\n1 / 0"}); r.Status != session.CellRaised ||
		r.Stdout != "child\n" || r.Stderr != "err\n" || r.Error == nil || r.Error.Name != "ZeroDivisionError" ||
		!strings.Contains(r.Error.Traceback, "1 / 0") || strings.Contains(r.Error.Traceback, "runner") {
		t.Errorf("failing cell: %+v %+v", r, r.Error)
	}
	code, answer := s.do(t, http.MethodDelete, "/v1/sessions/"+id, "", nil)
	if code != http.StatusOK || !bytes.Contains(answer, []byte(`"reason":"deleted"`)) {
		t.Fatalf("DELETE: %d %s", code, answer)
	}
	hold.assertGone(t)
	code, answer = s.post(t, "/v1/sessions/"+id+"/cells", `{"code": "x"}`)
	wantError(t, code, answer, http.StatusGone, "has ended (deleted")
}

// What a cell defines is __main__'s, as in a notebook: pickle finds it by
// name, so a multiprocessing pool maps a function a cell defined (the
// red-team corpus's benign_multiprocessing_pool, run as a cell).
func TestHTTPSessionCellsAreMain(t *testing.T) {
	s := startAPI(t)
	id, hold := s.openSession(t, `{"mem": "256M"}`)
	s.cell(t, id, map[string]any{"code": "def square(n):\n    return n * n"})
	r := s.cell(t, id, map[string]any{"code": "import multiprocessing, pickle, sys\n" +
		"with multiprocessing.Pool(2) as p:\n    got = p.map(square, range(5))\n" +
		"(got, pickle.loads(pickle.dumps(square)) is square, __name__, sys.modules['__main__'].square is square)"})
	if want := "([0, 1, 4, 9, 16], True, '__main__', True)"; r.Status != session.CellOK || r.Value == nil || *r.Value != want {
		t.Errorf("want value %s, got %+v %+v", want, r, r.Error)
	}
	if r := s.cell(t, id, map[string]any{"code": "square(7)"}); r.Value == nil || *r.Value != "49" {
		t.Errorf("the session after the pool: %+v", r)
	}
	s.do(t, http.MethodDelete, "/v1/sessions/"+id, "", nil)
	hold.assertGone(t)
}

// A cell past its timeout gets KeyboardInterrupt and its session goes
// on; one that ignores it ends its session, which says why, and leaves
// nothing behind.
func TestHTTPSessionCellTimeout(t *testing.T) {
	s := startAPI(t)
	id, hold := s.openSession(t, `{"mem": "128M"}`)
	s.cell(t, id, map[string]any{"code": "x = 1"})
	r := s.cell(t, id, map[string]any{"code": "import time\ntime.sleep(600)", "timeout": "1s"})
	if r.Status != session.CellTimeout || r.Error == nil || r.Error.Name != "KeyboardInterrupt" || r.Session.State != "alive" {
		t.Fatalf("interrupted cell: %+v %+v", r, r.Error)
	}
	if r := s.cell(t, id, map[string]any{"code": "x + 1"}); r.Value == nil || *r.Value != "2" {
		t.Fatalf("after the interrupt: %+v", r)
	}
	r = s.cell(t, id, map[string]any{"code": "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True: pass", "timeout": "1s"})
	if r.Status != session.CellEnded || r.Session.State != "ended" || r.Session.Reason != session.ReasonTimeout {
		t.Fatalf("cell that ignores its interrupt: %+v", r)
	}
	hold.assertGone(t)
	if info := s.sessionInfo(t, id); info.Reason != session.ReasonTimeout {
		t.Errorf("GET after the end: %+v", info)
	}
}

// A session over its memory limit ends with memory.
func TestHTTPSessionMemory(t *testing.T) {
	s := startAPI(t)
	id, hold := s.openSession(t, `{"mem": "64M"}`)
	r := s.cell(t, id, map[string]any{"code": "b = bytearray(512 << 20)"})
	if r.Status != session.CellEnded || r.Session.Reason != session.ReasonMemory {
		t.Fatalf("cell over the memory limit: %+v", r)
	}
	hold.assertGone(t)
}

// A session idle past its idle_ttl ends, and one past its max_lifetime,
// busy or not; each frees what it held. Their ceilings refuse more.
func TestHTTPSessionLifetimes(t *testing.T) {
	s := startAPI(t, "--max-session-idle-ttl", "1m", "--max-session-lifetime", "1m")
	idle, idleHold := s.openSession(t, `{"mem": "64M", "idle_ttl": "1s"}`)
	life, lifeHold := s.openSession(t, `{"mem": "64M", "max_lifetime": 2}`)
	if info := s.awaitEnd(t, idle); info.Reason != session.ReasonIdle {
		t.Errorf("idle session: %+v", info)
	}
	idleHold.assertGone(t)
	if info := s.awaitEnd(t, life); info.Reason != session.ReasonLifetime {
		t.Errorf("session past its lifetime: %+v", info)
	}
	lifeHold.assertGone(t)
	code, answer := s.post(t, "/v1/sessions", `{"idle_ttl": "2h"}`)
	wantError(t, code, answer, http.StatusBadRequest, "--max-session-idle-ttl")
	code, answer = s.post(t, "/v1/sessions", `{"max_lifetime": "2h"}`)
	wantError(t, code, answer, http.StatusBadRequest, "--max-session-lifetime")
	code, answer = s.post(t, "/v1/sessions", `{"code": "print(1)"}`)
	wantError(t, code, answer, http.StatusBadRequest, `"code" is not a session's key`)
}

// Files go in and out byte for byte, a cell sees them, the listing shows
// them; paths out of the working directory, and symbolic links, are
// refused.
func TestHTTPSessionFiles(t *testing.T) {
	s := startAPI(t)
	id := s.createSession(t, `{"mem": "128M"}`)
	all := make([]byte, 256)
	for i := range all {
		all[i] = byte(i)
	}
	code, answer := s.do(t, http.MethodPut, "/v1/sessions/"+id+"/files/data/all.bin", string(all), nil)
	if code != http.StatusOK {
		t.Fatalf("PUT: %d %s", code, answer)
	}
	if r := s.cell(t, id, map[string]any{"code": "open('data/all.bin', 'rb').read() == bytes(range(256))"}); r.Value == nil || *r.Value != "True" {
		t.Errorf("the cell's view of the file: %+v", r)
	}
	s.cell(t, id, map[string]any{"code": "open('out.bin', 'wb').write(bytes(range(255, -1, -1)))\nimport os\nos.symlink('/etc/passwd', 'link')"})
	code, answer = s.do(t, http.MethodGet, "/v1/sessions/"+id+"/files/data/all.bin", "", nil)
	if code != http.StatusOK || !bytes.Equal(answer, all) {
		t.Errorf("GET data/all.bin: %d, %d bytes, want the 256 byte values", code, len(answer))
	}
	code, answer = s.do(t, http.MethodGet, "/v1/sessions/"+id+"/files/out.bin", "", nil)
	if want := []byte(string(all)); code != http.StatusOK || len(answer) != 256 || answer[0] != 255 || answer[255] != 0 {
		t.Errorf("GET out.bin: %d %v, want %d bytes descending", code, answer, len(want))
	}
	code, answer = s.do(t, http.MethodGet, "/v1/sessions/"+id+"/files", "", nil)
	for _, want := range []string{`"path":"data/all.bin","size":256,"type":"file"`, `"path":"out.bin"`, `"path":"link","size":11,"type":"symlink"`} {
		if code != http.StatusOK || !strings.Contains(string(answer), want) {
			t.Errorf("listing: %d %s, want %s", code, answer, want)
		}
	}
	for path, want := range map[string]string{
		"..%2F..%2Fetc%2Fpasswd": `has a part ".."`, "%2Fetc%2Fpasswd": "is absolute", "data%2F..%2F..%2Fx": `has a part ".."`,
		"link": "symbolic link", "link%2Fx": "symbolic link",
	} {
		code, answer = s.do(t, http.MethodGet, "/v1/sessions/"+id+"/files/"+path, "", nil)
		wantError(t, code, answer, http.StatusBadRequest, want)
		code, answer = s.do(t, http.MethodPut, "/v1/sessions/"+id+"/files/"+path, "x", nil)
		wantError(t, code, answer, http.StatusBadRequest, want)
	}
	if code, answer = s.do(t, http.MethodDelete, "/v1/sessions/"+id+"/files/out.bin", "", nil); code != http.StatusOK {
		t.Errorf("DELETE out.bin: %d %s", code, answer)
	}
	code, answer = s.do(t, http.MethodGet, "/v1/sessions/"+id+"/files/out.bin", "", nil)
	wantError(t, code, answer, http.StatusNotFound, "no such file")
}

// Many sessions run at once, each with its own state and files; past
// the server's cap a new one is refused with 429; /metrics counts them.
func TestHTTPSessionsAtOnce(t *testing.T) {
	const n = 4
	s := startAPI(t, "--max-sessions", strconv.Itoa(n))
	ids := make([]string, n)
	var wg sync.WaitGroup
	codes := make([]int, n)
	for i := range ids {
		wg.Go(func() {
			var info session.Info
			var answer []byte
			codes[i], answer = s.post(t, "/v1/sessions", `{"mem": "64M"}`)
			json.Unmarshal(answer, &info)
			ids[i] = info.ID
		})
	}
	wg.Wait()
	for i, code := range codes {
		if code != http.StatusCreated || ids[i] == "" {
			t.Fatalf("sessions created at once: %v %v", codes, ids)
		}
	}
	code, answer := s.post(t, "/v1/sessions", `{"mem": "64M"}`)
	wantError(t, code, answer, http.StatusTooManyRequests, "--max-sessions")
	if got := scrape(t, s).value("microbox_sessions", "", ""); got != n {
		t.Errorf("microbox_sessions %v, want %d", got, n)
	}
	for i, id := range ids {
		wg.Go(func() {
			code := fmt.Sprintf(`{"code": "mine = %d\nopen('mine', 'w').write(str(mine))"}`, i)
			if status, answer := s.post(t, "/v1/sessions/"+id+"/cells", code); status != http.StatusOK || !bytes.Contains(answer, []byte(`"status":"ok"`)) {
				t.Errorf("cell %s: %d %s", code, status, answer)
			}
		})
	}
	wg.Wait()
	for i, id := range ids {
		r := s.cell(t, id, map[string]any{"code": "import os\n(mine, open('mine').read(), sorted(os.listdir('.')))"})
		if want := fmt.Sprintf("(%d, '%d', ['mine'])", i, i); r.Value == nil || *r.Value != want {
			t.Errorf("session %d: %+v, want %s", i, r, want)
		}
	}
	s.do(t, http.MethodDelete, "/v1/sessions/"+ids[0], "", nil)
	s.createSession(t, `{"mem": "64M"}`) // its place is free again
	if got := scrape(t, s).value("microbox_sessions_ended_total", "reason", session.ReasonDeleted); got != 1 {
		t.Errorf("microbox_sessions_ended_total{reason=deleted} %v, want 1", got)
	}
}

// A server that stops ends its sessions and leaves nothing behind.
func TestHTTPSessionServerStop(t *testing.T) {
	s := startAPI(t, "--max-timeout", "5m")
	_, first := s.openSession(t, `{"mem": "64M"}`)
	id, second := s.openSession(t, `{"mem": "64M"}`)
	done := make(chan session.CellResult, 1)
	go func() {
		body, _ := json.Marshal(map[string]any{"code": "import time\ntime.sleep(600)", "timeout": "5m"})
		resp, err := http.Post(s.url+"/v1/sessions/"+id+"/cells", "application/json", bytes.NewReader(body))
		var r session.CellResult
		if err == nil {
			json.NewDecoder(resp.Body).Decode(&r)
			resp.Body.Close()
		}
		done <- r
	}()
	for deadline := time.Now().Add(time.Minute); s.sessionInfo(t, id).Cells == 0; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the cell did not start")
		}
	}
	s.stop(t)
	if r := <-done; r.Status != session.CellEnded || r.Session.Reason != session.ReasonServerStopping {
		t.Errorf("cell under way as the server stopped: %+v", r)
	}
	first.assertGone(t)
	second.assertGone(t)
}

// When the root has matplotlib, a cell's figures come back as PNG.
func TestHTTPSessionFigures(t *testing.T) {
	if exec.Command("/usr/bin/python3", "-c", "import matplotlib").Run() != nil {
		t.Skip("the default root has no matplotlib (scripts/deps installs python3-matplotlib)")
	}
	s := startAPI(t, "--max-timeout", "2m")
	id := s.createSession(t, `{"mem": "256M"}`)
	r := s.cell(t, id, map[string]any{"code": "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\nplt.title('t')", "timeout": "60s"})
	if r.Status != session.CellOK || len(r.Display) != 1 || !strings.HasPrefix(r.Display[0]["image/png"], "iVBORw0KGgo") {
		t.Fatalf("figure: %+v", r)
	}
}

// A session's code controls its interpreter, and so what it answers: a
// reply over the session's bound, or one that is not a reply, ends that
// session with error, and the server goes on.
func TestHTTPSessionForgedReplies(t *testing.T) {
	s := startAPI(t)
	for name, forge := range map[string]string{
		"too large": "os.write(CTL, struct.pack('>I', 0xfffffff0))",
		"not JSON":  "os.write(CTL, struct.pack('>I', 3) + b'{{{')",
	} {
		id, hold := s.openSession(t, `{"mem": "64M"}`)
		// The cell finds the runner's control descriptor up its stack,
		// as hostile code would (its own __main__ is the cells').
		find := "import os, struct, sys\nf = sys._getframe()\nwhile 'CTL' not in f.f_globals: f = f.f_back\nCTL = f.f_globals['CTL']\n"
		r := s.cell(t, id, map[string]any{"code": find + forge})
		if r.Status != session.CellEnded || r.Session.Reason != session.ReasonError {
			t.Errorf("%s: %+v", name, r)
		}
		hold.assertGone(t)
	}
	other := s.createSession(t, `{"mem": "64M"}`)
	if r := s.cell(t, other, map[string]any{"code": "6 * 7"}); r.Value == nil || *r.Value != "42" {
		t.Errorf("a session after the forged ones: %+v", r)
	}
}

// SandboxFusion's /run_jupyter runs its cells in one session: state
// across them, values and errors as Jupyter's outputs, files in and out
// byte for byte, the total timeout; its session is gone after.
func TestHTTPSessionRunJupyter(t *testing.T) {
	s := startAPI(t)
	before := jailPids(t, s.cmd.Process.Pid)
	all := make([]byte, 256)
	for i := range all {
		all[i] = byte(i)
	}
	b64 := base64.StdEncoding.EncodeToString(all)
	req, _ := json.Marshal(map[string]any{
		"cells": []string{"a = 123", "a", "print(a)", "raise RuntimeError('boom')",
			"open('out.bin', 'wb').write(open('in.bin', 'rb').read()[::-1])"},
		"files": map[string]string{"in.bin": b64}, "fetch_files": []string{"out.bin"}})
	code, answer := s.post(t, "/run_jupyter", string(req))
	var res struct {
		Status string
		Driver struct{ Status string }
		Cells  []struct {
			Stdout  string
			Display []map[string]string
			Error   []struct{ Ename string }
		}
		Files map[string]string
	}
	if code != http.StatusOK || json.Unmarshal(answer, &res) != nil {
		t.Fatalf("run_jupyter: %d %s", code, answer)
	}
	reversed := slices.Clone(all)
	slices.Reverse(reversed)
	if res.Status != "Success" || res.Driver.Status != "Finished" || len(res.Cells) != 5 ||
		len(res.Cells[1].Display) != 1 || res.Cells[1].Display[0]["text/plain"] != "123" || res.Cells[2].Stdout != "123\n" ||
		len(res.Cells[3].Error) != 1 || res.Cells[3].Error[0].Ename != "RuntimeError" ||
		res.Files["out.bin"] != base64.StdEncoding.EncodeToString(reversed) {
		t.Errorf("run_jupyter: %s", answer)
	}
	code, answer = s.post(t, "/run_jupyter", `{"cells": ["import time; time.sleep(60)", "1"], "total_timeout": 1}`)
	if code != http.StatusOK || !bytes.Contains(answer, []byte(`"status":"Failed"`)) || !bytes.Contains(answer, []byte(`"TimeLimitExceeded"`)) {
		t.Errorf("run_jupyter past its total: %d %s", code, answer)
	}
	if got := scrape(t, s).value("microbox_sessions", "", ""); got != 0 {
		t.Errorf("microbox_sessions %v after run_jupyter, want 0", got)
	}
	for _, p := range jailPids(t, s.cmd.Process.Pid) {
		if !slices.Contains(before, p) {
			t.Errorf("jail process %d left after run_jupyter", p)
		}
	}
}
