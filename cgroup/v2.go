package cgroup

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/containerd/cgroups/v3/cgroup2"
)

// v2Run is a run's group on a pure cgroup v2 host.
type v2Run struct {
	m   *cgroup2.Manager
	dir string   // absolute directory
	fd  *os.File // the directory, for CLONE_INTO_CGROUP
}

// supervisorLeaf is where microbox moves itself when its own cgroup must
// hand controllers to run groups: cgroup v2 forbids a non-root group with
// processes from doing so (the no-internal-processes rule).
const supervisorLeaf = "microbox-supervisor"

func newV2(name string, opts Options) (Run, error) {
	lim := opts.Limits
	res := &cgroup2.Resources{}
	if lim.Memory > 0 {
		mem, noSwap, group := lim.Memory, int64(0), true
		// oom.group: an OOM kills the whole run, init included, so the
		// verdict comes from memory.events (see nsjail's judge), and no
		// half-killed tree goes on running.
		res.Memory = &cgroup2.Memory{Max: &mem, Swap: &noSwap, OOMGroup: &group}
	}
	if lim.CPUs > 0 {
		period := uint64(100000)
		quota := int64(lim.CPUs * float64(period))
		res.CPU = &cgroup2.CPU{Max: cgroup2.NewCPUMax(&quota, &period)}
	}
	if lim.Pids > 0 {
		res.Pids = &cgroup2.Pids{Max: lim.Pids}
	}
	parent, err := v2Parent(opts.Parent, res.EnabledControllers())
	if err != nil {
		return nil, err
	}
	group := filepath.Join(parent, name)
	m, err := cgroup2.NewManager(mountRoot, group, res)
	if err != nil {
		return nil, fmt.Errorf("create cgroup v2 %s: %w", group, err)
	}
	dir := filepath.Join(mountRoot, group)
	fd, err := os.OpenFile(dir, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		m.Delete()
		return nil, fmt.Errorf("open cgroup %s: %w", dir, err)
	}
	return &v2Run{m: m, dir: dir, fd: fd}, nil
}

// v2Parent picks the group that run groups are made under and makes sure it
// can give them the controllers: the requested parent as is; else
// microbox's own group, after microbox moved itself into a leaf if that
// group held only microbox.
func v2Parent(requested string, controllers []string) (string, error) {
	if requested != "" {
		return requested, nil
	}
	own, err := Own("")
	if err != nil {
		return "", fmt.Errorf("find own cgroup v2: %w", err)
	}
	if (own == "/" && isHierarchyRoot()) || len(controllers) == 0 {
		return own, nil
	}
	if err := enableControllers(own, controllers); err == nil {
		return own, nil
	}
	// Own group has processes; if they are all ours, step into a leaf.
	if strings.HasSuffix(own, "/"+supervisorLeaf) {
		parent := filepath.Dir(own)
		if err := enableControllers(parent, controllers); err != nil {
			return "", delegationError(parent, err)
		}
		return parent, nil
	}
	leaf := filepath.Join(mountRoot, own, supervisorLeaf)
	if err := os.Mkdir(leaf, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return "", delegationError(own, err)
	}
	if err := os.WriteFile(filepath.Join(leaf, "cgroup.procs"), []byte(strconv.Itoa(os.Getpid())), 0); err != nil {
		return "", delegationError(own, err)
	}
	if err := enableControllers(own, controllers); err != nil {
		return "", delegationError(own, err)
	}
	return own, nil
}

// isHierarchyRoot reports whether the cgroup mounted at mountRoot is the
// real root of the hierarchy, which may hold processes and still enable
// controllers. In a container's cgroup namespace "/" is the container's
// group instead: an ordinary group, bound by the no-internal-processes
// rule, and (unlike the root) it has a cgroup.type file.
func isHierarchyRoot() bool {
	return !fileExists(filepath.Join(mountRoot, "cgroup.type"))
}

func delegationError(group string, err error) error {
	return fmt.Errorf("cgroup v2 group %s cannot give memory/cpu/pids limits to child groups (%v): "+
		"run microbox in a cgroup delegated to it that holds no other processes (systemd: Delegate=yes), "+
		"or pass a delegated group as --cgroup-parent, or pass --no-cgroup to run without limits", group, err)
}

// enableControllers writes "+ctrl ..." to group's subtree_control.
func enableControllers(group string, controllers []string) error {
	have, err := os.ReadFile(filepath.Join(mountRoot, group, "cgroup.subtree_control"))
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
	return os.WriteFile(filepath.Join(mountRoot, group, "cgroup.subtree_control"), []byte(strings.Join(want, " ")), 0)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func (r *v2Run) Mode() Mode          { return ModeV2 }
func (r *v2Run) CloneFD() int        { return int(r.fd.Fd()) }
func (r *v2Run) Enter(pid int) error { return nil } // entered at clone time

func (r *v2Run) CPUTime() (time.Duration, error) {
	usec, err := readKey(filepath.Join(r.dir, "cpu.stat"), "usage_usec")
	return time.Duration(usec) * time.Microsecond, err
}

func (r *v2Run) Kill() error {
	if err := r.m.Kill(); err != nil {
		return fmt.Errorf("kill cgroup %s: %w", r.dir, err)
	}
	return nil
}

func (r *v2Run) Usage() (Usage, error) {
	st, err := r.m.StatFiltered(cgroup2.StatCPU | cgroup2.StatMemory | cgroup2.StatMemoryEvents)
	if err != nil {
		return Usage{}, fmt.Errorf("read cgroup %s: %w", r.dir, err)
	}
	var u Usage
	if st.CPU != nil {
		u.CPU = time.Duration(st.CPU.UsageUsec) * time.Microsecond
	}
	if st.Memory != nil {
		u.PeakMemory = int64(st.Memory.MaxUsage) // memory.peak (kernel 5.19+)
	}
	if st.MemoryEvents != nil {
		u.OOMKills = st.MemoryEvents.OomKill
		if st.MemoryEvents.OomGroupKill > u.OOMKills {
			u.OOMKills = st.MemoryEvents.OomGroupKill
		}
	}
	return u, nil
}

func (r *v2Run) Remove() error {
	r.fd.Close()
	return retryRemove(r.dir)
}

func gcV2(parent string) ([]string, error) {
	if parent == "" {
		own, err := Own("")
		if err != nil {
			return nil, err
		}
		parent = strings.TrimSuffix(own, "/"+supervisorLeaf)
	}
	var removed []string
	var errs []error
	for _, dir := range staleRuns(filepath.Join(mountRoot, parent)) {
		os.WriteFile(filepath.Join(dir, "cgroup.kill"), []byte("1"), 0)
		if err := killProcs(filepath.Join(dir, "cgroup.procs")); err != nil {
			errs = append(errs, err)
		}
		if err := retryRemove(dir); err != nil {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, dir)
	}
	return removed, errors.Join(errs...)
}
