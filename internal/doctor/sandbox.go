package doctor

// The rest of the sandbox (seccomp, filesystems, the root's Python), then
// a real run.

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/microbox/microbox/field"
	"github.com/microbox/microbox/nsjail"
	"github.com/microbox/microbox/result"
	"github.com/microbox/microbox/rootfs"
)

// checkSeccomp reports whether the kernel filters system calls with the
// actions microbox's filter uses.
func (d *doctor) checkSeccomp() {
	if d.opts.SeccompMode() == "off" {
		d.add("seccomp", OK, d.spell("not used ({Seccomp} off)"), "")
		return
	}
	status, err := os.ReadFile("/proc/self/status")
	if err != nil || !strings.Contains(string(status), "\nSeccomp:") {
		d.add("seccomp", Fail, "the kernel has no seccomp (CONFIG_SECCOMP)", d.spell("a kernel with CONFIG_SECCOMP_FILTER, or {Seccomp} off (much weaker isolation)"))
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
		d.add("seccomp", Fail, fmt.Sprintf("seccomp filters lack actions %v (%v)", missing, err), "a kernel ≥ 4.14 with CONFIG_SECCOMP_FILTER")
		return
	}
	detail := "filters available, actions: " + strings.Join(have, " ")
	if strings.Contains(string(status), "\nSeccomp:\t2") {
		detail += "; microbox itself already runs under a filter (a container's?), which stacks with the jail's"
	}
	if !slices.Contains(have, "log") {
		d.add("seccomp", Warn, detail, d.spell("{Seccomp} log needs the log action (kernel ≥ 4.14)"))
		return
	}
	d.add("seccomp", OK, detail, "")
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
		d.add("fs.tmpfs", OK, "tmpfs available (scratch /tmp, working directory, /dev/shm)", "")
	} else {
		d.add("fs.tmpfs", Fail, "no tmpfs in /proc/filesystems", "a kernel with CONFIG_TMPFS")
	}
	if has("overlay") {
		d.add("fs.overlay", OK, "overlay available (not needed: roots are read-only binds)", "")
	} else {
		d.add("fs.overlay", OK, "overlay not loaded (not needed: roots are read-only binds)", "")
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
		d.add("python", Fail, field.Message(err, d.opts.FieldNames), d.spell("install python3 (apt-get install python3), or pass {Python} or {RootFS}"))
		return
	}
	d.add("python", OK, fmt.Sprintf("%s in %s", d.opts.Python, where), "")
}

// probeCode is the real run's program.
const probeCode = "import sys; print('%d.%d.%d' % sys.version_info[:3])"

// checkRun makes a real run with the options and times it; if it fails
// for want of a cgroup, it tries one without to say whether that would do.
func (d *doctor) checkRun() {
	res, took, err := d.runOnce(false)
	switch {
	case err != nil:
		d.add("run", Fail, field.Message(err, d.opts.FieldNames), d.spell("fix {Options}"))
		return
	case res.Status == result.StatusOK:
		d.add("run", OK, fmt.Sprintf("Python %s ran in %s (set-up %.0f ms, program %.0f ms; cgroup %s, seccomp %s)",
			strings.TrimSpace(res.Stdout), took.Round(time.Millisecond), res.SetupTimeMs, res.WallTimeMs, res.Cgroup, res.Seccomp), "")
		return
	}
	d.add("run", Fail, "a run failed: "+res.Describe(), "see the failed checks above")
	if d.cgroup == nil {
		return
	}
	res, took, err = d.runOnce(true)
	if err == nil && res.Status == result.StatusOK {
		d.add("run.no-cgroup", OK, d.spell("with {NoCgroup} the run works (%s), without memory, CPU and pids limits", took.Round(time.Millisecond)), "")
	} else if err == nil {
		d.add("run.no-cgroup", Fail, d.spell("even with {NoCgroup} the run fails: %s", res.Describe()), "see the failed checks above")
	}
}

// runOnce runs probeCode as a run of the options would run (without a
// cgroup if noCgroup) and returns the result and the time nsjail.Run
// took; an error is options no run can be built from.
func (d *doctor) runOnce(noCgroup bool) (*result.Result, time.Duration, error) {
	o := d.opts
	if noCgroup {
		o = o.WithoutCgroup()
	}
	code := probeCode
	o.Code, o.Capture = &code, true
	s, err := o.Spec()
	if err != nil {
		return nil, 0, err
	}
	start := time.Now()
	res := nsjail.Run(context.Background(), s)
	return res, time.Since(start), nil
}
