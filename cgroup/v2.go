package cgroup

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/microbox/microbox/field"
)

// v2Run is a run's group on a pure cgroup v2 host.
type v2Run struct {
	dir string   // absolute directory
	fd  *os.File // the directory, for CLONE_INTO_CGROUP
	// The accounting's files (usageFile), looked up with the group.
	cpuStat, peak, events *usageFile
}

// v2Settings are the files a run group's limits are written to.
func v2Settings(l Limits) []setting {
	var s []setting
	if l.Memory > 0 {
		s = append(s, setting{"memory", "memory.max", strconv.FormatInt(l.Memory, 10)},
			setting{"memory", "memory.swap.max", "0"},
			// oom.group: an OOM kills the whole run, init included, so
			// the verdict comes from memory.events (see nsjail's judge),
			// and no half-killed tree goes on running.
			setting{"memory", "memory.oom.group", "1"})
	}
	if l.CPUs > 0 {
		quota, period := cpuQuota(l.CPUs)
		s = append(s, setting{"cpu", "cpu.max", fmt.Sprintf("%d %d", quota, period)})
	}
	if l.Pids > 0 {
		s = append(s, setting{"pids", "pids.max", strconv.FormatInt(l.Pids, 10)})
	}
	return s
}

// controllersOf lists the controllers that settings need, each once.
func controllersOf(settings []setting) []string {
	var c []string
	for _, s := range settings {
		if !contains(c, s.controller) {
			c = append(c, s.controller)
		}
	}
	return c
}

func newV2(name string, opts Options) (Run, error) {
	settings := v2Settings(opts.Limits)
	parent, err := v2Parent(opts.Parent, controllersOf(settings))
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(mountRoot, parent, name)
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create cgroup v2 %s: %w", dir, err)
	}
	fd, err := lockOwner(dir)
	if err != nil {
		if !errors.Is(err, errTaken) {
			retryRemove(dir)
		}
		return nil, err
	}
	r := &v2Run{dir: dir, fd: os.NewFile(uintptr(fd), dir)}
	r.cpuStat, _ = openUsage(fd, dir, "cpu.stat")
	r.peak, _ = openUsage(fd, dir, "memory.peak")
	r.events, _ = openUsage(fd, dir, "memory.events")
	for _, s := range settings {
		if err := r.apply(s); err != nil {
			r.Remove()
			return nil, err
		}
	}
	return r, nil
}

// apply writes one limit. memory.swap.max is absent when the kernel does
// not account swap; that is safe only if the host has no swap to use.
func (r *v2Run) apply(s setting) error {
	err := s.write(r.dir)
	if err != nil && s.file == "memory.swap.max" && errors.Is(err, os.ErrNotExist) && !hostHasSwap() {
		return nil
	}
	return err
}

// v2Parent picks the group that run groups are made under and makes sure it
// can give them the controllers: the requested parent as is; else
// microbox's own group, after microbox moved itself into a leaf if that
// group held only microbox.
func v2Parent(requested string, controllers []string) (string, error) {
	if requested != "" {
		// Delegated to microbox, but perhaps not yet handing controllers
		// down: enable them, as a delegate may.
		if err := enableControllers(requested, controllers); err != nil {
			return "", delegationError(requested, err)
		}
		return requested, nil
	}
	own, err := Own("")
	if err != nil {
		return "", fmt.Errorf("find own cgroup v2: %w", err)
	}
	if IsHierarchyRoot(own) || len(controllers) == 0 {
		return own, nil
	}
	if err := enableControllers(own, controllers); err == nil {
		return own, nil
	}
	// Own group has processes; if they are all ours, step into a leaf.
	if parent := RunParent(own); parent != own {
		if err := enableControllers(parent, controllers); err != nil {
			return "", delegationError(parent, err)
		}
		return parent, nil
	}
	leaf := filepath.Join(mountRoot, own, SupervisorLeaf)
	if err := os.Mkdir(leaf, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return "", delegationError(own, err)
	}
	procs := filepath.Join(leaf, "cgroup.procs")
	if err := writeFile(procs, strconv.Itoa(os.Getpid())); err != nil {
		return "", delegationError(own, err)
	}
	for _, pid := range helpersIn(own) {
		// One that has exited since is no obstacle; one that could not
		// move makes enableControllers fail below, which says why.
		writeFile(procs, strconv.Itoa(pid))
	}
	if err := enableControllers(own, controllers); err != nil {
		return "", delegationError(own, err)
	}
	return own, nil
}

// helpersIn lists microbox's helper processes in group: its children in
// its own pid namespace (the jail spawner; a jail's PID 1 is in a pid
// namespace of its own). They go into the leaf with microbox.
func helpersIn(group string) []int {
	procs, err := readFile(filepath.Join(mountRoot, group, "cgroup.procs"))
	if err != nil {
		return nil
	}
	me := os.Getpid()
	ownNS, _ := os.Readlink("/proc/self/ns/pid")
	var helpers []int
	for _, f := range strings.Fields(string(procs)) {
		pid, _ := strconv.Atoi(f)
		if pid == me || parentOf(pid) != me {
			continue
		}
		if ns, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", pid)); err == nil && ns == ownNS {
			helpers = append(helpers, pid)
		}
	}
	return helpers
}

// parentOf is pid's parent, from /proc/PID/stat; 0 if unknown.
func parentOf(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 2 {
		return 0
	}
	ppid, _ := strconv.Atoi(f[1])
	return ppid
}

func delegationError(group string, err error) error {
	return field.Errorf("CgroupParent", "cgroup v2 group %s cannot give memory/cpu/pids limits to child groups (%v): "+
		"run microbox in a cgroup delegated to it that holds no other processes (systemd: Delegate=yes), "+
		"or pass a delegated group as {CgroupParent}, or pass {NoCgroup} to run without limits", group, err)
}

// enableControllers writes "+ctrl ..." to group's subtree_control.
func enableControllers(group string, controllers []string) error {
	have, err := readFile(filepath.Join(mountRoot, group, "cgroup.subtree_control"))
	if err != nil {
		return err
	}
	enabled := strings.Fields(string(have))
	var want []string
	for _, c := range controllers {
		if !contains(enabled, c) {
			want = append(want, "+"+c)
		}
	}
	if len(want) == 0 {
		return nil
	}
	return writeFile(filepath.Join(mountRoot, group, "cgroup.subtree_control"), strings.Join(want, " "))
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func (r *v2Run) Mode() Mode              { return ModeV2 }
func (r *v2Run) CloneFD() int            { return int(r.fd.Fd()) }
func (r *v2Run) JoinFDs() ([]int, error) { return nil, nil }
func (r *v2Run) Enter(pid int) error     { return nil } // entered at clone time

// Adopt writes pid into the group's cgroup.procs.
func (r *v2Run) Adopt(pid int) error {
	if err := writeFile(filepath.Join(r.dir, "cgroup.procs"), strconv.Itoa(pid)); err != nil {
		return fmt.Errorf("move pid %d into cgroup %s: %w", pid, r.dir, err)
	}
	return nil
}

func (r *v2Run) CPUTime() (time.Duration, error) {
	usec, err := r.cpuStat.readKey("usage_usec")
	return time.Duration(usec) * time.Microsecond, err
}

// Kill uses cgroup.kill (Linux 5.14+), which also reaches processes forked
// while it runs; before that, it signals the listed pids until none is left.
func (r *v2Run) Kill() error {
	err := writeFile(filepath.Join(r.dir, "cgroup.kill"), "1")
	if err == nil {
		return nil
	}
	if err := killProcs(filepath.Join(r.dir, "cgroup.procs")); err != nil {
		return fmt.Errorf("kill cgroup %s: %w", r.dir, err)
	}
	return nil
}

// Usage reads cpu.stat, memory.peak (Linux 5.19+; 0 before) and
// memory.events, whose oom_group_kill counts the group kills of
// memory.oom.group.
func (r *v2Run) Usage() (Usage, error) {
	var u Usage
	var errs []error
	cpu, err := r.CPUTime()
	u.CPU = cpu
	errs = append(errs, err)
	if peak, err := r.peak.readUint(); err == nil {
		u.PeakMemory = int64(peak)
	} else if !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, err)
	}
	// memory.events: oom_kill, and oom_group_kill (Linux 6.1+), which
	// counts the group kills of memory.oom.group. No file: no memory
	// controller, no OOM kill.
	if data, err := r.events.read(); err == nil {
		kills, ok, err := keyIn(data, "oom_kill")
		if err == nil && !ok {
			err = fmt.Errorf("no oom_kill in %s/memory.events", r.dir)
		}
		errs = append(errs, err)
		if group, ok, err := keyIn(data, "oom_group_kill"); ok && err == nil && group > kills {
			kills = group
		}
		u.OOMKills = kills
	} else if !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return u, fmt.Errorf("read cgroup %s: %w", r.dir, err)
	}
	return u, nil
}

// Remove deletes the group, then lets go of its owner lock.
func (r *v2Run) Remove() error {
	err := retryRemove(r.dir)
	if r.fd != nil {
		r.fd.Close()
	}
	return err
}

func gcV2(parent string) ([]string, error) {
	if parent == "" {
		own, err := Own("")
		if err != nil {
			return nil, err
		}
		parent = RunParent(own)
	}
	return collectStale(filepath.Join(mountRoot, parent), func(group string) error {
		writeFile(filepath.Join(group, "cgroup.kill"), "1")
		return killProcs(filepath.Join(group, "cgroup.procs"))
	})
}
