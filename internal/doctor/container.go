package doctor

// What a container must grant microbox: the capabilities its jails need,
// a /proc the kernel lets each jail mount afresh, and per-jail uid ranges.
// Each missing grant is one failed check whose fix names the setting
// (Kubernetes, then docker/podman); docs/deploy.md has the table.

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/microbox/microbox/cgroup"
	"github.com/microbox/microbox/nsjail"
)

// capability numbers (linux/capability.h) of those root-run jails use.
var capNumbers = map[string]uint{"DAC_OVERRIDE": 1, "KILL": 5, "SETGID": 6, "SETUID": 7, "SETPCAP": 8, "SETFCAP": 31}

// neededCaps are the capabilities root needs for runs of these options:
// SETUID and SETGID map a jail's ids, SETPCAP keeps them across the change
// to a jail's uid; with a uid range per jail, DAC_OVERRIDE clones it into
// its v2 cgroup as that uid; without one (root in a user namespace of its
// own), SETFCAP maps root's own id into the jail.
func (d *doctor) neededCaps() []string {
	caps := []string{"SETUID", "SETGID", "SETPCAP"}
	if !nsjail.RangesPerJail() {
		return append(caps, "SETFCAP")
	}
	if d.cgroup != nil && cgroup.HostMode() == cgroup.ModeV2 {
		caps = append(caps, "DAC_OVERRIDE")
	}
	return caps
}

// checkCapabilities reports capabilities root lacks (a container that
// dropped them); an unprivileged user's jails need none.
func (d *doctor) checkCapabilities() {
	if os.Geteuid() != 0 {
		return
	}
	eff, err := effectiveCaps()
	if err != nil {
		d.add("capabilities", Warn, "cannot read CapEff in /proc/self/status: "+err.Error(), "mount /proc")
		return
	}
	var missing []string
	for _, c := range d.neededCaps() {
		if eff&(1<<capNumbers[c]) == 0 {
			missing = append(missing, "CAP_"+c)
		}
	}
	if len(missing) > 0 {
		d.add("capabilities", Fail, fmt.Sprintf("root lacks %s, which jails need (SETUID, SETGID: their id maps; SETPCAP: keeping them across the change of uid; SETFCAP: mapping root into a jail; DAC_OVERRIDE: cloning into a run's cgroup)", strings.Join(missing, ", ")),
			"grant them to the container: Kubernetes securityContext.capabilities.add: ["+strings.Join(trimCap(missing), ", ")+"]; docker/podman --cap-add "+strings.Join(trimCap(missing), " --cap-add "))
		return
	}
	d.add("capabilities", OK, "root has "+strings.Join(d.neededCaps(), ", "), "")
}

func trimCap(caps []string) []string {
	out := slices.Clone(caps)
	for i, c := range out {
		out[i] = strings.TrimPrefix(c, "CAP_")
	}
	return out
}

func effectiveCaps() (uint64, error) {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "CapEff:"); ok {
			return strconv.ParseUint(strings.TrimSpace(v), 16, 64)
		}
	}
	return 0, fmt.Errorf("no CapEff line")
}

// checkProcMasks reports mounts over parts of /proc, as container
// runtimes make to mask it: the kernel refuses a fresh /proc in a new
// user namespace while any covers a non-empty part of it, and every jail
// mounts one for its pid namespace. (binfmt_misc sits on an empty
// directory the kernel makes for it, which does not count.)
func (d *doctor) checkProcMasks() {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		d.add("proc.masks", Warn, "cannot read /proc/self/mountinfo: "+err.Error(), "mount /proc")
		return
	}
	var masks []string
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		sep := slices.Index(f, "-")
		if len(f) < 5 || sep < 0 || sep+1 >= len(f) {
			continue
		}
		if strings.HasPrefix(f[4], "/proc/") && f[sep+1] != "binfmt_misc" {
			masks = append(masks, f[4])
		}
	}
	if len(masks) == 0 {
		d.add("proc.masks", OK, "nothing is mounted over parts of /proc: jails can mount their own", "")
		return
	}
	d.add("proc.masks", Fail, fmt.Sprintf("%d mounts cover parts of /proc (%s), so the kernel refuses each jail a fresh /proc", len(masks), strings.Join(masks[:min(len(masks), 4)], ", ")),
		"run the container with /proc unmasked: Kubernetes securityContext.procMount: Unmasked (with hostUsers: false); docker --security-opt systempaths=unconfined; podman --security-opt unmask=ALL")
}

// checkRanges warns when root's jails cannot have uid ranges of their own
// (a user namespace of the container's own maps too few ids): they share
// root's uid on the host, and with it its per-user kernel quotas.
func (d *doctor) checkRanges() {
	if os.Geteuid() != 0 || nsjail.RangesPerJail() {
		return
	}
	d.add("userns.ranges", Warn, fmt.Sprintf("root in a user namespace that does not map uids %d and up: jails are made as without root, each program with this container's root uid on the host (its per-user quotas shared by every run; the explicit rlimits still bound each)", nsjail.HostIDBase),
		"nothing to do in a Kubernetes pod with hostUsers: false (its root is an unprivileged uid on the node); elsewhere run microbox in the host's user namespace")
}
