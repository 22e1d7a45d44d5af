package rootfs

// Importing a container image as a root: oci.go reads the image (an OCI
// layout directory, a `docker save` archive or an OCI archive) and
// flattens its layers, applying whiteouts and opaque directories;
// extractTar writes the flattened tree into the stage without ever leaving
// it.

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/microbox/microbox/field"
)

// ImageInfo records where an imported root came from.
type ImageInfo struct {
	Source string `json:"source"`
	Format string `json:"format"` // oci-layout, docker-archive, oci-archive
	Ref    string `json:"ref,omitempty"`
	// Digest is the manifest's digest (OCI), or the image ID, the config's
	// digest (docker-archive, which has no manifest blob).
	Digest string `json:"digest"`
	// Layers are the layer blobs' digests as stored (compressed or not),
	// bottom first; each was checked against the manifest where it names one.
	Layers []string `json:"layers"`
}

// ImportOptions say which image to import.
type ImportOptions struct {
	// Ref picks one image from an archive or layout holding several: a
	// tag such as python:3.12-slim, or an OCI ref.name annotation.
	Ref string
	// MaxSize bounds the bytes the image may unpack to (0: no bound). An
	// image is untrusted, and a few KiB of gzip can expand to fill a disk.
	MaxSize int64
	Log     io.Writer
}

// maxEntries bounds the files, directories and links an image may unpack
// to; a Python image has tens of thousands.
const maxEntries = 2_000_000

// Import unpacks the image at src into stage (which must not exist) and
// prepares it for the jail (see Finish).
func Import(ctx context.Context, src, stage string, o ImportOptions) (*Manifest, error) {
	log := o.Log
	if log == nil {
		log = io.Discard
	}
	budget := extractBudget{bytes: o.MaxSize, entries: maxEntries}
	img, cleanup, err := openImage(src, o.Ref, budget)
	defer cleanup()
	if err != nil {
		return nil, err
	}
	info := img.info
	fmt.Fprintf(log, "microbox: image %s (%s, %d layers)\n", info.Digest, info.Format, len(img.layers))
	if err := os.Mkdir(stage, 0o755); err != nil {
		return nil, err
	}
	flat := flatten(ctx, img)
	stats, err := extractTar(stage, &ctxReader{ctx, flat}, budget)
	layers, ferr := flat.wait()
	if err == nil && ferr != nil && !errors.Is(ferr, io.ErrClosedPipe) {
		err = ferr
	}
	if err != nil {
		return nil, fmt.Errorf("unpack %s: %w", src, err)
	}
	info.Layers = layers
	m := &Manifest{Kind: "import", Image: info, Notes: stats.notes()}
	notes, err := Finish(stage, false)
	if err != nil {
		return nil, err
	}
	m.Notes = append(m.Notes, notes...)
	if linked, err := linkPython(stage); err != nil {
		return nil, err
	} else if linked != "" {
		m.Notes = append(m.Notes, linked)
	}
	return m, nil
}

// ctxReader stops an import when its context ends.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c *ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// openImage opens an OCI layout directory, a `docker save` archive or an
// OCI archive (a tarred layout, unpacked into a temporary directory that
// cleanup removes).
func openImage(src, ref string, budget extractBudget) (img *image, cleanup func(), err error) {
	cleanup = func() {}
	abs, err := filepath.Abs(src)
	if err != nil {
		return nil, cleanup, err
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return nil, cleanup, fmt.Errorf("image %s: %w", src, err)
	}
	info := &ImageInfo{Source: abs, Ref: ref}
	if fi.IsDir() {
		if _, err := os.Stat(filepath.Join(abs, "oci-layout")); err != nil {
			return nil, cleanup, fmt.Errorf("%s is a directory but not an OCI image layout (no oci-layout file)", src)
		}
		info.Format = "oci-layout"
		img, err := layoutImage(abs, ref, info)
		return img, cleanup, err
	}
	names, err := archiveNames(abs)
	if err != nil {
		return nil, cleanup, err
	}
	switch {
	case names["manifest.json"]:
		info.Format = "docker-archive"
		img, err := dockerArchiveImage(abs, ref, info)
		return img, cleanup, err
	case names["oci-layout"] && names["index.json"]:
		info.Format = "oci-archive"
		tmp, err := os.MkdirTemp("", "microbox-oci-")
		if err != nil {
			return nil, cleanup, err
		}
		cleanup = func() { os.RemoveAll(tmp) }
		if err := untarFile(abs, tmp, budget); err != nil {
			return nil, cleanup, err
		}
		img, err := layoutImage(tmp, ref, info)
		return img, cleanup, err
	}
	return nil, cleanup, fmt.Errorf("%s is neither an OCI image layout, a `docker save` archive nor an OCI archive", src)
}

// archiveNames lists the top-level files of a tar archive.
func archiveNames(p string) (map[string]bool, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	br := bufio.NewReader(f)
	if magic, _ := br.Peek(2); bytes.Equal(magic, []byte{0x1f, 0x8b}) {
		return nil, fmt.Errorf("%s is compressed; decompress it first (gunzip), `docker save` writes a plain tar", p)
	}
	names := map[string]bool{}
	tr := tar.NewReader(br)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return names, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: not a tar archive: %w", p, err)
		}
		names[path.Clean(strings.TrimPrefix(h.Name, "./"))] = true
	}
}

func untarFile(p, dir string, budget extractBudget) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = extractTar(dir, f, budget)
	return err
}

// linkPython makes /usr/bin/python3 (exec's default --python) point at
// /usr/local/bin/python3 in images that install Python there only, such
// as the official python images.
func linkPython(dir string) (string, error) {
	r, err := os.OpenRoot(dir)
	if err != nil {
		return "", err
	}
	defer r.Close()
	if _, err := r.Lstat("usr/bin/python3"); err == nil {
		return "", nil
	}
	if fi, err := r.Stat("usr/local/bin/python3"); err != nil || !fi.Mode().IsRegular() {
		return "", nil
	}
	if err := r.MkdirAll("usr/bin", 0o755); err != nil {
		return "", err
	}
	if err := r.Symlink("../local/bin/python3", "usr/bin/python3"); err != nil {
		return "", fmt.Errorf("link /usr/bin/python3: %w", err)
	}
	return "linked /usr/bin/python3 to /usr/local/bin/python3 (the image has Python only there)", nil
}

// extractStats counts what extractTar did, and what it refused to do.
type extractStats struct {
	entries   int
	devices   []string // device nodes and fifos, not created
	setid     []string // setuid/setgid bits removed
	otherOwns int      // entries owned by someone else in the archive
	skipped   []string // other entry types, not created
}

func (s *extractStats) notes() []string {
	var n []string
	if len(s.devices) > 0 {
		n = append(n, fmt.Sprintf("skipped %d device nodes and fifos: %s", len(s.devices), sample(s.devices)))
	}
	if len(s.setid) > 0 {
		n = append(n, fmt.Sprintf("removed setuid/setgid bits from %d files: %s", len(s.setid), sample(s.setid)))
	}
	if s.otherOwns > 0 {
		n = append(n, fmt.Sprintf("%d entries owned by other users or groups in the image now belong to the importing user", s.otherOwns))
	}
	if len(s.skipped) > 0 {
		n = append(n, fmt.Sprintf("skipped %d entries of unsupported types: %s", len(s.skipped), sample(s.skipped)))
	}
	return n
}

// sample lists a few of many paths.
func sample(paths []string) string {
	if len(paths) > 5 {
		return strings.Join(paths[:5], " ") + fmt.Sprintf(" (and %d more)", len(paths)-5)
	}
	return strings.Join(paths, " ")
}

// extractTar writes a tar stream into dir, which it never leaves: every
// path is resolved inside an os.Root, so neither "..", absolute names nor
// symlinks in the archive (or created by it) can reach outside. It
// creates regular files, directories, symlinks and hard links (within dir),
// owned by the caller whatever the archive says (inside the jail ownership
// maps to nobody anyway; only the mode bits matter). It does not create
// device nodes or fifos, removes setuid/setgid bits and ignores extended
// attributes (file capabilities included), reporting each.
// A budget with non-zero fields bounds what the archive may write.
func extractTar(dir string, r io.Reader, budget extractBudget) (*extractStats, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	x := &extractor{root: root, stats: &extractStats{}, dirModes: map[string]dirMeta{}, budget: budget}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("read archive: %w", err)
		}
		if err := x.entry(h, tr); err != nil {
			return nil, err
		}
	}
	return x.stats, x.finish()
}

type dirMeta struct {
	mode  fs.FileMode
	mtime time.Time
}

// extractBudget bounds what an untrusted archive may write; a zero field
// is no bound.
type extractBudget struct {
	bytes, entries int64
}

type extractor struct {
	root    *os.Root
	stats   *extractStats
	budget  extractBudget
	written int64 // bytes of file content so far
	// Directories get their modes and times last: a read-only directory
	// must still take its children, and adding them changes its mtime.
	dirModes map[string]dirMeta
	// Hard links come last: in a flattened image, a link from an upper
	// layer may precede its target from a lower one.
	links []*tar.Header
}

// cleanName makes an archive path relative to the root, refusing any that
// climbs out of it.
func cleanName(name string) (string, error) {
	n := path.Clean("/" + name)
	if strings.Contains(name, "\x00") {
		return "", fmt.Errorf("archive path %q contains a NUL byte", name)
	}
	for _, part := range strings.Split(name, "/") {
		if part == ".." {
			return "", fmt.Errorf("archive path %q climbs out of the root; refusing the archive", name)
		}
	}
	return strings.TrimPrefix(n, "/"), nil
}

func (x *extractor) entry(h *tar.Header, r io.Reader) error {
	name, err := cleanName(h.Name)
	if err != nil {
		return err
	}
	if name == "" {
		return nil // the root itself keeps the mode its owner gave it
	}
	x.stats.entries++
	if x.budget.entries > 0 && int64(x.stats.entries) > x.budget.entries {
		return fmt.Errorf("the archive holds more than %d entries; refusing it", x.budget.entries)
	}
	if h.Uid != 0 || h.Gid != 0 {
		x.stats.otherOwns++
	}
	mode := fs.FileMode(h.Mode).Perm()
	if h.Mode&0o1000 != 0 {
		mode |= fs.ModeSticky
	}
	if h.Mode&0o6000 != 0 && h.Typeflag != tar.TypeDir {
		x.stats.setid = append(x.stats.setid, "/"+name)
	}
	switch h.Typeflag {
	case tar.TypeDir:
		if err := x.root.MkdirAll(name, 0o700); err != nil {
			return fmt.Errorf("create /%s: %w", name, err)
		}
		if fi, err := x.root.Lstat(name); err != nil || !fi.IsDir() {
			return fmt.Errorf("create /%s: not a directory", name)
		}
		dm := mode
		if h.Mode&0o2000 != 0 {
			dm |= fs.ModeSetgid // on a directory, only group inheritance
		}
		x.dirModes[name] = dirMeta{dm, h.ModTime}
		return nil
	case tar.TypeReg, tar.TypeRegA:
		return x.file(name, mode, h, r)
	case tar.TypeSymlink:
		if err := x.parent(name); err != nil {
			return err
		}
		if err := x.replace(name); err != nil {
			return err
		}
		if err := x.root.Symlink(h.Linkname, name); err != nil {
			return fmt.Errorf("create /%s: %w", name, err)
		}
		return nil
	case tar.TypeLink:
		if _, err := cleanName(h.Linkname); err != nil {
			return err
		}
		x.links = append(x.links, h)
		return nil
	case tar.TypeChar, tar.TypeBlock, tar.TypeFifo:
		x.stats.devices = append(x.stats.devices, "/"+name)
		return nil
	default:
		x.stats.skipped = append(x.stats.skipped, "/"+name)
		return nil
	}
}

// parent creates the directories above name.
func (x *extractor) parent(name string) error {
	if d := path.Dir(name); d != "." {
		if err := x.root.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("create /%s: %w", d, err)
		}
	}
	return nil
}

// replace removes what is at name unless it is a directory; a later entry
// for the same path wins, as in tar itself.
func (x *extractor) replace(name string) error {
	fi, err := x.root.Lstat(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if fi.IsDir() {
		return fmt.Errorf("/%s: the archive replaces a directory with a file", name)
	}
	return x.root.Remove(name)
}

func (x *extractor) file(name string, mode fs.FileMode, h *tar.Header, r io.Reader) error {
	if err := x.parent(name); err != nil {
		return err
	}
	if err := x.replace(name); err != nil {
		return err
	}
	// O_EXCL: the name was just cleared, so a symlink planted there since
	// cannot redirect the write.
	f, err := x.root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("create /%s: %w", name, err)
	}
	err = x.copy(f, r)
	if err == nil {
		err = f.Chmod(mode)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		// The mtime matters: Python's .pyc records its source's.
		err = x.root.Chtimes(name, h.ModTime, h.ModTime)
	}
	if err != nil {
		return fmt.Errorf("write /%s: %w", name, err)
	}
	return nil
}

// copy writes a file's content, within the byte budget.
func (x *extractor) copy(w io.Writer, r io.Reader) error {
	if x.budget.bytes == 0 {
		_, err := io.Copy(w, r)
		return err
	}
	n, err := io.CopyN(w, r, x.budget.bytes-x.written+1)
	x.written += n
	if x.written > x.budget.bytes {
		return field.Errorf("MaxSize", "the image unpacks to more than %d bytes ({MaxSize}); raise the limit if the image is trusted", x.budget.bytes)
	}
	if err == io.EOF {
		err = nil
	}
	return err
}

// finish creates the deferred hard links, then sets directory modes and
// times, deepest first.
func (x *extractor) finish() error {
	for _, h := range x.links {
		name, _ := cleanName(h.Name)
		target, _ := cleanName(h.Linkname)
		if err := x.parent(name); err != nil {
			return err
		}
		if err := x.replace(name); err != nil {
			return err
		}
		if err := x.root.Link(target, name); err != nil {
			return fmt.Errorf("hard link /%s to /%s: %w", name, target, err)
		}
	}
	dirs := make([]string, 0, len(x.dirModes))
	for d := range x.dirModes {
		dirs = append(dirs, d)
	}
	sort.Sort(sort.Reverse(sort.StringSlice(dirs)))
	for _, d := range dirs {
		m := x.dirModes[d]
		if err := x.root.Chmod(d, m.mode); err != nil {
			return fmt.Errorf("chmod /%s: %w", d, err)
		}
		x.root.Chtimes(d, m.mtime, m.mtime)
	}
	return nil
}
