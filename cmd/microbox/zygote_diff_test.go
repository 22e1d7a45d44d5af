package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/microbox/microbox/internal/policy"
	"github.com/microbox/microbox/result"
)

// observeProbe prints what a run can observe of its sandbox: "same" must
// be a cold run's, "distinct" must differ between any two runs.
const observeProbe = `
import ctypes, errno, json, os, random, resource, secrets, signal, socket, ssl, sys, uuid
status = {k: v.strip() for k, v in (l.split(":", 1) for l in open("/proc/self/status"))
          if k.startswith(("Cap", "NoNewPrivs", "Seccomp", "Sig", "ShdPnd"))}

def rseq():  # is the C library's rseq area registered with the kernel?
    libc = ctypes.CDLL(None, use_errno=True)
    try:
        at = ctypes.c_ssize_t.in_dll(libc, "__rseq_offset").value
    except ValueError:
        return "no rseq in the C library"
    fs = ctypes.c_ulong()
    if libc.syscall(158, 0x1003, ctypes.byref(fs)) < 0:  # arch_prctl(ARCH_GET_FS)
        return "arch_prctl: errno %d" % ctypes.get_errno()
    r = libc.syscall(334, ctypes.c_void_p(fs.value + at), 32, 0, 0x53053053)  # registered: EBUSY
    return "registered" if r < 0 and ctypes.get_errno() == errno.EBUSY else "rseq: %d, errno %d" % (r, ctypes.get_errno())
same = {
    "pid": os.getpid(), "ppid": os.getppid(), "uid": os.getuid(), "gid": os.getgid(), "groups": os.getgroups(),
    "sid": os.getsid(0) == os.getpid(), "cgroup": open("/proc/self/cgroup").read(), "env": dict(os.environ),
    "cwd": os.getcwd(), "tmp": sorted(os.listdir("/tmp")), "shm": sorted(os.listdir("/dev/shm")),
    "hostname": socket.gethostname(), "status": status, "argv": sys.argv, "path": sys.path, "flags": list(sys.flags),
    "rlimits": {n: resource.getrlimit(getattr(resource, n)) for n in dir(resource) if n.startswith("RLIMIT_")},
    "procs": sorted(int(p) for p in os.listdir("/proc") if p.isdigit()), "fds": sorted(os.listdir("/proc/self/fd")),
    "mounts": sorted(l.split()[4] for l in open("/proc/self/mountinfo")), "umask": os.umask(0o22),
    "ns": sorted(os.listdir("/proc/self/ns")), "affinity": sorted(os.sched_getaffinity(0)), "nice": os.nice(0),
    "encodings": [sys.getfilesystemencoding(), sys.stdout.encoding, sys.stderr.encoding],
    "uid_map": open("/proc/self/uid_map").read().split(),
    "handlers": {s.name: str(signal.getsignal(s)) for s in signal.valid_signals() if isinstance(s, signal.Signals)
                 and s not in (signal.SIGKILL, signal.SIGSTOP)},
    "rseq": rseq(),
}
distinct = {"ns": {n: os.readlink("/proc/self/ns/" + n) for n in sorted(os.listdir("/proc/self/ns"))},
            "random": random.random(), "urandom": os.urandom(16).hex(), "ssl": ssl.RAND_bytes(16).hex(),
            "uuid4": str(uuid.uuid4()), "secrets": secrets.token_hex(16)}
print(json.dumps({"same": same, "distinct": distinct}))
`

// zygoteDiffers are the observables docs/zygote.md lists as a forked
// run's own ("What differs from a cold run"), with what each must be.
var zygoteDiffers = map[string]func(cold, forked any) bool{
	// /run/microbox holds the template's bootstrap.
	"mounts": func(cold, forked any) bool {
		return reflect.DeepEqual(withoutRun(forked), cold)
	},
	// Its user namespace maps the program's uid alone.
	"uid_map": func(_, forked any) bool {
		m, _ := forked.([]any)
		return len(m) == 3 && m[0] == "1000" && m[2] == "1"
	},
}

// fetched is what a result's fetched files hold, for a message.
func fetched(files map[string]*result.Fetched) map[string]string {
	out := map[string]string{}
	for path, f := range files {
		if f == nil {
			out[path] = "<nil>"
			continue
		}
		out[path] = fmt.Sprintf("%q %s", f.Data, f.Error)
	}
	return out
}

func withoutRun(mounts any) []any {
	var out []any
	for _, m := range mounts.([]any) {
		if m != "/run" {
			out = append(out, m)
		}
	}
	return out
}

// coldExec is `microbox exec --json ARGS` in a one-shot jail, whatever
// the suite's pass: no server, no zygote.
func coldExec(t *testing.T, args ...string) policy.Result {
	t.Helper()
	cmd := exec.Command(microbox, append([]string{"exec", "--json"}, args...)...)
	cmd.Env = append(os.Environ(), socketEnv+"=", zygoteEnv+"=")
	return jsonResult(t, cmd)
}

// forkedExec is `microbox exec --json --zygote ARGS` through the server
// at socket, which must fork it from a template.
func forkedExec(t *testing.T, socket string, args ...string) policy.Result {
	t.Helper()
	cmd := client(socket, append([]string{"--json", "--zygote", "--preload", "json,ssl"}, args...)...)
	cmd.Env = append(cmd.Env, zygoteEnv+"=")
	r := jsonResult(t, cmd)
	if r.Status != result.StatusSandboxError && r.Start != "zygote" {
		t.Fatalf("%v: not forked (start %q): %s", args, r.Start, r.Describe())
	}
	return r
}

type observed struct {
	Same     map[string]any
	Distinct map[string]any
}

func observe(t *testing.T, r policy.Result) observed {
	t.Helper()
	var o observed
	if r.Status != result.StatusOK || json.Unmarshal([]byte(r.Stdout), &o) != nil {
		t.Fatalf("probe: %s", r.Describe())
	}
	return o
}

// TestZygoteDifferential runs programs cold and forked from a server's
// template and holds the forked runs to the cold runs' observables, but
// for those docs/zygote.md lists; random values and namespaces differ
// between forked runs as between cold ones.
func TestZygoteDifferential(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: a template's children each get a host uid range (CI runs as root)")
	}
	socket, _ := testServer(t)
	t.Run("observables", func(t *testing.T) {
		cold := observe(t, coldExec(t, "-c", observeProbe))
		forked := []observed{observe(t, forkedExec(t, socket, "-c", observeProbe)), observe(t, forkedExec(t, socket, "-c", observeProbe))}
		for i, f := range forked {
			for k, want := range cold.Same {
				got := f.Same[k]
				if ok := zygoteDiffers[k]; ok != nil && !ok(want, got) || ok == nil && !reflect.DeepEqual(got, want) {
					t.Errorf("forked run %d: %s is %v, cold %v", i, k, got, want)
				}
			}
		}
		for k, v := range forked[0].Distinct {
			if k != "ns" && reflect.DeepEqual(v, forked[1].Distinct[k]) { // ns: apart below, as runs end their numbers are given again
				t.Errorf("two forked runs drew the same %s: %v", k, v)
			}
		}
	})
	t.Run("concurrent namespaces", func(t *testing.T) {
		// Two runs alive at once: each prints its namespaces and waits for
		// its stdin to end.
		code := `import json, os, sys; print(json.dumps({n: os.readlink("/proc/self/ns/" + n) for n in os.listdir("/proc/self/ns")}), flush=True); sys.stdin.read()`
		var seen []map[string]string
		for range 2 {
			cmd := client(socket, "--zygote", "-c", code)
			cmd.Env = append(cmd.Env, zygoteEnv+"=")
			in, _ := cmd.StdinPipe()
			out, _ := cmd.StdoutPipe()
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer cmd.Wait()
			defer in.Close()
			var ns map[string]string
			line, _ := bufio.NewReader(out).ReadString('\n')
			if err := json.Unmarshal([]byte(line), &ns); err != nil {
				t.Fatalf("%q: %v", line, err)
			}
			seen = append(seen, ns)
		}
		for n, id := range seen[0] {
			if n != "time" && n != "time_for_children" && seen[1][n] == id { // time: the host's, cold too
				t.Errorf("two concurrent forked runs share their %s namespace %s", n, id)
			}
		}
	})
	t.Run("endings", func(t *testing.T) {
		// How a program ends, as python3 ends it: the status, the
		// streams to the byte (tracebacks included), the exit status
		// 120 of a stream that would not flush, the death by SIGINT
		// after an uncaught KeyboardInterrupt's traceback, __main__ as
		// the interpreter makes it, and its finalization: what only the
		// program's globals held is freed (a file left open is flushed,
		// __del__ methods run) and the original streams are flushed.
		for _, args := range [][]string{
			{"-c", "raise KeyboardInterrupt"},
			{"-c", "import os, signal, time\nos.kill(os.getpid(), signal.SIGINT)\ntime.sleep(5)"},
			{"-c", "import atexit\natexit.register(lambda: print('bye'))\nraise KeyboardInterrupt('stop') from None"},
			{"-c", "import signal, os\nsignal.signal(signal.SIGINT, lambda *a: print('caught'))\nos.kill(os.getpid(), signal.SIGINT)\nprint('after')"},
			{"-c", "def f():\n    raise ValueError('a') from KeyError('b')\nf()"},
			{"-c", "import sys; sys.exit('bye')"},
			{"-c", "import sys; sys.exit(-1)"},
			{"-c", "import sys; print('no newline', end=''); sys.exit(3)"},
			{"-c", "import os; os.close(1); print('x')"},
			{"-c", "import os; os.close(1); print('x'); raise SystemExit(4)"},
			{"-c", "import os; os.close(2); raise ValueError('z')"},
			{"-c", "import os, sys\nsys.unraisablehook = lambda u: print(type(u).__name__, u.exc_type.__name__, u.object is sys.stdout, u.err_msg, u.exc_traceback, file=sys.stderr)\nos.close(1)\nprint('x')"},
			{"-c", "import sys, os\nsys.stderr = sys.stdout\nos.close(1)\nprint('x')"},
			{"-c", "import sys\nsys.excepthook = lambda *a: print('hook', a[0].__name__, file=sys.stderr)\n1/0"},
			{"-c", "import atexit, sys\natexit.register(lambda: print(type(sys.last_value).__name__, sys.last_traceback is not None, file=sys.stderr))\n1/0"},
			{"-c", "print([(k, type(v).__name__) for k, v in globals().items()], __loader__)"},
			{"-c", "class A:\n    def __del__(self):\n        print('freed', a is self)\na = A()"},
			{"-c", "class A:\n    def __del__(self):\n        print('cycle freed')\na = A()\na.me = a"},
			{"-c", "import io, sys\nprint('before')\nsys.stdout = io.StringIO()\nprint('hidden')"},
			{"-c", "import sys\nprint('before')\ndel sys.stdout"},
			{"--fetch", "/tmp/left-open", "-c", "f = open('/tmp/left-open', 'w')\nf.write('written, never closed')"},
			{"--fetch", "/tmp/left-open", "-c", "def g(): pass\nf = open('/tmp/left-open', 'w')\nf.write('globals in a cycle')"},
			{"--fetch", "/tmp/left-open", "-c", "class K:\n    f = open('/tmp/left-open', 'w')\nK.f.write('a class attribute')"},
			{"-c", "import os, signal\nclass A:\n    def __del__(self): os.kill(os.getpid(), signal.SIGINT)\na = A()"},
			{"-c", "import ctypes; ctypes.CDLL(None).printf(b'from C stdio\\n')"},
			// A program that breaks what the ending uses still ends as
			// python3 would.
			{"-c", "import sys; sys.stderr = None; raise SystemExit('to the process stderr')"},
			{"-c", "class X:\n    def __str__(self): raise ValueError\nraise SystemExit(X())"},
			{"-c", "import sys; sys.excepthook = None; 1/0"},
			{"-c", "import sys\ndef h(*a): raise ValueError('in hook')\nsys.excepthook = h\n1/0"},
			{"-c", "import sys\ndef h(*a): raise SystemExit(7)\nsys.excepthook = h\n1/0"},
			{"-c", "import sys\nsys.excepthook = lambda *a: print(sys.exc_info()[0])\n1/0"},
			{"-c", "import builtins; del builtins.print; raise SystemExit('m')"},
			{"-c", "import builtins; builtins.KeyboardInterrupt = ZeroDivisionError; 1/0"},
			{"-c", "import os; os._exit = lambda c: print('called', c)"},
			{"-c", "import sys, os; del sys.unraisablehook; print('x', end=''); os.close(1)"},
			{"-c", "import signal; signal.SIGINT = 15; raise KeyboardInterrupt"},
			{"-c", "import builtins; del builtins.getattr; print('x')"},
			{"-c", "import gc; gc.collect = None\nclass A:\n    def __del__(self): print('cycle freed')\na = A(); a.me = a"},
			{"-c", "import atexit; atexit._run_exitfuncs = lambda: print('fake')\natexit.register(lambda: print('real'))"},
			{"-c", "import sys\nclass E:\n    def write(self, s): raise ValueError\n    def flush(self): pass\nsys.stderr = E()\nraise SystemExit('m')"},
			{"-c", "raise SystemExit(2**70)"},
			{"-c", "raise SystemExit(2**32 + 3)"},
			{"-c", "class I(int):\n    def __and__(s, o): return 9\nraise SystemExit(I(3))"},
			{"-c", "class K(KeyboardInterrupt): pass\nraise K()"},
			{"-c", "import threading, time, os, signal\nthreading.Thread(target=time.sleep, args=(1,)).start()\nthreading.Timer(0.2, os.kill, (os.getpid(), signal.SIGINT)).start()"},
		} {
			cold, forked := coldExec(t, args...), forkedExec(t, socket, args...)
			if forked.Status != cold.Status || !reflect.DeepEqual(forked.ExitCode, cold.ExitCode) || !reflect.DeepEqual(forked.Signal, cold.Signal) ||
				forked.Stdout != cold.Stdout || forked.Stderr != cold.Stderr || !reflect.DeepEqual(forked.Fetched, cold.Fetched) {
				t.Errorf("%q:\nforked %s exit %v signal %v stdout %q stderr %q fetched %v\ncold   %s exit %v signal %v stdout %q stderr %q fetched %v",
					args[len(args)-1], forked.Status, deref(forked.ExitCode), deref(forked.Signal), forked.Stdout, forked.Stderr, fetched(forked.Fetched),
					cold.Status, deref(cold.ExitCode), deref(cold.Signal), cold.Stdout, cold.Stderr, fetched(cold.Fetched))
			}
		}
		// A file program is compiled from its bytes, as python3 FILE
		// reads it (a BOM, a coding declaration), and its output is
		// flushed before the ending's hooks run.
		dir := t.TempDir()
		for name, src := range map[string]string{
			"bom.py":    "\xef\xbb\xbfprint('after a BOM')\n",
			"latin1.py": "# -*- coding: latin-1 -*-\nprint('\xe9')\n",
			"order.py":  "import atexit, os\nprint('buffered')\natexit.register(lambda: os.write(1, b'atexit\\n'))\n",
		} {
			path := filepath.Join(dir, name)
			if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
				t.Fatal(err)
			}
			cold, forked := coldExec(t, path), forkedExec(t, socket, path)
			if forked.Status != cold.Status || forked.Stdout != cold.Stdout || forked.Stderr != cold.Stderr {
				t.Errorf("%s: forked %s stdout %q stderr %q, cold %s stdout %q stderr %q",
					name, forked.Status, forked.Stdout, forked.Stderr, cold.Status, cold.Stdout, cold.Stderr)
			}
		}
		// A file's __main__ has the source file's loader.
		prog := filepath.Join(t.TempDir(), "prog.py")
		if err := os.WriteFile(prog, []byte("print(type(__loader__).__name__, __loader__.name, __file__ == __loader__.path, list(globals()))\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if cold, forked := coldExec(t, prog), forkedExec(t, socket, prog); forked.Stdout != cold.Stdout || cold.Status != result.StatusOK {
			t.Errorf("a file's __main__: forked %q, cold %q (%s)", forked.Stdout, cold.Stdout, cold.Describe())
		}
	})
	t.Run("limits at their edges", func(t *testing.T) {
		big := filepath.Join(t.TempDir(), "big")
		if err := os.WriteFile(big, make([]byte, 12<<20), 0o644); err != nil {
			t.Fatal(err)
		}
		fork := "import os\nfor _ in range(%d):\n    if os.fork() == 0: os._exit(0)\nos.wait(); print('forked')"
		for _, args := range [][]string{
			{"--pids", "1", "-c", "print(1)"},
			{"--pids", "2", "-c", "print(1)"},
			{"--pids", "2", "-c", strings.Replace(fork, "%d", "1", 1)},
			{"--pids", "3", "-c", strings.Replace(fork, "%d", "1", 1)},
			{"--mem", "64M", "--file", big + ":/tmp/big", "-c", "import os; print(os.path.getsize('/tmp/big'))"},
			{"--output-limit", "10", "-c", "print('x' * 9)"},
			{"--output-limit", "10", "-c", "print('x' * 10)"},
			{"--timeout", "300ms", "-c", "while True: pass"},
			{"-c", "import time; time.sleep(0.3)"},
		} {
			cold, forked := coldExec(t, args...), forkedExec(t, socket, args...)
			if forked.Status != cold.Status || forked.Stdout != cold.Stdout || forked.Limit != cold.Limit {
				t.Errorf("%v: forked %s, cold %s", args, forked.Describe(), cold.Describe())
			}
			// Times start with the caller's code in both: a forked run's
			// is never shorter than what the program slept.
			if args[0] == "-c" && forked.WallTimeMs < 300 {
				t.Errorf("%v: forked wall time %v ms", args, forked.WallTimeMs)
			}
		}
	})
}

// TestServedDifferential holds a run served from a jail started ahead,
// whose program's process was forked and sandboxed before the run came
// (nsjail/nsinit/pid1.c: prepare_program), to a cold run's observables:
// all of them, credentials, capabilities, filter, limits, descriptors,
// signal state and stdin included.
func TestServedDifferential(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for the server's jails (CI runs as root)")
	}
	socket, _ := testServer(t, "--warm", "1")
	served := func() (policy.Result, bool) {
		cmd := client(socket, "--json", "--trace", "-c", observeProbe)
		cmd.Env = append(cmd.Env, zygoteEnv+"=")
		r := jsonResult(t, cmd)
		ahead := r.Status == result.StatusOK
		for _, p := range r.Trace {
			ahead = ahead && p.Name != "cloned" // a jail started for the run
		}
		return r, ahead
	}
	cold := observe(t, coldExec(t, "-c", observeProbe))
	// The server's first run of a shape starts its jail; the next ones
	// find one ready once the server has started it.
	var r policy.Result
	ahead := false
	for try := 0; try < 20 && !ahead; try++ {
		r, ahead = served()
		if !ahead {
			time.Sleep(100 * time.Millisecond)
		}
	}
	if !ahead {
		t.Fatalf("no run was served from a jail started ahead: %s", r.Describe())
	}
	got := observe(t, r)
	for k, want := range cold.Same {
		if k == "uid_map" { // each jail has a host uid range of its own
			g, w := got.Same[k].([]any), want.([]any)
			if len(g) != 3 || len(w) != 3 || g[0] != w[0] || g[2] != w[2] {
				t.Errorf("served from a jail started ahead: uid_map is %v, cold %v", g, w)
			}
			continue
		}
		if !reflect.DeepEqual(got.Same[k], want) {
			t.Errorf("served from a jail started ahead: %s is %v, cold %v", k, got.Same[k], want)
		}
	}
}
