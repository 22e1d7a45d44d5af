package main

// Root filesystem tests: building real Debian roots with mmdebstrap (with
// and without numpy) and running real programs in them, importing an image
// made here, and checking roots. A built root is cached between test runs
// of the same CI job (see testRoot).

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/microbox/microbox/result"
	"github.com/microbox/microbox/rootfs"
)

// The cache of built roots. A root is reused while the code that builds
// it is unchanged and it is younger than cacheMaxAge: long enough for the
// test runs of one CI job (and its retries), short enough that a later job
// builds afresh against the mirror. MICROBOX_TEST_REBUILD=1 forces a build.
const (
	cacheBase   = "/var/tmp/microbox-test-cache"
	cacheMaxAge = 3 * time.Hour
	testSuite   = "bookworm"
)

// buildSources are the files whose content decides what a build makes.
var buildSources = []string{"../../rootfs/build.go", "../../rootfs/rootfs.go", "rootfs.go", "../../internal/lang/lang.go"}

// testRoots are the roots the tests use. They are built concurrently when
// the first test asks for one: each build is mostly one process waiting on
// dpkg, so two at once take little longer than one, and the package's
// tests share go test's 10-minute budget.
// An entry "lang:LIST" is --lang LIST rather than an extra.
var testRoots = [][]string{nil, {"numpy"}, {langRoot}}

// langRoot is the test root with every language's tools.
const langRoot = "lang:c,cpp,bash,node"

// buildTimeout bounds one build, well inside that budget.
const buildTimeout = 7 * time.Minute

// rootBuild is one root being built (or found in the cache).
type rootBuild struct {
	done  chan struct{}
	dir   string
	skip  string // why no root can be built here (the mirror is unreachable)
	err   error
	notes string // what happened, for the test's log
}

var (
	startBuilds sync.Once
	builds      = map[string]*rootBuild{}
)

func rootLabel(with []string) string {
	return strings.Join(append([]string{testSuite}, with...), "-")
}

// testRoot returns a bookworm root with the extras, built by `microbox
// rootfs build` unless a fresh one is cached. It skips the test only when
// the Debian mirror cannot be reached at all (a fact of the network);
// every other failure fails.
func testRoot(t *testing.T, with ...string) string {
	t.Helper()
	startBuilds.Do(func() {
		for _, w := range testRoots {
			b := &rootBuild{done: make(chan struct{})}
			builds[rootLabel(w)] = b
			go b.run(w)
		}
	})
	b, ok := builds[rootLabel(with)]
	if !ok {
		t.Fatalf("no test root %q: add it to testRoots", rootLabel(with))
	}
	<-b.done
	switch {
	case b.skip != "":
		t.Skip(b.skip)
	case b.err != nil:
		t.Fatalf("%v\n%s", b.err, b.notes)
	}
	t.Log(b.notes)
	b.notes = "using the root in " + b.dir // tests run one at a time
	return b.dir
}

func (b *rootBuild) run(with []string) {
	defer close(b.done)
	label := rootLabel(with)
	key, err := cacheKey(with)
	if err != nil {
		b.err = err
		return
	}
	b.dir = filepath.Join(cacheBase, "rootfs-"+label+"-"+key)
	if err := os.MkdirAll(cacheBase, 0o755); err != nil {
		b.err = err
		return
	}
	// Other test binaries (or developers) may build the same root now.
	lock, err := os.OpenFile(filepath.Join(cacheBase, ".lock-"+label), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		b.err = err
		return
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		b.err = err
		return
	}
	pruneCache(label, b.dir)
	if m, err := rootfs.ReadManifest(b.dir); err == nil && time.Since(m.Created) < cacheMaxAge && os.Getenv("MICROBOX_TEST_REBUILD") == "" {
		b.notes = fmt.Sprintf("reusing the %s root built at %s (cached in %s)", label, m.Created.Format(time.TimeOnly), b.dir)
		return
	}
	if b.skip = mirrorUnreachable(); b.skip != "" {
		return
	}
	args := []string{"rootfs", "build", "--suite", testSuite, "--replace", b.dir}
	var extras []string
	for _, w := range with {
		if langs, ok := strings.CutPrefix(w, "lang:"); ok {
			args = append(args, "--lang", langs)
		} else {
			extras = append(extras, w)
		}
	}
	if len(extras) > 0 {
		args = append(args, "--with", strings.Join(extras, ","))
	}
	ctx, cancel := context.WithTimeout(context.Background(), buildTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, microbox, args...)
	// microbox stops mmdebstrap cleanly on SIGTERM.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = time.Minute
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	began := time.Now()
	if err := cmd.Run(); err != nil {
		b.err = fmt.Errorf("microbox %s: %v (limit %s)", strings.Join(args, " "), err, buildTimeout)
		b.notes = out.String()
		return
	}
	b.notes = fmt.Sprintf("built the %s root in %.1f s", label, time.Since(began).Seconds())
}

func cacheKey(with []string) (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "%s %q\n", testSuite, with)
	for _, p := range buildSources {
		data, err := os.ReadFile(p)
		if err != nil {
			return "", fmt.Errorf("cache key: %w", err)
		}
		h.Write(data)
	}
	return hex.EncodeToString(h.Sum(nil))[:12], nil
}

// pruneCache removes cached roots of this label (and only this label: the
// caller holds its lock, not the others') but another key (older code),
// and the stages and replaced roots builds leave beside them.
func pruneCache(label, keep string) {
	ours := regexp.MustCompile(`^\.?rootfs-` + regexp.QuoteMeta(label) + `-[0-9a-f]{12}(\.microbox-(new|old))?$`)
	entries, _ := os.ReadDir(cacheBase)
	for _, e := range entries {
		p := filepath.Join(cacheBase, e.Name())
		if p != keep && ours.MatchString(e.Name()) {
			rootfs.RemoveTree(p)
		}
	}
}

// mirrorUnreachable says why no build can work here when the mirror a
// build would use does not answer at all; an answer of any kind (even an
// error status) goes on to the build, which then fails with the reason.
func mirrorUnreachable() string {
	sources, err := rootfs.Sources(testSuite, "")
	if err != nil {
		return ""
	}
	url := strings.Fields(sources[0])[1] + "/dists/" + testSuite + "/InRelease"
	client := &http.Client{Timeout: 30 * time.Second}
	resp, err := client.Head(url)
	if err != nil {
		return fmt.Sprintf("the Debian mirror is unreachable from this host (%v), so no root can be built", err)
	}
	resp.Body.Close()
	return ""
}

// microboxOut runs the binary and returns stdout, stderr and exit code.
func microboxOut(t *testing.T, env []string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(microbox, args...)
	cmd.Env = append(os.Environ(), env...)
	out, errOut, code := runCmd(t, cmd)
	return string(out), string(errOut), code
}

// stdlibProgram imports the set and uses each module a little.
const stdlibProgram = `
import json, asyncio, multiprocessing, ctypes, sqlite3, subprocess, threading, socket
db = sqlite3.connect(":memory:")
db.execute("create table t (x)"); db.executemany("insert into t values (?)", [(i,) for i in range(10)])
assert db.execute("select sum(x) from t").fetchone()[0] == 45
assert ctypes.CDLL(None).getpid() > 0
async def twice(x):
    await asyncio.sleep(0)
    return 2 * x
assert asyncio.run(twice(21)) == 42
with multiprocessing.Pool(2) as p:
    assert p.map(abs, [-1, -2]) == [1, 2]
assert subprocess.run(["/bin/sh", "-c", "echo hi"], capture_output=True, text=True).stdout == "hi\n"
m = json.load(open("/etc/microbox-rootfs.json"))
print("OK", m["kind"], m["suite"], m["python"])
`

func TestRootfsBuild(t *testing.T) {
	root := testRoot(t)
	out, errOut, code := microboxOut(t, nil, "rootfs", "check", root)
	if code != 0 || !strings.Contains(out, "ok    bytecode: all") || !strings.Contains(out, "ok    stdlib:") {
		t.Fatalf("check of a built root: exit %d\n%s%s", code, out, errOut)
	}
	t.Logf("rootfs check:\n%s", out)

	r := execJSON(t, "", "--rootfs", root, "-c", stdlibProgram)
	wantStatus(t, r, result.StatusOK)
	if !strings.HasPrefix(r.Stdout, "OK build bookworm 3.") {
		t.Fatalf("stdout %q", r.Stdout)
	}
	// The root is read-only, also for the sandbox's init.
	r = execJSON(t, "", "--rootfs", root, "-c", "open('/usr/x', 'w')")
	if r.Status != result.StatusNonzero || !strings.Contains(r.Stderr, "Read-only file system") {
		t.Fatalf("writing into the root: %s %q", r.Status, r.Stderr)
	}
}

// $MICROBOX_ROOTFS is exec's default root, and a bad one is refused with
// a line that says where it came from.
func TestRootfsFromEnvironment(t *testing.T) {
	root := testRoot(t)
	out, errOut, code := microboxOut(t, []string{rootfs.EnvRootfs + "=" + root}, "exec", "-c", "print(open('/etc/microbox-rootfs.json').read()[:1])")
	if code != 0 || out != "{\n" {
		t.Fatalf("exec with $%s: exit %d %q %q", rootfs.EnvRootfs, code, out, errOut)
	}
	_, errOut, code = microboxOut(t, []string{rootfs.EnvRootfs + "=" + t.TempDir()}, "exec", "-c", "print(1)")
	if code != result.ExitSandboxError || !strings.Contains(errOut, "$"+rootfs.EnvRootfs) || !strings.Contains(errOut, "has no /proc") {
		t.Fatalf("exec with a bad $%s: exit %d %q", rootfs.EnvRootfs, code, errOut)
	}
}

// The shared red-team corpus's benign cases run unchanged in a built root.
func TestRootfsBenignCorpus(t *testing.T) {
	cases, _ := filepath.Glob("../../../shared/redteam/benign_*.py")
	if len(cases) == 0 {
		t.Skip("the shared red-team corpus (../shared/redteam) is not beside this checkout")
	}
	root := testRoot(t)
	for _, c := range cases {
		t.Run(filepath.Base(c), func(t *testing.T) {
			limits, stdin := caseHeader(t, c)
			args := append(append([]string{"--rootfs", root}, limits...), c)
			r := execJSON(t, stdin, args...)
			wantStatus(t, r, result.StatusOK)
		})
	}
}

// caseHeader reads a corpus case's limits and stdin lines.
func caseHeader(t *testing.T, path string) ([]string, string) {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var limits []string
	var stdin string
	for _, l := range strings.SplitN(string(data), "\n", 10) {
		if v, ok := strings.CutPrefix(l, "# limits:"); ok {
			limits = strings.Fields(v)
		}
		if v, ok := strings.CutPrefix(l, "# stdin:"); ok {
			if stdin, err = strconv.Unquote(strings.TrimSpace(v)); err != nil {
				t.Fatalf("%s: stdin header: %v", path, err)
			}
		}
	}
	return limits, stdin
}

func TestRootfsBuildNumpy(t *testing.T) {
	root := testRoot(t, "numpy")
	r := execJSON(t, "", "--rootfs", root, "--mem", "512M", "-c", `
import numpy as np
a = np.arange(1.0, 10.0).reshape(3, 3) + np.eye(3)
x = np.linalg.solve(a, np.ones(3))
assert np.allclose(a @ x, np.ones(3))
print(np.__version__, round(float(np.linalg.det(a)), 6), round(float((a @ a.T).trace()), 6))
`)
	wantStatus(t, r, result.StatusOK)
	if f := strings.Fields(r.Stdout); len(f) != 3 || f[1] != "-2.0" || f[2] != "318.0" {
		t.Fatalf("numpy computation printed %q", r.Stdout)
	}
	out, errOut, code := microboxOut(t, nil, "rootfs", "check", root)
	if code != 0 || !strings.Contains(out, "ok    extras: numpy import") {
		t.Fatalf("check of the numpy root: exit %d\n%s%s", code, out, errOut)
	}
}

// linkedCopy makes a copy of a root whose files are hard links to the
// original's: cheap, and safe as long as the test only adds files.
func linkedCopy(t *testing.T, root string) string {
	t.Helper()
	dst := filepath.Join(reachableTempDir(t), "root")
	if out, err := exec.Command("cp", "-al", root, dst).CombinedOutput(); err != nil {
		t.Fatalf("cp -al: %v %s", err, out)
	}
	return dst
}

func TestRootfsCheckCatchesSetuid(t *testing.T) {
	root := linkedCopy(t, testRoot(t))
	bad := filepath.Join(root, "usr/local/bin/helper")
	if err := os.WriteFile(bad, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	os.Chmod(bad, 0o755|fs.ModeSetuid)
	os.Mkdir(filepath.Join(root, "srv/drop"), 0o777)
	os.Chmod(filepath.Join(root, "srv/drop"), 0o777)
	out, errOut, code := microboxOut(t, nil, "rootfs", "check", root)
	if code != 1 || !strings.Contains(out, "FAIL  setuid: 1 setuid/setgid files") || !strings.Contains(out, "/usr/local/bin/helper") ||
		!strings.Contains(out, "FAIL  writable: 1 world-writable directories without the sticky bit") || !strings.Contains(errOut, "not usable") {
		t.Fatalf("check of a root with a setuid file: exit %d\n%s%s", code, out, errOut)
	}
	os.Chmod(bad, 0o755)
	os.Chmod(filepath.Join(root, "srv/drop"), 0o755)
	if out, errOut, code := microboxOut(t, nil, "rootfs", "check", root); code != 0 {
		t.Fatalf("check after the fix: exit %d\n%s%s", code, out, errOut)
	}
}

// reachableTempDir is a temporary directory the jail can reach: t.TempDir
// makes 0700 directories, which the jail's unprivileged user cannot search.
func reachableTempDir(t *testing.T) string {
	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	os.Chmod(filepath.Dir(dir), 0o755)
	return dir
}

// exec refuses a root without Python (the cheap part of the check), and a
// root the jail cannot reach.
func TestRootfsExecRefusesBadRoot(t *testing.T) {
	empty := t.TempDir()
	for _, d := range []string{"proc", "dev", "tmp"} {
		os.Mkdir(filepath.Join(empty, d), 0o755)
	}
	_, errOut, code := microboxOut(t, nil, "exec", "--rootfs", empty, "-c", "print(1)")
	if code != result.ExitSandboxError || !strings.Contains(errOut, "no usable python") || strings.Count(errOut, "\n") != 1 {
		t.Fatalf("exec on a root without python: exit %d %q", code, errOut)
	}
	_, errOut, code = microboxOut(t, nil, "exec", "--rootfs", filepath.Join(empty, "missing"), "-c", "print(1)")
	if code != result.ExitSandboxError || !strings.Contains(errOut, "not a directory") {
		t.Fatalf("exec on a missing root: exit %d %q", code, errOut)
	}
	out, _, code := microboxOut(t, nil, "rootfs", "check", empty)
	if code != 1 || !strings.Contains(out, "FAIL  python:") {
		t.Fatalf("check of a root without python: exit %d %q", code, out)
	}
	if os.Geteuid() == 0 {
		private := filepath.Join(t.TempDir(), "root") // under a 0700 directory
		for _, d := range []string{"proc", "dev", "tmp", "usr/bin"} {
			os.MkdirAll(filepath.Join(private, d), 0o755)
		}
		os.WriteFile(filepath.Join(private, "usr/bin/python3"), []byte("#!x"), 0o755)
		_, errOut, code = microboxOut(t, nil, "exec", "--rootfs", private, "-c", "print(1)")
		if code != result.ExitSandboxError || !strings.Contains(errOut, "cannot reach") {
			t.Fatalf("exec on an unreachable root: exit %d %q", code, errOut)
		}
	}
}

// An image made here from the built root plus a second layer with a
// whiteout and an opaque directory, saved as `docker save` would, imports
// into a root that runs Python.
func TestRootfsImport(t *testing.T) {
	base := testRoot(t)
	tmp := reachableTempDir(t)
	layer1 := layerFromTree(t, base)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	add := func(name, body string) {
		tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(body)), ModTime: time.Now()})
		tw.Write([]byte(body))
	}
	add("usr/lib/python3.11/.wh.antigravity.py", "")          // a whiteout
	add("usr/share/common-licenses/.wh..wh..opq", "")         // an opaque directory
	add("usr/share/common-licenses/NOTICE", "layer 2 only\n") // the opaque directory's new content
	add("opt/app/hello.py", "print('hello from layer 2')\n")  // a new file
	tw.Close()
	layer2 := gzLayer(t, buf.Bytes())
	img, err := mutate.AppendLayers(empty.Image, layer1, layer2)
	if err != nil {
		t.Fatal(err)
	}
	archive := filepath.Join(tmp, "image.tar")
	tag, _ := name.NewTag("example.test/microbox-python:test")
	began := time.Now()
	if err := tarball.WriteToFile(archive, tag, img); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote a two-layer image archive in %.1f s", time.Since(began).Seconds())
	dir := filepath.Join(tmp, "imported")
	began = time.Now()
	out, errOut, code := microboxOut(t, nil, "rootfs", "import", archive, dir)
	if code != 0 {
		t.Fatalf("import: exit %d\n%s%s", code, out, errOut)
	}
	t.Logf("imported in %.1f s:\n%s%s", time.Since(began).Seconds(), out, errOut)
	r := execJSON(t, "", "--rootfs", dir, "-c", `
import os, json
print(os.listdir("/usr/share/common-licenses"))
try:
    import antigravity
except ModuleNotFoundError:
    print("whited out")
print(json.load(open("/etc/microbox-rootfs.json"))["kind"])
exec(open("/opt/app/hello.py").read())
`)
	wantStatus(t, r, result.StatusOK)
	if r.Stdout != "['NOTICE']\nwhited out\nimport\nhello from layer 2\n" {
		t.Fatalf("stdout %q", r.Stdout)
	}
}

// layerFromTree tars a directory into an image layer (uncompressed in
// memory, gzip at the fastest level when written).
func layerFromTree(t *testing.T, dir string) v1.Layer {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		link := ""
		if fi.Mode()&fs.ModeSymlink != 0 {
			if link, err = os.Readlink(p); err != nil {
				return err
			}
		}
		h, err := tar.FileInfoHeader(fi, link)
		if err != nil {
			return err
		}
		h.Name, _ = filepath.Rel(dir, p)
		if fi.IsDir() {
			h.Name += "/"
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if fi.Mode().IsRegular() {
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			defer f.Close()
			_, err = io.Copy(tw, f)
			return err
		}
		return nil
	})
	if err == nil {
		err = tw.Close()
	}
	if err != nil {
		t.Fatal(err)
	}
	return gzLayer(t, buf.Bytes())
}

func gzLayer(t *testing.T, data []byte) v1.Layer {
	t.Helper()
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil },
		tarball.WithCompressionLevel(gzip.BestSpeed))
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// A root built with --lang runs each language, checked in the sandbox
// before it is installed; rootfs check runs each one's hello world.
func TestRootfsBuildLanguages(t *testing.T) {
	root := testRoot(t, langRoot)
	out, errOut, code := microboxOut(t, nil, "rootfs", "check", root)
	for _, l := range []string{"c", "cpp", "bash", "node"} {
		if want := "ok    lang " + l + ": hello world runs in the sandbox"; code != 0 || !strings.Contains(out, want) {
			t.Errorf("check of the --lang root: exit %d, no %q\n%s%s", code, want, out, errOut)
		}
	}
	r := execJSON(t, "7\n", "--rootfs", root, "--lang", "cpp", "-c", "#include <iostream>\nint main() { int n; std::cin >> n; std::cout << n * 6 << std::endl; }")
	wantStatus(t, r, result.StatusOK)
	if r.Stdout != "42\n" || r.Compile == nil || r.Compile.Status != result.StatusOK {
		t.Errorf("cpp in the --lang root: %q, compile %+v", r.Stdout, r.Compile)
	}
	r = execJSON(t, "", "--rootfs", root, "--lang", "node", "-c", "console.log(process.versions.node.split('.')[0] >= 18)")
	if r.Status != result.StatusOK || r.Stdout != "true\n" {
		t.Errorf("node in the --lang root: %s %q %q", r.Status, r.Stdout, r.Stderr)
	}
	// A root built without them refuses the languages by name.
	plain := testRoot(t)
	cmd := exec.Command(microbox, "exec", "--rootfs", plain, "--lang", "cpp", "-c", "int main(){}")
	_, stderr, code := runCmd(t, cmd)
	if code != result.ExitSandboxError || !strings.Contains(string(stderr), "rootfs build --lang cpp") {
		t.Errorf("cpp in a root without g++: exit %d, %s", code, stderr)
	}
}
