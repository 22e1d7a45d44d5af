package nsjail

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/microbox/microbox/cgroup"
	"github.com/microbox/microbox/nsjail/nsinit"
	"github.com/microbox/microbox/result"
	"github.com/microbox/microbox/seccomp"
)

// zygoteSpec is a run of code forked from a template with preload
// imported: default limits and filter, output captured.
func zygoteSpec(t testing.TB, code string, preload ...string) *Spec {
	t.Helper()
	o := Defaults()
	o.Code, o.Capture, o.Zygote, o.Preload = &code, true, true, preload
	s, err := o.Spec()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func startTemplate(t *testing.T, s *Spec) *Template {
	t.Helper()
	needNamespaces(t)
	key, err := ZygoteKeyOf(s)
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := testSpawner(t).StartTemplate(key, s)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tmpl.Close() })
	return tmpl
}

func runChild(t *testing.T, tmpl *Template, s *Spec) *result.Result {
	t.Helper()
	c, err := tmpl.Fork()
	if err != nil {
		t.Fatal(err)
	}
	return Settle(c.Run(context.Background(), s))
}

func TestZygoteRun(t *testing.T) {
	s := zygoteSpec(t, "import os, sys; print(os.getpid(), os.getuid(), sys.argv, __name__); print('err', file=sys.stderr); sys.exit(3)")
	tmpl := startTemplate(t, s)
	r := runChild(t, tmpl, s)
	if r.Status != result.StatusNonzero || *r.ExitCode != 3 || r.Stdout != "2 1000 ['-c'] __main__\n" || r.Stderr != "err\n" || r.Start != "zygote" {
		t.Fatalf("status %s exit %v stdout %q stderr %q error %v start %q", r.Status, r.ExitCode, r.Stdout, r.Stderr, deref(r.Error), r.Start)
	}
}

// A forked run ends as python3 does: the bootstrap does not import
// threading, and a program that does has its non-daemon threads waited
// for before its atexit handlers run, in a main thread that is the main
// thread.
func TestZygoteExitWaitsForThreads(t *testing.T) {
	code := `import atexit, threading, time
def late():
    time.sleep(0.2)
    print("thread")
atexit.register(print, "atexit")
threading.Thread(target=late).start()
print("main", threading.current_thread() is threading.main_thread())`
	s := zygoteSpec(t, code)
	tmpl := startTemplate(t, s)
	if r := runChild(t, tmpl, s); r.Status != result.StatusOK || r.Stdout != "main True\nthread\natexit\n" {
		t.Fatalf("status %s stdout %q stderr %q error %v", r.Status, r.Stdout, r.Stderr, deref(r.Error))
	}
	s = zygoteSpec(t, `import sys; print("threading" in sys.modules)`)
	if r := runChild(t, tmpl, s); r.Status != result.StatusOK || r.Stdout != "False\n" {
		t.Fatalf("a run that imports nothing: status %s stdout %q stderr %q error %v", r.Status, r.Stdout, r.Stderr, deref(r.Error))
	}
}

// A run forked from a template holds no capability (the bounding set
// too), has no_new_privs and the filter, sees only its own processes,
// cannot reach the template or a sibling, and leaves nothing a later run
// sees; each draws its own random numbers.
func TestZygoteRunsAreApart(t *testing.T) {
	probe := zygoteSpec(t, `
import builtins, json, os, random, signal, sys, threading
pids = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
state = {"pids": pids, "uid": os.getuid(), "random": random.random(),
         "patched": hasattr(builtins, "leak"), "json_leak": hasattr(json, "leak"),
         "tmp": os.listdir("/tmp"), "host_uid": open("/proc/self/uid_map").read().split()[1],
         "caps": [l.split()[1] for l in open("/proc/self/status") if l.startswith("Cap")],
         "nnp": [l.split()[1] for l in open("/proc/self/status") if l.startswith(("NoNewPrivs", "Seccomp:", "Seccomp_filters:"))]}
try:
    os.kill(-1, signal.SIGKILL)  # every process it may signal but itself and its init: none
except OSError as e:
    pass
builtins.leak = json.leak = True
open("/tmp/left", "w").write("x")
threading.Thread(target=lambda: None, daemon=True).start()
print(json.dumps(state))
`)
	tmpl := startTemplate(t, probe)
	filters, err := seccomp.Programs(probe.Seccomp) // every one loaded, in each run
	if err != nil {
		t.Fatal(err)
	}
	wantNNP := fmt.Sprintf("[1 2 %d]", len(filters))
	var states []map[string]any
	for range 3 {
		r := runChild(t, tmpl, probe)
		if r.Status != result.StatusOK {
			t.Fatalf("status %s stdout %q stderr %q error %v", r.Status, r.Stdout, r.Stderr, deref(r.Error))
		}
		var st map[string]any
		if err := json.Unmarshal([]byte(r.Stdout), &st); err != nil {
			t.Fatalf("%v: %q", err, r.Stdout)
		}
		states = append(states, st)
	}
	if tmpl.Err() != nil {
		t.Fatalf("a run's kill(-1) reached the template: %v", tmpl.Err())
	}
	for i, st := range states {
		if fmt.Sprint(st["pids"]) != "[1 2]" || st["uid"] != 1000.0 || st["patched"] != false || st["json_leak"] != false || fmt.Sprint(st["tmp"]) != "[]" ||
			fmt.Sprint(st["caps"]) != "[0000000000000000 0000000000000000 0000000000000000 0000000000000000 0000000000000000]" || fmt.Sprint(st["nnp"]) != wantNNP {
			t.Errorf("run %d saw %v", i, st)
		}
		for _, other := range states[:i] {
			if other["random"] == st["random"] {
				t.Errorf("two runs drew the same random number %v", st["random"])
			}
		}
	}
}

// The verdicts are a cold run's: the traceback as python3 prints it,
// SystemExit's status, the wall-clock and memory limits, the output cap.
func TestZygoteVerdicts(t *testing.T) {
	s := zygoteSpec(t, "print(1)")
	tmpl := startTemplate(t, s)
	cases := []struct {
		code, status, stderr string
		change               func(*Spec)
	}{
		{"def f():\n    raise ValueError('boom')\nf()", "nonzero",
			"Traceback (most recent call last):\n  File \"<string>\", line 3, in <module>\n  File \"<string>\", line 2, in f\nValueError: boom\n", nil},
		{"def (:", "nonzero", "  File \"<string>\", line 1\n    def (:\n        ^\nSyntaxError: invalid syntax\n", nil},
		{"import sys; sys.exit('bye')", "nonzero", "bye\n", nil},
		{"while True: pass", "timeout", "", func(s *Spec) { s.Timeout = 300 * time.Millisecond }},
		{"x = bytearray(400 << 20)", "memory", "", nil},
		{"print('x' * 100)", "output_limit", "", func(s *Spec) { s.OutputLimit = 10 }},
		{"import os; os.kill(os.getpid(), 11)", "signaled", "", nil},
	}
	for _, c := range cases {
		s := zygoteSpec(t, c.code)
		if c.change != nil {
			c.change(s)
		}
		r := runChild(t, tmpl, s)
		if string(r.Status) != c.status || (c.stderr != "" && r.Stderr != c.stderr) {
			t.Errorf("%q: status %s stderr %q error %v; want %s %q", c.code, r.Status, r.Stderr, deref(r.Error), c.status, c.stderr)
		}
	}
}

// A preload that fails is the template's error, naming the module.
func TestZygotePreloads(t *testing.T) {
	needNamespaces(t)
	s := zygoteSpec(t, "import json; print(json.dumps(1))", "json", "no_such_module")
	key, _ := ZygoteKeyOf(s)
	if _, err := testSpawner(t).StartTemplate(key, s); err == nil || !strings.Contains(err.Error(), "no_such_module: ModuleNotFoundError") {
		t.Fatalf("a missing preload: %v", err)
	}
	s = zygoteSpec(t, "import sys; print(sys.modules['json'].dumps(1))", "json")
	tmpl := startTemplate(t, s)
	if r := runChild(t, tmpl, s); r.Status != result.StatusOK || r.Stdout != "1\n" {
		t.Fatalf("status %s stdout %q error %v", r.Status, r.Stdout, deref(r.Error))
	}
	// numpy's BLAS would start threads of its own, which a fork would not
	// copy; the base environment has it start none, and the children's
	// numpy works.
	s = zygoteSpec(t, "import numpy as np; print(int((np.ones((64, 64)) @ np.ones((64, 64)))[0, 0]))", "numpy")
	tmpl = startTemplate(t, s)
	if r := runChild(t, tmpl, s); r.Status != result.StatusOK || r.Stdout != "64\n" {
		t.Fatalf("numpy: status %s stdout %q stderr %q error %v", r.Status, r.Stdout, r.Stderr, deref(r.Error))
	}
}

// BenchmarkZygoteRun measures a run in a child forked ahead (Run and its
// teardown) and the fork itself, apart:
// go test -run '^$' -bench Zygote ./nsjail
func BenchmarkZygoteRun(b *testing.B) {
	s := zygoteSpec(b, "print(1)")
	key, _ := ZygoteKeyOf(s)
	sp, err := NewSpawner()
	if err != nil {
		b.Fatal(err)
	}
	defer sp.Close()
	tmpl, err := sp.StartTemplate(key, s)
	if err != nil {
		b.Fatal(err)
	}
	defer tmpl.Close()
	var forking, running time.Duration
	for b.Loop() {
		t0 := time.Now()
		c, err := tmpl.Fork()
		if err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if r := Settle(c.Run(context.Background(), s)); r.Status != result.StatusOK {
			b.Fatalf("%s %v", r.Status, deref(r.Error))
		}
		forking, running = forking+t1.Sub(t0), running+time.Since(t1)
	}
	b.ReportMetric(float64(forking.Microseconds())/float64(b.N)/1000, "fork-ms/op")
	b.ReportMetric(float64(running.Microseconds())/float64(b.N)/1000, "run-ms/op")
}

// What a template can run: python -c CODE or python FILE with the
// interpreter options it can start with (its own), code longer than a
// command line takes; what it cannot is refused by name, before any run.
func TestZygoteCommandLines(t *testing.T) {
	long := "x = 1\n" + strings.Repeat("#"+strings.Repeat(".", 99)+"\n", 1200) + "print(len(__import__('sys').argv), x)"
	o := Defaults()
	o.Code, o.Capture, o.Zygote, o.PythonFlags, o.Args = &long, true, true, []string{"-I", "-S"}, []string{"a"}
	s, err := o.Spec()
	if err != nil {
		t.Fatal(err)
	}
	tmpl := startTemplate(t, s)
	if r := runChild(t, tmpl, s); r.Status != result.StatusOK || r.Stdout != "2 1\n" {
		t.Errorf("long code under -I -S: %s %q %q %v", r.Status, r.Stdout, r.Stderr, deref(r.Error))
	}
	// In a template of its own: the options are the template's.
	o = Defaults()
	o.Capture, o.Zygote, o.Args = true, true, []string{"x"}
	o.Files = []File{{Path: "/tmp/main.py", Data: []byte("import sys; print(sys.argv, __file__, sys.path[0])"), Mode: 0o644}}
	code := "import runpy; runpy.run_path('/tmp/main.py', run_name='__main__')"
	o.Code = &code
	s, err = o.Spec()
	if err != nil {
		t.Fatal(err)
	}
	s.Argv = []string{s.Argv[0], "/tmp/main.py", "x"}
	tmpl = startTemplate(t, s)
	if r := runChild(t, tmpl, s); r.Status != result.StatusOK || r.Stdout != "['/tmp/main.py', 'x'] /tmp/main.py /tmp\n" {
		t.Errorf("python FILE: %s %q %q %v", r.Status, r.Stdout, r.Stderr, deref(r.Error))
	}
	for _, c := range []struct {
		change func(*Options)
		want   string
	}{
		{func(o *Options) { o.PythonFlags = []string{"-O"} }, "option -O"},
		{func(o *Options) { o.Env = []string{"PYTHONHASHSEED=1"} }, "PYTHONHASHSEED"},
		{func(o *Options) { o.Env = []string{"LD_PRELOAD=/tmp/x.so"} }, "LD_PRELOAD cannot take effect"},
		{func(o *Options) { o.Env = []string{"LC_ALL=C"} }, "LC_ALL cannot take effect"},
		{func(o *Options) { o.Env = []string{"HOME=/tmp/home"} }, "HOME cannot take effect in a zygote run: it is read at the interpreter's start, and a fork's interpreter started before it (leave it out, or pass the interpreter's -s)"},
		{func(o *Options) { o.Preload = []string{"os; import x"} }, "not a module name"},
		{func(o *Options) { o.Zygote = false; o.Preload = []string{"json"} }, "Preload needs Zygote"},
	} {
		o := Defaults()
		code := "pass"
		o.Code, o.Zygote = &code, true
		c.change(&o)
		if _, err := o.Spec(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("want an error naming %q, got %v", c.want, err)
		}
	}
}

// Where no template can serve it (a one-shot exec), a zygote run starts
// cold and says so.
func TestZygoteColdStart(t *testing.T) {
	needNamespaces(t)
	s := zygoteSpec(t, "print(1)")
	if r := testSpawner(t).Run(context.Background(), s); r.Status != result.StatusOK || r.Start != "cold" {
		t.Fatalf("%s start %q %v", r.Status, r.Start, deref(r.Error))
	}
}

// Every source of randomness a run can draw from is its own: a fork of a
// template whose preload used OpenSSL's generator (created an SSLContext)
// must not continue the template's stream, nor a sibling's; nor share
// multiprocessing's authentication key.
func TestZygoteRandomness(t *testing.T) {
	preload := preloadModule(t, "import multiprocessing, ssl\nssl.create_default_context()\nssl.RAND_bytes(16)\n")
	s := zygoteSpec(t, `
import json, multiprocessing, os, random, secrets, ssl, uuid
print(json.dumps([ssl.RAND_bytes(16).hex(), os.urandom(16).hex(), str(uuid.uuid4()), secrets.token_hex(16), random.random(),
                  multiprocessing.current_process().authkey.hex()]))
`, preload)
	tmpl := startTemplate(t, s)
	seen := map[string]int{}
	for i := range 3 {
		r := runChild(t, tmpl, s)
		var vals []any
		if r.Status != result.StatusOK || json.Unmarshal([]byte(r.Stdout), &vals) != nil {
			t.Fatalf("status %s stdout %q stderr %q error %v", r.Status, r.Stdout, r.Stderr, deref(r.Error))
		}
		for j, v := range vals {
			k := fmt.Sprint(j, v)
			if prev, ok := seen[k]; ok {
				t.Errorf("runs %d and %d drew the same value from source %d: %v", prev, i, j, v)
			}
			seen[k] = i
		}
	}
}

// preloadModule writes a module of source where the jails' interpreter
// (the host's, in the host-derived root) imports from, for the test's
// length, and names it.
func preloadModule(t *testing.T, source string) string {
	t.Helper()
	needNamespaces(t)
	dir := "/usr/local/lib/python3.11/dist-packages"
	if _, err := os.Stat(dir); err != nil {
		t.Skipf("no %s for a test module: %v", dir, err)
	}
	name := fmt.Sprintf("microbox_test_preload_%d", os.Getpid())
	path := filepath.Join(dir, name+".py")
	if err := os.WriteFile(path, []byte(source), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(path) })
	return name
}

// What a preload prints is not any run's output: the run's stdout and
// stderr hold only what the run wrote.
func TestZygotePreloadOutput(t *testing.T) {
	preload := preloadModule(t, "import sys\nprint('preload out', end='')\nsys.stderr.write('preload err')\n")
	s := zygoteSpec(t, "import sys; print('run out'); print('run err', file=sys.stderr)", preload)
	tmpl := startTemplate(t, s)
	for range 2 {
		if r := runChild(t, tmpl, s); r.Status != result.StatusOK || r.Stdout != "run out\n" || r.Stderr != "run err\n" {
			t.Fatalf("status %s stdout %q stderr %q error %v", r.Status, r.Stdout, r.Stderr, deref(r.Error))
		}
	}
}

// A forked run's namespaces are its own, as a cold run's are: its cgroup
// namespace is rooted at its own cgroup (/proc/self/cgroup reads as a cold
// run's), its mount table is a cold run's, and no namespace is a
// concurrent sibling's.
func TestZygoteNamespaces(t *testing.T) {
	code := `
import json, os
print(json.dumps({"cgroup": open("/proc/self/cgroup").read(),
                  "mounts": sorted(l.split()[4] for l in open("/proc/self/mountinfo") if l.split()[4] != "/run"),
                  "ns": {n: os.readlink("/proc/self/ns/" + n) for n in ("cgroup", "ipc", "mnt", "net", "pid", "user", "uts")}}))
`
	type seen struct {
		Cgroup string
		Mounts []string
		NS     map[string]string
	}
	observe := func(r *result.Result) seen {
		var s seen
		if r.Status != result.StatusOK || json.Unmarshal([]byte(r.Stdout), &s) != nil {
			t.Fatalf("status %s stdout %q stderr %q error %v", r.Status, r.Stdout, r.Stderr, deref(r.Error))
		}
		return s
	}
	cold := observe(testSpawner(t).Run(context.Background(), coldSpec(t, code)))
	s := zygoteSpec(t, code)
	tmpl := startTemplate(t, s)
	// Both alive at once: an ended namespace's number is given again.
	c1, err := tmpl.Fork()
	if err != nil {
		t.Fatal(err)
	}
	c2, err := tmpl.Fork()
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	a := observe(Settle(c1.Run(context.Background(), s)))
	b := observe(Settle(c2.Run(context.Background(), s)))
	if a.Cgroup != cold.Cgroup || b.Cgroup != cold.Cgroup {
		t.Errorf("/proc/self/cgroup: forked %q and %q, cold %q", a.Cgroup, b.Cgroup, cold.Cgroup)
	}
	// The mount table is a cold run's but for /run (the template's
	// bootstrap): the template's own /proc, /tmp and /dev/shm are not
	// beneath the run's.
	if !slices.Equal(a.Mounts, cold.Mounts) {
		t.Errorf("mount points: forked %v, cold %v", a.Mounts, cold.Mounts)
	}
	for n, id := range a.NS {
		if b.NS[n] == id {
			t.Errorf("two forked runs share their %s namespace (%s)", n, id)
		}
	}
}

// coldSpec is zygoteSpec's run without a zygote.
func coldSpec(t testing.TB, code string) *Spec {
	t.Helper()
	o := Defaults()
	o.Code, o.Capture = &code, true
	s, err := o.Spec()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// The verdicts at the limits' edges are a cold run's: the pids budget
// counts what a cold run's does (its PID 1 and program), and a run's
// files are written outside its memory budget, as a cold run's are.
func TestZygoteLimitEdges(t *testing.T) {
	needNamespaces(t)
	big := bytes.Repeat([]byte("x"), 12<<20)
	cases := []struct {
		name   string
		code   string
		limits cgroup.Limits
		files  []File
	}{
		{"pids 1", "print(1)", cgroup.Limits{Memory: 256 << 20, Pids: 1}, nil},
		{"pids 2", "print(1)", cgroup.Limits{Memory: 256 << 20, Pids: 2}, nil},
		{"pids 3", "import os\nif os.fork() == 0: os._exit(0)\nos.wait(); print(1)", cgroup.Limits{Memory: 256 << 20, Pids: 3}, nil},
		{"12 MiB file in 64 MiB", "import os; print(os.path.getsize('/tmp/big'))", cgroup.Limits{Memory: 64 << 20, Pids: 16},
			[]File{{Path: "/tmp/big", Data: big, Mode: 0o644}}},
	}
	sp := testSpawner(t)
	for _, c := range cases {
		cold, forked := coldSpec(t, c.code), zygoteSpec(t, c.code)
		for _, s := range []*Spec{cold, forked} {
			s.Cgroup = &cgroup.Options{Limits: c.limits}
			s.Files = c.files
		}
		want := sp.Run(context.Background(), cold)
		tmpl := startTemplate(t, forked)
		got := &result.Result{Status: result.StatusSandboxError}
		if child, err := tmpl.Fork(); err == nil { // a fork that fails is the run's sandbox_error
			got = Settle(child.Run(context.Background(), forked))
		}
		if got.Status != want.Status || got.Stdout != want.Stdout {
			t.Errorf("%s: forked %s %q (%v), cold %s %q (%v)", c.name, got.Status, got.Stdout, deref(got.Error), want.Status, want.Stdout, deref(want.Error))
		}
		tmpl.Close()
	}
}

// What a run's environment sets after the interpreter's start is the
// run's, as in a cold run (TZ, TMPDIR, even once a preload has used the
// template's); HOME is the run's too where the user site is off (-s).
func TestZygoteEnvironment(t *testing.T) {
	preload := preloadModule(t, "import tempfile, time\ntempfile.gettempdir()\n")
	code := "import os, tempfile, time; print(time.tzname, time.timezone, tempfile.gettempdir(), os.path.expanduser('~'))"
	specs := map[bool]*Spec{}
	for _, zygote := range []bool{false, true} {
		o := Defaults()
		o.Code, o.Capture, o.PythonFlags = &code, true, []string{"-s"}
		if zygote {
			o.Zygote, o.Preload = true, []string{preload}
		}
		o.Env = []string{"TZ=JST-9", "TMPDIR=/tmp/t", "HOME=/tmp/h"}
		o.Files = []File{{Path: "/tmp/t/x", Mode: 0o644}}
		s, err := o.Spec()
		if err != nil {
			t.Fatal(err)
		}
		specs[zygote] = s
	}
	cold := testSpawner(t).Run(context.Background(), specs[false])
	forked := runChild(t, startTemplate(t, specs[true]), specs[true])
	if cold.Status != result.StatusOK || forked.Stdout != cold.Stdout {
		t.Fatalf("forked %s %q %q, cold %s %q %q", forked.Status, forked.Stdout, forked.Stderr, cold.Status, cold.Stdout, cold.Stderr)
	}
}

// Code of any length is the run's own, not its template's: runs of long
// and short code share a key, and a long program forks from the template
// a short one started.
func TestZygoteKeyIgnoresCode(t *testing.T) {
	long := func(tag string) string {
		return strings.Repeat("#"+strings.Repeat(tag, 99)+"\n", 1200) + "print(" + strconv.Quote(tag) + ")"
	}
	short := zygoteSpec(t, "print('s')")
	key, err := ZygoteKeyOf(short)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := startTemplate(t, short)
	for _, tag := range []string{"a", "b"} {
		s := zygoteSpec(t, long(tag))
		k, err := ZygoteKeyOf(s)
		if err != nil || !k.Equal(key) {
			t.Fatalf("long code %s: its key is not the short code's (%v)", tag, err)
		}
		if r := runChild(t, tmpl, s); r.Status != result.StatusOK || r.Stdout != tag+"\n" {
			t.Errorf("long code %s: %s %q %q %v", tag, r.Status, r.Stdout, r.Stderr, deref(r.Error))
		}
	}
}

// A run whose template ends under it is told so.
func TestZygoteTemplateDiesUnderRun(t *testing.T) {
	s := zygoteSpec(t, "import time; print('up', flush=True); time.sleep(60)")
	s.Timeout = time.Minute
	tmpl := startTemplate(t, s)
	c, err := tmpl.Fork()
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		time.Sleep(300 * time.Millisecond) // into the run (its result is the same if not)
		unix.Kill(tmpl.Pid(), unix.SIGKILL)
	}()
	r := Settle(c.Run(context.Background(), s))
	if r.Status != result.StatusSandboxError || !strings.Contains(deref(r.Error), "template ended") {
		t.Fatalf("status %s error %q", r.Status, deref(r.Error))
	}
}

// The C library's fork runs the preloads' pthread_atfork handlers in PID
// 1, which shares the template's memory until its exec: a PID 1 that dies
// in one fails its run, saying so, and retires the template, whose memory
// the handler may have left half written, rather than forking on from it.
func TestZygoteForkHandlerDeathRetiresTemplate(t *testing.T) {
	preload := preloadModule(t, `import ctypes
libc = ctypes.CDLL(None)
def prepare():
    ctypes.string_at(0)  # dies, in PID 1
handlers = (ctypes.CFUNCTYPE(None)(prepare), ctypes.CFUNCTYPE(None)(lambda: None), ctypes.CFUNCTYPE(None)(lambda: None))
libc.__register_atfork(*handlers, None)
`)
	s := zygoteSpec(t, "print(1)", preload)
	tmpl := startTemplate(t, s)
	c, err := tmpl.Fork()
	if err == nil {
		r := Settle(c.Run(context.Background(), s))
		if r.Status != result.StatusSandboxError {
			t.Fatalf("a run whose PID 1 died in fork: status %s stdout %q", r.Status, r.Stdout)
		}
		err = errors.New(deref(r.Error))
	}
	if !strings.Contains(err.Error(), "died in fork") || !strings.Contains(err.Error(), "retires") {
		t.Errorf("the run's error %q does not say PID 1 died in fork and the template retires", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for tmpl.Err() == nil && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if tmpl.Err() == nil {
		t.Error("the template forks on after its PID 1 died in fork")
	}
}

// A forked run's PID 1 execs the init image when the build has one (make
// unit's microbox_init_image) and microbox's own binary otherwise, and its
// runs work either way (TestZygoteRun and the rest run on whichever it is).
func TestZygoteInitImage(t *testing.T) {
	s := zygoteSpec(t, "print(1)")
	tmpl := startTemplate(t, s)
	c, err := tmpl.Fork()
	if err != nil {
		t.Fatal(err)
	}
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", c.pid))
	if err != nil {
		t.Fatal(err)
	}
	want, _ := os.Executable()
	if nsinit.Image() != nil {
		want = "/memfd:microbox-init (deleted)"
		if tmpl.NotImage != nil {
			t.Errorf("the build has the init image, but: %v", tmpl.NotImage)
		}
	}
	if exe != want {
		t.Errorf("the run's PID 1 runs %q, want %q", exe, want)
	}
	if r := Settle(c.Run(context.Background(), s)); r.Status != result.StatusOK || r.Stdout != "1\n" {
		t.Errorf("the run: %s %q %s", r.Status, r.Stdout, deref(r.Error))
	}
	// The image is sealed and read-only: whoever holds it (the template
	// does) can change neither its bytes nor its mode.
	f, _, err := zygoteInit()
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if nsinit.Image() != nil {
		if _, err := f.WriteAt([]byte{0}, 0); err == nil {
			t.Error("the init image took a write")
		}
		if err := f.Truncate(0); err == nil {
			t.Error("the init image took a truncation")
		}
		if fi, err := f.Stat(); err != nil || fi.Mode().Perm() != 0o555 {
			t.Errorf("the init image's mode: %v %v", fi.Mode(), err)
		}
		seals, err := unix.FcntlInt(f.Fd(), unix.F_GET_SEALS, 0)
		if err != nil || seals&unix.F_SEAL_SEAL == 0 {
			t.Errorf("the init image's seals: %#x %v", seals, err)
		}
		if seals&unix.F_SEAL_EXEC != 0 { // Linux 6.3 on: its exec bits stay
			if err := f.Chmod(0o444); err == nil {
				t.Error("the init image took a chmod of its exec bits")
			}
		}
	}
}
