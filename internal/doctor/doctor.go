// Package doctor checks what a sandboxed run needs on this host, one check
// at a time with ok, warn or fail and a fix: user namespaces, the cgroup
// hierarchy, its controllers and delegation, seccomp, tmpfs, the root's
// Python, and last a real run. It checks the run that given options
// describe, so a report about runs under another cgroup parent, or
// without a cgroup, says whether those would work.
//
// What it knows about cgroups comes from package cgroup, whose runs it
// checks. Its details and fixes name the options' fields, and the options
// as a whole as the field "Options", as the caller spells them
// (nsjail.Options.FieldNames).
package doctor

import (
	"fmt"
	"io"
	"slices"

	"github.com/microbox/microbox/cgroup"
	"github.com/microbox/microbox/field"
	"github.com/microbox/microbox/nsjail"
)

// Status is how a check went. Only Fail means a run would fail.
type Status string

const (
	OK   Status = "ok"
	Warn Status = "warn"
	Fail Status = "fail"
)

// Check is one line of the report.
type Check struct {
	Name   string `json:"name"`
	Status Status `json:"status"`
	Detail string `json:"detail"`
	Fix    string `json:"fix,omitempty"`
}

// Report is every check in order; OK is false when a run would fail (some
// check failed).
type Report struct {
	OK     bool    `json:"ok"`
	Checks []Check `json:"checks"`
}

// Run makes every check for runs of opts, the real run last. Options that
// no run could have (bad limits, a root without Python) are an error,
// naming the field at fault, and no report.
func Run(opts nsjail.Options) (*Report, error) {
	d, err := newDoctor(opts)
	if err != nil {
		return nil, err
	}
	d.checkHost()
	d.checkCapabilities()
	d.checkUserNS()
	d.checkRanges()
	d.checkProcMasks()
	d.checkCgroups()
	d.checkSeccomp()
	d.checkFilesystems()
	d.checkPython()
	d.checkSharedRoot()
	d.checkRun()
	d.checkPackages()
	return d.finish(), nil
}

// Essentials makes the checks of what every run of opts needs that are
// cheap enough to repeat while a server runs (internal/health): root's
// capabilities, user namespaces, /proc's masks, the cgroup hierarchy where
// run groups go, seccomp, tmpfs and the root's Python. It makes no run.
// Options that no run could have are an error, as Run's are.
func Essentials(opts nsjail.Options) (*Report, error) {
	d, err := newDoctor(opts)
	if err != nil {
		return nil, err
	}
	for _, check := range []func(){d.checkCapabilities, d.checkUserNS, d.checkProcMasks, d.checkCgroups, d.checkSeccomp, d.checkFilesystems, d.checkPython} {
		check()
	}
	return d.finish(), nil
}

// Print writes the report as text, one line per check, then the verdict.
func (r *Report) Print(w io.Writer) {
	for _, c := range r.Checks {
		line := fmt.Sprintf("%-4s  %-20s %s", c.Status, c.Name, c.Detail)
		if c.Fix != "" {
			line += " — fix: " + c.Fix
		}
		fmt.Fprintln(w, line)
	}
	if r.OK {
		fmt.Fprintln(w, "doctor: runs work on this host")
	} else {
		fmt.Fprintln(w, "doctor: runs would fail on this host; see the fixes above")
	}
}

// doctor gathers the report.
type doctor struct {
	opts   nsjail.Options  // the run to check, without its program yet (prepared)
	cgroup *cgroup.Options // its cgroup; nil for none
	report Report
	ran    bool // the real run worked
}

// newDoctor prepares opts for the checks; its error names the field no
// run could have.
func newDoctor(opts nsjail.Options) (*doctor, error) {
	cg, err := opts.Cgroup()
	if err == nil {
		err = opts.Prepare()
	}
	if err != nil {
		return nil, err
	}
	return &doctor{opts: opts, cgroup: cg}, nil
}

// finish is the report, OK unless a check failed.
func (d *doctor) finish() *Report {
	d.report.OK = !slices.ContainsFunc(d.report.Checks, func(c Check) bool { return c.Status == Fail })
	return &d.report
}

func (d *doctor) add(name string, status Status, detail, fix string) {
	d.report.Checks = append(d.report.Checks, Check{Name: name, Status: status, Detail: detail, Fix: fix})
}

// spell formats a detail or fix whose {Field} markers name the options'
// fields, spelled as the caller calls them.
func (d *doctor) spell(format string, args ...any) string {
	return field.Sprintf(d.opts.FieldNames, format, args...)
}
