package rootfs

// Reading container images without a registry library. The three formats
// Import accepts are small, stable specifications: an OCI image layout
// (index.json, blobs/<alg>/<hex>), the same layout tarred (an OCI archive),
// and `docker save`'s archive (manifest.json naming a config and layer
// files). go-containerregistry did this before; its package initialisation
// (digest regexps, zstd and gzip tables, net) cost every `microbox exec`
// about 2.4 ms of start-up (scripts/importcost -cgo) for a command an
// operator runs once. It remains the reference the tests build their
// images with.

import (
	"archive/tar"
	"bufio"
	"bytes"
	"cmp"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path"
	"runtime"
	"slices"
	"strings"

	"github.com/microbox/microbox/field"
)

// image is what Import needs of an image, whatever its format.
type image struct {
	info   *ImageInfo
	layers []layer // bottom first
}

// layer is one layer blob as stored: perhaps compressed, perhaps with the
// digest its manifest gives it, which reading it checks.
type layer struct {
	name   string // for messages
	digest string // "sha256:<hex>" of the blob as stored, or "" if the format names none
	diffID string // "sha256:<hex>" of the uncompressed tar, or "" if unknown
	open   func() (io.ReadCloser, error)
}

// descriptor, ociIndex and ociManifest are the parts of the OCI image
// spec's JSON (and Docker's v2 equivalents) that Import reads.
type descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Annotations map[string]string `json:"annotations"`
	Platform    *struct {
		OS           string `json:"os"`
		Architecture string `json:"architecture"`
	} `json:"platform"`
}

type ociIndex struct {
	Manifests []descriptor `json:"manifests"`
}

type ociManifest struct {
	MediaType string       `json:"mediaType"`
	Layers    []descriptor `json:"layers"`
}

const (
	mediaOCIIndex       = "application/vnd.oci.image.index.v1+json"
	mediaDockerList     = "application/vnd.docker.distribution.manifest.list.v2+json"
	mediaOCIManifest    = "application/vnd.oci.image.manifest.v1+json"
	mediaDockerManifest = "application/vnd.docker.distribution.manifest.v2+json"
	refAnnotation       = "org.opencontainers.image.ref.name"
	maxJSONBlob         = 4 << 20 // indexes, manifests and configs are small
	whiteoutPrefix      = ".wh."
	opaqueWhiteout      = ".wh..wh..opq"
)

// blobPath is where a blob lives in a layout, relative to it. The digest
// is checked first: it comes from the image, and must not name a path
// outside blobs/.
func blobPath(digest string) (string, error) {
	alg, hexPart, ok := strings.Cut(digest, ":")
	want := map[string]int{"sha256": 64, "sha512": 128}[alg]
	if !ok || want == 0 || len(hexPart) != want || strings.Trim(hexPart, "0123456789abcdef") != "" {
		return "", fmt.Errorf("malformed digest %q", digest)
	}
	return path.Join("blobs", alg, hexPart), nil
}

// openInLayout opens a regular file of the layout at dir. The layout may
// come from an untrusted OCI archive, whose symbolic links must not lead
// out of it (to a host file, or to /dev/zero to read forever): the file is
// opened inside an os.Root.
func openInLayout(dir, rel string) (*os.File, error) {
	f, err := os.OpenInRoot(dir, rel)
	if err != nil {
		return nil, err
	}
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%s is not a regular file of the layout", rel)
	}
	return f, nil
}

// readLayoutFile reads a small file of the layout (index.json, a
// manifest, a config).
func readLayoutFile(dir, rel string) ([]byte, error) {
	f, err := openInLayout(dir, rel)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readSmall(f, rel)
}

// readSmall reads all of r, which is called name, refusing more than
// maxJSONBlob bytes: what the image says is small must be small.
func readSmall(r io.Reader, name string) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxJSONBlob+1))
	if err == nil && len(data) > maxJSONBlob {
		err = fmt.Errorf("%s is larger than %d bytes", name, maxJSONBlob)
	}
	return data, err
}

// readJSONBlob reads and decodes a small blob, checking its digest.
func readJSONBlob(dir, digest string, v any) error {
	rel, err := blobPath(digest)
	if err != nil {
		return err
	}
	data, err := readLayoutFile(dir, rel)
	if err != nil {
		return err
	}
	if got := digestOf(digest, data); got != digest {
		return fmt.Errorf("blob %s does not have that digest; the image is corrupt", digest)
	}
	return json.Unmarshal(data, v)
}

func newHash(digest string) hash.Hash {
	if strings.HasPrefix(digest, "sha512:") {
		return sha512.New()
	}
	return sha256.New()
}

func digestOf(like string, data []byte) string {
	h := newHash(like)
	h.Write(data)
	return sumOf(like, h)
}

// layoutImage picks the image for this platform (or named ref) from an
// OCI layout, descending into nested indexes (multi-platform images).
func layoutImage(dir, ref string, info *ImageInfo) (*image, error) {
	data, err := readLayoutFile(dir, "index.json")
	if err != nil {
		return nil, fmt.Errorf("OCI layout %s: %w", dir, err)
	}
	var idx ociIndex
	if err := json.Unmarshal(data, &idx); err != nil {
		return nil, fmt.Errorf("OCI layout %s: index.json: %w", dir, err)
	}
	w := &indexWalk{dir: dir, ref: ref, indexes: map[string]bool{}}
	if err := w.collect(idx, "", 0); err != nil {
		return nil, fmt.Errorf("OCI layout %s: %w", dir, err)
	}
	found, names := w.found, w.names
	switch {
	case len(found) == 0 && ref != "":
		return nil, fmt.Errorf("OCI layout %s has no image %q for linux/%s", dir, ref, runtime.GOARCH)
	case len(found) == 0:
		return nil, fmt.Errorf("OCI layout %s has no image for linux/%s", dir, runtime.GOARCH)
	case len(found) > 1:
		return nil, field.Errorf("Ref", "OCI layout %s holds several images (%s); pick one with {Ref}", dir, strings.Join(names, ", "))
	}
	var m ociManifest
	if err := readJSONBlob(dir, found[0].Digest, &m); err != nil {
		return nil, fmt.Errorf("OCI layout %s: manifest: %w", dir, err)
	}
	info.Digest = found[0].Digest
	img := &image{info: info}
	for _, d := range m.Layers {
		if strings.Contains(d.MediaType, "zstd") {
			return nil, fmt.Errorf("OCI layout %s: layer %s is zstd-compressed, which microbox does not read; save the image with gzip or uncompressed layers", dir, d.Digest)
		}
		rel, err := blobPath(d.Digest)
		if err != nil {
			return nil, fmt.Errorf("OCI layout %s: layer: %w", dir, err)
		}
		img.layers = append(img.layers, layer{name: d.Digest, digest: d.Digest,
			open: func() (io.ReadCloser, error) { return openInLayout(dir, rel) }})
	}
	return img, nil
}

// indexWalk finds the images of a layout that match ref (all of them if
// ref is empty) for this platform, descending into nested indexes.
type indexWalk struct {
	dir, ref string
	found    []descriptor
	names    []string        // for messages, one per found
	entries  int             // walked so far
	indexes  map[string]bool // digests of the nested indexes read
}

const (
	maxIndexEntries = 10000
	maxIndexDepth   = 4
)

// collect walks idx, whose images are called name unless they say
// otherwise. A hostile layout must not make the walk exponential: the
// entries walked are bounded, and each nested index is read once however
// often it is listed.
func (w *indexWalk) collect(idx ociIndex, name string, depth int) error {
	if depth > maxIndexDepth {
		return errors.New("image indexes nested too deeply")
	}
	for _, d := range idx.Manifests {
		if w.entries++; w.entries > maxIndexEntries {
			return fmt.Errorf("more than %d index entries", maxIndexEntries)
		}
		n := name
		if a := d.Annotations[refAnnotation]; a != "" {
			n = a
		}
		if d.Platform != nil && (d.Platform.OS != "linux" || d.Platform.Architecture != runtime.GOARCH) {
			continue
		}
		switch d.MediaType {
		case mediaOCIIndex, mediaDockerList:
			if w.indexes[d.Digest] {
				continue
			}
			w.indexes[d.Digest] = true
			var child ociIndex
			if err := readJSONBlob(w.dir, d.Digest, &child); err != nil {
				return err
			}
			if err := w.collect(child, n, depth+1); err != nil {
				return err
			}
		case mediaOCIManifest, mediaDockerManifest:
			if w.ref != "" && n != w.ref && !strings.HasSuffix(n, ":"+w.ref) && !strings.HasSuffix(w.ref, ":"+n) {
				continue
			}
			w.found = append(w.found, d)
			w.names = append(w.names, cmp.Or(n, d.Digest))
		}
	}
	return nil
}

// dockerManifest is one image of a `docker save` archive's manifest.json.
type dockerManifest struct {
	Config   string   `json:"Config"`
	RepoTags []string `json:"RepoTags"`
	Layers   []string `json:"Layers"`
}

// dockerArchiveImage picks the image (the only one, or the one tagged ref)
// of a `docker save` archive. Its digest is the image ID, the config's
// digest; layer digests are those of the layer files as stored.
func dockerArchiveImage(archive, ref string, info *ImageInfo) (*image, error) {
	var ms []dockerManifest
	data, err := readMember(archive, "manifest.json")
	if err == nil {
		err = json.Unmarshal(data, &ms)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: manifest.json: %w", archive, err)
	}
	var tags []string
	var matches []*dockerManifest
	for i := range ms {
		tags = append(tags, ms[i].RepoTags...)
		if ref == "" || slices.ContainsFunc(ms[i].RepoTags, func(t string) bool { return sameTag(t, ref) }) {
			matches = append(matches, &ms[i])
		}
	}
	switch {
	case len(matches) == 0 && ref != "":
		return nil, fmt.Errorf("%s has no image tagged %q (it has %s)", archive, ref, strings.Join(tags, ", "))
	case len(matches) == 0:
		return nil, fmt.Errorf("%s: manifest.json lists no image", archive)
	case len(matches) > 1 && ref != "":
		return nil, fmt.Errorf("%s holds %d images tagged %q; this archive cannot be imported by tag, save the one image alone", archive, len(matches), ref)
	case len(matches) > 1:
		return nil, field.Errorf("Ref", "%s holds %d images (%s); pick one with {Ref}", archive, len(ms), strings.Join(tags, ", "))
	}
	m := matches[0]
	config, err := readMember(archive, m.Config)
	if err != nil {
		return nil, fmt.Errorf("%s: config %s: %w", archive, m.Config, err)
	}
	info.Digest = digestOf("sha256:", config)
	// The config names each layer's uncompressed digest (its diff ID):
	// the only check a `docker save` archive allows on its layer files.
	var cfg struct {
		RootFS struct {
			DiffIDs []string `json:"diff_ids"`
		} `json:"rootfs"`
	}
	if err := json.Unmarshal(config, &cfg); err != nil {
		return nil, fmt.Errorf("%s: config %s: %w", archive, m.Config, err)
	}
	if len(cfg.RootFS.DiffIDs) != len(m.Layers) {
		return nil, fmt.Errorf("%s: the config lists %d layers, manifest.json %d", archive, len(cfg.RootFS.DiffIDs), len(m.Layers))
	}
	img := &image{info: info}
	for i, l := range m.Layers {
		member := l
		img.layers = append(img.layers, layer{name: member, diffID: cfg.RootFS.DiffIDs[i],
			open: func() (io.ReadCloser, error) { return openMember(archive, member) }})
	}
	return img, nil
}

// sameTag compares two image references the way `docker` reads them:
// python:3.12, docker.io/library/python:3.12 and
// index.docker.io/library/python:3.12 are one image; no tag means latest.
func sameTag(a, b string) bool {
	return normalTag(a) == normalTag(b)
}

func normalTag(t string) string {
	for _, p := range []string{"index.docker.io/", "docker.io/"} {
		t = strings.TrimPrefix(t, p)
	}
	t = strings.TrimPrefix(t, "library/")
	if i := strings.LastIndex(t, "/"); !strings.Contains(t[i+1:], ":") && !strings.Contains(t, "@") {
		t += ":latest"
	}
	return t
}

// readMember returns a small member of a tar archive.
func readMember(archive, name string) ([]byte, error) {
	r, err := openMember(archive, name)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return readSmall(r, name)
}

// openMember opens the member called name of a tar archive. A member that
// is a link (older `docker save` links layers that several images share)
// is followed inside the archive, a few links deep at most.
func openMember(archive, name string) (io.ReadCloser, error) {
	want := memberName(name)
	for hops := 0; hops < 8; hops++ {
		f, err := os.Open(archive)
		if err != nil {
			return nil, err
		}
		tr := tar.NewReader(bufio.NewReader(f))
		h, err := findMember(tr, want)
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("member %s: %w", name, err)
		}
		switch h.Typeflag {
		case tar.TypeReg:
			return struct {
				io.Reader
				io.Closer
			}{tr, f}, nil
		case tar.TypeSymlink:
			target := h.Linkname
			if !path.IsAbs(target) {
				target = path.Join(path.Dir(want), target)
			}
			want = memberName(strings.TrimPrefix(target, "/"))
		case tar.TypeLink:
			want = memberName(h.Linkname)
		default:
			f.Close()
			return nil, fmt.Errorf("member %s is not a regular file", name)
		}
		f.Close()
	}
	return nil, fmt.Errorf("member %s: too many links", name)
}

// findMember advances tr to the member called want.
func findMember(tr *tar.Reader, want string) (*tar.Header, error) {
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil, errors.New("not in the archive")
		}
		if err != nil {
			return nil, err
		}
		if memberName(h.Name) == want {
			return h, nil
		}
	}
}

// memberName is a member's path as compared: clean, without "./".
func memberName(name string) string {
	return path.Clean(strings.TrimPrefix(name, "./"))
}

// flatten writes the union of the layers as one tar stream, the way a
// container runtime would stack them: an upper layer's entry hides the
// same path below (a non-directory also hides everything under it), a
// whiteout ".wh.NAME" hides NAME below, and an opaque whiteout hides all
// that lies below in its directory. Layers are read top first, so every
// path is written once; whiteouts take effect once their layer is done.
// It records each layer's digest, and refuses a layer whose content does
// not match the digest its manifest gives.
func flatten(ctx context.Context, img *image) *flattened {
	pr, pw := io.Pipe()
	f := &flattened{PipeReader: pr, done: make(chan struct{})}
	go func() {
		defer close(f.done)
		tw := tar.NewWriter(pw)
		seen := map[string]bool{} // path → hides what is below it
		digests := make([]string, len(img.layers))
		var err error
		for i := len(img.layers) - 1; i >= 0 && err == nil; i-- {
			digests[i], err = flattenLayer(ctx, img.layers[i], tw, seen)
		}
		if err == nil {
			err = tw.Close()
		}
		f.digests, f.err = digests, err
		pw.CloseWithError(err)
	}()
	return f
}

// flattened is the stream flatten writes; wait says how it ended.
type flattened struct {
	*io.PipeReader
	done    chan struct{}
	digests []string
	err     error
}

// wait stops the stream (if the reader gave up early) and returns the
// layers' digests, bottom first, or why flattening failed.
func (f *flattened) wait() ([]string, error) {
	f.Close()
	<-f.done
	return f.digests, f.err
}

func flattenLayer(ctx context.Context, l layer, tw *tar.Writer, seen map[string]bool) (string, error) {
	raw, err := l.open()
	if err != nil {
		return "", fmt.Errorf("layer %s: %w", l.name, err)
	}
	defer raw.Close()
	h := newHash(l.digest)
	br := bufio.NewReader(io.TeeReader(&ctxReader{ctx, raw}, h))
	var content io.Reader = br
	magic, _ := br.Peek(4)
	switch {
	case bytes.HasPrefix(magic, []byte{0x1f, 0x8b}):
		gz, err := gzip.NewReader(br)
		if err != nil {
			return "", fmt.Errorf("layer %s: %w", l.name, err)
		}
		content = gz
	case bytes.Equal(magic, []byte{0x28, 0xb5, 0x2f, 0xfd}):
		return "", fmt.Errorf("layer %s is zstd-compressed, which microbox does not read; save the image with gzip or uncompressed layers", l.name)
	}
	diff := newHash(l.diffID)
	content = io.TeeReader(content, diff)
	hidden := map[string]bool{} // this layer's whiteouts, for the layers below
	tr := tar.NewReader(content)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return "", fmt.Errorf("layer %s: %w", l.name, err)
		}
		name := path.Clean("/" + hdr.Name)
		dir, base := path.Split(name)
		switch {
		case base == opaqueWhiteout:
			hidden[opaqueKey(dir)] = true // everything below, under dir
			continue
		case strings.HasPrefix(base, whiteoutPrefix):
			hidden[path.Join(dir, strings.TrimPrefix(base, whiteoutPrefix))] = true
			continue
		}
		if underHidden(seen, name) {
			continue
		}
		if _, done := seen[name]; done {
			// Shadowed by an upper layer, it still shadows the layers
			// below: a file here replaced a directory of theirs.
			if hdr.Typeflag != tar.TypeDir {
				hidden[name] = true
			}
			continue
		}
		seen[name] = hdr.Typeflag != tar.TypeDir
		if err := tw.WriteHeader(hdr); err != nil {
			return "", err
		}
		if _, err := io.Copy(tw, tr); err != nil {
			return "", fmt.Errorf("layer %s: %s: %w", l.name, name, err)
		}
	}
	// The digests cover the streams to their ends, past the tar's last
	// entry: the uncompressed tar's, then the blob's.
	if _, err := io.Copy(io.Discard, content); err != nil {
		return "", fmt.Errorf("layer %s: %w", l.name, err)
	}
	if _, err := io.Copy(io.Discard, br); err != nil {
		return "", fmt.Errorf("layer %s: %w", l.name, err)
	}
	if got := sumOf(l.diffID, diff); l.diffID != "" && got != l.diffID {
		return "", fmt.Errorf("layer %s: its content has digest %s, but the image config says %s; the image is corrupt", l.name, got, l.diffID)
	}
	got := sumOf(l.digest, h)
	if l.digest != "" && got != l.digest {
		return "", fmt.Errorf("layer %s: content has digest %s; the image is corrupt", l.name, got)
	}
	for p := range hidden {
		seen[p] = true
	}
	return got, nil
}

// sumOf formats h's sum as a digest of the algorithm like names.
func sumOf(like string, h hash.Hash) string {
	alg, _, _ := strings.Cut(like, ":")
	if alg != "sha512" {
		alg = "sha256"
	}
	return alg + ":" + hex.EncodeToString(h.Sum(nil))
}

// opaqueKey is the key of an opaque whiteout of dir: the path with a
// trailing slash, which no entry's own (cleaned) path has.
func opaqueKey(dir string) string {
	return strings.TrimSuffix(path.Clean(dir), "/") + "/"
}

// underHidden reports whether an upper layer hid name through one of its
// parents: a whiteout or a non-directory at a parent, or an opaque
// whiteout ("dir/") of one. (An entry at name itself is the caller's
// business.)
func underHidden(seen map[string]bool, name string) bool {
	for p := name; p != "/"; {
		if seen[p] && p != name {
			return true
		}
		p = path.Dir(p)
		if seen[opaqueKey(p)] {
			return true
		}
	}
	return false
}
