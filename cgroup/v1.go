package cgroup

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/microbox/microbox/field"
	"golang.org/x/sys/unix"
)

// v1Run is a run's group on v1 (or hybrid) hosts: one directory in each of
// the memory, pids, cpu and cpuacct hierarchies.
type v1Run struct {
	dirs  map[string]string // absolute directory per hierarchy
	locks []int             // each directory's owner lock (lockOwner)
	// The accounting's files (usageFile), looked up with the group:
	// cpuacct.usage, the memory high-water mark and memory.oom_control;
	// nil without their hierarchy.
	cpuUsage, peak, oomControl *usageFile
}

// openUsage looks up the accounting's files of the group's hierarchies,
// through lockFD, each directory's descriptor. The peak is memory+swap's
// where the kernel accounts swap, else memory's.
func (r *v1Run) openUsage(lockFD map[string]int) {
	fdOf := func(dir string) int {
		if fd, ok := lockFD[dir]; ok {
			return fd
		}
		return -1
	}
	if dir, ok := r.dirs["cpuacct"]; ok {
		r.cpuUsage, _ = openUsage(fdOf(dir), dir, "cpuacct.usage")
	}
	if dir, ok := r.dirs["memory"]; ok {
		var err error
		r.peak, err = openUsage(fdOf(dir), dir, "memory.memsw.max_usage_in_bytes")
		if errors.Is(err, unix.ENOENT) { // no swap accounting
			r.peak, _ = openUsage(fdOf(dir), dir, "memory.max_usage_in_bytes")
		}
		r.oomControl, _ = openUsage(fdOf(dir), dir, "memory.oom_control")
	}
}

// v1Controllers are the only hierarchies a run joins. Freezer, blkio,
// devices and cpuset would each cost a mkdir, a move and an rmdir per run
// and enforce nothing microbox asks for.
var v1Controllers = []string{"memory", "pids", "cpu", "cpuacct"}

// v1Parents says where run groups go in each hierarchy: the requested
// parent, or else microbox's own group there (so a caller's own limits
// still hold). A hierarchy missing from /proc/self/cgroup is left out.
func v1Parents(parent string) (map[string]string, error) {
	parents := map[string]string{}
	if parent != "" {
		for _, sub := range v1Controllers {
			parents[sub] = parent
		}
		return parents, nil
	}
	own, err := ownGroups()
	for _, sub := range v1Controllers {
		if p, ok := own[sub]; ok {
			parents[sub] = p
		}
	}
	return parents, err
}

// v1Settings are the files a run group's limits are written to, in order:
// memory.limit_in_bytes before memsw, which may never be below it.
func v1Settings(l Limits) []setting {
	var s []setting
	if l.Memory > 0 {
		mem := strconv.FormatInt(l.Memory, 10)
		// memsw equal to the limit: no swap on top of RAM. And the
		// socket buffers: v1 counts them apart (kmem.tcp), only once
		// a limit is written, and not against the memory limit; without
		// one, a run's unread loopback connections pinned gigabytes of
		// the host's memory and its shared tcp_mem.
		s = append(s, setting{"memory", "memory.limit_in_bytes", mem},
			setting{"memory", "memory.memsw.limit_in_bytes", mem},
			setting{"memory", "memory.kmem.tcp.limit_in_bytes", mem})
	}
	if l.Pids > 0 {
		s = append(s, setting{"pids", "pids.max", strconv.FormatInt(l.Pids, 10)})
	}
	if l.CPUs > 0 {
		// The quota alone: a new group's period is the kernel's default,
		// cpuPeriod (TestRunGroupLifecycle reads it back), and each write
		// of either walks every task group of the host.
		quota, _ := cpuQuota(l.CPUs)
		s = append(s, setting{"cpu", "cpu.cfs_quota_us", strconv.FormatInt(quota, 10)})
	}
	return s
}

// v1Needed reports whether a limit asks for hierarchy sub, which must then
// exist: fail closed rather than run without it.
func v1Needed(sub string, l Limits) bool {
	switch sub {
	case "memory":
		return l.Memory > 0
	case "pids":
		return l.Pids > 0
	case "cpu":
		return l.CPUs > 0
	}
	return false
}

// v1Plan is what every run group of one Options needs on a v1 host,
// found once (Maker): the parent in each hierarchy and the limits' files.
type v1Plan struct {
	limits   Limits
	parents  map[string]string
	settings []setting
	// swapless: the memory limit goes without a swap limit, the host
	// having no swap accounting and no swap. Swap turned on later would
	// let a run page out past its limit, so make checks again each time.
	swapless bool
}

// v1SwapCheck is V1CheckSwap, a variable for the tests.
var v1SwapCheck = V1CheckSwap

func prepareV1(opts Options) (*v1Plan, error) {
	p := &v1Plan{limits: opts.Limits}
	swapless := false
	if p.limits.Memory > 0 {
		var err error
		if swapless, err = v1SwapCheck(); err != nil {
			return nil, err
		}
	}
	var err error
	if p.parents, err = v1Parents(opts.Parent); err != nil {
		return nil, fmt.Errorf("find own cgroups: %w", err)
	}
	for _, s := range v1Settings(p.limits) {
		if s.file != "memory.memsw.limit_in_bytes" || !swapless {
			p.settings = append(p.settings, s)
		}
	}
	p.swapless = swapless
	return p, nil
}

// make makes the run group name in each hierarchy and writes its limits.
func (p *v1Plan) make(name string) (Run, error) {
	if p.swapless {
		if _, err := v1SwapCheck(); err != nil {
			return nil, err
		}
	}
	lim := p.limits
	parents := p.parents
	r := &v1Run{dirs: map[string]string{}}
	lockFD := map[string]int{}
	var made []string
	for _, sub := range v1Controllers {
		dir, err := v1Mkdir(mountRoot, sub, parents, name, made)
		if err == nil && !slices.Contains(made, dir) {
			var lock int
			if lock, err = lockOwner(dir); err == nil {
				r.locks = append(r.locks, lock)
				lockFD[dir] = lock
				made = append(made, dir)
			} else if errors.Is(err, errTaken) {
				r.Remove()
				return nil, err
			} else {
				retryRemove(dir)
			}
		}
		if err == nil {
			r.dirs[sub] = dir
			continue
		}
		if v1Needed(sub, lim) {
			r.Remove()
			return nil, field.Errorf("NoCgroup", "create cgroup v1 %s in the %s hierarchy, which a requested limit needs (%v); mount that hierarchy, or drop the limit, or pass {NoCgroup}", name, sub, err)
		}
		// Only a hierarchy this host lacks may be left out when no limit
		// needs it. One that is there but could not be joined (read-only,
		// or no descriptor for its lock) would leave the run without its
		// accounting: the verdict would lack CPU time or peak memory. The
		// cause stays wrapped, so a want of descriptors reads as busy.
		if _, mounted := parents[sub]; mounted && !errors.Is(err, fs.ErrNotExist) {
			r.Remove()
			return nil, field.Errorf("NoCgroup", "create cgroup v1 %s in the %s hierarchy, which the run's accounting needs (%v); make it writable to microbox, or pass {NoCgroup}", name, sub, err)
		}
	}
	for _, s := range p.settings {
		if err := s.write(r.dirs[s.controller]); err != nil {
			r.Remove()
			return nil, err
		}
	}
	r.openUsage(lockFD)
	return r, nil
}

// v1Mkdir makes the run's directory in hierarchy sub under root.
// Controllers mounted together (cpu,cpuacct on systemd hosts, where
// /sys/fs/cgroup/cpu and /sys/fs/cgroup/cpuacct are links to one
// hierarchy) share the directory: the second mkdir finds it already there,
// as one of made, the directories this run made so far.
func v1Mkdir(root, sub string, parents map[string]string, name string, made []string) (string, error) {
	parent, ok := parents[sub]
	if !ok {
		return "", fmt.Errorf("no %s line in /proc/self/cgroup", sub)
	}
	dir := filepath.Join(root, sub, parent, name)
	err := os.Mkdir(dir, 0o755)
	if errors.Is(err, fs.ErrExist) {
		// The name is unique to this run: an existing directory can only
		// be one it made through another link to the same hierarchy.
		if fi, serr := os.Stat(dir); serr == nil {
			for _, m := range made {
				if mi, merr := os.Stat(m); merr == nil && os.SameFile(fi, mi) {
					return m, nil
				}
			}
		}
	}
	return dir, err
}

func (r *v1Run) Mode() Mode   { return ModeV1 }
func (r *v1Run) CloneFD() int { return -1 }

// JoinFDs opens each directory's tasks file for the child to write "0"
// to: the kernel moves the writing thread alone, and the check of who may
// move it is made against this process, which opened the file. The child
// must have one thread (a jail's PID 1, fresh from its clone, has). The
// caller closes them once the child has its copies.
func (r *v1Run) JoinFDs() ([]int, error) {
	var fds []int
	for _, dir := range r.distinctDirs() {
		fd, err := unix.Open(filepath.Join(dir, "tasks"), unix.O_WRONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			closeAll(fds)
			return nil, fmt.Errorf("open cgroup %s for the jail to join: %w", dir, err)
		}
		fds = append(fds, fd)
	}
	return fds, nil
}

// distinctDirs are the run's directories, one per hierarchy (co-mounted
// controllers share one), in v1Controllers' order.
func (r *v1Run) distinctDirs() []string {
	var dirs []string
	for _, sub := range v1Controllers {
		if dir, ok := r.dirs[sub]; ok && !slices.Contains(dirs, dir) {
			dirs = append(dirs, dir)
		}
	}
	return dirs
}

func closeAll(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}

// Enter writes pid into each hierarchy's cgroup.procs: moving another
// process, which waits for an RCU grace period per write (JoinFDs
// does not). For a zygote's fork (Adopt), and tests.
func (r *v1Run) Enter(pid int) error {
	for _, dir := range r.distinctDirs() {
		if err := writeFile(filepath.Join(dir, "cgroup.procs"), strconv.Itoa(pid)); err != nil {
			return fmt.Errorf("move pid %d into cgroup %s: %w", pid, dir, err)
		}
	}
	return nil
}

// Adopt is Enter: v1 moves every process the same way.
func (r *v1Run) Adopt(pid int) error { return r.Enter(pid) }

func (r *v1Run) CPUTime() (time.Duration, error) {
	if r.cpuUsage == nil {
		return 0, errors.New("no cpuacct hierarchy")
	}
	ns, err := r.cpuUsage.readUint()
	return time.Duration(ns), err
}

// Kill signals every process of the group. v1 has no cgroup.kill; the pids
// are read from the memory hierarchy until it is empty.
func (r *v1Run) Kill() error {
	dir, ok := r.dirs["memory"]
	if !ok {
		dir, ok = r.dirs["pids"]
	}
	if !ok {
		return errors.New("no hierarchy to find the run's processes")
	}
	return killProcs(filepath.Join(dir, "cgroup.procs"))
}

// Usage reads cpuacct.usage, the memory high-water mark and the OOM-kill
// counter of memory.oom_control, the only reliable v1 OOM signal
// (memory.failcnt stays 0 when memsw equals the limit).
func (r *v1Run) Usage() (Usage, error) {
	var u Usage
	var errs []error
	cpu, err := r.CPUTime()
	u.CPU = cpu
	errs = append(errs, err)
	if r.peak != nil {
		peak, err := r.peak.readUint()
		u.PeakMemory = int64(peak)
		errs = append(errs, err)
		u.OOMKills, err = r.oomControl.readKey("oom_kill")
		errs = append(errs, err)
	}
	return u, errors.Join(errs...)
}

// Remove deletes the group from every hierarchy it was made in, then
// lets go of the owner locks.
func (r *v1Run) Remove() error {
	var errs []error
	for sub, dir := range r.dirs {
		if err := retryRemove(dir); err != nil {
			errs = append(errs, err)
			continue
		}
		delete(r.dirs, sub)
	}
	// A group that would not go is GC's to take once the locks are free.
	closeAll(r.locks)
	r.locks = nil
	return errors.Join(errs...)
}

func gcV1(parent string) ([]string, error) {
	parents, err := v1Parents(parent)
	if err != nil {
		return nil, err
	}
	var removed []string
	var errs []error
	for sub, p := range parents {
		done, err := collectStale(filepath.Join(mountRoot, sub, p), func(group string) error {
			return killProcs(filepath.Join(group, "cgroup.procs"))
		})
		removed, errs = append(removed, done...), append(errs, err)
	}
	return removed, errors.Join(errs...)
}

// killProcs SIGKILLs the pids listed in a cgroup.procs file until it is
// empty or a second has passed.
func killProcs(procsFile string) error {
	deadline := time.Now().Add(time.Second)
	for {
		data, err := readFile(procsFile)
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		pids := strings.Fields(string(data))
		if len(pids) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("processes %v survive in %s", pids, procsFile)
		}
		for _, p := range pids {
			// 0 (a process this pid namespace cannot see) would name our
			// own process group.
			if pid, err := strconv.Atoi(p); err == nil && pid > 0 {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
}
