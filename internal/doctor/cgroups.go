package doctor

// The cgroup hierarchy: its mode, the controllers and features runs use,
// and whether this user may make run groups where runs would make them.

import (
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/microbox/microbox/cgroup"
	"golang.org/x/sys/unix"
)

// checkCgroups reports the hierarchy, its controllers and features, and
// whether this user may make run groups where runs would make them.
func (d *doctor) checkCgroups() {
	mode := cgroup.HostMode()
	if d.cgroup == nil {
		d.add("cgroup.mode", OK, d.spell("%s, not used ({NoCgroup}: no memory, CPU or pids limits)", mode), "")
		return
	}
	switch mode {
	case cgroup.ModeV2:
		d.add("cgroup.mode", OK, "v2: pure unified hierarchy at "+cgroup.MountRoot, "")
		d.checkV2()
	case cgroup.ModeV1:
		detail := "v1: memory, pids, cpu, cpuacct on v1 hierarchies"
		if cgroup.Hybrid() {
			detail += " (hybrid: cgroup2 at " + cgroup.MountRoot + "/unified holds no controllers microbox uses)"
		}
		d.add("cgroup.mode", OK, detail, "")
		d.checkV1()
	default:
		d.add("cgroup.mode", Fail, "no cgroup v2 at "+cgroup.MountRoot+" and no v1 memory hierarchy",
			d.spell("mount cgroup2 at %[1]s (mount -t cgroup2 none %[1]s), or pass {NoCgroup} to run without limits", cgroup.MountRoot))
	}
}

// checkV2 reports controllers, features and delegation on cgroup v2.
func (d *doctor) checkV2() {
	own, err := cgroup.Own("")
	if err != nil {
		d.add("cgroup.controllers", Fail, err.Error(), "mount /proc")
		return
	}
	parent, inOwn := d.cgroup.Parent, d.cgroup.Parent == ""
	if inOwn {
		parent = cgroup.RunParent(own)
	}
	// Sorted: the report names them alphabetically.
	need := slices.Sorted(slices.Values(d.cgroup.Limits.Controllers()))
	have, err := cgroup.Offered(parent)
	var missing []string
	for _, c := range need {
		if !slices.Contains(have, c) {
			missing = append(missing, c)
		}
	}
	offers := strings.Join(have, " ")
	switch {
	case err != nil:
		d.add("cgroup.controllers", Fail, fmt.Sprintf("cannot read the controllers of %s: %v", parent, err),
			d.spell("pass an existing group as {CgroupParent}"))
	case len(missing) > 0:
		d.add("cgroup.controllers", Fail, fmt.Sprintf("%s (where run groups go) offers %q, not %s", parent, offers, strings.Join(missing, ", ")),
			d.spell("enable them in the parent's cgroup.subtree_control (systemd: Delegate=yes, or Delegate=cpu memory pids), or pass another {CgroupParent}"))
	default:
		d.add("cgroup.controllers", OK, fmt.Sprintf("%s available in %s (where run groups go), of %q", strings.Join(need, ", "), parent, offers), "")
	}
	d.checkV2Features(own)
	d.checkV2Delegation(parent, inOwn, own)
}

// checkV2Features reports memory.peak, cgroup.kill and CLONE_INTO_CGROUP:
// from microbox's own group's interface files, else from the kernel's
// version.
func (d *doctor) checkV2Features(own string) {
	release := kernel()
	feature := func(name, file string, major, minor int, missing Status, fix string) {
		status, detail := OK, ""
		switch {
		case file != "" && cgroup.HasInterface(own, file):
			detail = fmt.Sprintf("%s present (in %s)", file, own)
		case kernelAtLeast(release, major, minor):
			detail = fmt.Sprintf("kernel %s ≥ %d.%d", release, major, minor)
		default:
			status, detail = missing, fmt.Sprintf("kernel %s < %d.%d", release, major, minor)
		}
		if status == OK {
			fix = ""
		}
		d.add(name, status, detail, fix)
	}
	feature("cgroup.memory_peak", "memory.peak", 5, 19, Warn,
		"a kernel ≥ 5.19; until then peak_memory_bytes reads 0")
	feature("cgroup.kill", "cgroup.kill", 5, 14, Warn,
		"a kernel ≥ 5.14; until then runs are killed process by process")
	feature("cgroup.clone_into", "", 5, 7, Fail,
		d.spell("a kernel ≥ 5.7 (clone3 with CLONE_INTO_CGROUP), or pass {NoCgroup}"))
}

// checkV2Delegation tells whether this user may make run groups under
// parent, move microbox into its leaf (when parent is its own group), and
// clone into them.
func (d *doctor) checkV2Delegation(parent string, inOwn bool, own string) {
	fix := d.spell("run microbox in a systemd unit or scope with Delegate=yes (systemd-run --user --scope -p Delegate=yes microbox ...), or pass a group delegated to you as {CgroupParent}, or pass {NoCgroup} to run without limits")
	if !cgroup.GroupExists(parent) {
		d.add("cgroup.delegation", Fail, fmt.Sprintf("%s does not exist", parent), "create it, or "+fix)
		return
	}
	ownGroup := inOwn && !cgroup.IsHierarchyRoot(own)
	if ownGroup && parent == own {
		if others := cgroup.OtherProcesses(own); others > 0 {
			d.add("cgroup.delegation", Fail, fmt.Sprintf("microbox's own group %s holds %d other process(es) (a shell?), so cgroup v2 lets it hand out no controllers", own, others), fix)
			return
		}
	}
	// Root too: a container's cgroup mount is read-only unless the
	// runtime delegates it.
	if p, err := cgroup.Unwritable(own, parent); p != "" {
		d.add("cgroup.delegation", Fail, fmt.Sprintf("uid %d may not write %s (%v): %s is not delegated to it", os.Geteuid(), p, err, parent), fix+containerCgroupFix)
		return
	}
	where := fmt.Sprintf("run groups go under %s", parent)
	if ownGroup {
		where += ", microbox's own group (it moves itself into a " + cgroup.SupervisorLeaf + " leaf)"
	}
	who := "as root"
	if os.Geteuid() != 0 {
		who = fmt.Sprintf("delegated to uid %d", os.Geteuid())
	}
	d.add("cgroup.delegation", OK, where+", "+who, "")
}

// checkV1 reports the v1 hierarchies, swap accounting and delegation.
func (d *doctor) checkV1() {
	places, missing := cgroup.V1Where(*d.cgroup)
	if len(missing) > 0 {
		d.add("cgroup.controllers", Fail, "no v1 hierarchy for "+strings.Join(missing, ", "),
			d.spell("mount them (mount -t cgroup -o memory cgroup %s/memory, ...), or pass {NoCgroup}", cgroup.MountRoot))
	} else {
		var where []string
		for _, p := range places {
			where = append(where, p.Hierarchy+" under "+p.Parent)
		}
		d.add("cgroup.controllers", OK, "run groups go in "+strings.Join(where, ", "), "")
	}
	d.add("cgroup.memory_peak", OK, "not used on v1: the peak is memory.max_usage_in_bytes", "")
	d.add("cgroup.kill", OK, "not used on v1: runs are killed pid by pid", "")
	d.add("cgroup.clone_into", OK, "not used on v1: the jail's PID 1 moves itself into its groups before it starts", "")
	d.checkV1Swap()
	if os.Geteuid() != 0 {
		d.add("cgroup.delegation", Fail, fmt.Sprintf("uid %d: cgroup v1 hierarchies are not delegated to unprivileged users", os.Geteuid()),
			d.spell("run microbox as root, or use a cgroup v2 host with a delegated subtree (see README, Rootless), or pass {NoCgroup} to run without limits"))
		return
	}
	for _, p := range places {
		dir := cgroup.MountRoot + "/" + p.Hierarchy + p.Parent
		if _, err := os.Stat(dir); err != nil {
			d.add("cgroup.delegation", Fail, fmt.Sprintf("%s: /proc/self/cgroup names a group the %s mount does not show (a container sharing the host's cgroup namespace)", dir, p.Hierarchy),
				d.spell("run the container with a cgroup namespace of its own (docker/podman --cgroupns private), or pass {NoCgroup}"))
			return
		}
		if err := unix.Access(dir, unix.W_OK); err != nil {
			d.add("cgroup.delegation", Fail, fmt.Sprintf("as root, may not write %s (%v)", dir, err),
				d.spell("pass {NoCgroup} to run without limits")+containerCgroupFix)
			return
		}
	}
	d.add("cgroup.delegation", OK, "as root: creates run groups in the v1 hierarchies", "")
}

// containerCgroupFix is how a container gets a cgroup it may write.
const containerCgroupFix = "; in a container: a cgroup namespace of its own and /sys/fs/cgroup mounted writable (Kubernetes with CRI-O: the pod annotation io.kubernetes.cri-o.cgroup2-mount-hierarchy-rw: \"true\"; runc/crun: an rw cgroup mount)"

// checkV1Swap: without memsw accounting, swap would let a run page out
// past its memory limit, so memory limits are refused on such hosts.
func (d *doctor) checkV1Swap() {
	if d.cgroup.Limits.Memory == 0 {
		d.add("cgroup.swap", OK, "no memory limit asked for", "")
		return
	}
	switch swapless, err := cgroup.V1CheckSwap(); {
	case err != nil:
		d.add("cgroup.swap", Fail, "the host has swap but no cgroup v1 swap accounting, so memory limits are refused",
			"boot with swapaccount=1, or swapoff -a")
	case swapless:
		d.add("cgroup.swap", OK, "no swap and no memsw accounting: the memory limit holds", "")
	default:
		d.add("cgroup.swap", OK, "swap is accounted (memory.memsw.*): the memory limit includes it", "")
	}
}
