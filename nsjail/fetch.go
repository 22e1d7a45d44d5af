package nsjail

// Files fetched out of a run: read from its scratch area once the program
// has ended (Spec.Fetch), into the result's Fetched.
//
// Where the read happens, and why there: on the host, by the supervisor,
// through descriptors of the run's scratch mounts, not by PID 1 in C.
// The supervisor opens them through PID 1's root (/proc/PID/root) after
// PID 1 has made them and before the program can run (a cold run's PID 1
// reports ready and waits for its run's plan; a zygote's child is ready
// before its run is sent), so nothing of the program's choosing is on
// the way to them. The descriptors keep each tmpfs alive after the jail's
// namespaces are gone, so the files are read after PID 1 has been reaped:
// every process of the run is dead by then and nothing changes under the
// read. Each file is opened with openat2 beneath its mount's descriptor,
// refusing any symbolic link, magic link or mount crossing
// (RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS|RESOLVE_NO_MAGICLINKS|
// RESOLVE_NO_XDEV): a link the program planted to /etc/passwd or to
// /proc/1/root cannot lead out, and a hard link cannot cross into another
// file system. The open never blocks (O_NONBLOCK: a FIFO opens at once),
// the scratch mounts are nodev (no device node can be opened), and only a
// regular file is read, at most its ceiling (a huge sparse file is refused
// by its size before a byte is read). The same code serves cold runs,
// jails started ahead and zygote forks, which differ only in when PID 1
// is ready. It needs the supervisor to reach PID 1's root, which a
// rootless microbox cannot (PID 1 is not dumpable): Validate refuses
// Fetch there by name.

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/microbox/microbox/result"
)

// The fetch's ceilings when the caller sets none (Spec.FetchMaxFile,
// Spec.FetchMaxTotal).
const (
	DefaultFetchMaxFile  = 16 << 20
	DefaultFetchMaxTotal = 64 << 20
)

// FetchFile is a file to fetch: Name as the caller asked for it (the
// key of the result's Fetched), Path where it is in the sandbox.
type FetchFile struct {
	Name, Path string
}

// scratchDirs are descriptors (O_PATH) of a run's scratch mounts: /tmp,
// and the working directory when it is a tmpfs of its own.
type scratchDirs struct {
	tmp, workdir *os.File
	workdirPath  string
}

// openScratch opens the scratch mounts of the jail whose PID 1 is pid, as
// the spec places them; PID 1 must have made them already.
func openScratch(pid int, s *Spec) (*scratchDirs, error) {
	root, err := os.OpenFile(fmt.Sprintf("/proc/%d/root", pid), unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("reach the jail's root: %w", err)
	}
	defer root.Close()
	sc := &scratchDirs{}
	if sc.tmp, err = openMount(root, "/tmp"); err != nil {
		return nil, err
	}
	if !underTmp(s.Workdir) {
		sc.workdirPath = s.Workdir
		if sc.workdir, err = openMount(root, s.Workdir); err != nil {
			sc.close()
			return nil, err
		}
	}
	return sc, nil
}

// openMount opens the scratch tmpfs at dir of the jail's root. The way
// there is the root's own (read-only, and microbox's or the operator's),
// resolved as the jail resolves it.
func openMount(root *os.File, dir string) (*os.File, error) {
	fd, err := unix.Openat2(int(root.Fd()), strings.TrimPrefix(dir, "/"), &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS,
	})
	if err != nil {
		return nil, fmt.Errorf("open the jail's scratch area %s: %w", dir, err)
	}
	var fs unix.Statfs_t
	if err := unix.Fstatfs(fd, &fs); err != nil || fs.Type != unix.TMPFS_MAGIC {
		unix.Close(fd)
		return nil, fmt.Errorf("the jail's %s is not its scratch tmpfs", dir)
	}
	return os.NewFile(uintptr(fd), dir), nil
}

func (sc *scratchDirs) close() {
	if sc == nil {
		return
	}
	for _, f := range []*os.File{sc.tmp, sc.workdir} {
		if f != nil {
			f.Close()
		}
	}
}

// fetch reads s.Fetch, in order, each within s.FetchMaxFile and all
// within s.FetchMaxTotal.
func (sc *scratchDirs) fetch(s *Spec) map[string]*result.Fetched {
	out := map[string]*result.Fetched{}
	left := s.FetchMaxTotal
	for _, f := range s.Fetch {
		if out[f.Name] != nil {
			continue
		}
		dir, rel := sc.locate(f.Path)
		data, err := readBeneath(dir, rel, s.FetchMaxFile, left)
		if err != nil {
			out[f.Name] = &result.Fetched{Error: fmt.Sprintf("%s: %v", f.Path, err)}
			continue
		}
		left -= int64(len(data))
		out[f.Name] = &result.Fetched{Data: data}
	}
	return out
}

// locate is the scratch mount that holds p (Validate put it under one)
// and p's path beneath it.
func (sc *scratchDirs) locate(p string) (*os.File, string) {
	if sc.workdir != nil && strings.HasPrefix(p, sc.workdirPath+"/") {
		return sc.workdir, strings.TrimPrefix(p, sc.workdirPath+"/")
	}
	return sc.tmp, strings.TrimPrefix(strings.TrimPrefix(p, "/tmp"), "/")
}

// errNotRegular refuses what is not a regular file: a directory, a FIFO,
// a socket.
var errNotRegular = errors.New("not a regular file")

// readBeneath reads the regular file rel beneath dir, following no link
// and crossing no mount, if it holds at most maxFile bytes and at most
// left.
func readBeneath(dir *os.File, rel string, maxFile, left int64) ([]byte, error) {
	fd, err := unix.Openat2(int(dir.Fd()), rel, &unix.OpenHow{
		Flags:   unix.O_RDONLY | unix.O_NONBLOCK | unix.O_NOCTTY | unix.O_NOFOLLOW | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV,
	})
	switch {
	case errors.Is(err, unix.ENOENT), errors.Is(err, unix.ENOTDIR):
		return nil, errors.New("missing: no such file")
	case errors.Is(err, unix.ELOOP):
		return nil, errors.New("a symbolic link on the way, which a fetch never follows: fetch the file itself")
	case errors.Is(err, unix.EXDEV):
		return nil, errors.New("outside the run's scratch area")
	case errors.Is(err, unix.ENXIO):
		return nil, errNotRegular // a socket
	case err != nil:
		return nil, err
	}
	f := os.NewFile(uintptr(fd), rel)
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, errNotRegular
	}
	limit, over := maxFile, "over the ceiling of %d bytes a fetched file may have"
	if left < maxFile {
		limit, over = left, "over the %d bytes left of the ceiling on all fetched files together"
	}
	if st.Size > limit {
		return nil, fmt.Errorf("too big: %d bytes, "+over, st.Size, limit)
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err == nil && int64(len(data)) > limit {
		err = fmt.Errorf("too big: over "+over, limit)
	}
	return data, err
}
