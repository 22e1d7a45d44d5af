package rootfs

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// memLayers makes an image of in-memory layer tars, bottom first.
func memLayers(layers ...[]byte) *image {
	img := &image{info: &ImageInfo{}}
	for i, l := range layers {
		data := l
		img.layers = append(img.layers, layer{name: string(rune('a' + i)),
			open: func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil }})
	}
	return img
}

// flatNames lists the entries flatten writes for img, sorted.
func flatNames(t *testing.T, img *image) []string {
	t.Helper()
	f := flatten(context.Background(), img)
	tr := tar.NewReader(f)
	var names []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, strings.TrimSuffix(h.Name, "/"))
	}
	if _, err := f.wait(); err != nil {
		t.Fatal(err)
	}
	slices.Sort(names)
	return names
}

// The union rules, one case each: what the upper layer does to the lower.
func TestFlattenWhiteouts(t *testing.T) {
	lower := tarOf(t,
		entry{name: "d/", typ: tar.TypeDir},
		entry{name: "d/a", body: "lower"},
		entry{name: "d/sub/", typ: tar.TypeDir},
		entry{name: "d/sub/deep", body: "lower"},
		entry{name: "e/", typ: tar.TypeDir},
		entry{name: "e/x", body: "lower"},
		entry{name: "f/", typ: tar.TypeDir},
		entry{name: "f/y", body: "lower"},
		entry{name: "g", body: "lower"},
	)
	cases := []struct {
		what  string
		upper []byte
		want  string
	}{
		{"nothing", tarOf(t, entry{name: "new", body: "u"}),
			"d d/a d/sub d/sub/deep e e/x f f/y g new"},
		{"file whiteout", tarOf(t, entry{name: "d/.wh.a"}),
			"d d/sub d/sub/deep e e/x f f/y g"},
		{"directory whiteout hides its tree", tarOf(t, entry{name: "d/.wh.sub"}),
			"d d/a e e/x f f/y g"},
		{"opaque directory keeps its own layer's entries", tarOf(t,
			entry{name: "d/", typ: tar.TypeDir}, entry{name: "d/.wh..wh..opq"}, entry{name: "d/fresh", body: "u"}),
			"d d/fresh e e/x f f/y g"},
		{"a file replaces a directory and its tree", tarOf(t, entry{name: "e", body: "now a file"}),
			"d d/a d/sub d/sub/deep e f f/y g"},
		{"a directory replaces a file", tarOf(t, entry{name: "g/", typ: tar.TypeDir}, entry{name: "g/z", body: "u"}),
			"d d/a d/sub d/sub/deep e e/x f f/y g g/z"},
		{"whiteout and re-creation in one layer", tarOf(t, entry{name: ".wh.f"}, entry{name: "f/", typ: tar.TypeDir}, entry{name: "f/new", body: "u"}),
			"d d/a d/sub d/sub/deep e e/x f f/new g"},
	}
	for _, c := range cases {
		t.Run(c.what, func(t *testing.T) {
			got := strings.Join(flatNames(t, memLayers(lower, c.upper)), " ")
			if got != c.want {
				t.Errorf("\n got %s\nwant %s", got, c.want)
			}
		})
	}
}

// Gzip layers are read; zstd layers are refused by name, not mistaken for
// a broken tar.
func TestFlattenCompression(t *testing.T) {
	var gz bytes.Buffer
	w := gzip.NewWriter(&gz)
	w.Write(tarOf(t, entry{name: "zipped", body: "x"}))
	w.Close()
	if got := flatNames(t, memLayers(gz.Bytes())); !slices.Equal(got, []string{"zipped"}) {
		t.Errorf("gzip layer gave %v", got)
	}
	f := flatten(context.Background(), memLayers(append([]byte{0x28, 0xb5, 0x2f, 0xfd}, make([]byte, 64)...)))
	io.Copy(io.Discard, f)
	if _, err := f.wait(); err == nil || !strings.Contains(err.Error(), "zstd") {
		t.Errorf("zstd layer: %v", err)
	}
}

// testLayout writes testImage as an OCI layout under dir and returns it.
func testLayout(t *testing.T, dir string) string {
	t.Helper()
	oci := filepath.Join(dir, "oci")
	p, err := layout.Write(oci, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.AppendImage(testImage(t)); err != nil {
		t.Fatal(err)
	}
	return oci
}

// layerBlob is the file of layer i of the layout's image.
func layerBlob(t *testing.T, oci string, i int) string {
	t.Helper()
	img, err := layoutImage(oci, "", &ImageInfo{})
	if err != nil {
		t.Fatal(err)
	}
	rel, _ := blobPath(img.layers[i].digest)
	return filepath.Join(oci, rel)
}

// A layout whose blob does not match its digest is refused, and so is a
// digest that would name a path outside blobs/.
func TestLayoutDigests(t *testing.T) {
	tmp := reachableDir(t)
	blob := layerBlob(t, testLayout(t, tmp), 1)
	// A valid layer, but not the one the manifest names.
	var gz bytes.Buffer
	w := gzip.NewWriter(&gz)
	w.Write(tarOf(t, entry{name: "etc/", typ: tar.TypeDir}, entry{name: "etc/evil", body: "swapped in"}))
	w.Close()
	os.WriteFile(blob, gz.Bytes(), 0o644)
	_, err := Import(context.Background(), filepath.Join(tmp, "oci"), filepath.Join(tmp, "root"), ImportOptions{})
	if err == nil || !strings.Contains(err.Error(), "corrupt") {
		t.Errorf("tampered layer imported: %v", err)
	}
	for _, d := range []string{"sha256:../../../etc/passwd", "sha256:abc", "md5:" + strings.Repeat("0", 32), "sha256:" + strings.Repeat("A", 64)} {
		if _, err := blobPath(d); err == nil {
			t.Errorf("digest %q accepted", d)
		}
	}
}

// --ref picks one image of a `docker save` archive that holds several,
// however the tag is spelled; without it, the archive is refused.
func TestDockerArchiveRef(t *testing.T) {
	tmp := reachableDir(t)
	archive := filepath.Join(tmp, "two.tar")
	a, _ := name.NewTag("python:3.12-slim")
	b, _ := name.NewTag("example.test/other")
	refs := map[name.Reference]v1.Image{a: testImage(t), b: testImage(t)}
	if err := tarball.MultiRefWriteToFile(archive, refs); err != nil {
		t.Fatal(err)
	}
	if _, err := dockerArchiveImage(archive, "", &ImageInfo{}); err == nil || !strings.Contains(err.Error(), "with Ref") {
		t.Errorf("two images without --ref: %v", err)
	}
	for _, ref := range []string{"python:3.12-slim", "docker.io/library/python:3.12-slim", "example.test/other:latest", "example.test/other"} {
		if _, err := dockerArchiveImage(archive, ref, &ImageInfo{}); err != nil {
			t.Errorf("--ref %s: %v", ref, err)
		}
	}
	if _, err := dockerArchiveImage(archive, "python:3.11", &ImageInfo{}); err == nil {
		t.Error("--ref python:3.11 matched")
	}
}

// A file that replaced a directory in a middle layer still hides that
// directory's old contents when an upper layer makes it a directory again.
func TestFlattenNoResurrection(t *testing.T) {
	bottom := tarOf(t, entry{name: "a/", typ: tar.TypeDir}, entry{name: "a/secret", body: "deleted in the middle layer"})
	middle := tarOf(t, entry{name: "a", body: "a file now"})
	upper := tarOf(t, entry{name: "a/", typ: tar.TypeDir})
	if got := flatNames(t, memLayers(bottom, middle, upper)); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("got %v, want only the upper layer's empty a/", got)
	}
}

// An OCI archive is untrusted, and so are the symbolic links it unpacks:
// a blob that links out of the layout is refused, not read.
func TestLayoutLinkOut(t *testing.T) {
	tmp := reachableDir(t)
	blob := layerBlob(t, testLayout(t, tmp), 0)
	os.Remove(blob)
	os.Symlink("/dev/zero", blob)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err := Import(ctx, filepath.Join(tmp, "oci"), filepath.Join(tmp, "root"), ImportOptions{})
	if err == nil || ctx.Err() != nil || !strings.Contains(err.Error(), "escapes") {
		t.Fatalf("a blob linked to /dev/zero: %v (context: %v); want the link refused for escaping the layout", err, ctx.Err())
	}
}

// dockerArchive writes a `docker save` archive by hand: one image of the
// given layers, whose config claims diffIDs.
func dockerArchive(t *testing.T, file string, layers [][]byte, diffIDs []string) {
	t.Helper()
	config, _ := json.Marshal(map[string]any{"rootfs": map[string]any{"type": "layers", "diff_ids": diffIDs}})
	var names []string
	members := map[string][]byte{"config.json": config}
	for i, l := range layers {
		n := fmt.Sprintf("layer%d/layer.tar", i)
		names = append(names, n)
		members[n] = l
	}
	manifest, _ := json.Marshal([]map[string]any{{"Config": "config.json", "RepoTags": []string{"example.test/x:1"}, "Layers": names}})
	members["manifest.json"] = manifest
	var entries []entry
	for _, n := range append([]string{"manifest.json", "config.json"}, names...) {
		entries = append(entries, entry{name: n, body: string(members[n])})
	}
	os.WriteFile(file, tarOf(t, entries...), 0o644)
}

// A `docker save` layer whose content is not the one its config names is
// refused.
func TestDockerArchiveDiffIDs(t *testing.T) {
	tmp := reachableDir(t)
	l := tarOf(t, entry{name: "etc/", typ: tar.TypeDir}, entry{name: "etc/passwd", body: "root:x:0:0::/root:/bin/sh\n"})
	good := digestOf("sha256:", l)
	bad := digestOf("sha256:", []byte("something else"))
	for _, c := range []struct {
		diffID string
		ok     bool
	}{{good, true}, {bad, false}} {
		archive := filepath.Join(tmp, "img.tar")
		dockerArchive(t, archive, [][]byte{l}, []string{c.diffID})
		root := filepath.Join(t.TempDir(), "root")
		_, err := Import(context.Background(), archive, root, ImportOptions{})
		if c.ok && err != nil {
			t.Errorf("matching diff ID: %v", err)
		}
		if !c.ok && (err == nil || !strings.Contains(err.Error(), "image config says")) {
			t.Errorf("mismatched diff ID: %v", err)
		}
	}
}

// Older `docker save` archives store a layer that two images share once
// and link to it: the link is followed inside the archive.
func TestDockerArchiveLinkedLayer(t *testing.T) {
	l := tarOf(t, entry{name: "etc/", typ: tar.TypeDir}, entry{name: "etc/passwd", body: "root:x:0:0::/root:/bin/sh\n"})
	id := digestOf("sha256:", l)
	config, _ := json.Marshal(map[string]any{"rootfs": map[string]any{"type": "layers", "diff_ids": []string{id}}})
	manifest, _ := json.Marshal([]map[string]any{{"Config": "config.json", "RepoTags": []string{"example.test/x:1"}, "Layers": []string{"b/layer.tar"}}})
	archive := filepath.Join(reachableDir(t), "img.tar")
	os.WriteFile(archive, tarOf(t,
		entry{name: "manifest.json", body: string(manifest)},
		entry{name: "config.json", body: string(config)},
		entry{name: "a/layer.tar", body: string(l)},
		entry{name: "b/layer.tar", typ: tar.TypeSymlink, link: "../a/layer.tar"},
	), 0o644)
	if _, err := Import(context.Background(), archive, filepath.Join(t.TempDir(), "root"), ImportOptions{}); err != nil {
		t.Fatal(err)
	}
}
