package rootfs

import (
	"archive/tar"
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// entry is one member of a test tar.
type entry struct {
	name, body, link string
	typ              byte
	mode             int64
	uid              int
}

var mtime = time.Date(2024, 3, 1, 12, 0, 0, 0, time.UTC)

func tarOf(t *testing.T, entries ...entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Typeflag: e.typ, Mode: e.mode, Linkname: e.link, Uid: e.uid, ModTime: mtime, Size: int64(len(e.body))}
		if h.Typeflag == 0 {
			h.Typeflag = tar.TypeReg
		}
		if h.Mode == 0 {
			h.Mode = 0o644
			if h.Typeflag == tar.TypeDir {
				h.Mode = 0o755
			}
		}
		if h.Typeflag != tar.TypeReg {
			h.Size = 0
		}
		if h.Typeflag == tar.TypeChar {
			h.Devmajor, h.Devminor = 1, 3
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Size > 0 {
			tw.Write([]byte(e.body))
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func layerOf(t *testing.T, data []byte) v1.Layer {
	t.Helper()
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil })
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// testImage has two layers: the second deletes a file with a whiteout,
// hides a whole directory of the first with an opaque whiteout, replaces a
// file, and hard-links to a file of the first.
func testImage(t *testing.T) v1.Image {
	t.Helper()
	l1 := tarOf(t,
		entry{name: "etc/", typ: tar.TypeDir},
		entry{name: "etc/passwd", body: "root:x:0:0:root:/root:/bin/sh\n"},
		entry{name: "usr/local/bin/", typ: tar.TypeDir},
		entry{name: "usr/local/bin/python3", body: "#!fake\n", mode: 0o755},
		entry{name: "usr/bin/", typ: tar.TypeDir},
		entry{name: "usr/bin/su", body: "su", mode: 0o4755},
		entry{name: "usr/bin/py", typ: tar.TypeSymlink, link: "../local/bin/python3"},
		entry{name: "dev/", typ: tar.TypeDir},
		entry{name: "dev/null", typ: tar.TypeChar, mode: 0o666},
		entry{name: "app/", typ: tar.TypeDir},
		entry{name: "app/keep.txt", body: "kept"},
		entry{name: "app/gone.txt", body: "deleted by layer 2"},
		entry{name: "app/changed.txt", body: "old"},
		entry{name: "app/owned.txt", body: "x", uid: 1234},
		entry{name: "app/cache/", typ: tar.TypeDir},
		entry{name: "app/cache/old1", body: "hidden by the opaque whiteout"},
		entry{name: "app/cache/old2", body: "hidden by the opaque whiteout"},
		entry{name: "ro/", typ: tar.TypeDir, mode: 0o555},
		entry{name: "ro/file", body: "in a read-only dir"},
	)
	l2 := tarOf(t,
		entry{name: "app/.wh.gone.txt"},
		entry{name: "app/changed.txt", body: "new"},
		entry{name: "app/cache/", typ: tar.TypeDir},
		entry{name: "app/cache/.wh..wh..opq"},
		entry{name: "app/cache/fresh", body: "added by layer 2"},
		entry{name: "app/hard", typ: tar.TypeLink, link: "app/keep.txt"},
		entry{name: "fifo", typ: tar.TypeFifo},
	)
	img, err := mutate.AppendLayers(empty.Image, layerOf(t, l1), layerOf(t, l2))
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// assertImported checks what the test image must look like once imported.
func assertImported(t *testing.T, dir string, m *Manifest) {
	t.Helper()
	read := func(p string) string {
		b, err := os.ReadFile(filepath.Join(dir, p))
		if err != nil {
			t.Errorf("%s: %v", p, err)
		}
		return string(b)
	}
	absent := func(p string) {
		if _, err := os.Lstat(filepath.Join(dir, p)); err == nil {
			t.Errorf("%s exists, want it gone", p)
		}
	}
	if got := read("app/changed.txt"); got != "new" {
		t.Errorf("app/changed.txt = %q, want the upper layer's", got)
	}
	read("app/keep.txt")
	read("app/cache/fresh")
	absent("app/gone.txt")   // whiteout
	absent("app/cache/old1") // opaque directory
	absent("app/cache/old2") // opaque directory
	absent("dev/null")       // device nodes are not created
	absent("fifo")           // nor fifos
	if fi, err := os.Stat(filepath.Join(dir, "usr/bin/su")); err != nil || fi.Mode()&os.ModeSetuid != 0 {
		t.Errorf("usr/bin/su: %v, mode %v; want it present without setuid", err, fi.Mode())
	}
	if l, err := os.Readlink(filepath.Join(dir, "usr/bin/py")); err != nil || l != "../local/bin/python3" {
		t.Errorf("symlink usr/bin/py -> %q (%v)", l, err)
	}
	if l, err := os.Readlink(filepath.Join(dir, "usr/bin/python3")); err != nil || l != "../local/bin/python3" {
		t.Errorf("usr/bin/python3 not linked to /usr/local/bin/python3: %q %v", l, err)
	}
	a, _ := os.Stat(filepath.Join(dir, "app/keep.txt"))
	b, _ := os.Stat(filepath.Join(dir, "app/hard"))
	if a == nil || b == nil || !os.SameFile(a, b) {
		t.Errorf("app/hard is not a hard link to app/keep.txt")
	}
	if !a.ModTime().Equal(mtime) {
		t.Errorf("mtime %v, want the archive's %v (.pyc validation needs it)", a.ModTime(), mtime)
	}
	if fi, err := os.Stat(filepath.Join(dir, "ro")); err != nil || fi.Mode().Perm() != 0o555 {
		t.Errorf("ro: mode %v (%v), want 0555 restored after its file was written", fi.Mode(), err)
	}
	if st, _ := os.Stat(filepath.Join(dir, "app/owned.txt")); st.Sys().(*syscall.Stat_t).Uid != uint32(os.Geteuid()) {
		t.Errorf("app/owned.txt belongs to uid %d, want the importing user", st.Sys().(*syscall.Stat_t).Uid)
	}
	for _, d := range RequiredDirs {
		if fi, err := os.Stat(filepath.Join(dir, d)); err != nil || !fi.IsDir() {
			t.Errorf("%s missing", d)
		}
	}
	if !strings.Contains(read("etc/passwd"), "sandbox:x:1000:1000:") {
		t.Errorf("no sandbox user in /etc/passwd")
	}
	notes := strings.Join(m.Notes, "\n")
	for _, want := range []string{"/dev/null", "/fifo", "setuid/setgid bits from 1 files: /usr/bin/su", "linked /usr/bin/python3"} {
		if !strings.Contains(notes, want) {
			t.Errorf("notes do not mention %q:\n%s", want, notes)
		}
	}
	if m.Image == nil || len(m.Image.Layers) != 2 || !strings.HasPrefix(m.Image.Digest, "sha256:") {
		t.Errorf("image info %+v", m.Image)
	}
	// The result passes the tree checks (no Python run here).
	r := Check(dir, CheckOptions{Python: "/usr/bin/python3", Owners: []int{0, os.Geteuid()}})
	if r.Failed() {
		t.Errorf("imported root fails its check: %v", r.Findings)
	}
}

func TestImportOCILayout(t *testing.T) {
	tmp := reachableDir(t)
	oci := testLayout(t, tmp)
	dir := filepath.Join(tmp, "root")
	m, err := Import(context.Background(), oci, dir, ImportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if m.Image.Format != "oci-layout" {
		t.Errorf("format %q", m.Image.Format)
	}
	assertImported(t, dir, m)
}

func TestImportDockerArchive(t *testing.T) {
	tmp := reachableDir(t)
	archive := filepath.Join(tmp, "image.tar")
	tag, _ := name.NewTag("example.test/python:3.12-slim")
	if err := tarball.WriteToFile(archive, tag, testImage(t)); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(tmp, "root")
	m, err := Import(context.Background(), archive, dir, ImportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if m.Image.Format != "docker-archive" {
		t.Errorf("format %q", m.Image.Format)
	}
	assertImported(t, dir, m)
}

func TestImportRejectsNonImages(t *testing.T) {
	tmp := t.TempDir()
	os.WriteFile(filepath.Join(tmp, "junk"), []byte("not a tar"), 0o644)
	for _, src := range []string{tmp, filepath.Join(tmp, "junk"), filepath.Join(tmp, "missing")} {
		if _, err := Import(context.Background(), src, filepath.Join(t.TempDir(), "root"), ImportOptions{}); err == nil {
			t.Errorf("Import(%s) succeeded", src)
		}
	}
}

// extractTar must never write outside its directory, whatever the archive
// says: .. paths, symlinks pointing out (absolute or relative) followed by
// entries through them, hard links to outside files.
func TestExtractStaysInside(t *testing.T) {
	outside := t.TempDir()
	cases := map[string][]entry{
		"dotdot":          {{name: "../escaped", body: "x"}},
		"deep dotdot":     {{name: "a/../../escaped", body: "x"}},
		"abs symlink dir": {{name: "esc", typ: tar.TypeSymlink, link: outside}, {name: "esc/escaped", body: "x"}},
		"rel symlink dir": {{name: "esc", typ: tar.TypeSymlink, link: "../../../../../../../../" + outside}, {name: "esc/escaped", body: "x"}},
		"symlink file":    {{name: "esc", typ: tar.TypeSymlink, link: filepath.Join(outside, "escaped")}, {name: "esc", body: "x"}},
		"hard link out":   {{name: "hl", typ: tar.TypeLink, link: "../../../../etc/passwd"}},
	}
	for name, entries := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			_, err := extractTar(dir, bytes.NewReader(tarOf(t, entries...)), extractBudget{})
			if err == nil && name != "symlink file" {
				t.Errorf("extractTar accepted the archive")
			}
			t.Logf("extractTar: %v", err)
			if _, err := os.Lstat(filepath.Join(outside, "escaped")); err == nil {
				t.Fatalf("the archive wrote outside its root")
			}
			if _, err := os.Lstat(filepath.Join(filepath.Dir(dir), "escaped")); err == nil {
				t.Fatalf("the archive wrote outside its root")
			}
		})
	}
	// An absolute name lands inside the root; a symlink replaced by a file
	// is replaced, not written through.
	dir := t.TempDir()
	_, err := extractTar(dir, bytes.NewReader(tarOf(t,
		entry{name: "/etc/abs", body: "inside"},
		entry{name: "link", typ: tar.TypeSymlink, link: filepath.Join(outside, "escaped")},
		entry{name: "link", body: "replaced"},
	)), extractBudget{})
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "etc/abs")); string(b) != "inside" {
		t.Errorf("absolute name not extracted inside the root")
	}
	if fi, err := os.Lstat(filepath.Join(dir, "link")); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("link was not replaced by a file")
	}
	if _, err := os.Lstat(filepath.Join(outside, "escaped")); err == nil {
		t.Fatalf("the archive wrote through a symlink")
	}
}

// An image may not unpack to more than its budget: a few KiB of gzip can
// expand to fill a disk.
func TestExtractBudget(t *testing.T) {
	archive := tarOf(t, entry{name: "a", body: "0123456789"}, entry{name: "b", body: "0123456789"})
	if _, err := extractTar(t.TempDir(), bytes.NewReader(archive), extractBudget{bytes: 20}); err != nil {
		t.Fatalf("20 bytes within a 20-byte budget: %v", err)
	}
	_, err := extractTar(t.TempDir(), bytes.NewReader(archive), extractBudget{bytes: 19})
	if err == nil || !strings.Contains(err.Error(), "(MaxSize)") {
		t.Fatalf("20 bytes in a 19-byte budget: %v", err)
	}
	_, err = extractTar(t.TempDir(), bytes.NewReader(archive), extractBudget{entries: 1})
	if err == nil || !strings.Contains(err.Error(), "more than 1 entries") {
		t.Fatalf("two entries with room for one: %v", err)
	}
	// Import applies the budget to the image it unpacks.
	tmp := reachableDir(t)
	_, err = Import(context.Background(), testLayout(t, tmp), filepath.Join(tmp, "root"), ImportOptions{MaxSize: 16})
	if err == nil || !strings.Contains(err.Error(), "(MaxSize)") {
		t.Fatalf("an import over its budget: %v", err)
	}
}
