package cgroup

// What this host's hierarchies offer and where run groups would go,
// answered without making any group: for a report on the host (package
// doctor) by the same code that runs use.

import (
	"errors"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// MountRoot is where the cgroup hierarchies are mounted.
const MountRoot = mountRoot

// SupervisorLeaf is where microbox moves itself when its own cgroup must
// hand controllers to run groups: cgroup v2 forbids a non-root group with
// processes from doing so (the no-internal-processes rule).
const SupervisorLeaf = "microbox-supervisor"

// Hybrid reports whether a v1 host also mounts cgroup v2 (at
// MountRoot/unified), which holds none of the controllers runs use.
func Hybrid() bool {
	return fileExists(filepath.Join(mountRoot, "unified", "cgroup.controllers"))
}

// Controllers are the v2 controllers a run group with these limits needs.
func (l Limits) Controllers() []string {
	return controllersOf(v2Settings(l))
}

// Offered lists the v2 controllers that group may give its children (its
// cgroup.controllers).
func Offered(group string) ([]string, error) {
	have, err := readFile(filepath.Join(mountRoot, group, "cgroup.controllers"))
	return strings.Fields(string(have)), err
}

// RunParent is the group run groups go under when none is requested and
// microbox's own v2 group is own: own itself, or the group whose
// supervisor leaf own is, once microbox has stepped into it.
func RunParent(own string) string {
	if strings.HasSuffix(own, "/"+SupervisorLeaf) {
		return path.Dir(own)
	}
	return own
}

// IsHierarchyRoot reports whether the v2 group is the real root of the
// hierarchy, which may hold processes and still enable controllers. In a
// container's cgroup namespace "/" is the container's group instead: an
// ordinary group, bound by the no-internal-processes rule, and (unlike the
// root) it has a cgroup.type file.
func IsHierarchyRoot(group string) bool { return isHierarchyRoot(mountRoot, group) }

// isHierarchyRoot is IsHierarchyRoot for the hierarchy mounted at root.
func isHierarchyRoot(root, group string) bool {
	return group == "/" && !fileExists(filepath.Join(root, "cgroup.type"))
}

// HasInterface reports whether the v2 group has the interface file (such
// as memory.peak or cgroup.kill), which tells that the kernel has its
// feature. The real root of the hierarchy lacks most such files, so there
// it is false.
func HasInterface(group, file string) bool { return hasInterface(mountRoot, group, file) }

// hasInterface is HasInterface for the hierarchy mounted at root.
func hasInterface(root, group, file string) bool {
	return !isHierarchyRoot(root, group) && fileExists(filepath.Join(root, group, file))
}

// GroupExists reports whether the v2 group exists.
func GroupExists(group string) bool {
	return fileExists(filepath.Join(mountRoot, group))
}

// OtherProcesses counts the processes in the v2 group besides this one.
func OtherProcesses(group string) int {
	return othersIn(filepath.Join(mountRoot, group, "cgroup.procs"), os.Getpid())
}

// othersIn counts the pids of a cgroup.procs file other than self's; 0 if
// it cannot be read.
func othersIn(procsFile string, self int) int {
	data, err := readFile(procsFile)
	if err != nil {
		return 0
	}
	n := 0
	for _, f := range strings.Fields(string(data)) {
		if f != strconv.Itoa(self) {
			n++
		}
	}
	return n
}

// Unwritable is the first file this user would have to write, and may
// not, to make run groups under parent and move processes from own into
// them, with the reason; "" if it may write them all. Moving a process
// (microbox into its leaf, the jail into its run group) needs write access
// to the cgroup.procs of the deepest group holding both.
func Unwritable(own, parent string) (string, error) {
	dir := filepath.Join(mountRoot, parent)
	for _, p := range []string{dir, filepath.Join(dir, "cgroup.subtree_control"),
		filepath.Join(mountRoot, commonAncestor(own, parent), "cgroup.procs")} {
		if err := unix.Access(p, unix.W_OK); err != nil {
			return p, err
		}
	}
	return "", nil
}

// commonAncestor is the deepest group that contains both a and b.
func commonAncestor(a, b string) string {
	as, bs := strings.Split(strings.Trim(a, "/"), "/"), strings.Split(strings.Trim(b, "/"), "/")
	var common []string
	for i := 0; i < len(as) && i < len(bs) && as[i] == bs[i] && as[i] != ""; i++ {
		common = append(common, as[i])
	}
	return "/" + strings.Join(common, "/")
}

// Place is where run groups go in one v1 hierarchy.
type Place struct {
	Hierarchy string // memory, pids, cpu or cpuacct
	Parent    string // the group they go under
}

// V1Where says where run groups of opts would go in each v1 hierarchy a
// run joins, in order, and which hierarchies the limits need but cannot
// have: not mounted, or not in /proc/self/cgroup.
func V1Where(opts Options) (where []Place, missing []string) {
	// Without /proc/self/cgroup no own group is known: every hierarchy
	// that needs one is missing.
	parents, _ := v1Parents(opts.Parent)
	return v1Where(mountRoot, parents, opts.Limits)
}

// v1Where is V1Where for the hierarchies mounted under root, with run
// groups going under parents.
func v1Where(root string, parents map[string]string, l Limits) (where []Place, missing []string) {
	for _, sub := range v1Controllers {
		parent, ok := parents[sub]
		if !ok || !fileExists(filepath.Join(root, sub)) {
			if v1Needed(sub, l) {
				missing = append(missing, sub)
			}
			continue
		}
		where = append(where, Place{sub, parent})
	}
	return where, missing
}

// V1CheckSwap refuses a memory limit that swap could get around: without
// swap accounting (memory.memsw.*) a run could page out past its limit.
// It reports whether memsw is missing on a host that has no swap at all.
func V1CheckSwap() (swapless bool, err error) {
	if fileExists(filepath.Join(mountRoot, "memory", "memory.memsw.limit_in_bytes")) {
		return false, nil
	}
	if !hostHasSwap() {
		return true, nil // no swap on this host: nothing to account
	}
	return false, errors.New("the host has swap (or /proc/swaps cannot be read) but no cgroup v1 swap accounting, so the memory limit cannot be enforced; boot with swapaccount=1 or turn swap off")
}
