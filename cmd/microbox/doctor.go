package main

// `microbox doctor`: checks what a run needs on this host, one line each
// with ok/warn/fail and a fix, ends with a real run, and exits non-zero if
// a default run (or the run its flags describe) would fail.

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/microbox/microbox/cgroup"
	"github.com/microbox/microbox/field"
	"github.com/microbox/microbox/nsjail"
	"github.com/microbox/microbox/result"
	"github.com/microbox/microbox/rootfs"
)

// Check statuses. Only fail means a run would fail.
const (
	docOK   = "ok"
	docWarn = "warn"
	docFail = "fail"
)

// doctorCheck is one line of the report.
type doctorCheck struct {
	Name   string `json:"name"`
	Status string `json:"status"`
	Detail string `json:"detail"`
	Fix    string `json:"fix,omitempty"`
}

// doctorReport is `doctor --json`'s output; OK is false when a run would
// fail (some check failed).
type doctorReport struct {
	OK     bool          `json:"ok"`
	Checks []doctorCheck `json:"checks"`
}

const doctorCgroupMount = "/sys/fs/cgroup"

func doctorCommand() *cobra.Command {
	f := &execFlags{}
	var asJSON bool
	c := &cobra.Command{
		Use:   "doctor [flags]",
		Short: "Check that this host can run sandboxes, and explain how to fix what it cannot",
		Long: `Check what a run needs on this host, one line each with ok, warn or fail
and a fix: user namespaces, the cgroup mode and controllers, delegation for
this user, seccomp, tmpfs and overlay, the root's Python, and finally a real
run with timing.

It checks the run exec's flags describe (the same flags, same defaults), so
"microbox doctor --cgroup-parent /my/group" checks runs made there. Exit
status: 0 if such a run works, 1 if it would fail, 125 on bad flags.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return runDoctor(f, c, asJSON)
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print the report as one JSON object")
	f.sandboxFlags(c)
	return c
}

func runDoctor(f *execFlags, c *cobra.Command, asJSON bool) error {
	o, err := f.options(c)
	if err != nil {
		return err
	}
	cg, err := o.Cgroup()
	if err == nil {
		err = o.Prepare()
	}
	if err != nil {
		return flagError(err)
	}
	d := &doctor{opts: o, cgroup: cg}
	d.run(c)
	if asJSON {
		printJSON(d.report)
	} else {
		d.print(os.Stdout)
	}
	if !d.report.OK {
		os.Exit(1)
	}
	return nil
}

// doctor gathers the report.
type doctor struct {
	opts   nsjail.Options  // the run to check, without its program yet (prepared)
	cgroup *cgroup.Options // its cgroup; nil for none
	report doctorReport
}

func (d *doctor) add(name, status, detail, fix string) {
	d.report.Checks = append(d.report.Checks, doctorCheck{Name: name, Status: status, Detail: detail, Fix: fix})
}

// run makes every check in order, the real run last.
func (d *doctor) run(c *cobra.Command) {
	d.checkHost()
	d.checkUserNS()
	d.checkCgroups()
	d.checkSeccomp()
	d.checkFilesystems()
	d.checkPython()
	d.checkRun(c)
	d.report.OK = true
	for _, ch := range d.report.Checks {
		if ch.Status == docFail {
			d.report.OK = false
		}
	}
}

// print writes the report as text, one line per check.
func (d *doctor) print(w io.Writer) {
	for _, ch := range d.report.Checks {
		line := fmt.Sprintf("%-4s  %-20s %s", ch.Status, ch.Name, ch.Detail)
		if ch.Fix != "" {
			line += " — fix: " + ch.Fix
		}
		fmt.Fprintln(w, line)
	}
	if d.report.OK {
		fmt.Fprintln(w, "doctor: runs work on this host")
	} else {
		fmt.Fprintln(w, "doctor: runs would fail on this host; see the fixes above")
	}
}

// checkHost names the kernel and whether microbox runs in a container.
func (d *doctor) checkHost() {
	detail := fmt.Sprintf("Linux %s, uid %d", doctorKernel(), os.Geteuid())
	if c := doctorContainer(); c != "" {
		detail += ", inside a container (" + c + ")"
	}
	d.add("host", docOK, detail, "")
}

func doctorKernel() string {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return "unknown"
	}
	return unix.ByteSliceToString(u.Release[:])
}

// doctorKernelAtLeast compares the running kernel's version with major.minor.
func doctorKernelAtLeast(major, minor int) bool {
	var maj, min int
	fmt.Sscanf(doctorKernel(), "%d.%d", &maj, &min)
	return maj > major || (maj == major && min >= minor)
}

// container guesses the container runtime microbox runs in, if any.
func doctorContainer() string {
	switch {
	case doctorExists("/.dockerenv"):
		return "docker"
	case doctorExists("/run/.containerenv"):
		return "podman"
	case doctorExists("/proc/vz") && !doctorExists("/proc/bc"):
		return "openvz"
	}
	return ""
}

func doctorExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// doctorSysctl reads /proc/sys/NAME (dots as slashes); ok is false when the
// kernel has no such setting.
func doctorSysctl(name string) (int, bool) {
	b, err := os.ReadFile("/proc/sys/" + strings.ReplaceAll(name, ".", "/"))
	if err != nil {
		return 0, false
	}
	v, err := strconv.Atoi(strings.TrimSpace(string(b)))
	return v, err == nil
}

// checkUserNS reports the three settings that can forbid user namespaces,
// then creates one.
func (d *doctor) checkUserNS() {
	root := os.Geteuid() == 0
	if v, ok := doctorSysctl("user.max_user_namespaces"); !ok {
		d.add("userns.max", docOK, "user.max_user_namespaces not present", "")
	} else if v == 0 {
		d.add("userns.max", docFail, "user.max_user_namespaces = 0: nobody may create user namespaces",
			"sysctl -w user.max_user_namespaces=15000 (and set it in /etc/sysctl.d/)")
	} else {
		d.add("userns.max", docOK, fmt.Sprintf("user.max_user_namespaces = %d", v), "")
	}
	switch v, ok := doctorSysctl("kernel.unprivileged_userns_clone"); {
	case !ok:
		d.add("userns.unprivileged", docOK, "kernel.unprivileged_userns_clone not present (no Debian/Ubuntu restriction)", "")
	case v == 1:
		d.add("userns.unprivileged", docOK, "kernel.unprivileged_userns_clone = 1", "")
	case root:
		d.add("userns.unprivileged", docOK, "kernel.unprivileged_userns_clone = 0, which does not bind root", "")
	default:
		d.add("userns.unprivileged", docFail, "kernel.unprivileged_userns_clone = 0: unprivileged users may not create user namespaces",
			"sysctl -w kernel.unprivileged_userns_clone=1 (and set it in /etc/sysctl.d/), or run as root")
	}
	switch v, ok := doctorSysctl("kernel.apparmor_restrict_unprivileged_userns"); {
	case !ok:
		d.add("userns.apparmor", docOK, "kernel.apparmor_restrict_unprivileged_userns not present", "")
	case v == 0:
		d.add("userns.apparmor", docOK, "kernel.apparmor_restrict_unprivileged_userns = 0", "")
	case root:
		d.add("userns.apparmor", docOK, "kernel.apparmor_restrict_unprivileged_userns = 1, which does not bind root", "")
	default:
		exe, _ := os.Executable()
		d.add("userns.apparmor", docFail, "kernel.apparmor_restrict_unprivileged_userns = 1: AppArmor denies unprivileged user namespaces their capabilities, so the jail cannot mount",
			fmt.Sprintf("sysctl -w kernel.apparmor_restrict_unprivileged_userns=0, or an AppArmor profile for microbox: /etc/apparmor.d/microbox with 'abi <abi/4.0>, include <tunables/global> profile microbox %s flags=(unconfined) { userns, }' then apparmor_parser -r /etc/apparmor.d/microbox", exe))
	}
	if err := doctorProbeUserNS(); err != nil {
		d.add("userns.create", docFail, "creating a user namespace failed: "+err.Error(),
			"fix the settings above; in a container, run it with user namespaces allowed (e.g. Docker: --security-opt seccomp=unconfined --security-opt apparmor=unconfined, or as a privileged container)")
	} else {
		d.add("userns.create", docOK, "a user namespace can be created", "")
	}
}

// doctorProbeUserNS starts this binary in a new user namespace (mapping only
// the caller's own ids) and lets it print help; only the clone matters.
func doctorProbeUserNS() error {
	cmd := exec.Command("/proc/self/exe", "help")
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Geteuid(), Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getegid(), Size: 1}},
	}
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
	if err := cmd.Run(); err != nil {
		return err
	}
	return nil
}

// checkCgroups reports the hierarchy, its controllers and features, and
// whether this user may make run groups where runs would make them.
func (d *doctor) checkCgroups() {
	opts := d.cgroup
	mode := cgroup.HostMode()
	if opts == nil {
		d.add("cgroup.mode", docOK, fmt.Sprintf("%s, not used (--no-cgroup: no memory, CPU or pids limits)", mode), "")
		return
	}
	switch mode {
	case cgroup.ModeV2:
		d.add("cgroup.mode", docOK, "v2: pure unified hierarchy at "+doctorCgroupMount, "")
		d.checkV2(opts)
	case cgroup.ModeV1:
		detail := "v1: memory, pids, cpu, cpuacct on v1 hierarchies"
		if doctorExists(filepath.Join(doctorCgroupMount, "unified", "cgroup.controllers")) {
			detail += " (hybrid: cgroup2 at " + doctorCgroupMount + "/unified holds no controllers microbox uses)"
		}
		d.add("cgroup.mode", docOK, detail, "")
		d.checkV1(opts)
	default:
		d.add("cgroup.mode", docFail, "no cgroup v2 at "+doctorCgroupMount+" and no v1 memory hierarchy",
			"mount cgroup2 at "+doctorCgroupMount+" (mount -t cgroup2 none "+doctorCgroupMount+"), or pass --no-cgroup to run without limits")
	}
}

// doctorControllers are the v2 controllers the limits ask for.
func doctorControllers(l cgroup.Limits) []string {
	var need []string
	if l.CPUs > 0 {
		need = append(need, "cpu")
	}
	if l.Memory > 0 {
		need = append(need, "memory")
	}
	if l.Pids > 0 {
		need = append(need, "pids")
	}
	return need
}

// doctorV2Where says where run groups would go: the parent, whether it is
// microbox's own group (which it must first leave for a leaf), and
// microbox's own group.
func doctorV2Where(opts *cgroup.Options) (parent string, ownMode bool, own string, err error) {
	own, err = cgroup.Own("")
	if err != nil {
		return "", false, "", err
	}
	if opts.Parent != "" {
		return opts.Parent, false, own, nil
	}
	return strings.TrimSuffix(own, "/microbox-supervisor"), true, own, nil
}

// checkV2 reports controllers, features and delegation on cgroup v2.
func (d *doctor) checkV2(opts *cgroup.Options) {
	parent, ownMode, own, err := doctorV2Where(opts)
	if err != nil {
		d.add("cgroup.controllers", docFail, err.Error(), "mount /proc")
		return
	}
	dir := filepath.Join(doctorCgroupMount, parent)
	have, err := os.ReadFile(filepath.Join(dir, "cgroup.controllers"))
	need := doctorControllers(opts.Limits)
	var missing []string
	for _, c := range need {
		if !slices.Contains(strings.Fields(string(have)), c) {
			missing = append(missing, c)
		}
	}
	switch {
	case err != nil:
		d.add("cgroup.controllers", docFail, fmt.Sprintf("cannot read the controllers of %s: %v", parent, err),
			"pass an existing group as --cgroup-parent")
	case len(missing) > 0:
		d.add("cgroup.controllers", docFail, fmt.Sprintf("%s (where run groups go) offers %q, not %s", parent, strings.TrimSpace(string(have)), strings.Join(missing, ", ")),
			"enable them in the parent's cgroup.subtree_control (systemd: Delegate=yes, or Delegate=cpu memory pids), or pass another --cgroup-parent")
	default:
		d.add("cgroup.controllers", docOK, fmt.Sprintf("%s available in %s (where run groups go), of %q", strings.Join(need, ", "), parent, strings.TrimSpace(string(have))), "")
	}
	d.checkV2Features(own)
	d.checkV2Delegation(parent, ownMode, own)
}

// checkV2Features reports memory.peak, cgroup.kill and CLONE_INTO_CGROUP.
func (d *doctor) checkV2Features(own string) {
	sample := filepath.Join(doctorCgroupMount, own)
	feature := func(name, file string, major, minor int, missing, fix string) {
		status, detail := docOK, ""
		switch {
		case !doctorHierarchyRoot(own) && file != "" && doctorExists(filepath.Join(sample, file)):
			detail = fmt.Sprintf("%s present (in %s)", file, own)
		case doctorKernelAtLeast(major, minor):
			detail = fmt.Sprintf("kernel %s ≥ %d.%d", doctorKernel(), major, minor)
		default:
			status, detail = missing, fmt.Sprintf("kernel %s < %d.%d", doctorKernel(), major, minor)
		}
		if status == docOK {
			fix = ""
		}
		d.add(name, status, detail, fix)
	}
	feature("cgroup.memory_peak", "memory.peak", 5, 19, docWarn,
		"a kernel ≥ 5.19; until then peak_memory_bytes reads 0")
	feature("cgroup.kill", "cgroup.kill", 5, 14, docWarn,
		"a kernel ≥ 5.14; until then runs are killed process by process")
	feature("cgroup.clone_into", "", 5, 7, docFail,
		"a kernel ≥ 5.7 (clone3 with CLONE_INTO_CGROUP), or pass --no-cgroup")
}

// checkV2Delegation tells whether this user may make run groups under
// parent, move microbox into its leaf (own mode), and clone into them.
func (d *doctor) checkV2Delegation(parent string, ownMode bool, own string) {
	const fix = "run microbox in a systemd unit or scope with Delegate=yes (systemd-run --user --scope -p Delegate=yes microbox ...), or pass a group delegated to you as --cgroup-parent, or pass --no-cgroup to run without limits"
	dir := filepath.Join(doctorCgroupMount, parent)
	if !doctorExists(dir) {
		d.add("cgroup.delegation", docFail, fmt.Sprintf("%s does not exist", parent), "create it, or "+fix)
		return
	}
	if ownMode && !doctorHierarchyRoot(own) && !strings.HasSuffix(own, "/microbox-supervisor") {
		if others := doctorOtherProcs(filepath.Join(dir, "cgroup.procs")); others > 0 {
			d.add("cgroup.delegation", docFail, fmt.Sprintf("microbox's own group %s holds %d other process(es) (a shell?), so cgroup v2 lets it hand out no controllers", own, others), fix)
			return
		}
	}
	if os.Geteuid() != 0 {
		need := []string{dir, filepath.Join(dir, "cgroup.subtree_control")}
		// Moving a process (microbox into its leaf, the jail into its
		// run group) needs write access to the common ancestor's procs.
		need = append(need, filepath.Join(doctorCgroupMount, doctorCommonAncestor(own, parent), "cgroup.procs"))
		for _, p := range need {
			if err := unix.Access(p, unix.W_OK); err != nil {
				d.add("cgroup.delegation", docFail, fmt.Sprintf("uid %d may not write %s (%v): %s is not delegated to it", os.Geteuid(), p, err, parent), fix)
				return
			}
		}
	}
	where := fmt.Sprintf("run groups go under %s", parent)
	if ownMode && !doctorHierarchyRoot(own) {
		where += ", microbox's own group (it moves itself into a microbox-supervisor leaf)"
	}
	who := "as root"
	if os.Geteuid() != 0 {
		who = fmt.Sprintf("delegated to uid %d", os.Geteuid())
	}
	d.add("cgroup.delegation", docOK, where+", "+who, "")
}

// doctorHierarchyRoot reports whether own is the real root of the v2
// hierarchy. In a container's cgroup namespace "/" is the container's own
// group, which (unlike the root) has a cgroup.type file and is bound by
// the no-internal-processes rule.
func doctorHierarchyRoot(own string) bool {
	return own == "/" && !doctorExists(filepath.Join(doctorCgroupMount, "cgroup.type"))
}

// doctorCommonAncestor is the deepest group that contains both a and b.
func doctorCommonAncestor(a, b string) string {
	as, bs := strings.Split(strings.Trim(a, "/"), "/"), strings.Split(strings.Trim(b, "/"), "/")
	var common []string
	for i := 0; i < len(as) && i < len(bs) && as[i] == bs[i] && as[i] != ""; i++ {
		common = append(common, as[i])
	}
	return "/" + strings.Join(common, "/")
}

// doctorOtherProcs counts the processes in a cgroup.procs file besides this one.
func doctorOtherProcs(procsFile string) int {
	b, err := os.ReadFile(procsFile)
	if err != nil {
		return 0
	}
	n := 0
	for _, f := range strings.Fields(string(b)) {
		if f != strconv.Itoa(os.Getpid()) {
			n++
		}
	}
	return n
}

// doctorV1Needed maps v1 hierarchies to whether the limits need them.
func doctorV1Needed(l cgroup.Limits) map[string]bool {
	return map[string]bool{"memory": l.Memory > 0, "pids": l.Pids > 0, "cpu": l.CPUs > 0, "cpuacct": true}
}

// checkV1 reports the v1 hierarchies, swap accounting and delegation.
func (d *doctor) checkV1(opts *cgroup.Options) {
	var where, missing []string
	needed := doctorV1Needed(opts.Limits)
	for _, c := range []string{"memory", "pids", "cpu", "cpuacct"} {
		own, err := cgroup.Own(c)
		if err != nil || !doctorExists(filepath.Join(doctorCgroupMount, c)) {
			if needed[c] {
				missing = append(missing, c)
			}
			continue
		}
		if opts.Parent != "" {
			own = opts.Parent
		}
		where = append(where, c+" under "+own)
	}
	if len(missing) > 0 {
		d.add("cgroup.controllers", docFail, "no v1 hierarchy for "+strings.Join(missing, ", "),
			"mount them (mount -t cgroup -o memory cgroup "+doctorCgroupMount+"/memory, ...), or pass --no-cgroup")
	} else {
		d.add("cgroup.controllers", docOK, "run groups go in "+strings.Join(where, ", "), "")
	}
	d.add("cgroup.memory_peak", docOK, "not used on v1: the peak is memory.max_usage_in_bytes", "")
	d.add("cgroup.kill", docOK, "not used on v1: runs are killed pid by pid", "")
	d.add("cgroup.clone_into", docOK, "not used on v1: the jail is moved into its groups before it starts", "")
	d.checkV1Swap(opts.Limits)
	if os.Geteuid() != 0 {
		d.add("cgroup.delegation", docFail, fmt.Sprintf("uid %d: cgroup v1 hierarchies are not delegated to unprivileged users", os.Geteuid()),
			"run microbox as root, or use a cgroup v2 host with a delegated subtree (see README, Rootless), or pass --no-cgroup to run without limits")
		return
	}
	d.add("cgroup.delegation", docOK, "as root: creates run groups in the v1 hierarchies", "")
}

// checkV1Swap: without memsw accounting, swap would let a run page out
// past its memory limit, so microbox refuses memory limits on such hosts.
func (d *doctor) checkV1Swap(l cgroup.Limits) {
	if l.Memory == 0 {
		d.add("cgroup.swap", docOK, "no memory limit asked for", "")
		return
	}
	if doctorExists(filepath.Join(doctorCgroupMount, "memory", "memory.memsw.limit_in_bytes")) {
		d.add("cgroup.swap", docOK, "swap is accounted (memory.memsw.*): the memory limit includes it", "")
		return
	}
	data, _ := os.ReadFile("/proc/swaps")
	if strings.Count(string(data), "\n") <= 1 {
		d.add("cgroup.swap", docOK, "no swap and no memsw accounting: the memory limit holds", "")
		return
	}
	d.add("cgroup.swap", docFail, "the host has swap but no cgroup v1 swap accounting, so memory limits are refused",
		"boot with swapaccount=1, or swapoff -a")
}

// checkSeccomp reports whether the kernel filters system calls with the
// actions microbox's filter uses.
func (d *doctor) checkSeccomp() {
	if d.opts.SeccompMode() == "off" {
		d.add("seccomp", docOK, "not used (--seccomp off)", "")
		return
	}
	status, err := os.ReadFile("/proc/self/status")
	if err != nil || !strings.Contains(string(status), "\nSeccomp:") {
		d.add("seccomp", docFail, "the kernel has no seccomp (CONFIG_SECCOMP)", "a kernel with CONFIG_SECCOMP_FILTER, or --seccomp off (much weaker isolation)")
		return
	}
	actions, err := os.ReadFile("/proc/sys/kernel/seccomp/actions_avail")
	have := strings.Fields(string(actions))
	var missing []string
	for _, a := range []string{"kill_process", "errno", "allow"} {
		if !slices.Contains(have, a) {
			missing = append(missing, a)
		}
	}
	if err != nil || len(missing) > 0 {
		d.add("seccomp", docFail, fmt.Sprintf("seccomp filters lack actions %v (%v)", missing, err), "a kernel ≥ 4.14 with CONFIG_SECCOMP_FILTER")
		return
	}
	detail := "filters available, actions: " + strings.Join(have, " ")
	if strings.Contains(string(status), "\nSeccomp:\t2") {
		detail += "; microbox itself already runs under a filter (a container's?), which stacks with the jail's"
	}
	if !slices.Contains(have, "log") {
		d.add("seccomp", docWarn, detail, "--seccomp log needs the log action (kernel ≥ 4.14)")
		return
	}
	d.add("seccomp", docOK, detail, "")
}

// checkFilesystems reports tmpfs (every scratch area is one) and overlay
// (which microbox does not need).
func (d *doctor) checkFilesystems() {
	fss, _ := os.ReadFile("/proc/filesystems")
	has := func(name string) bool {
		for _, line := range strings.Split(string(fss), "\n") {
			if f := strings.Fields(line); len(f) > 0 && f[len(f)-1] == name {
				return true
			}
		}
		return false
	}
	if has("tmpfs") {
		d.add("fs.tmpfs", docOK, "tmpfs available (scratch /tmp, working directory, /dev/shm)", "")
	} else {
		d.add("fs.tmpfs", docFail, "no tmpfs in /proc/filesystems", "a kernel with CONFIG_TMPFS")
	}
	if has("overlay") {
		d.add("fs.overlay", docOK, "overlay available (not needed: roots are read-only binds)", "")
	} else {
		d.add("fs.overlay", docOK, "overlay not loaded (not needed: roots are read-only binds)", "")
	}
}

// checkPython checks the interpreter inside the root runs would use.
func (d *doctor) checkPython() {
	root := d.opts.RootDir()
	where := "the default root (the host's /usr)"
	if root != "" {
		where = root
	}
	if err := rootfs.CheckPython(root, d.opts.Python); err != nil {
		d.add("python", docFail, field.Message(err, flagName), "install python3 (apt-get install python3), or pass --python or --rootfs")
		return
	}
	d.add("python", docOK, fmt.Sprintf("%s in %s", d.opts.Python, where), "")
}

// doctorCode is the end-to-end run's program.
const doctorCode = "import sys; print('%d.%d.%d' % sys.version_info[:3])"

// checkRun makes a real run with the flags' settings and times it; if it
// fails for want of a cgroup, it tries --no-cgroup to say whether that
// would do.
func (d *doctor) checkRun(c *cobra.Command) {
	res, took, err := d.runOnce(c, false)
	switch {
	case err != nil:
		d.add("run", docFail, err.Error(), "fix the flags")
		return
	case res.Status == result.StatusOK:
		d.add("run", docOK, fmt.Sprintf("Python %s ran in %s (set-up %.0f ms, program %.0f ms; cgroup %s, seccomp %s)",
			strings.TrimSpace(res.Stdout), took.Round(time.Millisecond), res.SetupTimeMs, res.WallTimeMs, res.Cgroup, res.Seccomp), "")
		return
	}
	d.add("run", docFail, "a run failed: "+res.Describe(), "see the failed checks above")
	if d.cgroup == nil {
		return
	}
	res, took, err = d.runOnce(c, true)
	if err == nil && res.Status == result.StatusOK {
		d.add("run.no-cgroup", docOK, fmt.Sprintf("with --no-cgroup the run works (%s), without memory, CPU and pids limits", took.Round(time.Millisecond)), "")
	} else if err == nil {
		d.add("run.no-cgroup", docFail, "even with --no-cgroup the run fails: "+res.Describe(), "see the failed checks above")
	}
}

// runOnce runs doctorCode in a sandbox as exec would with the flags
// (without a cgroup if noCgroup) and returns the result and the time
// nsjail.Run took.
func (d *doctor) runOnce(c *cobra.Command, noCgroup bool) (*result.Result, time.Duration, error) {
	o := d.opts
	if noCgroup {
		o = o.WithoutCgroup()
	}
	code := doctorCode
	o.Code, o.Capture = &code, true
	s, err := o.Spec()
	if err != nil {
		return nil, 0, flagError(err)
	}
	start := time.Now()
	res := nsjail.Run(context.Background(), s)
	return res, time.Since(start), nil
}
