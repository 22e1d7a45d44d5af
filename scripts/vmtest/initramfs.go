package main

import (
	"bufio"
	"compress/gzip"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
)

// entry is one file, directory, symlink or device node of the initramfs.
type entry struct {
	mode   uint32 // type and permission bits, as in stat(2)
	mtime  int64
	source string // host file whose content goes in (regular files)
	data   []byte // content when there is no source
	target string // symlink target
	rdev   [2]uint32
}

// tree is the initramfs being assembled: absolute paths to entries.
type tree map[string]*entry

// addDir adds a directory (and its parents).
func (t tree) addDir(p string) {
	for d := path.Clean(p); d != "/" && t[d] == nil; d = path.Dir(d) {
		t[d] = &entry{mode: syscall.S_IFDIR | 0o755}
	}
}

// add adds an entry (and its parent directories).
func (t tree) add(p string, e *entry) {
	t.addDir(path.Dir(p))
	t[p] = e
}

// addData adds a regular file with the given content.
func (t tree) addData(p string, data []byte, perm uint32) {
	t.addDir(path.Dir(p))
	t[p] = &entry{mode: syscall.S_IFREG | perm, data: data}
}

// addHostFile adds the host file src at dst, keeping its mode and mtime
// (Python trusts a __pycache__ .pyc only if the source's mtime matches).
func (t tree) addHostFile(dst, src string) error {
	fi, err := os.Stat(src)
	if err != nil {
		return err
	}
	st := fi.Sys().(*syscall.Stat_t)
	t.addDir(path.Dir(dst))
	t[dst] = &entry{mode: st.Mode, mtime: fi.ModTime().Unix(), source: src}
	return nil
}

// addHostPath copies a host path in, resolving it one component at a time
// so every symlink on the way (merged-/usr links such as /lib64 -> usr/lib64,
// library version links) is recreated and its target copied too. It returns
// the path the symlinks lead to.
func (t tree) addHostPath(p string) (string, error) {
	return t.resolve(path.Clean(p), 0)
}

func (t tree) resolve(p string, depth int) (string, error) {
	if depth > 40 {
		return "", fmt.Errorf("%s: too many symlinks", p)
	}
	parts := strings.Split(strings.TrimPrefix(p, "/"), "/")
	cur := "/"
	for i, part := range parts {
		next := path.Join(cur, part)
		fi, err := os.Lstat(next)
		if err != nil {
			return "", err
		}
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(next)
			if err != nil {
				return "", err
			}
			t.addDir(cur)
			t[next] = &entry{mode: syscall.S_IFLNK | 0o777, target: target}
			abs := target
			if !path.IsAbs(abs) {
				abs = path.Join(cur, target)
			}
			rest := path.Join(append([]string{abs}, parts[i+1:]...)...)
			return t.resolve(rest, depth+1)
		case fi.IsDir():
			t.addDir(next)
		default:
			if i != len(parts)-1 {
				return "", fmt.Errorf("%s: not a directory", next)
			}
			return next, t.addHostFile(next, next)
		}
		cur = next
	}
	return cur, nil
}

// libDirs are where the dynamic loader finds libraries on Debian amd64.
var libDirs = []string{"/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64", "/usr/lib64", "/lib", "/usr/lib"}

// addELF copies an executable or shared object with its interpreter and
// every library it needs, transitively.
func (t tree) addELF(p string) error {
	real, err := t.addHostPath(p)
	if err != nil {
		return err
	}
	needed, interp, err := elfDeps(real)
	if err != nil {
		return err
	}
	if interp != "" {
		if _, err := t.addHostPath(interp); err != nil {
			return fmt.Errorf("%s: interpreter: %w", p, err)
		}
	}
	for _, lib := range needed {
		if err := t.addLib(lib); err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
	}
	return nil
}

// addLib copies the library with the given soname (and its own needs).
func (t tree) addLib(soname string) error {
	p, ok := findLib(soname)
	if !ok {
		return fmt.Errorf("library %s not found in %v", soname, libDirs)
	}
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		return err
	}
	if _, done := t[real]; done {
		return nil
	}
	return t.addELF(p)
}

// findLib finds a library by soname on the host.
func findLib(soname string) (string, bool) {
	for _, d := range libDirs {
		p := path.Join(d, soname)
		if _, err := os.Stat(p); err == nil {
			return p, true
		}
	}
	return "", false
}

// elfDeps reads an ELF file's DT_NEEDED sonames and program interpreter.
func elfDeps(p string) ([]string, string, error) {
	f, err := elf.Open(p)
	if err != nil {
		return nil, "", fmt.Errorf("read ELF %s: %w", p, err)
	}
	defer f.Close()
	needed, err := f.ImportedLibraries()
	if err != nil {
		return nil, "", fmt.Errorf("read ELF %s: %w", p, err)
	}
	var interp string
	for _, prog := range f.Progs {
		if prog.Type == elf.PT_INTERP {
			b, err := io.ReadAll(prog.Open())
			if err != nil {
				return nil, "", fmt.Errorf("read ELF %s: %w", p, err)
			}
			interp = strings.TrimRight(string(b), "\x00")
		}
	}
	return needed, interp, nil
}

// stdlibSkip are parts of the standard library no test program imports;
// leaving them out keeps the initramfs (and boot under TCG) small.
// (Directories named config-* hold the static library for embedding.)
var stdlibSkip = map[string]bool{
	"test": true, "dist-packages": true,
	"site-packages": true, "lib2to3": true, "distutils": true, "pydoc_data": true,
	"idlelib": true, "tkinter": true, "ensurepip": true, "turtledemo": true,
	"unittest": true, "xmlrpc": true, "wsgiref": true, "sqlite3": true,
	"curses": true, "dbm": true, "venv": true, "lib-dynload": true,
}

// addPython copies the host's python3, the standard library (less
// stdlibSkip, with its precompiled __pycache__), ctypes with its library,
// and those extension modules whose libraries the interpreter already
// brings.
func (t tree) addPython(python string) error {
	real, err := filepath.EvalSymlinks(python)
	if err != nil {
		return fmt.Errorf("python: %w", err)
	}
	if _, err := t.addHostPath(python); err != nil {
		return fmt.Errorf("python: %w", err)
	}
	if err := t.addELF(real); err != nil {
		return err
	}
	stdlib := path.Join("/usr/lib", path.Base(real)) // /usr/lib/python3.11
	// __pycache__/NAME.cpython-311.pyc for python3.11
	tag := ".cpython-" + strings.ReplaceAll(strings.TrimPrefix(path.Base(real), "python"), ".", "") + ".pyc"
	if err := t.addStdlib(stdlib, tag); err != nil {
		return err
	}
	dynload := path.Join(stdlib, "lib-dynload")
	// ctypes, with libffi: a zygote template's bootstrap (nsjail's
	// zygote.py) imports it, so the zygote test needs it.
	ctypes, _ := filepath.Glob(filepath.Join(dynload, "_ctypes.*.so"))
	if len(ctypes) != 1 {
		return fmt.Errorf("python: no single _ctypes extension in %s (found %v)", dynload, ctypes)
	}
	if err := t.addELF(ctypes[0]); err != nil {
		return err
	}
	return t.addExtensions(dynload)
}

// addStdlib copies the pure-Python standard library with the bytecode
// whose file names end in pycTag.
func (t tree) addStdlib(stdlib, pycTag string) error {
	return filepath.WalkDir(stdlib, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(stdlib, p)
		top := strings.Split(rel, "/")[0]
		skip := stdlibSkip[top] || strings.HasPrefix(top, "config-")
		switch {
		case skip && d.IsDir():
			return filepath.SkipDir
		case skip:
			return nil
		case d.IsDir():
			t.addDir(p)
			return nil
		case d.Type()&fs.ModeSymlink != 0:
			return nil // e.g. sitecustomize.py -> /etc/..., absent in a jail anyway
		case strings.HasSuffix(p, ".pyc") && !strings.HasSuffix(p, pycTag):
			return nil // optimized (-O) variants
		}
		return t.addHostFile(p, p)
	})
}

// addExtensions copies the compiled extension modules that need no
// library beyond those already in the tree.
func (t tree) addExtensions(dir string) error {
	mods, err := filepath.Glob(filepath.Join(dir, "*.so"))
	if err != nil {
		return err
	}
	for _, m := range mods {
		base := filepath.Base(m)
		if strings.HasPrefix(base, "_test") || strings.HasPrefix(base, "xx") || strings.HasPrefix(base, "_xx") {
			continue
		}
		needed, _, err := elfDeps(m)
		if err != nil {
			return err
		}
		if t.haveLibs(needed) {
			if err := t.addHostFile(m, m); err != nil {
				return err
			}
		}
	}
	return nil
}

// haveLibs reports whether every soname is already in the tree.
func (t tree) haveLibs(sonames []string) bool {
	for _, so := range sonames {
		p, ok := findLib(so)
		if !ok {
			return false
		}
		real, err := filepath.EvalSymlinks(p)
		if err != nil || t[real] == nil {
			return false
		}
	}
	return true
}

// writeCpio writes the tree as a gzip-compressed "newc" cpio archive, the
// format the kernel unpacks into its initial root. Parents come before
// their children because paths are written in sorted order.
func (t tree) writeCpio(w io.Writer) error {
	zw, err := gzip.NewWriterLevel(w, gzip.BestSpeed)
	if err != nil {
		return err
	}
	bw := bufio.NewWriterSize(zw, 1<<20)
	paths := make([]string, 0, len(t))
	for p := range t {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for i, p := range paths {
		if err := t[p].writeCpio(bw, strings.TrimPrefix(p, "/"), uint32(i+1)); err != nil {
			return fmt.Errorf("initramfs %s: %w", p, err)
		}
	}
	trailer := &entry{}
	if err := trailer.writeCpio(bw, "TRAILER!!!", 0); err != nil {
		return err
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	return zw.Close()
}

// writeCpio writes one newc header, name and body, each padded to 4 bytes.
func (e *entry) writeCpio(w *bufio.Writer, name string, ino uint32) error {
	body := e.data
	switch {
	case e.mode&syscall.S_IFMT == syscall.S_IFLNK:
		body = []byte(e.target)
	case e.source != "":
		b, err := os.ReadFile(e.source)
		if err != nil {
			return err
		}
		body = b
	}
	nlink := 1
	if e.mode&syscall.S_IFMT == syscall.S_IFDIR {
		nlink = 2
	}
	fmt.Fprintf(w, "070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X",
		ino, e.mode, 0, 0, nlink, e.mtime, len(body), 0, 0, e.rdev[0], e.rdev[1], len(name)+1, 0)
	w.WriteString(name)
	w.WriteByte(0)
	pad(w, 110+len(name)+1)
	w.Write(body)
	pad(w, len(body))
	return nil
}

func pad(w *bufio.Writer, n int) {
	for ; n%4 != 0; n++ {
		w.WriteByte(0)
	}
}

// buildInitramfs assembles the VM's root: the guest program as /init,
// microbox as /bin/microbox (and /usr/bin/microbox), the host's Python
// under /usr, merged-/usr links, and the few mount points and device node
// the kernel and the guest need before devtmpfs is mounted.
func buildInitramfs(out, guest, microbox, python string) error {
	t := tree{}
	for _, d := range []string{"/proc", "/sys", "/dev", "/tmp", "/run", "/etc", "/root"} {
		t.addDir(d)
	}
	t.add("/dev/console", &entry{mode: syscall.S_IFCHR | 0o600, rdev: [2]uint32{5, 1}})
	t["/tmp"].mode = syscall.S_IFDIR | 0o1777
	if err := t.addPython(python); err != nil {
		return err
	}
	if _, err := os.Stat("/etc/ld.so.cache"); err == nil {
		if err := t.addHostFile("/etc/ld.so.cache", "/etc/ld.so.cache"); err != nil {
			return err
		}
	}
	if err := t.addHostFile("/init", guest); err != nil {
		return err
	}
	if err := t.addHostFile("/usr/bin/microbox", microbox); err != nil {
		return err
	}
	// The merged-/usr links as the host has them: the default root
	// recreates them in the jail from the "host" (here, the initramfs).
	for _, d := range []string{"/bin", "/sbin", "/lib", "/lib64"} {
		if _, err := t.addHostPath(d); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	if bin := t["/bin"]; bin != nil && bin.mode&syscall.S_IFMT == syscall.S_IFDIR {
		if err := t.addHostFile("/bin/microbox", microbox); err != nil {
			return err
		}
	}
	t.addData("/etc/passwd", []byte("root:x:0:0:root:/root:/bin/sh\nuser:x:1000:1000:user:/tmp:/bin/sh\n"), 0o644)
	t.addData("/etc/group", []byte("root:x:0:\nuser:x:1000:\n"), 0o644)
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	if err := t.writeCpio(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
