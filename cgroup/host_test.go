package cgroup

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
)

func TestLimitsControllers(t *testing.T) {
	if c := (Limits{Memory: 1 << 20, CPUs: 1, Pids: 8}).Controllers(); !slices.Equal(c, []string{"memory", "cpu", "pids"}) {
		t.Fatalf("controllers %v", c)
	}
	if c := (Limits{Pids: 8}).Controllers(); !slices.Equal(c, []string{"pids"}) {
		t.Fatalf("only a pids limit asked, got %v", c)
	}
}

// Runs, stale-group collection and doctor agree on where run groups go:
// beside the supervisor leaf, never in it.
func TestRunParent(t *testing.T) {
	for own, want := range map[string]string{
		"/user.slice/app":                     "/user.slice/app",
		"/user.slice/app/microbox-supervisor": "/user.slice/app",
		"/microbox-supervisor":                "/",
		"/app/microbox-supervisor-2":          "/app/microbox-supervisor-2",
		"/":                                   "/",
	} {
		if got := RunParent(own); got != want {
			t.Errorf("RunParent(%q) = %q, want %q", own, got, want)
		}
	}
}

func TestCommonAncestor(t *testing.T) {
	for _, c := range []struct{ a, b, want string }{
		{"/a/b/c", "/a/b/d", "/a/b"},
		{"/a/b", "/a/b", "/a/b"},
		{"/a", "/b", "/"},
		{"/", "/a", "/"},
		{"/ab", "/a", "/"},
	} {
		if got := commonAncestor(c.a, c.b); got != c.want {
			t.Errorf("commonAncestor(%q, %q) = %q, want %q", c.a, c.b, got, c.want)
		}
	}
}

func TestOthersIn(t *testing.T) {
	procs := filepath.Join(t.TempDir(), "cgroup.procs")
	os.WriteFile(procs, []byte("1\n42\n"+strconv.Itoa(os.Getpid())+"\n"), 0o644)
	if n := othersIn(procs, os.Getpid()); n != 2 {
		t.Fatalf("%d other processes, want 2", n)
	}
	if n := othersIn(procs+".missing", os.Getpid()); n != 0 {
		t.Fatalf("%d other processes in a missing file", n)
	}
}

// The real root of a v2 hierarchy has no cgroup.type and lacks most
// interface files, so it tells nothing of the kernel's features; a
// container's "/" is an ordinary group.
func TestHierarchyRootAndInterfaces(t *testing.T) {
	host := t.TempDir()
	os.WriteFile(filepath.Join(host, "memory.peak"), nil, 0o644)
	os.Mkdir(filepath.Join(host, "app"), 0o755)
	os.WriteFile(filepath.Join(host, "app", "memory.peak"), nil, 0o644)
	if !isHierarchyRoot(host, "/") || isHierarchyRoot(host, "/app") {
		t.Error("the host's root is the hierarchy's root, and only it")
	}
	if hasInterface(host, "/", "memory.peak") || !hasInterface(host, "/app", "memory.peak") || hasInterface(host, "/app", "cgroup.kill") {
		t.Error("interfaces: only a non-root group's files count")
	}
	container := t.TempDir()
	os.WriteFile(filepath.Join(container, "cgroup.type"), []byte("domain\n"), 0o644)
	os.WriteFile(filepath.Join(container, "memory.peak"), nil, 0o644)
	if isHierarchyRoot(container, "/") || !hasInterface(container, "/", "memory.peak") {
		t.Error(`a container's "/" is an ordinary group`)
	}
}

// A hierarchy that is not mounted, or not in /proc/self/cgroup, is
// missing only if a limit needs it.
func TestV1Where(t *testing.T) {
	root := t.TempDir()
	for _, sub := range []string{"memory", "cpu", "cpuacct"} {
		os.Mkdir(filepath.Join(root, sub), 0o755)
	}
	parents := map[string]string{"memory": "/own", "pids": "/own", "cpu": "/own"}
	where, missing := v1Where(root, parents, Limits{Memory: 1 << 20})
	want := []Place{{"memory", "/own"}, {"cpu", "/own"}}
	if !slices.Equal(where, want) || len(missing) != 0 {
		t.Fatalf("where %v missing %v, want %v and none", where, missing, want)
	}
	_, missing = v1Where(root, parents, Limits{Memory: 1 << 20, Pids: 8})
	if !slices.Equal(missing, []string{"pids"}) {
		t.Fatalf("missing %v, want pids (not mounted)", missing)
	}
	delete(parents, "cpu")
	_, missing = v1Where(root, parents, Limits{CPUs: 1})
	if !slices.Equal(missing, []string{"cpu"}) {
		t.Fatalf("missing %v, want cpu (not in /proc/self/cgroup)", missing)
	}
}

// A Maker made when the host had neither swap accounting nor swap gives
// its runs a memory limit without a swap limit; once swap is on, its next
// run is refused as a new Maker's would be, not left free to page out
// past its limit for the rest of a template's life.
func TestV1PlanRechecksSwap(t *testing.T) {
	swapOn := errors.New("the host has swap but no cgroup v1 swap accounting")
	defer func(check func() (bool, error)) { v1SwapCheck = check }(v1SwapCheck)
	v1SwapCheck = func() (bool, error) { return false, swapOn }
	p := &v1Plan{limits: Limits{Memory: 64 << 20}, swapless: true,
		parents: map[string]string{"memory": "/microbox-test-no-such-parent", "pids": "/microbox-test-no-such-parent", "cpu": "/microbox-test-no-such-parent", "cpuacct": "/microbox-test-no-such-parent"}}
	if _, err := p.make("microbox-test-swap"); !errors.Is(err, swapOn) {
		t.Errorf("a swapless plan's run once the host swaps: %v, want %v", err, swapOn)
	}
}
