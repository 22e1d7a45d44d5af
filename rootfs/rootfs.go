// Package rootfs describes the read-only Python root filesystem a sandbox
// runs in: either a tree the user prepared (--rootfs DIR) or, by default, one
// derived from the host's own Python (its /usr bound read-only, with a
// synthesized /etc that holds no host secrets). The jail turns the
// description into mounts; this package only decides what goes where.
//
// It also makes and vets prepared trees: Build bootstraps a Debian root
// with mmdebstrap (build.go), Import unpacks a container image into one
// without letting it write outside (image.go), and Check says whether a
// root is usable and safe (check.go).
package rootfs

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	securejoin "github.com/cyphar/filepath-securejoin"
	"github.com/microbox/microbox/field"
)

// Kind says how an Entry gets into the new root.
type Kind int

const (
	Bind     Kind = iota // Source (a host directory) is bound read-only at Path
	BindFile             // Source (a host file) is bound read-only at Path
	Symlink              // Path is a symlink to Source
	File                 // Path is a file holding Data
)

// Entry is one thing the jail puts into a host-derived root.
type Entry struct {
	Kind   Kind
	Path   string // absolute, inside the new root
	Source string // host path (Bind) or link target (Symlink)
	Data   []byte // contents (File)
}

// Identity is the sandbox's user as the synthesized /etc names it.
type Identity struct {
	User, Group string
	UID, GID    int
	Home        string
}

// usrMergedDirs are the top-level directories a Debian-like host either
// links into /usr (merged /usr) or keeps as real directories.
var usrMergedDirs = []string{"bin", "sbin", "lib", "lib32", "lib64", "libx32"}

// HostEntries describes a root made from the host: /usr read-only, the
// top-level library and binary directories as the host has them, and an
// /etc written from scratch. From the host's /etc come only what /usr
// itself needs and holds no secret (hostEtcFiles, hostEtcDirs):
// ld.so.cache, which makes library loading fast, /etc/alternatives, the
// links through which Debian reaches the library a package chose
// (libblas.so.3, liblapack.so.3: numpy does not import without them), and
// the configuration matplotlib and fontconfig read.
func HostEntries(id Identity, hostname string) ([]Entry, error) {
	host, err := hostScan.entries()
	if err != nil {
		return nil, err
	}
	entries := slices.Clone(host.usr)
	entries = append(entries, EtcEntries(id, hostname)...)
	return append(entries, host.etc...), nil
}

// hostScan is what HostEntries reads of the host's root, kept for
// hostScanTTL: a server computes the root of every run it is asked for,
// to match the run with the jails it started ahead, and the scan's
// lookups (some twenty, with their symlinks) were half of that work on
// each run's path. A host root that changes is seen within hostScanTTL;
// a jail started ahead holds the root of its own start anyway.
var hostScan scanCache

const hostScanTTL = time.Second

type scanCache struct {
	mu      sync.Mutex
	at      time.Time
	scanned hostRoot
}

// hostRoot is the host's part of a root made from it: /usr and the
// top-level directories merged into it, and what of /etc it binds.
type hostRoot struct {
	usr, etc []Entry
}

func (c *scanCache) entries() (hostRoot, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.at.IsZero() && time.Since(c.at) < hostScanTTL {
		return c.scanned, nil
	}
	h, err := scanHostRoot()
	if err != nil {
		return hostRoot{}, err
	}
	c.scanned, c.at = h, time.Now()
	return h, nil
}

func scanHostRoot() (hostRoot, error) {
	var h hostRoot
	if _, err := os.Stat("/usr"); err != nil {
		return h, fmt.Errorf("host root: %w", err)
	}
	h.usr = []Entry{{Kind: Bind, Path: "/usr", Source: "/usr"}}
	for _, d := range usrMergedDirs {
		host := "/" + d
		fi, err := os.Lstat(host)
		switch {
		case errors.Is(err, os.ErrNotExist):
			continue
		case err != nil:
			return h, fmt.Errorf("host root: %w", err)
		case fi.Mode()&os.ModeSymlink != 0:
			target, err := os.Readlink(host)
			if err != nil {
				return h, fmt.Errorf("host root: %w", err)
			}
			h.usr = append(h.usr, Entry{Kind: Symlink, Path: host, Source: target})
		case fi.IsDir():
			h.usr = append(h.usr, Entry{Kind: Bind, Path: host, Source: host})
		}
	}
	for _, f := range hostEtcFiles {
		if fi, err := os.Stat(f); err == nil && fi.Mode().IsRegular() {
			h.etc = append(h.etc, Entry{Kind: BindFile, Path: f, Source: f})
		}
	}
	for _, d := range hostEtcDirs {
		if fi, err := os.Stat(d); err == nil && fi.IsDir() {
			h.etc = append(h.etc, Entry{Kind: Bind, Path: d, Source: d})
		}
	}
	return h, nil
}

// hostEtcFiles are the host's /etc files that libraries of /usr read and
// that hold nothing of the host's own: the dynamic linker's cache, and
// Debian matplotlib's defaults (it reads them from /etc/matplotlibrc
// only, and will not import without them).
var hostEtcFiles = []string{"/etc/ld.so.cache", "/etc/matplotlibrc"}

// hostEtcDirs are the host's /etc directories of the same kind: Debian's
// alternatives (the links through which /usr reaches the library a
// package chose), and fontconfig's configuration (which matplotlib's
// text rendering loads, and complains on stderr without).
var hostEtcDirs = []string{"/etc/alternatives", "/etc/fonts"}

// EtcEntries is the synthesized /etc: a passwd and group that name only
// root and the sandbox user, loopback-only hosts, and no resolver.
func EtcEntries(id Identity, hostname string) []Entry {
	passwd := fmt.Sprintf("root:x:0:0:root:/root:/usr/sbin/nologin\n%s:x:%d:%d:%s:%s:/usr/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n",
		id.User, id.UID, id.GID, id.User, id.Home)
	group := fmt.Sprintf("root:x:0:\n%s:x:%d:\nnogroup:x:65534:\n", id.Group, id.GID)
	hosts := fmt.Sprintf("127.0.0.1\tlocalhost %s\n::1\tlocalhost ip6-localhost ip6-loopback\n", hostname)
	return []Entry{
		{Kind: File, Path: "/etc/passwd", Data: []byte(passwd)},
		{Kind: File, Path: "/etc/group", Data: []byte(group)},
		{Kind: File, Path: "/etc/hosts", Data: []byte(hosts)},
		{Kind: File, Path: "/etc/hostname", Data: []byte(hostname + "\n")},
		{Kind: File, Path: "/etc/nsswitch.conf", Data: []byte("passwd: files\ngroup: files\nhosts: files\n")},
		{Kind: Symlink, Path: "/etc/os-release", Source: "../usr/lib/os-release"},
	}
}

// RequiredDirs must exist in a prepared root: the jail mounts onto them.
var RequiredDirs = []string{"/proc", "/dev", "/tmp"}

// CheckMountPoint verifies that p, where the jail mounts something, is a
// directory of the prepared root dir reached without symbolic links. The
// jail mounts before it pivots, so a link there would be followed in the
// staging tree rather than in the root: the run would fail in confusing
// ways, or mount where nothing should be.
//
// Every directory on the way, the root included, must also be writable by
// no one but root and the caller: the jail mounts by path after this
// check, and whoever can write such a directory could swap a link in
// between.
func CheckMountPoint(dir, p string) error {
	cur := dir
	for _, part := range strings.Split(strings.Trim(p, "/"), "/") {
		if err := onlyOwnerWrites(dir, cur); err != nil {
			return err
		}
		cur = filepath.Join(cur, part)
		fi, err := os.Lstat(cur)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return fmt.Errorf("rootfs %s has no %s directory to mount on; create it (mkdir -p %s)", dir, p, filepath.Join(dir, p))
		case err != nil:
			return fmt.Errorf("rootfs %s: %w", dir, err)
		case fi.Mode()&fs.ModeSymlink != 0:
			return fmt.Errorf("rootfs %s: %s is a symbolic link, but the jail mounts on %s, which must be reached through real directories; replace the link with a directory", dir, strings.TrimPrefix(cur, dir), p)
		case !fi.IsDir():
			return fmt.Errorf("rootfs %s: %s is not a directory, but the jail mounts on %s", dir, strings.TrimPrefix(cur, dir), p)
		}
	}
	return nil
}

// onlyOwnerWrites refuses a directory of the root that someone other than
// root or the caller owns or may write.
func onlyOwnerWrites(root, path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("rootfs %s: %w", root, err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	owner := int(st.Uid)
	if (owner != 0 && owner != os.Geteuid()) || fi.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("rootfs %s: %s (owner uid %d, mode %04o) may be written by others, who could swap a link in before the jail mounts below it; chown it to root and chmod go-w it", root, cmp.Or(strings.TrimPrefix(path, root), "/"), owner, fi.Mode().Perm())
	}
	return nil
}

// CheckPython verifies that python names an executable file inside the
// root (dir "" is the host-derived root) and returns a one-line reason if
// not. It is the cheap check every run makes; `rootfs check` does more.
func CheckPython(dir, python string) error {
	if !filepath.IsAbs(python) {
		return field.Errorf("Python", "{Python} %s: the interpreter path must be absolute", python)
	}
	if dir == "" {
		return checkHostPython(python)
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return fmt.Errorf("rootfs %s is not a directory; build one with `microbox rootfs build %s`", dir, dir)
	}
	for _, d := range RequiredDirs {
		if err := CheckMountPoint(dir, d); err != nil {
			return err
		}
	}
	resolved, err := securejoin.SecureJoin(dir, python)
	if err != nil {
		return fmt.Errorf("rootfs %s: resolve %s: %w", dir, python, err)
	}
	if err := isExecutable(resolved); err != nil {
		return field.Errorf("Python", "rootfs %s has no usable python at %s (%v); build one with `microbox rootfs build` or pass {Python}", dir, python, err)
	}
	return nil
}

// checkHostPython checks an interpreter for the host-derived root, which
// holds only /usr and its merged directories.
//
// A success is kept for hostScanTTL, as the host scan is: a server checks
// the interpreter of every run it is asked for, three times on the way
// (options, spec, the jail's own check), some thirty lookups.
func checkHostPython(python string) error {
	if hostPythons.fresh(python) {
		return nil
	}
	if err := lookHostPython(python); err != nil {
		return err
	}
	hostPythons.found(python)
	return nil
}

// hostPythons are the host interpreters checkHostPython found usable, and
// when.
var hostPythons = checkedPaths{at: map[string]time.Time{}}

type checkedPaths struct {
	mu sync.Mutex
	at map[string]time.Time
}

func (c *checkedPaths) fresh(path string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	at, ok := c.at[path]
	return ok && time.Since(at) < hostScanTTL
}

func (c *checkedPaths) found(path string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.at) >= 64 { // a caller's many interpreters: start over
		clear(c.at)
	}
	c.at[path] = time.Now()
}

func lookHostPython(python string) error {
	resolved, err := filepath.EvalSymlinks(python)
	if err != nil {
		return field.Errorf("Python", "python %s not found on the host: install python3 (apt-get install python3) or pass {Python}", python)
	}
	if !strings.HasPrefix(resolved, "/usr/") {
		return field.Errorf("Python", "python %s resolves to %s, outside /usr, which is all the default root holds; use an interpreter under /usr or a {RootFS}", python, resolved)
	}
	if err := isExecutable(resolved); err != nil {
		return fmt.Errorf("python %s: %v", python, err)
	}
	return nil
}

func isExecutable(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return errors.New("not a regular file")
	}
	if fi.Mode().Perm()&0o111 == 0 {
		return errors.New("not executable")
	}
	return nil
}
