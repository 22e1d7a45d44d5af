// Package cgroup gives each sandboxed run a fresh control group, applies its
// memory, CPU and process limits, reports what the run used, and removes the
// group afterwards: on pure cgroup v2 hosts in the unified hierarchy, and on
// v1 and hybrid hosts (where memory, pids and cpu live on v1 hierarchies) in
// one group per hierarchy.
//
// It writes the cgroup files itself (a mkdir, a few writes, an rmdir per
// run) instead of going through containerd/cgroups: that library's package
// initialisation (protobuf descriptors, cilium/ebpf, dbus) cost 3.8 to
// 5.2 ms at every start of microbox, about a fifth of a bare python3 run
// (BENCHMARKS.md, "What changed the one-shot cost").
package cgroup

import (
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/microbox/microbox/field"
	"golang.org/x/sys/unix"
)

// Limits are what one run may use. A zero field means "no limit".
type Limits struct {
	Memory int64   // bytes of RAM, swap excluded (swap is off for the run)
	CPUs   float64 // CPU bandwidth in cores, e.g. 0.5
	Pids   int64   // processes and threads
}

// Usage is what a run consumed, read from its cgroup when it ended.
type Usage struct {
	CPU        time.Duration // user+system time of every process of the run
	PeakMemory int64         // high-water mark of the group's memory
	OOMKills   uint64        // processes the kernel killed for the memory limit
}

// Mode names the kind of hierarchy a run's limits live in.
type Mode string

const (
	ModeV2   Mode = "v2"
	ModeV1   Mode = "v1"
	ModeNone Mode = "none"
)

// Run is the cgroup of one sandboxed run.
type Run interface {
	// Mode tells which hierarchy enforces the limits.
	Mode() Mode
	// CloneFD is a directory fd to clone the child straight into
	// (CLONE_INTO_CGROUP), or -1 when the child must be moved with Enter.
	CloneFD() int
	// Enter moves pid into the group. The child waits for its plan until
	// this is done, so none of the program's instructions run outside.
	Enter(pid int) error
	// CPUTime is the group's CPU usage so far; cheap enough to poll.
	CPUTime() (time.Duration, error)
	// Kill sends SIGKILL to every process in the group.
	Kill() error
	// Usage reads the group's accounting; call it once the program has
	// ended (the jail may still be ending: the peak and OOM count stand).
	Usage() (Usage, error)
	// Remove deletes the group; the run's processes must be gone.
	Remove() error
}

// Options choose where and how a run's group is made.
type Options struct {
	Limits Limits
	// Parent is the cgroup (a path inside the hierarchy, e.g.
	// "/system.slice/eval.service") under which run groups are made.
	// Empty means microbox's own cgroup.
	Parent string
}

// SameOptions reports whether a and b ask for the same group (nil: none).
func SameOptions(a, b *Options) bool {
	return (a == nil) == (b == nil) && (a == nil || *a == *b)
}

// runPrefix starts the name of every group microbox creates for a run; GC
// relies on it to find stale ones and never touches any other name.
const runPrefix = "microbox-run-"

const mountRoot = "/sys/fs/cgroup"

// HostMode tells whether the host is pure cgroup v2, or has v1 hierarchies
// for the controllers microbox needs (v1 or hybrid).
func HostMode() Mode {
	if fileExists(filepath.Join(mountRoot, "cgroup.controllers")) {
		return ModeV2
	}
	if fileExists(filepath.Join(mountRoot, "memory", "memory.limit_in_bytes")) {
		return ModeV1
	}
	return ModeNone
}

// New creates the cgroup for one run with the given limits.
func New(opts Options) (Run, error) {
	if p := opts.Parent; p != "" && (!path.IsAbs(p) || path.Clean(p) != p) {
		return nil, field.Errorf("CgroupParent", "{CgroupParent} %q: give the group's absolute, clean path inside the hierarchy, e.g. /system.slice/eval.service", p)
	}
	// pid-time-random: unique even for concurrent runs of one process.
	name := fmt.Sprintf("%s%d-%d-%08x", runPrefix, os.Getpid(), time.Now().UnixNano(), rand.Uint32())
	var r Run
	var err error
	switch HostMode() {
	case ModeV2:
		r, err = newV2(name, opts)
	case ModeV1:
		r, err = newV1(name, opts)
	default:
		return nil, field.Errorf("NoCgroup", "no usable cgroup hierarchy: neither %s/cgroup.controllers (v2) nor a v1 memory hierarchy exists; pass {NoCgroup} to run without limits", mountRoot)
	}
	if errors.Is(err, fs.ErrPermission) {
		err = field.Errorf("CgroupParent", "%v; as uid %d microbox may not create cgroups here: run it as root, or delegate a cgroup v2 subtree to this user (systemd Delegate=yes) and pass it as {CgroupParent}, or pass {NoCgroup} to run without memory, CPU and pids limits", err, os.Geteuid())
	}
	return r, err
}

// ownerAlive reports whether the microbox process that made the run group
// called name may still be running; GC leaves such groups alone.
func ownerAlive(name string) bool {
	rest := strings.TrimPrefix(name, runPrefix)
	pid, _, ok := strings.Cut(rest, "-")
	if !ok {
		return false
	}
	return fileExists(filepath.Join("/proc", pid))
}

// retryRemove removes a cgroup directory; the kernel can answer EBUSY for a
// moment after the last task exited, so it retries for about a second.
func retryRemove(dir string) error {
	var err error
	for delay := time.Millisecond; delay < 300*time.Millisecond; delay *= 2 {
		err = os.Remove(dir)
		if err == nil || errors.Is(err, os.ErrNotExist) {
			return nil
		}
		time.Sleep(delay)
	}
	return fmt.Errorf("remove cgroup %s: %w", dir, err)
}

// Own returns this process's path in the hierarchy whose
// /proc/self/cgroup line lists controller ("" is the v2 line).
func Own(controller string) (string, error) {
	own, err := ownGroups()
	if err != nil {
		return "", err
	}
	p, ok := own[controller]
	if !ok {
		return "", fmt.Errorf("no %q line in /proc/self/cgroup", controller)
	}
	return p, nil
}

// ownGroups maps each controller of /proc/self/cgroup ("" for v2) to this
// process's path in its hierarchy.
func ownGroups() (map[string]string, error) {
	data, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return nil, err
	}
	own := map[string]string{}
	for _, line := range strings.Split(string(data), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			own[c] = parts[2]
		}
	}
	return own, nil
}

// setting is one limit: value written to file in controller's directory.
type setting struct {
	controller, file, value string
}

func (s setting) write(dir string) error {
	path := filepath.Join(dir, s.file)
	if err := writeFile(path, s.value); err != nil {
		return fmt.Errorf("set %s to %s: %w", path, s.value, err)
	}
	return nil
}

// writeFile writes an existing cgroup file. It never creates one: a file
// the kernel does not offer must fail as missing (ENOENT), and a path that
// strayed out of the cgroup filesystem must not become a plain file.
//
// Cgroup files are read and written with plain system calls: an os.File
// would register each with Go's poller (kernfs files can be polled) and
// take it out again, four system calls more per file, about fifty per run.
func writeFile(path, value string) error {
	fd, err := openFile(path, unix.O_WRONLY|unix.O_TRUNC)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	for {
		_, err = unix.Write(fd, []byte(value))
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		return &fs.PathError{Op: "write", Path: path, Err: err}
	}
	return nil
}

// readFile reads a cgroup file, which the kernel serves in one go.
func readFile(path string) ([]byte, error) {
	fd, err := openFile(path, unix.O_RDONLY)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	var out []byte
	buf := make([]byte, 4096)
	for {
		n, err := unix.Read(fd, buf)
		switch {
		case err == unix.EINTR:
			continue
		case err != nil:
			return nil, &fs.PathError{Op: "read", Path: path, Err: err}
		case n == 0:
			return out, nil
		}
		out = append(out, buf[:n]...)
	}
}

func openFile(path string, flags int) (int, error) {
	for {
		fd, err := unix.Open(path, flags|unix.O_CLOEXEC, 0)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return -1, &fs.PathError{Op: "open", Path: path, Err: err}
		}
		return fd, nil
	}
}

// hostHasSwap reports whether the host may swap; a /proc/swaps that cannot
// be read counts as swap, so that a memory limit fails closed.
func hostHasSwap() bool {
	data, err := os.ReadFile("/proc/swaps")
	return err != nil || strings.Count(string(data), "\n") > 1
}

// cpuQuota turns a bandwidth in cores into a CFS quota per 100 ms period.
func cpuQuota(cpus float64) (quota, period int64) {
	period = 100000
	return int64(cpus * float64(period)), period
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// staleRuns lists run groups directly under dir whose owner is gone.
func staleRuns(dir string) []string {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var stale []string
	for _, e := range entries {
		if e.IsDir() && strings.HasPrefix(e.Name(), runPrefix) && !ownerAlive(e.Name()) {
			stale = append(stale, filepath.Join(dir, e.Name()))
		}
	}
	return stale
}

// GC removes run groups left behind by microbox processes that died before
// they could clean up (e.g. killed with SIGKILL mid-run), killing any
// process still inside them. It returns the groups it removed.
func GC(parent string) ([]string, error) {
	switch HostMode() {
	case ModeV2:
		return gcV2(parent)
	case ModeV1:
		return gcV1(parent)
	}
	return nil, nil
}
