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
	"strconv"
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
	// JoinFDs are files, open for writing, to each of which the child
	// writes "0" to move itself into the group before it does anything
	// else (v1: each hierarchy's tasks file), or nil when it is cloned
	// into the group (CloneFD) or must be moved with Enter. A thread
	// that moves itself skips the kernel's global lock that moving
	// another process takes, and that lock's wait for an RCU grace
	// period: 7 to 13 ms per run on a v1 host (BENCHMARKS.md). The
	// caller closes them once the child has its copies.
	JoinFDs() ([]int, error)
	// Enter moves pid into the group. The child waits for its plan until
	// this is done, so none of the program's instructions run outside.
	Enter(pid int) error
	// Adopt moves pid, a process made outside the group (a zygote's
	// fork), into it, on any hierarchy.
	Adopt(pid int) error
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
// relies on it to find stale ones and never touches any other name. (Runs
// of microbox releases before the owner lock had "microbox-run-": those
// groups are left alone, since nothing can prove their owner dead.)
const runPrefix = "microbox-jail-"

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
	m, err := NewMaker(opts)
	if err != nil {
		return nil, err
	}
	return m.New()
}

// A Maker makes run groups of one Options, having found once what each of
// them needs on a v1 host (the parent in each hierarchy, the swap check,
// the limits' files): for a runner that makes many alike, a zygote's
// template. What it found holds for its groups: its parents are those of
// when it was made.
type Maker struct {
	newRun func(name string) (Run, error)
}

// NewMaker checks opts and the host for runs of opts.
func NewMaker(opts Options) (*Maker, error) {
	if p := opts.Parent; p != "" && (!path.IsAbs(p) || path.Clean(p) != p) {
		return nil, field.Errorf("CgroupParent", "{CgroupParent} %q: give the group's absolute, clean path inside the hierarchy, e.g. /system.slice/eval.service", p)
	}
	switch HostMode() {
	case ModeV2: // v2Parent may move microbox into a leaf: checked per group
		return &Maker{newRun: func(name string) (Run, error) { return newV2(name, opts) }}, nil
	case ModeV1:
		p, err := prepareV1(opts)
		if err != nil {
			return nil, permissionHint(err)
		}
		return &Maker{newRun: p.make}, nil
	}
	return nil, field.Errorf("NoCgroup", "no usable cgroup hierarchy: neither %s/cgroup.controllers (v2) nor a v1 memory hierarchy exists; pass {NoCgroup} to run without limits", mountRoot)
}

// New creates a run's group.
func (m *Maker) New() (Run, error) {
	var r Run
	var err error
	for try := 0; try < 3; try++ {
		// pid-random: unique even for concurrent runs of one process; the
		// pid is for people, GC goes by the owner lock.
		r, err = m.newRun(fmt.Sprintf("%s%d-%016x", runPrefix, os.Getpid(), rand.Uint64()))
		if !errors.Is(err, errTaken) {
			break
		}
	}
	return r, permissionHint(err)
}

// permissionHint says what to do about a group microbox may not make.
func permissionHint(err error) error {
	if errors.Is(err, fs.ErrPermission) {
		err = field.Errorf("CgroupParent", "%v; as uid %d microbox may not create cgroups here: run it as root, or delegate a cgroup v2 subtree to this user (systemd Delegate=yes) and pass it as {CgroupParent}, or pass {NoCgroup} to run without memory, CPU and pids limits", err, os.Geteuid())
	}
	return err
}

// errTaken says a GC took a new group between its mkdir and its owner's
// lock (the group is unlocked for that instant): New tries another name.
var errTaken = errors.New("taken by a collection of stale groups")

// lockOwner opens a run group's directory and takes its owner lock, an
// exclusive flock the run's microbox holds until the group is removed.
// Its maker locks a group right after the mkdir, before it writes any
// limit; if a GC got there first (the lock is held, or the group already
// gone), the error is errTaken.
// The lock, not a pid in the name, is how GC tells a live owner from a
// dead one: it holds in any PID namespace (a microbox in a container or
// under unshare --pid has a pid this /proc does not show, or shows as
// another process), whatever became of the pid, and is gone with a
// zombie's descriptors. It returns the locked descriptor.
func lockOwner(dir string) (int, error) {
	fd, err := openFile(dir, unix.O_RDONLY|unix.O_DIRECTORY)
	if errors.Is(err, fs.ErrNotExist) {
		return -1, fmt.Errorf("lock cgroup %s: %w", dir, errTaken)
	}
	if err != nil {
		return -1, err
	}
	if err := lockOpened(fd, dir); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// lockOpened takes the owner lock on fd, the directory dir opened.
func lockOpened(fd int, dir string) error {
	if err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB); err != nil {
		if err == unix.EWOULDBLOCK {
			return fmt.Errorf("lock cgroup %s: %w", dir, errTaken)
		}
		return &fs.PathError{Op: "lock", Path: dir, Err: err}
	}
	// A GC may have taken the lock between our open and our lock,
	// removed the group and let go: the lock is then on a directory that
	// is gone.
	var held, now unix.Stat_t
	if unix.Fstat(fd, &held) != nil || unix.Stat(dir, &now) != nil || held.Ino != now.Ino || held.Dev != now.Dev {
		return fmt.Errorf("lock cgroup %s: %w", dir, errTaken)
	}
	return nil
}

// Orphaned reports whether the run group at dir has lost its owner: a
// group left behind, for tests and reports to find.
func Orphaned(dir string) bool {
	fd, err := lockOwner(dir)
	if err != nil {
		return false
	}
	unix.Close(fd)
	return true
}

// IsRunGroup reports whether name is that of a run group microbox made.
func IsRunGroup(name string) bool { return strings.HasPrefix(name, runPrefix) }

// retryRemove removes a cgroup directory; the kernel can answer EBUSY for a
// moment after the last task exited, so it retries for about a second.
// (rmdir itself: os.Remove would try unlink first, a failed system call
// and a walk of the path each time.)
func retryRemove(dir string) error {
	var err error
	for delay := time.Millisecond; delay < 300*time.Millisecond; delay *= 2 {
		err = unix.Rmdir(dir)
		if err == nil || err == unix.ENOENT {
			return nil
		}
		if err != unix.EINTR {
			time.Sleep(delay)
		}
	}
	return fmt.Errorf("remove cgroup %s: %w", dir, &fs.PathError{Op: "remove", Path: dir, Err: err})
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
	return readFD(fd, path)
}

// A usageFile is a file of a run group's accounting, looked up once when
// the group is made (opened through the directory's descriptor, its owner
// lock, and closed) and read by its path when asked. The first lookup of
// a name in a new cgroup directory makes its dentry and inode: those
// lookups were most of the accounting that a run reads between its
// program's end and its verdict. Made at the group's creation (for a jail
// started ahead, before its run), the later opens find them cached. No
// descriptor is kept: a run's descriptors are the bound on how many runs
// a process holds at once.
type usageFile struct {
	path string
}

// openUsage looks name up in dir through dirfd; err is the lookup's
// failure (the file is then read, and fails, by its path).
func openUsage(dirfd int, dir, name string) (*usageFile, error) {
	f := &usageFile{path: filepath.Join(dir, name)}
	if dirfd < 0 {
		return f, nil
	}
	for {
		fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err == unix.EINTR {
			continue
		}
		if err == nil {
			unix.Close(fd)
		}
		return f, err
	}
}

// read reads the whole file, as it is now.
func (f *usageFile) read() ([]byte, error) { return readFile(f.path) }

// readUint reads a file that holds one number.
func (f *usageFile) readUint() (uint64, error) {
	data, err := f.read()
	if err != nil {
		return 0, err
	}
	return strconv.ParseUint(strings.TrimSpace(string(data)), 10, 64)
}

// readKey reads the value of "key N" in a flat-keyed file; a key the file
// lacks is an error.
func (f *usageFile) readKey(key string) (uint64, error) {
	data, err := f.read()
	if err != nil {
		return 0, err
	}
	v, ok, err := keyIn(data, key)
	if err == nil && !ok {
		err = fmt.Errorf("no %s in %s", key, f.path)
	}
	return v, err
}

// keyIn returns the value of the "key N" line of data, and whether there
// is one.
func keyIn(data []byte, key string) (uint64, bool, error) {
	for _, line := range strings.Split(string(data), "\n") {
		k, v, ok := strings.Cut(line, " ")
		if ok && k == key {
			n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
			return n, true, err
		}
	}
	return 0, false, nil
}

// readFD reads fd, the file path opened, to its end and closes it.
func readFD(fd int, path string) ([]byte, error) {
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
	return int64(cpus * float64(cpuPeriod)), cpuPeriod
}

// The kernel's range of a CFS quota, in microseconds per cpuPeriod: at
// least 1 ms, at most 2^44-1 µs (sched/core.c's max_cfs_runtime); it
// refuses a write outside it, and a bandwidth past what an int64 quota
// holds would overflow into no limit at all. MinCPUs and MaxCPUs are the
// range in cores.
const (
	cpuPeriod   = 100000
	minCPUQuota = 1000
	maxCPUQuota = 1<<44 - 1
	MinCPUs     = float64(minCPUQuota) / cpuPeriod
	MaxCPUs     = float64(maxCPUQuota) / cpuPeriod
)

// CPUsInRange reports whether a bandwidth of cpus cores makes a quota the
// kernel takes.
func CPUsInRange(cpus float64) bool {
	if !(cpus >= MinCPUs && cpus <= MaxCPUs) { // NaN too
		return false
	}
	quota, _ := cpuQuota(cpus)
	return quota >= minCPUQuota && quota <= maxCPUQuota
}

// MaxPids is the most pids.max takes: the kernel's PID_MAX_LIMIT, more
// processes than any host can have.
const MaxPids = 4 << 20

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// collectStale removes the run groups directly under dir whose owner is
// gone, killing what is left in them with kill (given the group's
// directory), and returns those it removed.
func collectStale(dir string, kill func(group string) error) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil
	}
	var removed []string
	var errs []error
	for _, e := range entries {
		if !e.IsDir() || !IsRunGroup(e.Name()) {
			continue
		}
		if makerRuns(e.Name()) {
			continue
		}
		group := filepath.Join(dir, e.Name())
		fd, err := lockOwner(group)
		if err != nil {
			continue // its owner lives
		}
		if err := kill(group); err != nil {
			errs = append(errs, err)
		}
		if err := retryRemove(group); err != nil {
			errs = append(errs, err)
		} else {
			removed = append(removed, group)
		}
		unix.Close(fd)
	}
	return removed, errors.Join(errs...)
}

// makerRuns reports whether the group named name was made by a microbox
// that still runs in this PID namespace: the pid its name carries is this
// process, or one running this binary. Such a group is never collected,
// even unlocked: its maker locks it just after the mkdir, and a
// collection that took it in that instant would take a fresh run's group
// (measured: 2% of 32 concurrent runs failed so). A pid reused by another
// microbox keeps a stale group until that one ends; other PID namespaces
// go by the lock alone.
func makerRuns(name string) bool {
	pid, _, ok := strings.Cut(strings.TrimPrefix(name, runPrefix), "-")
	if !ok {
		return false
	}
	if pid == strconv.Itoa(os.Getpid()) {
		return true
	}
	var self, maker unix.Stat_t
	return unix.Stat("/proc/self/exe", &self) == nil && unix.Stat("/proc/"+pid+"/exe", &maker) == nil &&
		self.Dev == maker.Dev && self.Ino == maker.Ino
}

// GC removes run groups left behind by microbox processes that died before
// they could clean up (e.g. killed with SIGKILL mid-run), killing any
// process still inside them. It returns the groups it removed. A group is
// left behind when its owner lock is free (lockOwner); a group whose
// owner cannot be proved dead is never touched.
func GC(parent string) ([]string, error) {
	switch HostMode() {
	case ModeV2:
		return gcV2(parent)
	case ModeV1:
		return gcV1(parent)
	}
	return nil, nil
}
