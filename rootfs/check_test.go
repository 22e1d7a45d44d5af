package rootfs

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// goodRoot is a finished fake root that passes the tree checks.
func goodRoot(t *testing.T) string {
	t.Helper()
	dir := fakeRoot(t)
	if _, err := Finish(dir, true); err != nil {
		t.Fatal(err)
	}
	return dir
}

func findings(r *Report, what string) []Finding {
	var out []Finding
	for _, f := range r.Findings {
		if f.What == what {
			out = append(out, f)
		}
	}
	return out
}

func wantLevel(t *testing.T, r *Report, what string, level Level, detail string) {
	t.Helper()
	for _, f := range findings(r, what) {
		if f.Level == level && strings.Contains(f.Detail, detail) {
			return
		}
	}
	t.Errorf("no %s finding %q containing %q in:\n%v", level, what, detail, r.Findings)
}

var owners = []int{0, os.Geteuid()}

func TestCheckGoodRoot(t *testing.T) {
	r := Check(goodRoot(t), CheckOptions{Python: "/usr/bin/python3", Owners: owners})
	if r.Failed() {
		t.Fatalf("a good root fails: %v", r.Findings)
	}
	wantLevel(t, r, "setuid", OK, "no setuid")
	wantLevel(t, r, "manifest", Warn, "none")
}

func TestCheckCatchesSetuid(t *testing.T) {
	dir := goodRoot(t)
	p := filepath.Join(dir, "usr/bin/sneaky")
	os.WriteFile(p, []byte("x"), 0o755)
	os.Chmod(p, 0o755|os.ModeSetuid)
	g := filepath.Join(dir, "usr/bin/sneaky-group")
	os.WriteFile(g, []byte("x"), 0o755)
	os.Chmod(g, 0o755|os.ModeSetgid)
	r := Check(dir, CheckOptions{Python: "/usr/bin/python3", Owners: owners})
	if !r.Failed() {
		t.Fatal("a root with setuid files passes")
	}
	wantLevel(t, r, "setuid", Fail, "/usr/bin/sneaky")
	wantLevel(t, r, "setuid", Fail, "/usr/bin/sneaky-group")
}

func TestCheckCatchesWritableAndMissing(t *testing.T) {
	dir := goodRoot(t)
	os.Mkdir(filepath.Join(dir, "open"), 0o777)
	os.Chmod(filepath.Join(dir, "open"), 0o777)
	os.WriteFile(filepath.Join(dir, "etc/open"), nil, 0o666)
	os.Chmod(filepath.Join(dir, "etc/open"), 0o666)
	os.Remove(filepath.Join(dir, "usr/bin/python3"))
	os.Remove(filepath.Join(dir, "proc"))
	r := Check(dir, CheckOptions{Python: "/usr/bin/python3", Owners: owners})
	wantLevel(t, r, "writable", Fail, "/open")
	wantLevel(t, r, "writable", Fail, "/etc/open")
	wantLevel(t, r, "python", Fail, "/proc")
	if r := Check(filepath.Join(dir, "missing"), CheckOptions{Python: "/usr/bin/python3"}); !r.Failed() {
		t.Errorf("a missing root passes")
	}
}

func TestCheckCatchesDevicesAndOwners(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("making device nodes and chowning to another user needs root")
	}
	dir := goodRoot(t)
	if err := unix.Mknod(filepath.Join(dir, "dev/sda"), unix.S_IFBLK|0o600, int(unix.Mkdev(8, 0))); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "etc/theirs"), nil, 0o644)
	os.Chown(filepath.Join(dir, "etc/theirs"), 4242, 4242)
	r := Check(dir, CheckOptions{Python: "/usr/bin/python3", Owners: owners})
	wantLevel(t, r, "devices", Fail, "/dev/sda")
	wantLevel(t, r, "owners", Fail, "/etc/theirs (uid 4242)")
}

func TestCheckReachable(t *testing.T) {
	dir := goodRoot(t)
	if err := CheckReachable(dir); err != nil {
		t.Fatal(err)
	}
	os.Chmod(filepath.Dir(dir), 0o750)
	r := Check(dir, CheckOptions{Python: "/usr/bin/python3", Owners: owners})
	if os.Geteuid() == 0 {
		wantLevel(t, r, "reach", Fail, "chmod o+x "+filepath.Dir(dir))
	}
	os.Chmod(filepath.Dir(dir), 0o755)
}

// The sandbox probe's report is read into findings.
func TestCheckPythonProbe(t *testing.T) {
	dir := goodRoot(t)
	var argv []string
	run := func(out string, err error) func(string, ...string) (string, error) {
		return func(code string, args ...string) (string, error) {
			argv = append([]string{"-c", code}, args...)
			return out, err
		}
	}
	r := Check(dir, CheckOptions{Python: "/usr/bin/python3", Owners: owners, Run: run(
		`{"version": "3.11.2", "failed": {}, "missing_pyc": [], "stale_pyc": [], "modules": 90, "import_ms": 40}`, nil)})
	if r.Failed() || r.Python != "3.11.2" {
		t.Fatalf("%v %q", r.Findings, r.Python)
	}
	if argv[0] != "-c" || !strings.Contains(argv[2], "sqlite3") {
		t.Errorf("probe argv %q", argv[:1])
	}
	wantLevel(t, r, "bytecode", OK, "all 90")

	r = Check(dir, CheckOptions{Python: "/usr/bin/python3", Owners: owners, Run: run(
		`{"version": "3.11.2", "failed": {"ctypes": "ModuleNotFoundError: No module named '_ctypes'"}, "missing_pyc": ["json"], "stale_pyc": ["os"], "modules": 90}`, nil)})
	wantLevel(t, r, "stdlib", Fail, "ctypes (ModuleNotFoundError")
	wantLevel(t, r, "bytecode", Warn, "2 of 90")

	r = Check(dir, CheckOptions{Python: "/usr/bin/python3", Owners: owners, Run: run("", errors.New("sandbox_error: boom"))})
	wantLevel(t, r, "sandbox", Fail, "boom")
}

// The jail mounts on /proc, /dev, /tmp (and a working directory) before it
// pivots: a symbolic link on the way would be followed in the staging
// tree, so a root that has one is refused before any run.
func TestCheckMountPoint(t *testing.T) {
	dir := t.TempDir()
	for _, d := range []string{"proc", "dev", "real/work", "etc"} {
		os.MkdirAll(filepath.Join(dir, d), 0o755)
	}
	os.Symlink("/oldroot/etc", filepath.Join(dir, "tmp"))
	os.Symlink("real", filepath.Join(dir, "srv"))
	os.WriteFile(filepath.Join(dir, "file"), nil, 0o644)
	for p, want := range map[string]string{
		"/proc":      "",
		"/real/work": "",
		"/tmp":       "/tmp is a symbolic link",
		"/srv/work":  "/srv is a symbolic link",
		"/file":      "/file is not a directory",
		"/missing":   "no /missing directory",
	} {
		err := CheckMountPoint(dir, p)
		if (want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), want)) {
			t.Errorf("%s: %v, want %q", p, err, want)
		}
	}
	if err := CheckPython(dir, "/usr/bin/python3"); err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Errorf("a root whose /tmp is a link passed: %v", err)
	}
	// A directory on the way that others may write could have a link
	// swapped in between this check and the mount.
	os.Chmod(filepath.Join(dir, "real"), 0o777)
	if err := CheckMountPoint(dir, "/real/work"); err == nil || !strings.Contains(err.Error(), "written by others") {
		t.Errorf("a group- and world-writable parent passed: %v", err)
	}
	os.Chmod(filepath.Join(dir, "real"), 0o755)
	os.Chmod(dir, 0o775)
	if err := CheckMountPoint(dir, "/proc"); err == nil || !strings.Contains(err.Error(), "written by others") {
		t.Errorf("a group-writable root passed: %v", err)
	}
}
