// Command image writes microbox's OCI image: a prepared Python root (from
// `microbox rootfs build`) at /var/lib/microbox/rootfs, the default root
// of every run, and the static binaries (bin/microbox, and
// bin/microbox-server when it has been built) in /usr/local/bin, as an
// OCI image layout directory that skopeo copies to a registry and umoci
// unpacks.
//
// The image is reproducible: the same root and binaries give the same
// digest. Entries are sorted, owned by root with no names, their mtimes
// clamped to -epoch (sources older than it keep theirs, which the root's
// .pyc files were checked against), and the config's dates are -epoch.
//
//	go run ./scripts/image -rootfs DIR -bin bin -o build/oci -tag v1.2.3
//
// The root's packages are pinned: -lock names the file listing them
// ("name version" lines, as the root's manifest records them), and a root
// whose packages differ is refused (-update-lock rewrites the list).
package main

import (
	"archive/tar"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

func main() {
	log.SetFlags(0)
	log.SetPrefix("image: ")
	rootfs := flag.String("rootfs", "", "prepared root (microbox rootfs build --with numpy DIR)")
	bin := flag.String("bin", "bin", "directory of the static microbox (and microbox-server, if built)")
	out := flag.String("o", "build/oci", "OCI image layout to write (replaced)")
	tag := flag.String("tag", "latest", "the image's reference name in the layout")
	epoch := flag.Int64("epoch", 0, "timestamp of the image (SOURCE_DATE_EPOCH; 0: the root manifest's creation time)")
	lock := flag.String("lock", "", "pinned package list the root must match")
	updateLock := flag.Bool("update-lock", false, "write the root's package list to -lock instead of checking it")
	flag.Parse()
	if *rootfs == "" {
		log.Fatal("-rootfs: give a root built with microbox rootfs build")
	}
	man, err := readManifest(*rootfs)
	if err != nil {
		log.Fatal(err)
	}
	if *lock != "" {
		if err := checkLock(*lock, man.Packages, *updateLock); err != nil {
			log.Fatal(err)
		}
	}
	when := time.Unix(*epoch, 0).UTC()
	if *epoch == 0 {
		when = man.Created.UTC()
	}
	d, err := write(*out, *tag, when, image{rootfs: *rootfs, bin: *bin})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s@%s\n", *out, d)
}

// rootManifest is what the image needs of the root's
// /etc/microbox-rootfs.json.
type rootManifest struct {
	Created  time.Time `json:"created"`
	Packages []string  `json:"packages"`
}

func readManifest(root string) (rootManifest, error) {
	var m rootManifest
	data, err := os.ReadFile(filepath.Join(root, "etc/microbox-rootfs.json"))
	if err == nil {
		err = json.Unmarshal(data, &m)
	}
	if err != nil {
		return m, fmt.Errorf("%s is not a root built by microbox rootfs build: %w", root, err)
	}
	return m, nil
}

// checkLock compares the root's packages with the pinned list, or writes
// the list.
func checkLock(lock string, have []string, update bool) error {
	text := strings.Join(have, "\n") + "\n"
	if update {
		return os.WriteFile(lock, []byte(text), 0o644)
	}
	data, err := os.ReadFile(lock)
	if err != nil {
		return err
	}
	want := strings.Fields(strings.ReplaceAll(string(data), " ", "="))
	got := strings.Fields(strings.ReplaceAll(text, " ", "="))
	var diff []string
	for _, p := range want {
		if !slices.Contains(got, p) {
			diff = append(diff, "-"+p)
		}
	}
	for _, p := range got {
		if !slices.Contains(want, p) {
			diff = append(diff, "+"+p)
		}
	}
	if len(diff) > 0 {
		return fmt.Errorf("the root's packages differ from %s (%s): Debian has moved on; review and run with -update-lock (make image-lock)", lock, strings.Join(diff, " "))
	}
	return nil
}

// image is what goes into the image's two layers: the root (large,
// changing with Debian's packages) and the binaries (changing with every
// commit), so that a new commit's image shares the root's layer.
type image struct {
	rootfs, bin string
}

// entry is one file of a layer: where it goes in the image, and where it
// comes from on disk ("" for a directory made by the image).
type entry struct {
	name, src string
	mode      fs.FileMode
}

func (im image) layers() ([][]entry, error) {
	root, err := walk(im.rootfs, "var/lib/microbox/rootfs")
	if err != nil {
		return nil, err
	}
	root = append(dirs("var", "var/lib", "var/lib/microbox"), root...)
	bins := dirs("usr", "usr/local", "usr/local/bin")
	for _, name := range []string{"microbox", "microbox-server"} {
		src := filepath.Join(im.bin, name)
		if _, err := os.Stat(src); errors.Is(err, fs.ErrNotExist) && name != "microbox" {
			continue // the server binary is built only with its build tag
		} else if err != nil {
			return nil, err
		}
		bins = append(bins, entry{name: "usr/local/bin/" + name, src: src, mode: 0o755})
	}
	// Mount points and the directories microbox writes (/tmp, /run).
	bins = append(bins, dirs("etc", "proc", "sys", "dev", "run")...)
	bins = append(bins, entry{name: "tmp", mode: fs.ModeDir | fs.ModeSticky | 0o777})
	return [][]entry{root, bins}, nil
}

func dirs(names ...string) []entry {
	var es []entry
	for _, n := range names {
		es = append(es, entry{name: n, mode: fs.ModeDir | 0o755})
	}
	return es
}

// walk lists the tree at dir as entries under prefix, in order.
func walk(dir, prefix string) ([]entry, error) {
	var es []entry
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		name := prefix
		if rel != "." {
			name = prefix + "/" + filepath.ToSlash(rel)
		}
		es = append(es, entry{name: name, src: p})
		return nil
	})
	return es, err // WalkDir visits in lexical order
}

// writeLayer writes the entries as a gzipped tar and returns its
// descriptor and its diff ID (the uncompressed digest).
func writeLayer(blobs string, es []entry, epoch time.Time) (descriptor, string, error) {
	tmp, err := os.CreateTemp(blobs, ".layer-*")
	if err != nil {
		return descriptor{}, "", err
	}
	defer os.Remove(tmp.Name())
	zsum, tsum := sha256.New(), sha256.New()
	counted := &countWriter{w: io.MultiWriter(tmp, zsum)}
	zw, _ := gzip.NewWriterLevel(counted, gzip.DefaultCompression)
	tw := tar.NewWriter(io.MultiWriter(zw, tsum))
	links := map[[2]uint64]string{} // hard links: first name of each inode
	for _, e := range es {
		if err := writeEntry(tw, e, epoch, links); err != nil {
			return descriptor{}, "", err
		}
	}
	if err := errors.Join(tw.Close(), zw.Close(), tmp.Close()); err != nil {
		return descriptor{}, "", err
	}
	d := descriptor{MediaType: "application/vnd.oci.image.layer.v1.tar+gzip", Digest: "sha256:" + hex.EncodeToString(zsum.Sum(nil)), Size: counted.n}
	return d, "sha256:" + hex.EncodeToString(tsum.Sum(nil)), os.Rename(tmp.Name(), blobPath(blobs, d.Digest))
}

// writeEntry writes one tar entry: owned by root, without user or group
// names, its mtime clamped to epoch.
func writeEntry(tw *tar.Writer, e entry, epoch time.Time, links map[[2]uint64]string) error {
	h := &tar.Header{Name: e.name, Mode: int64(e.mode.Perm()), ModTime: epoch, Format: tar.FormatPAX}
	if e.mode&fs.ModeSticky != 0 {
		h.Mode |= 0o1000
	}
	if e.src == "" || e.mode.IsDir() {
		h.Typeflag, h.Name = tar.TypeDir, e.name+"/"
		if e.src == "" {
			return tw.WriteHeader(h)
		}
	}
	fi, err := os.Lstat(e.src)
	if err != nil {
		return err
	}
	h.Mode = int64(fi.Mode().Perm())
	if fi.Mode()&fs.ModeSticky != 0 {
		h.Mode |= 0o1000
	}
	if e.mode != 0 {
		h.Mode = int64(e.mode.Perm())
	}
	if fi.ModTime().Before(epoch) {
		h.ModTime = fi.ModTime()
	}
	h.ModTime = h.ModTime.Truncate(time.Second)
	switch m := fi.Mode(); {
	case m.IsDir():
		h.Typeflag, h.Name = tar.TypeDir, e.name+"/"
		return tw.WriteHeader(h)
	case m&fs.ModeSymlink != 0:
		target, err := os.Readlink(e.src)
		if err != nil {
			return err
		}
		h.Typeflag, h.Linkname = tar.TypeSymlink, target
		return tw.WriteHeader(h)
	case m.IsRegular():
		st := fi.Sys().(*syscall.Stat_t)
		if st.Nlink > 1 {
			id := [2]uint64{st.Dev, st.Ino}
			if first, ok := links[id]; ok {
				h.Typeflag, h.Linkname = tar.TypeLink, first
				return tw.WriteHeader(h)
			}
			links[id] = e.name
		}
		h.Typeflag, h.Size = tar.TypeReg, fi.Size()
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		f, err := os.Open(e.src)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.Copy(tw, f)
		return err
	}
	return fmt.Errorf("%s: %v is not a directory, file or link (a prepared root holds none)", e.src, fi.Mode().Type())
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// descriptor is an OCI content descriptor.
type descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

func blobPath(blobs, digest string) string {
	return filepath.Join(blobs, strings.TrimPrefix(digest, "sha256:"))
}

// writeBlob stores a JSON document as a blob.
func writeBlob(blobs, mediaType string, v any) (descriptor, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return descriptor{}, err
	}
	sum := sha256.Sum256(data)
	d := descriptor{MediaType: mediaType, Digest: "sha256:" + hex.EncodeToString(sum[:]), Size: int64(len(data))}
	return d, os.WriteFile(blobPath(blobs, d.Digest), data, 0o644)
}

// write builds the layout at out and returns the manifest's digest.
func write(out, tag string, epoch time.Time, im image) (string, error) {
	layers, err := im.layers()
	if err != nil {
		return "", err
	}
	tmp := out + ".new"
	os.RemoveAll(tmp)
	blobs := filepath.Join(tmp, "blobs", "sha256")
	if err := os.MkdirAll(blobs, 0o755); err != nil {
		return "", err
	}
	var descs []descriptor
	var diffIDs []string
	for _, es := range layers {
		d, diffID, err := writeLayer(blobs, es, epoch)
		if err != nil {
			return "", err
		}
		descs, diffIDs = append(descs, d), append(diffIDs, diffID)
	}
	created := epoch.Format(time.RFC3339)
	config := map[string]any{
		"created": created, "architecture": "amd64", "os": "linux",
		"config": map[string]any{
			"Entrypoint": []string{"/usr/local/bin/microbox"},
			"Cmd":        []string{"doctor"},
			"Env":        []string{"PATH=/usr/local/bin:/usr/bin:/bin"},
			"Labels":     map[string]string{"org.opencontainers.image.title": "microbox", "org.opencontainers.image.version": tag},
		},
		"rootfs": map[string]any{"type": "layers", "diff_ids": diffIDs},
		"history": []map[string]any{
			{"created": created, "created_by": "microbox rootfs build (scripts/image)", "comment": "the Python root of runs"},
			{"created": created, "created_by": "scripts/image", "comment": "microbox's static binaries"},
		},
	}
	cd, err := writeBlob(blobs, "application/vnd.oci.image.config.v1+json", config)
	if err != nil {
		return "", err
	}
	md, err := writeBlob(blobs, "application/vnd.oci.image.manifest.v1+json", map[string]any{
		"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json", "config": cd, "layers": descs,
	})
	if err != nil {
		return "", err
	}
	md.Annotations = map[string]string{"org.opencontainers.image.ref.name": tag}
	index := map[string]any{"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json", "manifests": []descriptor{md}}
	for name, v := range map[string]any{"index.json": index, "oci-layout": map[string]string{"imageLayoutVersion": "1.0.0"}} {
		data, _ := json.Marshal(v)
		if err := os.WriteFile(filepath.Join(tmp, name), data, 0o644); err != nil {
			return "", err
		}
	}
	if err := os.RemoveAll(out); err != nil {
		return "", err
	}
	return md.Digest, os.Rename(tmp, out)
}
