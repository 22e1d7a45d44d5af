package doctor

// The rest of the sandbox (seccomp, filesystems, the root's Python), then
// a real run.

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
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
		d.ran = true
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
	o.Language = "" // the probe is Python, whatever the runs' language
	s, err := o.Spec()
	if err != nil {
		return nil, 0, err
	}
	start := time.Now()
	res := nsjail.Run(context.Background(), s)
	return res, time.Since(start), nil
}

// checkSharedRoot warns when runs use the host's own /usr: they read the
// host's page cache and can lock files that host services lock (flock on a
// shared library blocks whoever locks it too). A prepared root that no host
// service uses keeps that among runs.
func (d *doctor) checkSharedRoot() {
	if d.opts.RootDir() != "" {
		d.add("root.shared", OK, "runs use a prepared root, not the host's own /usr", "")
		return
	}
	d.add("root.shared", Warn, "runs use the host's own /usr, read-only: they share its page cache, and their locks on its files reach host services that lock them",
		d.spell("for production, give runs a root of their own: microbox rootfs build DIR, then {RootFS} DIR"))
}

// scientificModules are the packages whose import doctor compares inside
// and outside the default root: those most used by runs, and those that
// reach their libraries through the host's /etc (BLAS and LAPACK through
// /etc/alternatives).
var scientificModules = []string{"numpy", "scipy", "pandas", "sklearn", "matplotlib"}

// importCode imports each module named in argv[1] (comma-separated) that
// the interpreter can find and prints, as JSON, the ones it found with
// "ok" or the error their import raised.
const importCode = `import importlib, importlib.util, json, sys
out = {}
for m in sys.argv[1].split(","):
    if importlib.util.find_spec(m) is None:
        continue
    try:
        importlib.import_module(m)
        out[m] = "ok"
    except Exception as e:
        out[m] = "%s: %s" % (type(e).__name__, e)
print(json.dumps(out))`

// checkPackages checks, for the default root, that the packages the
// host's Python imports import inside too.
func (d *doctor) checkPackages() {
	if d.opts.RootDir() != "" || !d.ran {
		return // a prepared root is not the host's; a failed run says why
	}
	mods := strings.Join(scientificModules, ",")
	out, err := exec.Command(d.opts.Python, "-I", "-c", importCode, mods).Output()
	var host map[string]string
	if err != nil || json.Unmarshal(out, &host) != nil {
		d.add("python.packages", Warn, fmt.Sprintf("could not list the host's packages with %s: %v", d.opts.Python, err), "check that the interpreter runs on the host")
		return
	}
	var found []string
	for m, outcome := range host {
		if outcome == "ok" {
			found = append(found, m)
		}
	}
	if len(found) == 0 {
		d.add("python.packages", OK, "the host's Python imports none of "+mods, "")
		return
	}
	slices.Sort(found)
	o := d.opts
	code := importCode
	o.Code, o.Args, o.Capture, o.Memory = &code, []string{strings.Join(found, ",")}, true, max(o.Memory, 1<<30)
	if o.NoCgroup {
		o.Memory = 0
	}
	inside := map[string]string{}
	s, err := o.Spec()
	if err == nil {
		res := nsjail.Run(context.Background(), s)
		if res.Status != result.StatusOK || json.Unmarshal([]byte(res.Stdout), &inside) != nil {
			err = errors.New(res.Describe())
		}
	}
	var broken []string
	for _, m := range found {
		if inside[m] != "ok" {
			broken = append(broken, fmt.Sprintf("%s (%s)", m, cmp.Or(inside[m], "not found")))
		}
	}
	switch {
	case err != nil:
		d.add("python.packages", Warn, "could not import the host's packages in a run: "+field.Message(err, d.opts.FieldNames), "see the run's error")
	case len(broken) > 0:
		d.add("python.packages", Warn, "the host's Python imports them, runs do not: "+strings.Join(broken, ", "),
			d.spell("a library they load is reached through a part of the host's /etc the default root lacks; give runs a prepared root with them (microbox rootfs build DIR --with %s, then {RootFS} DIR)", strings.Join(found, ",")))
	default:
		d.add("python.packages", OK, "import in runs as on the host: "+strings.Join(found, ", "), "")
	}
}
