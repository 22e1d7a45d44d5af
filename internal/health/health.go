// Package health tells whether a run can work on this host now, for a
// server's /healthz: doctor's essential checks (internal/doctor: user
// namespaces, the cgroup hierarchy, seccomp, the root's Python), a run
// group made and removed where runs make theirs (unless the server runs
// without a cgroup), and last a real run that prints a token in a jail.
//
// A check costs a fork of the binary and a run, a few tens of
// milliseconds of CPU, and /healthz answers anyone without a token: so a
// Checker keeps its report for Every and makes at most one check at a
// time (callers that come while one is under way wait for that one).
// Its details and fixes name the options' fields as the Options'
// FieldNames spell them: the server's flags, for its operator.
package health

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/microbox/microbox/cgroup"
	"github.com/microbox/microbox/field"
	"github.com/microbox/microbox/internal/doctor"
	"github.com/microbox/microbox/nsjail"
	"github.com/microbox/microbox/result"
)

// Config is a Checker's.
type Config struct {
	// Options are the runs' to check (the server's, prepared).
	Options nsjail.Options
	// Run runs the check's spec in a fresh jail (server.Runner.Probe).
	Run func(context.Context, *nsjail.Spec) *result.Result
	// Every is how long a report stands before a caller's request makes
	// a new check (DefaultEvery if 0).
	Every time.Duration
}

// DefaultEvery is how long a report stands by default.
const DefaultEvery = 30 * time.Second

// checkTimeout bounds a whole check; runTimeout the run's program, which
// prints one line.
const (
	checkTimeout = 30 * time.Second
	runTimeout   = 5 * time.Second
)

// Report is one check's outcome: OK when no check failed.
type Report struct {
	OK      bool           `json:"ok"`
	Checks  []doctor.Check `json:"checks"`
	Checked time.Time      `json:"checked_at"`
}

// Failed is the first check that failed, nil if none did.
func (r *Report) Failed() *doctor.Check {
	if i := slices.IndexFunc(r.Checks, func(c doctor.Check) bool { return c.Status == doctor.Fail }); i >= 0 {
		return &r.Checks[i]
	}
	return nil
}

// Error says, in one line, which check failed, why (with detail), and
// the fix; "" when none did.
func (r *Report) Error(detail bool) string {
	c := r.Failed()
	if c == nil {
		return ""
	}
	msg := "runs cannot work here: " + c.Name + " failed"
	if detail {
		msg += ": " + c.Detail
	}
	if c.Fix != "" {
		msg += " — fix: " + c.Fix
	}
	return msg
}

// Answer adds the report to a /healthz answer, and returns its HTTP
// status: 200, or 503 with status "fail" and the error when a check
// failed. Without detail (a caller without the server's token), the
// checks lose their details, which name the host's paths and kernel: the
// names, statuses and fixes say what is wrong and what to do.
func (r *Report) Answer(answer map[string]any, detail bool) int {
	checks := r.Checks
	if !detail {
		checks = slices.Clone(checks)
		for i := range checks {
			checks[i].Detail = ""
		}
	}
	answer["checks"], answer["checked_at"] = checks, r.Checked
	if r.OK {
		return http.StatusOK
	}
	answer["status"], answer["error"] = "fail", r.Error(detail)
	return http.StatusServiceUnavailable
}

// A Checker makes checks on demand, at most one every Every.
type Checker struct {
	cfg    Config
	ctx    context.Context // ends with Close: the check under way stops
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.Mutex
	last   *Report       // nil before the first check ends
	inturn chan struct{} // closed when the check under way ends; nil if none
	closed bool
}

// New makes a Checker; call Close when the server stops.
func New(cfg Config) *Checker {
	if cfg.Every <= 0 {
		cfg.Every = DefaultEvery
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Checker{cfg: cfg, ctx: ctx, cancel: cancel}
}

// Report is the last check's report if it is younger than Every, else
// that of a new check (the one under way, if any). If ctx ends first, it
// is the last report, or, before the first, one that says so.
func (c *Checker) Report(ctx context.Context) *Report {
	c.mu.Lock()
	if c.last != nil && time.Since(c.last.Checked) < c.cfg.Every {
		defer c.mu.Unlock()
		return c.last
	}
	if c.inturn == nil && !c.closed {
		c.inturn = make(chan struct{})
		c.wg.Add(1)
		go c.refresh(c.inturn)
	}
	if done := c.inturn; done != nil {
		c.mu.Unlock()
		select {
		case <-done:
		case <-ctx.Done():
		}
		c.mu.Lock()
	}
	defer c.mu.Unlock()
	if c.last == nil {
		return &Report{Checks: []doctor.Check{{Name: "health", Status: doctor.Fail,
			Detail: "the first check has not ended", Fix: "ask again"}}, Checked: time.Now()}
	}
	return c.last
}

// Close stops the check under way, if any, and waits for it to end.
func (c *Checker) Close() {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.cancel()
	c.wg.Wait()
}

// refresh makes a check, keeps its report and closes done; a verdict
// other than the last one's goes to the server's log.
func (c *Checker) refresh(done chan struct{}) {
	defer c.wg.Done()
	ctx, cancel := context.WithTimeout(c.ctx, checkTimeout)
	rep := c.check(ctx)
	cancel()
	c.mu.Lock()
	defer c.mu.Unlock()
	if (c.last == nil && !rep.OK) || (c.last != nil && c.last.OK != rep.OK) {
		if rep.OK {
			fmt.Fprintln(os.Stderr, "microbox: serve: health: runs work again")
		} else {
			fmt.Fprintf(os.Stderr, "microbox: serve: health: %s\n", rep.Error(true))
		}
	}
	c.last, c.inturn = rep, nil
	close(done)
}

// check makes doctor's essential checks, the run group's, and, if they
// pass, a real run.
func (c *Checker) check(ctx context.Context) *Report {
	o := c.cfg.Options
	rep := &Report{}
	essentials, err := doctor.Essentials(o)
	if err != nil {
		rep.Checks = []doctor.Check{{Name: "options", Status: doctor.Fail, Detail: field.Message(err, o.FieldNames),
			Fix: c.spell("restart the server with {Options} that runs can have")}}
	} else {
		rep.Checks = essentials.Checks
	}
	if g := c.checkCgroup(); g != nil {
		rep.Checks = append(rep.Checks, *g)
	}
	if rep.Failed() == nil {
		rep.Checks = append(rep.Checks, c.checkRun(ctx))
	}
	rep.OK, rep.Checked = rep.Failed() == nil, time.Now()
	return rep
}

// checkCgroup makes a run group where runs make theirs, with their
// limits, and removes it; nil when runs have no cgroup, or when the
// options are wrong (which check reports).
func (c *Checker) checkCgroup() *doctor.Check {
	opts, err := c.cfg.Options.Cgroup()
	if err != nil || opts == nil {
		return nil
	}
	g, err := cgroup.New(*opts)
	if err == nil {
		err = g.Remove()
	}
	if err != nil {
		return &doctor.Check{Name: "cgroup.probe", Status: doctor.Fail,
			Detail: "making and removing a run group failed: " + field.Message(err, c.cfg.Options.FieldNames),
			Fix:    c.spell("give the server a cgroup it may write (in a container: a writable cgroup mount of its own), or {CgroupParent} such a group, or restart it with {NoCgroup} to run without memory, CPU and pids limits (docs/deploy.md)")}
	}
	where := "microbox's own group"
	if opts.Parent != "" {
		where = opts.Parent
	}
	return &doctor.Check{Name: "cgroup.probe", Status: doctor.OK, Detail: "made and removed a run group under " + where}
}

// checkRun runs a program that prints a fresh token, in a jail of the
// runs' options.
func (c *Checker) checkRun(ctx context.Context) doctor.Check {
	token := newToken()
	o := c.cfg.Options
	code := fmt.Sprintf("print(%q)", token)
	o.Code, o.File, o.Args, o.Stdin, o.Capture = &code, "", nil, nil, true
	o.Zygote, o.ZygoteFallback, o.Preload = false, false, nil
	o.Language = "" // the probe is Python, whatever the runs' language
	if o.Timeout <= 0 || o.Timeout > runTimeout {
		o.Timeout = runTimeout
	}
	const fix = "microbox doctor, with the server's flags, names the cause and the fix"
	s, err := o.Spec()
	if err != nil {
		return doctor.Check{Name: "run", Status: doctor.Fail, Detail: field.Message(err, o.FieldNames), Fix: fix}
	}
	start := time.Now()
	res := c.cfg.Run(ctx, s)
	if res.Status != result.StatusOK || strings.TrimSpace(res.Stdout) != token {
		return doctor.Check{Name: "run", Status: doctor.Fail, Detail: fmt.Sprintf("a run that prints a token: %s (stdout %q)", res.Describe(), result.LastLine(res.Stdout)), Fix: fix}
	}
	return doctor.Check{Name: "run", Status: doctor.OK, Detail: fmt.Sprintf("a jail printed its token in %s (cgroup %s, seccomp %s)",
		time.Since(start).Round(time.Millisecond), res.Cgroup, res.Seccomp)}
}

// spell formats a detail or fix whose {Field} markers name the options'
// fields as the server spells them.
func (c *Checker) spell(format string, args ...any) string {
	return field.Sprintf(c.cfg.Options.FieldNames, format, args...)
}

// newToken is 16 random hex digits.
func newToken() string {
	b := make([]byte, 8)
	rand.Read(b)
	return hex.EncodeToString(b)
}
