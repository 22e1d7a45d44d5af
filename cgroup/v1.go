package cgroup

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/containerd/cgroups/v3/cgroup1"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// v1Run is a run's group on v1 (or hybrid) hosts: one directory in each of
// the memory, pids, cpu and cpuacct hierarchies.
type v1Run struct {
	cg   cgroup1.Cgroup
	dirs map[cgroup1.Name]string // absolute directory per hierarchy
}

// v1Controllers are the only hierarchies a run joins: the library's default
// set would also create it in freezer, blkio, devices, cpuset... which costs
// a mkdir and rmdir each and enforces nothing microbox asks for.
var v1Controllers = []cgroup1.Name{cgroup1.Memory, cgroup1.Pids, cgroup1.Cpu, cgroup1.Cpuacct}

func v1Hierarchy() ([]cgroup1.Subsystem, error) {
	return []cgroup1.Subsystem{
		cgroup1.NewMemory(mountRoot, cgroup1.OptionalSwap()),
		cgroup1.NewPids(mountRoot),
		cgroup1.NewCpu(mountRoot),
		cgroup1.NewCpuacct(mountRoot),
	}, nil
}

// v1Parent is where run groups go in hierarchy sub: the requested parent,
// or else microbox's own group there (so a caller's own limits still hold).
func v1Parent(sub cgroup1.Name, parent string) (string, error) {
	if parent != "" {
		return parent, nil
	}
	return Own(string(sub))
}

func newV1(name string, opts Options) (Run, error) {
	lim := opts.Limits
	if lim.Memory > 0 {
		if err := v1CheckSwap(); err != nil {
			return nil, err
		}
	}
	// The library asks for a hierarchy's path at every step; resolve each
	// parent once rather than re-reading /proc/self/cgroup every time.
	paths := map[cgroup1.Name]string{}
	for _, sub := range v1Controllers {
		if p, err := v1Parent(sub, opts.Parent); err == nil {
			paths[sub] = filepath.Join(p, name)
		}
	}
	path := func(sub cgroup1.Name) (string, error) {
		if p, ok := paths[sub]; ok {
			return p, nil
		}
		return "", fmt.Errorf("no %s line in /proc/self/cgroup", sub)
	}
	// Fail closed: a hierarchy that a requested limit needs must exist.
	required := func(s cgroup1.Subsystem, _ cgroup1.Path, err error) error {
		switch {
		case s.Name() == cgroup1.Memory && lim.Memory > 0,
			s.Name() == cgroup1.Pids && lim.Pids > 0,
			s.Name() == cgroup1.Cpu && lim.CPUs > 0:
			return fmt.Errorf("cgroup v1 %s hierarchy is needed for the requested limit: %w", s.Name(), err)
		}
		return cgroup1.ErrIgnoreSubsystem
	}
	cg, err := cgroup1.New(path, v1Resources(lim), cgroup1.WithHierarchy(v1Hierarchy),
		func(c *cgroup1.InitConfig) error { c.InitCheck = required; return nil })
	if err != nil {
		return nil, fmt.Errorf("create cgroup v1 %s: %w", name, err)
	}
	r := &v1Run{cg: cg, dirs: map[cgroup1.Name]string{}}
	for _, s := range cg.Subsystems() {
		p, err := path(s.Name())
		if err != nil {
			continue
		}
		r.dirs[s.Name()] = filepath.Join(mountRoot, string(s.Name()), p)
	}
	return r, nil
}

func v1Resources(l Limits) *specs.LinuxResources {
	res := &specs.LinuxResources{}
	if l.Memory > 0 {
		mem := l.Memory
		// memsw equal to the limit: no swap on top of RAM.
		res.Memory = &specs.LinuxMemory{Limit: &mem, Swap: &mem}
	}
	if l.Pids > 0 {
		res.Pids = &specs.LinuxPids{Limit: &l.Pids}
	}
	if l.CPUs > 0 {
		period := uint64(100000)
		quota := int64(l.CPUs * float64(period))
		res.CPU = &specs.LinuxCPU{Quota: &quota, Period: &period}
	}
	return res
}

// v1CheckSwap refuses a memory limit that swap could get around: without
// swap accounting (memory.memsw.*) a run could page out past its limit.
func v1CheckSwap() error {
	if fileExists(filepath.Join(mountRoot, "memory", "memory.memsw.limit_in_bytes")) {
		return nil
	}
	data, err := os.ReadFile("/proc/swaps")
	if err != nil || strings.Count(string(data), "\n") <= 1 {
		return nil // no swap on this host: nothing to account
	}
	return errors.New("the host has swap but no cgroup v1 swap accounting, so the memory limit cannot be enforced; boot with swapaccount=1 or turn swap off")
}

func (r *v1Run) Mode() Mode   { return ModeV1 }
func (r *v1Run) CloneFD() int { return -1 }

func (r *v1Run) Enter(pid int) error {
	if err := r.cg.AddProc(uint64(pid)); err != nil {
		return fmt.Errorf("move pid %d into cgroup v1: %w", pid, err)
	}
	return nil
}

func (r *v1Run) CPUTime() (time.Duration, error) {
	dir, ok := r.dirs[cgroup1.Cpuacct]
	if !ok {
		return 0, errors.New("no cpuacct hierarchy")
	}
	ns, err := readUint(filepath.Join(dir, "cpuacct.usage"))
	return time.Duration(ns), err
}

// Kill signals every process of the group. v1 has no cgroup.kill; the pids
// are read from the memory hierarchy until it is empty.
func (r *v1Run) Kill() error {
	dir, ok := r.dirs[cgroup1.Memory]
	if !ok {
		dir, ok = r.dirs[cgroup1.Pids]
	}
	if !ok {
		return errors.New("no hierarchy to find the run's processes")
	}
	return killProcs(filepath.Join(dir, "cgroup.procs"))
}

// Usage reads cpuacct.usage, the memory high-water mark and the OOM-kill
// counter directly: cgroup1's Stat reads every file of every controller and
// lacks memory.oom_control's oom_kill, the only reliable v1 OOM signal
// (memory.failcnt stays 0 when memsw equals the limit).
func (r *v1Run) Usage() (Usage, error) {
	var u Usage
	var errs []error
	cpu, err := r.CPUTime()
	u.CPU = cpu
	errs = append(errs, err)
	if dir, ok := r.dirs[cgroup1.Memory]; ok {
		peak, err := readUint(filepath.Join(dir, "memory.memsw.max_usage_in_bytes"))
		if err != nil {
			peak, err = readUint(filepath.Join(dir, "memory.max_usage_in_bytes"))
		}
		u.PeakMemory = int64(peak)
		errs = append(errs, err)
		u.OOMKills, err = readKey(filepath.Join(dir, "memory.oom_control"), "oom_kill")
		errs = append(errs, err)
	}
	return u, errors.Join(errs...)
}

func (r *v1Run) Remove() error {
	if err := r.cg.Delete(); err != nil {
		return fmt.Errorf("remove cgroup v1: %w", err)
	}
	return nil
}

func gcV1(parent string) ([]string, error) {
	var removed []string
	var errs []error
	for _, sub := range v1Controllers {
		p, err := v1Parent(sub, parent)
		if err != nil {
			continue
		}
		for _, dir := range staleRuns(filepath.Join(mountRoot, string(sub), p)) {
			errs = append(errs, killProcs(filepath.Join(dir, "cgroup.procs")))
			if err := retryRemove(dir); err != nil {
				errs = append(errs, err)
				continue
			}
			removed = append(removed, dir)
		}
	}
	return removed, errors.Join(errs...)
}

// killProcs SIGKILLs the pids listed in a cgroup.procs file until it is
// empty or a second has passed.
func killProcs(procsFile string) error {
	deadline := time.Now().Add(time.Second)
	for {
		data, err := os.ReadFile(procsFile)
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
			if pid, err := strconv.Atoi(p); err == nil {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func readUint(path string) (uint64, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.ParseUint(strings.TrimSpace(string(data)), 10, 64)
}

// readKey returns the value of "key N" in a flat-keyed cgroup file.
func readKey(path, key string) (uint64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), " ")
		if ok && k == key {
			return strconv.ParseUint(strings.TrimSpace(v), 10, 64)
		}
	}
	return 0, fmt.Errorf("no %s in %s", key, path)
}
