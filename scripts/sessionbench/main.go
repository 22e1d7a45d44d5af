// Command sessionbench measures sessions (docs/sessions.md) against the
// other ways to run the same Python: a cell in a live session, a one-shot
// run through POST /v1/runs started cold and forked from a zygote, and
// bare /usr/bin/python3 on the host. Then it opens idle sessions and
// reports the memory each holds, as sessions per GiB.
//
// It starts its own `microbox-server serve --http` on the loopback (no
// warm jails, so that nothing else holds memory in the server's cgroups)
// and runs every variant of one program in turns, round by round, so that
// load from outside hits them alike. Each variant runs the program a few
// times before it is timed: the session has then imported what the
// program imports, as a session in use has, and the zygote has its
// template.
//
// Run from the repository root after make:
//
//	go run ./scripts/sessionbench [-n 30] [-rounds 3] [-sessions 16]
//
// It prints Markdown for BENCHMARKS.md. It only reports: a request that
// fails stops it with the server's answer.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

var (
	server   = flag.String("server", "bin/microbox-server", "the server build")
	perRound = flag.Int("n", 30, "timed runs of each variant per round")
	rounds   = flag.Int("rounds", 3, "rounds, the variants taking turns")
	warmup   = flag.Int("warmup", 3, "untimed runs of each variant before the rounds")
	sessions = flag.Int("sessions", 16, "idle sessions to open for the memory figures")
)

// A program is what every variant runs; preload is what its zygote
// imports ahead.
type program struct {
	name, code string
	preload    []string
}

var programs = []program{
	{"print(1)", "print(1)", nil},
	{"numpy", "import numpy as np\na = np.arange(100000, dtype=np.float64)\nprint(float((a * a).sum()))", []string{"numpy"}},
}

// A variant runs the program once and says whether it succeeded.
type variant struct {
	name, how string
	run       func() error
}

func main() {
	flag.Parse()
	bin, err := filepath.Abs(*server)
	check(err)
	srv := startServer(bin, "--max-sessions", strconv.Itoa(*sessions+4))
	defer srv.stop()
	load := loadavg()
	fmt.Printf("Produced by `go run ./scripts/sessionbench -n %d -rounds %d -sessions %d` (%s).\n\n",
		*perRound, *rounds, *sessions, time.Now().UTC().Format("2006-01-02 15:04 UTC"))
	fmt.Printf("- %s; load average before: %s\n", machine(), load)
	fmt.Println("- server: `microbox-server serve --http 127.0.0.1:0 --warm 0`; requests from Go's net/http client over one kept-alive connection; wall time from request to answer read")
	fmt.Println("- session: `{\"mem\": \"256M\"}`; run: `{\"code\", \"mem\": \"256M\", \"timeout\": \"10s\"}`, plus `\"zygote\": true` and the program's `preload`")
	for _, p := range programs {
		latency(srv, p)
	}
	memory(srv)
	fmt.Printf("\nload average after: %s\n", loadavg())
}

// latency times the program's variants and prints their table.
func latency(srv *apiServer, p program) {
	s := srv.openSession(`{"mem": "256M"}`)
	defer srv.closeSession(s)
	run := map[string]any{"code": p.code, "mem": "256M", "timeout": "10s"}
	zyg := map[string]any{"code": p.code, "mem": "256M", "timeout": "10s", "zygote": true}
	if p.preload != nil {
		zyg["preload"] = p.preload
	}
	variants := []variant{
		{"python", "`/usr/bin/python3 -c CODE` on the host", func() error { return bare(p.code) }},
		{"cell", "`POST /v1/sessions/{id}/cells` in one live session", func() error { return srv.cell(s, p.code) }},
		{"run-zygote", "`POST /v1/runs`, forked from a zygote", func() error { return srv.run(zyg) }},
		{"run-cold", "`POST /v1/runs`, a cold start", func() error { return srv.run(run) }},
		{"session-open", "`POST /v1/sessions` until its interpreter is ready (closed untimed)", func() error { return srv.openAndClose() }},
	}
	times := make([][]time.Duration, len(variants))
	for _, v := range variants {
		for range *warmup {
			check(v.run())
		}
	}
	for range *rounds {
		for i, v := range variants {
			for range *perRound {
				t0 := time.Now()
				check(v.run())
				times[i] = append(times[i], time.Since(t0))
			}
		}
	}
	fmt.Printf("\n### `%s`\n\n", strings.ReplaceAll(p.code, "\n", "; "))
	fmt.Println("| variant | what | n | median ms | p90 ms | mean ms | × python median |")
	fmt.Println("|---|---|--:|--:|--:|--:|--:|")
	base := pct(times[0], 50)
	for i, v := range variants {
		fmt.Printf("| %s | %s | %d | %.2f | %.2f | %.2f | %.2f |\n", v.name, v.how, len(times[i]),
			pct(times[i], 50), pct(times[i], 90), mean(times[i]), pct(times[i], 50)/base)
	}
}

// memory opens idle sessions, each after one cell, and prints what they
// hold: their cgroups' charge and their processes' PSS, and what the
// server itself grew by.
func memory(srv *apiServer) {
	fmt.Printf("\n### Memory of %d idle sessions\n\n", *sessions)
	fmt.Println("Each session ran one cell and then sat idle. *cgroup* is the sessions' groups' charge (memory.usage_in_bytes, or memory.current on cgroup v2: their processes' pages, page tables, the tmpfs and kernel memory charged to them); *PSS* is the proportional set size of their processes (/proc/PID/smaps_rollup: the shared pages of the python binary and libraries split among all their users); *server* is the growth of the server's own PSS. Sessions per GiB = 1 GiB ÷ (the larger of cgroup and PSS, plus the server's growth) per session.")
	fmt.Println()
	fmt.Println("| first cell | sessions | cgroup MiB per session | PSS MiB per session | processes per session | server growth MiB per session | sessions per GiB |")
	fmt.Println("|---|--:|--:|--:|--:|--:|--:|")
	for _, cell := range []string{"x = 1", "import numpy"} {
		before := srv.groups()
		serverBefore := pss(srv.cmd.Process.Pid)
		var ids []string
		for range *sessions {
			id := srv.openSession(`{"mem": "256M"}`)
			check(srv.cell(id, cell))
			ids = append(ids, id)
		}
		time.Sleep(time.Second) // let the interpreters settle idle
		var charge, procPSS, procs int64
		groups := 0
		for _, g := range srv.groups() {
			if slices.Contains(before, g) {
				continue
			}
			groups++
			charge += groupCharge(g)
			for _, pid := range groupPids(g) {
				procPSS += pss(pid)
				procs++
			}
		}
		serverGrowth := pss(srv.cmd.Process.Pid) - serverBefore
		for _, id := range ids {
			srv.closeSession(id)
		}
		if groups != *sessions {
			check(fmt.Errorf("found %d new session cgroups, want %d", groups, *sessions))
		}
		n := float64(*sessions)
		perSession := float64(max(charge, procPSS)+max(serverGrowth, 0)) / n
		fmt.Printf("| `%s` | %d | %.1f | %.1f | %.1f | %.2f | %.0f |\n", cell, *sessions, mib(float64(charge)/n),
			mib(float64(procPSS)/n), float64(procs)/n, mib(float64(serverGrowth)/n), float64(1<<30)/perSession)
	}
}

// ---------------------------------------------------------------------------
// The server.

type apiServer struct {
	cmd    *exec.Cmd
	url    string
	client *http.Client
}

var listening = regexp.MustCompile(`serving the HTTP API on (http://\S+)`)

func startServer(bin string, args ...string) *apiServer {
	dir, err := os.MkdirTemp("", "microbox-sessionbench-")
	check(err)
	defer os.RemoveAll(dir) // the socket is made once the server listens
	cmd := exec.Command(bin, append([]string{"serve", "--socket", filepath.Join(dir, "exec.sock"),
		"--http", "127.0.0.1:0", "--warm", "0"}, args...)...)
	stderr, err := cmd.StderrPipe()
	check(err)
	check(cmd.Start())
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		if m := listening.FindStringSubmatch(sc.Text()); m != nil {
			go io.Copy(io.Discard, stderr)
			s := &apiServer{cmd: cmd, url: m[1], client: &http.Client{Timeout: time.Minute}}
			cleanup = s.stop
			return s
		}
	}
	cmd.Process.Kill()
	cmd.Wait()
	check(fmt.Errorf("%s did not start", bin))
	return nil
}

func (s *apiServer) stop() {
	s.cmd.Process.Signal(syscall.SIGTERM)
	s.cmd.Wait()
}

// call sends a request and decodes its JSON answer, which must have the
// status want.
func (s *apiServer) call(method, path string, body any, want int, out any) error {
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, s.url+path, r)
	if err != nil {
		return err
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != want {
		return fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, head(data))
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(data, out)
}

func (s *apiServer) openSession(options string) string {
	var info struct{ ID string }
	check(s.call("POST", "/v1/sessions", json.RawMessage(options), http.StatusCreated, &info))
	return info.ID
}

func (s *apiServer) closeSession(id string) {
	check(s.call("DELETE", "/v1/sessions/"+id, nil, http.StatusOK, nil))
}

func (s *apiServer) openAndClose() error {
	var info struct{ ID string }
	if err := s.call("POST", "/v1/sessions", json.RawMessage(`{"mem": "256M"}`), http.StatusCreated, &info); err != nil {
		return err
	}
	defer s.closeSession(info.ID)
	return nil
}

// cell runs code in the session; it must end "ok".
func (s *apiServer) cell(id, code string) error {
	var ans struct {
		Status string
		Error  any
	}
	if err := s.call("POST", "/v1/sessions/"+id+"/cells", map[string]string{"code": code}, http.StatusOK, &ans); err != nil {
		return err
	}
	if ans.Status != "ok" {
		return fmt.Errorf("cell %q: status %s, error %v", code, ans.Status, ans.Error)
	}
	return nil
}

// run posts a one-shot run; it must end "ok".
func (s *apiServer) run(task map[string]any) error {
	var res struct {
		Status, Stderr string
		Error          any
	}
	if err := s.call("POST", "/v1/runs", task, http.StatusOK, &res); err != nil {
		return err
	}
	if res.Status != "ok" {
		return fmt.Errorf("run: status %s, error %v, stderr %q", res.Status, res.Error, res.Stderr)
	}
	return nil
}

// groups lists the server's run and session cgroups in the memory
// controller's hierarchy (named microbox-jail-PID-..., PID the server's).
func (s *apiServer) groups() []string {
	root := "/sys/fs/cgroup/memory"
	if _, err := os.Stat(root); err != nil {
		root = "/sys/fs/cgroup"
	}
	prefix := fmt.Sprintf("microbox-jail-%d-", s.cmd.Process.Pid)
	var found []string
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() && strings.HasPrefix(d.Name(), prefix) {
			found = append(found, p)
			return filepath.SkipDir
		}
		return nil
	})
	return found
}

// ---------------------------------------------------------------------------
// Measures.

func bare(code string) error {
	out, err := exec.Command("/usr/bin/python3", "-c", code).Output()
	if err != nil {
		return fmt.Errorf("python3: %v", err)
	}
	if len(out) == 0 {
		return fmt.Errorf("python3 printed nothing")
	}
	return nil
}

// groupCharge is a group's memory charge in bytes.
func groupCharge(dir string) int64 {
	for _, f := range []string{"memory.usage_in_bytes", "memory.current"} {
		if b, err := os.ReadFile(filepath.Join(dir, f)); err == nil {
			n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
			check(err)
			return n
		}
	}
	check(fmt.Errorf("%s: no memory.usage_in_bytes or memory.current", dir))
	return 0
}

// groupPids lists the processes of a group and its descendants.
func groupPids(dir string) []int {
	var pids []int
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() != "cgroup.procs" {
			return nil
		}
		b, _ := os.ReadFile(p)
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil {
				pids = append(pids, pid)
			}
		}
		return nil
	})
	return pids
}

// pss is a process's proportional set size in bytes (0 once it is gone).
func pss(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "Pss:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}

func pct(ds []time.Duration, p int) float64 {
	s := slices.Clone(ds)
	slices.Sort(s)
	i := min(len(s)-1, (len(s)*p+99)/100-1)
	return ms(s[max(i, 0)])
}

func mean(ds []time.Duration) float64 {
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	return ms(sum) / float64(len(ds))
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func mib(b float64) float64 { return b / (1 << 20) }

func machine() string {
	cpu := "?"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				cpu = strings.TrimSpace(v)
				break
			}
		}
	}
	var u syscall.Utsname
	syscall.Uname(&u)
	rel := make([]byte, 0, len(u.Release))
	for _, c := range u.Release {
		if c == 0 {
			break
		}
		rel = append(rel, byte(c))
	}
	py, _ := exec.Command("/usr/bin/python3", "-c", "import platform; print(platform.python_version())").Output()
	return fmt.Sprintf("CPU: %s, %d CPUs; kernel %s; /usr/bin/python3 %s", cpu, runtime.NumCPU(), rel, strings.TrimSpace(string(py)))
}

func loadavg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

func head(b []byte) string {
	if len(b) > 300 {
		return string(b[:300]) + "..."
	}
	return string(b)
}

// cleanup stops the server when check ends the program early.
var cleanup func()

func check(err error) {
	if err == nil {
		return
	}
	fmt.Fprintln(os.Stderr, "sessionbench:", err)
	if cleanup != nil {
		cleanup()
	}
	os.Exit(1)
}
