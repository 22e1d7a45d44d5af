package rootfs

// Checking a prepared root: that Python runs in it under the sandbox with
// its standard library and precompiled bytecode, and that nothing in the
// tree would be a danger on the host (setuid files, device nodes, writable
// directories another user could use to swap files).

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
)

// Level grades a finding.
type Level int

const (
	OK Level = iota
	Warn
	Fail
)

func (l Level) String() string {
	return [...]string{"ok", "warn", "FAIL"}[l]
}

// Finding is one line of a check's report.
type Finding struct {
	Level  Level
	What   string
	Detail string
}

func (f Finding) String() string {
	return fmt.Sprintf("%-4s  %s: %s", f.Level, f.What, f.Detail)
}

// Report is what Check found.
type Report struct {
	Findings []Finding
	// Python is the interpreter's version, if it ran.
	Python string
}

// Failed reports whether any finding makes the root unusable or unsafe.
func (r *Report) Failed() bool {
	return slices.ContainsFunc(r.Findings, func(f Finding) bool { return f.Level == Fail })
}

func (r *Report) add(l Level, what, format string, args ...any) {
	r.Findings = append(r.Findings, Finding{l, what, fmt.Sprintf(format, args...)})
}

// StdlibModules must import in a usable root: the full standard library,
// not python3-minimal's subset.
var StdlibModules = []string{"json", "asyncio", "multiprocessing", "ctypes", "sqlite3", "subprocess", "threading", "socket", "ssl", "hashlib", "decimal", "zlib"}

// CheckOptions say how to check a root.
type CheckOptions struct {
	Python string // interpreter inside the root
	// Owners are the uids that may own files in the root: root and the
	// caller. Anyone else could change the tree under the sandbox.
	Owners []int
	// Modules are imported besides StdlibModules (a build's extras).
	Modules []string
	// Run runs Python code (python -c code args...) with the root's
	// interpreter inside the sandbox and returns its stdout; nil skips
	// the run.
	Run func(code string, args ...string) (string, error)
	// Languages are languages besides Python the root should run (a
	// build's --lang), and RunLanguage runs one's code in the sandbox
	// and returns its stdout (nil skips the runs).
	Languages   []string
	RunLanguage func(language, code string) (string, error)
}

// Check inspects the root at dir and reports every finding; it never stops
// at the first problem, so one run shows everything to fix.
func Check(dir string, o CheckOptions) *Report {
	r := &Report{}
	// A root may be a symlink (to another disk); the jail binds what it
	// points to, so that is what is scanned.
	real, err := filepath.EvalSymlinks(dir)
	if fi, serr := os.Stat(real); err != nil || serr != nil || !fi.IsDir() {
		r.add(Fail, "root", "%s is not a directory", dir)
		return r
	}
	if err := CheckReachable(dir); err != nil {
		r.add(Fail, "reach", "%v", err)
	}
	if err := CheckPython(dir, o.Python); err != nil {
		r.add(Fail, "python", "%v", err)
	} else {
		r.add(OK, "python", "%s is an executable; /proc, /dev and /tmp are directories, reached without symbolic links", o.Python)
	}
	if o.Run != nil && !r.Failed() {
		probePython(r, o)
	}
	checkLanguages(r, dir, o)
	scanTree(r, real, o.Owners)
	if m, err := ReadManifest(dir); err == nil {
		r.add(OK, "manifest", "%s", m.describe())
	} else {
		r.add(Warn, "manifest", "none at %s (not made by microbox rootfs build/import)", ManifestPath)
	}
	return r
}

// CheckReachable reports whether the jail can reach the root at dir. The
// jail's init is not root on the host (it runs as an unprivileged host
// uid, or as the caller without root), so every directory on the way to
// the root must be searchable by it: a root under a 0700 directory (such
// as a private temporary directory) cannot be mounted.
func CheckReachable(dir string) error {
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return fmt.Errorf("rootfs %s: %w", dir, err)
	}
	euid := os.Geteuid()
	for d := real; ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil {
			return fmt.Errorf("rootfs %s: %w", dir, err)
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		search := fs.FileMode(0o001) // the jail is "other" to the host's files
		if ok && euid != 0 && int(st.Uid) == euid {
			search = 0o100 // without root, the jail runs as the caller
		}
		if fi.Mode().Perm()&search == 0 {
			return fmt.Errorf("the sandbox cannot reach rootfs %s: %s (mode %04o) is not searchable by other users, which the jail's unprivileged user is; chmod o+x %s, or keep the root elsewhere", dir, d, fi.Mode().Perm(), d)
		}
		if d == "/" {
			return nil
		}
	}
}

func (m *Manifest) describe() string {
	switch m.Kind {
	case "build":
		s := fmt.Sprintf("built %s from Debian %s, %d packages", m.Created.Format("2006-01-02"), m.Suite, len(m.Packages))
		if len(m.With) > 0 {
			s += ", with " + strings.Join(m.With, ",")
		}
		return s
	case "import":
		if m.Image != nil {
			return fmt.Sprintf("imported %s from %s %s", m.Created.Format("2006-01-02"), m.Image.Format, m.Image.Digest)
		}
	}
	return m.Kind
}

// probeCode runs inside the sandbox: it imports the modules named in
// argv[1], times the imports, and checks that every loaded module's
// bytecode is present and valid for its source (as the import system
// judges timestamp-based .pyc: magic number, source mtime and size), since
// in a read-only root a missing or stale .pyc means compiling on every
// run.
const probeCode = `
import importlib, importlib.util, json, os, sys, time
out = {"version": "%d.%d.%d" % sys.version_info[:3], "failed": {}, "missing_pyc": [], "stale_pyc": [], "modules": 0}
t = time.perf_counter()
for m in sys.argv[1].split(","):
    try:
        importlib.import_module(m)
    except BaseException as e:
        out["failed"][m] = "%s: %s" % (type(e).__name__, e)
out["import_ms"] = round((time.perf_counter() - t) * 1000, 1)
for name, mod in sorted(sys.modules.items()):
    src = getattr(mod, "__file__", None)
    if not src or not src.endswith(".py"):
        continue
    out["modules"] += 1
    try:
        with open(importlib.util.cache_from_source(src), "rb") as f:
            head = f.read(16)
    except (OSError, NotImplementedError, ValueError):
        out["missing_pyc"].append(name)
        continue
    st = os.stat(src)
    flags = int.from_bytes(head[4:8], "little")
    if head[:4] != importlib.util.MAGIC_NUMBER:
        out["stale_pyc"].append(name)
    elif not flags & 1 and (int.from_bytes(head[8:12], "little") != int(st.st_mtime) & 0xFFFFFFFF
                             or int.from_bytes(head[12:16], "little") != st.st_size & 0xFFFFFFFF):
        out["stale_pyc"].append(name)
print(json.dumps(out))
`

type probeResult struct {
	Version    string            `json:"version"`
	Failed     map[string]string `json:"failed"`
	MissingPyc []string          `json:"missing_pyc"`
	StalePyc   []string          `json:"stale_pyc"`
	Modules    int               `json:"modules"`
	ImportMs   float64           `json:"import_ms"`
}

// probePython runs probeCode in the sandbox and reports the interpreter,
// the imports and the bytecode.
func probePython(r *Report, o CheckOptions) {
	stdlib := strings.Join(StdlibModules, ",")
	out, err := o.Run(probeCode, stdlib)
	if err != nil {
		r.add(Fail, "sandbox", "python does not run in the sandbox: %v", err)
		return
	}
	var p probeResult
	if err := json.Unmarshal([]byte(strings.TrimSpace(out)), &p); err != nil {
		r.add(Fail, "sandbox", "python ran but its report is unreadable (%v): %.200q", err, out)
		return
	}
	r.Python = p.Version
	r.add(OK, "sandbox", "Python %s runs under the sandbox", p.Version)
	if len(p.Failed) > 0 {
		r.add(Fail, "stdlib", "cannot import %s (is this python3-minimal? build with microbox rootfs build)", describeFailures(p.Failed))
	} else {
		r.add(OK, "stdlib", "%s import (%.0f ms)", stdlib, p.ImportMs)
	}
	bytecode(r, "bytecode", p)
	if len(o.Modules) > 0 {
		probeExtras(r, o)
	}
}

// bytecode reports whether the modules a probe loaded have valid .pyc.
func bytecode(r *Report, what string, p probeResult) {
	if bad := append(p.MissingPyc, p.StalePyc...); len(bad) > 0 {
		r.add(Warn, what, "%d of %d loaded modules have no valid .pyc and are compiled on every run: %s", len(bad), p.Modules, sample(bad))
		return
	}
	r.add(OK, what, "all %d loaded modules have valid .pyc", p.Modules)
}

// probeExtras imports the build's extras; a failure is only a warning,
// since a Debian package's module may be named otherwise (python3-pil is
// PIL).
func probeExtras(r *Report, o CheckOptions) {
	extras := strings.Join(o.Modules, ",")
	out, err := o.Run(probeCode, extras)
	var p probeResult
	if err == nil {
		err = json.Unmarshal([]byte(strings.TrimSpace(out)), &p)
	}
	switch {
	case err != nil:
		r.add(Warn, "extras", "importing %s failed: %v", extras, err)
	case len(p.Failed) > 0:
		r.add(Warn, "extras", "cannot import %s (a package's module may be named otherwise)", describeFailures(p.Failed))
	default:
		r.add(OK, "extras", "%s import (%.0f ms)", extras, p.ImportMs)
		bytecode(r, "extras bytecode", p)
	}
}

func describeFailures(failed map[string]string) string {
	var parts []string
	for m, why := range failed {
		parts = append(parts, fmt.Sprintf("%s (%s)", m, why))
	}
	slices.Sort(parts)
	return strings.Join(parts, ", ")
}

// scanTree walks the root without following symlinks and reports what
// must not be in it.
func scanTree(r *Report, dir string, owners []int) {
	var setid, devices, special, openDirs, openFiles, owned []string
	var files, dirs, links int
	var bytes int64
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		rel := "/" + strings.TrimPrefix(strings.TrimPrefix(p, dir), "/")
		mode := fi.Mode()
		switch {
		case mode.IsDir():
			dirs++
			if mode.Perm()&0o002 != 0 && mode&fs.ModeSticky == 0 {
				openDirs = append(openDirs, rel)
			}
		case mode&fs.ModeSymlink != 0:
			links++
		case mode&fs.ModeDevice != 0:
			devices = append(devices, rel)
		case mode.IsRegular():
			files++
			bytes += fi.Size()
			if mode.Perm()&0o002 != 0 {
				openFiles = append(openFiles, rel)
			}
		default:
			special = append(special, rel)
		}
		if !mode.IsDir() && mode&(fs.ModeSetuid|fs.ModeSetgid) != 0 {
			setid = append(setid, rel)
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && !slices.Contains(owners, int(st.Uid)) {
			owned = append(owned, fmt.Sprintf("%s (uid %d)", rel, st.Uid))
		}
		return nil
	})
	if err != nil {
		r.add(Fail, "tree", "cannot read the whole tree: %v", err)
	}
	r.add(OK, "tree", "%d files (%.0f MiB), %d directories, %d symlinks", files, float64(bytes)/(1<<20), dirs, links)
	verdict(r, Fail, "setuid", setid, "no setuid/setgid files", "setuid/setgid files (a way to root on the host; chmod ug-s them)")
	verdict(r, Fail, "devices", devices, "no device nodes", "device nodes (remove them; the jail makes its own /dev)")
	verdict(r, Warn, "special", special, "no fifos or sockets", "fifos or sockets (remove them)")
	verdict(r, Fail, "writable", openDirs, "no world-writable directory without the sticky bit", "world-writable directories without the sticky bit (chmod o-w or +t)")
	verdict(r, Fail, "writable", openFiles, "no world-writable files", "world-writable files (chmod o-w)")
	verdict(r, Fail, "owners", owned, fmt.Sprintf("everything is owned by uid %s", joinInts(owners)), fmt.Sprintf("entries owned by someone other than uid %s (chown them)", joinInts(owners)))
}

func verdict(r *Report, level Level, what string, bad []string, good, problem string) {
	if len(bad) == 0 {
		r.add(OK, what, "%s", good)
		return
	}
	r.add(level, what, "%d %s: %s", len(bad), problem, sample(bad))
}

func joinInts(ids []int) string {
	var s []string
	for _, id := range slices.Compact(slices.Sorted(slices.Values(ids))) {
		s = append(s, fmt.Sprint(id))
	}
	return strings.Join(s, " or ")
}
