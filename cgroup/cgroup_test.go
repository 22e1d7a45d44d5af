package cgroup

import (
	"errors"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// A usage file reads the file as it is at each read, whether its lookup
// went through the directory's descriptor or not; a key or file that is
// missing is an error, not 0, and the lookup of a missing file says so.
func TestUsageFile(t *testing.T) {
	dir := t.TempDir()
	events := filepath.Join(dir, "memory.events")
	os.WriteFile(events, []byte("low 0\nhigh 2\noom_kill 3\n"), 0o644)
	d, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(d)
	looked, err := openUsage(d, dir, "memory.events")
	if err != nil {
		t.Fatal(err)
	}
	byPath, _ := openUsage(-1, dir, "memory.events")
	for _, f := range []*usageFile{looked, byPath} {
		if v, err := f.readKey("oom_kill"); err != nil || v != 3 {
			t.Fatalf("oom_kill = %d, %v", v, err)
		}
		if _, err := f.readKey("oom_group_kill"); err == nil {
			t.Fatal("a missing key must be an error, not 0")
		}
	}
	os.WriteFile(events, []byte("low 0\nhigh 2\noom_kill 4\n"), 0o644)
	if v, err := looked.readKey("oom_kill"); err != nil || v != 4 {
		t.Fatalf("oom_kill after the change = %d, %v", v, err)
	}
	missing, err := openUsage(d, dir, "memory.peak")
	if !errors.Is(err, unix.ENOENT) {
		t.Fatalf("looking up a missing file: %v", err)
	}
	if _, err := missing.readUint(); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a missing file: %v", err)
	}
}

// GC removes only run groups whose owner lock is free, and nothing else.
func TestCollectStale(t *testing.T) {
	dir := t.TempDir()
	groups := map[string]bool{ // name: removed
		runPrefix + "1-dead": true, runPrefix + "2-live": false,
		"microbox-supervisor": false, "someone-else": false, "microbox-run-4-1-0": false,
	}
	for name := range groups {
		os.Mkdir(filepath.Join(dir, name), 0o755)
	}
	live, err := lockOwner(filepath.Join(dir, runPrefix+"2-live"))
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(live)
	var killed []string
	removed, err := collectStale(dir, func(group string) error {
		killed = append(killed, filepath.Base(group))
		return nil
	})
	if err != nil || len(removed) != 1 || filepath.Base(removed[0]) != runPrefix+"1-dead" || !slices.Equal(killed, []string{runPrefix + "1-dead"}) {
		t.Fatalf("removed %v killed %v (%v), want only %s", removed, killed, err, runPrefix+"1-dead")
	}
	for name, gone := range groups {
		if _, err := os.Stat(filepath.Join(dir, name)); (err != nil) != gone {
			t.Errorf("%s: gone %v, want %v", name, err != nil, gone)
		}
	}
	if Orphaned(filepath.Join(dir, runPrefix+"2-live")) {
		t.Error("a held lock reads as orphaned")
	}
}

func TestV1Settings(t *testing.T) {
	got := v1Settings(Limits{Memory: 256 << 20, CPUs: 0.5, Pids: 64})
	want := []setting{
		{"memory", "memory.limit_in_bytes", "268435456"},
		// memsw equal to the limit (no swap), and written after it.
		{"memory", "memory.memsw.limit_in_bytes", "268435456"},
		{"memory", "memory.kmem.tcp.limit_in_bytes", "268435456"},
		{"pids", "pids.max", "64"},
		// The quota alone: the period is a new group's default.
		{"cpu", "cpu.cfs_quota_us", "50000"},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("v1 settings\n got %v\nwant %v", got, want)
	}
	if s := v1Settings(Limits{}); len(s) != 0 {
		t.Fatalf("no limits asked, yet %v", s)
	}
}

func TestV2Settings(t *testing.T) {
	got := v2Settings(Limits{Memory: 64 << 20, CPUs: 1.5, Pids: 16})
	want := []setting{
		{"memory", "memory.max", "67108864"},
		{"memory", "memory.swap.max", "0"},
		{"memory", "memory.oom.group", "1"},
		{"cpu", "cpu.max", "150000 100000"},
		{"pids", "pids.max", "16"},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("v2 settings\n got %v\nwant %v", got, want)
	}
	if c := controllersOf(got); !slices.Equal(c, []string{"memory", "cpu", "pids"}) {
		t.Fatalf("controllers %v", c)
	}
	if s := v2Settings(Limits{Pids: 8}); len(s) != 1 || s[0].file != "pids.max" {
		t.Fatalf("only a pids limit asked, got %v", s)
	}
}

// A real run group on this host: limits written, a process moved in,
// usage read, the process killed, the group removed.
func TestRunGroupLifecycle(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("creating cgroups here needs root (CI runs as root)")
	}
	if HostMode() == ModeNone {
		t.Skip("this kernel has no cgroup hierarchy microbox can use")
	}
	r, err := New(Options{Limits: Limits{Memory: 64 << 20, CPUs: 1, Pids: 16}})
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sleep", "30")
	if r.CloneFD() >= 0 {
		t.Skip("v2 host: entry is at clone time, covered by the VM suite")
	}
	// The period the quota is of (cpuQuota), which v1Settings leaves as
	// a new group has it.
	period := setting{"cpu", "cpu.cfs_period_us", strconv.Itoa(cpuPeriod)}
	for _, s := range append(v1Settings(Limits{Memory: 64 << 20, CPUs: 1, Pids: 16}), period) {
		path := filepath.Join(r.(*v1Run).dirs[s.controller], s.file)
		data, err := os.ReadFile(path)
		if err != nil && s.file == "memory.memsw.limit_in_bytes" && errors.Is(err, os.ErrNotExist) {
			continue // no swap accounting on a host without swap
		}
		if err != nil || strings.TrimSpace(string(data)) != s.value {
			t.Fatalf("%s = %q (%v), want %s", path, data, err, s.value)
		}
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if err := r.Enter(cmd.Process.Pid); err != nil {
		t.Fatal(err)
	}
	if err := r.Kill(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Kill did not end the group's process")
	}
	if _, err := r.Usage(); err != nil {
		t.Fatalf("usage: %v", err)
	}
	dirs := maps.Clone(r.(*v1Run).dirs) // Remove empties r's own map
	if len(dirs) != len(v1Controllers) {
		t.Fatalf("joined %d hierarchies, want %d", len(dirs), len(v1Controllers))
	}
	if err := r.Remove(); err != nil {
		t.Fatal(err)
	}
	for _, d := range dirs {
		if _, err := os.Stat(d); err == nil {
			t.Fatalf("%s left behind", d)
		}
	}
}

// On systemd's v1 hosts cpu and cpuacct are one hierarchy, mounted at
// cpu,cpuacct with cpu and cpuacct as links to it: the run gets one
// directory there, used for both.
func TestV1ComountedHierarchies(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{"memory/own", "cpu,cpuacct/own"} {
		os.MkdirAll(filepath.Join(root, d), 0o755)
	}
	os.Symlink("cpu,cpuacct", filepath.Join(root, "cpu"))
	os.Symlink("cpu,cpuacct", filepath.Join(root, "cpuacct"))
	parents := map[string]string{"memory": "/own", "cpu": "/own", "cpuacct": "/own"}
	r := &v1Run{dirs: map[string]string{}}
	var made []string
	for _, sub := range []string{"memory", "cpu", "cpuacct"} {
		dir, err := v1Mkdir(root, sub, parents, "run", made)
		if err != nil {
			t.Fatalf("%s: %v", sub, err)
		}
		r.dirs[sub] = dir
		made = append(made, dir)
	}
	if r.dirs["cpu"] != r.dirs["cpuacct"] || r.dirs["cpu"] == r.dirs["memory"] {
		t.Fatalf("dirs %v: want cpu and cpuacct to share one directory", r.dirs)
	}
	if _, err := os.Stat(filepath.Join(root, "cpu,cpuacct/own/run")); err != nil {
		t.Fatal(err)
	}
	if _, err := v1Mkdir(root, "pids", parents, "run", made); err == nil {
		t.Fatal("a hierarchy missing from /proc/self/cgroup was accepted")
	}
	// A directory of that name this run did not make is an error, not
	// shared.
	os.MkdirAll(filepath.Join(root, "memory/own/taken"), 0o755)
	if _, err := v1Mkdir(root, "memory", parents, "taken", made); err == nil {
		t.Fatal("an existing group of another run was taken over")
	}
}

func TestBadParentRefused(t *testing.T) {
	for _, p := range []string{"relative", "/a/../../etc", "/a//b", "/a/", "/.."} {
		if _, err := New(Options{Parent: p, Limits: Limits{Pids: 8}}); err == nil || !strings.HasPrefix(err.Error(), "CgroupParent") {
			t.Errorf("parent %q: %v", p, err)
		}
	}
}

// A limit file the kernel does not offer must fail as missing, never be
// created as a plain file that enforces nothing.
func TestWriteFileNeverCreates(t *testing.T) {
	p := filepath.Join(t.TempDir(), "memory.swap.max")
	if err := writeFile(p, "0"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("writeFile on a missing file: %v, want ErrNotExist", err)
	}
	if _, err := os.Stat(p); err == nil {
		t.Fatal("writeFile created the file")
	}
}

// A lock won on a group a GC removed in the meantime is no lock: the
// maker tries another name (errTaken).
func TestLockOnRemovedGroup(t *testing.T) {
	dir := filepath.Join(t.TempDir(), runPrefix+"1-x")
	os.Mkdir(dir, 0o755)
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	os.Remove(dir) // the GC's doing, between the maker's open and its lock
	if err := lockOpened(fd, dir); !errors.Is(err, errTaken) {
		t.Fatalf("lock on a removed group: %v, want errTaken", err)
	}
	os.Mkdir(dir, 0o755) // another group of the same name: still not ours
	if err := lockOpened(fd, dir); !errors.Is(err, errTaken) {
		t.Fatalf("lock on a replaced group: %v, want errTaken", err)
	}
}

// A v1 hierarchy that is there but cannot be joined, here for want of a
// descriptor for its owner lock, fails the run with the cause kept (so
// the caller can tell "busy" from a verdict); it is never silently left
// out, which would leave the run without its CPU time or peak memory.
func TestV1JoinFailureKeepsCause(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("creating cgroups here needs root (CI runs as root)")
	}
	if HostMode() != ModeV1 {
		t.Skip("v1 only: a v2 group is one directory, joined at clone time")
	}
	var old unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &old); err != nil {
		t.Fatal(err)
	}
	var fill []int
	defer func() {
		for _, fd := range fill {
			unix.Close(fd)
		}
		unix.Setrlimit(unix.RLIMIT_NOFILE, &old)
	}()
	low := unix.Rlimit{Cur: 256, Max: old.Max}
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &low); err != nil {
		t.Fatal(err)
	}
	for {
		fd, err := unix.Open("/dev/null", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			break
		}
		fill = append(fill, fd)
	}
	// One descriptor left: the first hierarchy's lock takes it, and the
	// next hierarchy's lock finds none.
	unix.Close(fill[len(fill)-1])
	fill = fill[:len(fill)-1]
	// No limit: no setting is written, so only the locks need descriptors.
	r, err := New(Options{})
	if err == nil {
		dirs := maps.Clone(r.(*v1Run).dirs)
		r.Remove()
		t.Fatalf("a run group was made without every hierarchy: %v", dirs)
	}
	if !errors.Is(err, unix.EMFILE) {
		t.Fatalf("the cause was lost: %v", err)
	}
}

// A process joins its v1 group by writing "0" to the tasks files JoinFDs
// opened for it: it lands in the run's directory of every hierarchy (the
// cpu and cpuacct ones included, which no limit test looks at), without
// anyone moving it.
func TestV1JoinFDsMoveTheWriter(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("creating cgroups here needs root (CI runs as root)")
	}
	if HostMode() != ModeV1 {
		t.Skip("v1 only: a v2 group is joined at clone time")
	}
	r, err := New(Options{Limits: Limits{Memory: 64 << 20, Pids: 16}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Remove()
	fds, err := r.JoinFDs()
	if err != nil {
		t.Fatal(err)
	}
	var files []*os.File
	var writes []string
	for i, fd := range fds {
		files = append(files, os.NewFile(uintptr(fd), "tasks"))
		writes = append(writes, "echo 0 >&"+strconv.Itoa(3+i))
	}
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	// The shell has one thread; cat inherits the groups it joined.
	cmd := exec.Command("/bin/sh", "-c", strings.Join(writes, " && ")+" && exec cat /proc/self/cgroup")
	cmd.ExtraFiles = files
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("join: %v: %s", err, out)
	}
	for _, sub := range v1Controllers {
		dir := r.(*v1Run).dirs[sub]
		rel := strings.TrimPrefix(dir, filepath.Join(mountRoot, sub))
		if !slices.ContainsFunc(strings.Split(string(out), "\n"), func(l string) bool {
			parts := strings.SplitN(l, ":", 3)
			return len(parts) == 3 && slices.Contains(strings.Split(parts[1], ","), sub) && parts[2] == rel
		}) {
			t.Errorf("not in the run's %s group %s:\n%s", sub, rel, out)
		}
	}
}
