package server

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"sync/atomic"

	"github.com/microbox/microbox/cgroup"
	"github.com/microbox/microbox/field"
	"github.com/microbox/microbox/internal/zygote"
	"github.com/microbox/microbox/nsjail"
	"github.com/microbox/microbox/result"
)

// A Runner runs a long-lived server's specs, whatever front end received
// them: in jails one spawner starts, some of them ahead of their runs
// (readyjails.go), or forked from zygotes' templates (internal/zygote);
// answering before each jail is torn down, and collecting the groups of
// killed runs at most once a minute (stalegroups.go). Each request's runs
// are a Session.
type Runner struct {
	spawner  *nsjail.Spawner
	jails    *readyJails
	zygotes  *zygote.TemplatePool // for runs that ask for one (nsjail.Spec.Zygote)
	run      zygote.RunFunc
	stale    staleGroups
	observer Observer
	// names spell the fields in the log's messages as the last run's
	// caller spells them (Spec.FieldNames: a flag, or "the server's
	// --flag"): the operator reads --no-cgroup, not the Go field NoCgroup.
	names atomic.Pointer[func(field string) string]
}

// An Observer hears of a runner's verdicts and collections, for a
// server's metrics; its methods must be quick and safe for concurrent use.
type Observer interface {
	// Verdict is the result a caller got from a run of the runner.
	Verdict(r *result.Result)
	// StaleGroupsCollected counts the groups of killed runs removed.
	StaleGroupsCollected(n int)
}

// Observe sets the runner's observer; call it before the first session.
func (r *Runner) Observe(o Observer) { r.observer = o }

// Stats are what a runner holds now.
type Stats struct {
	// ReadyJails are the jails started ahead and waiting for a run.
	ReadyJails int
	// Zygotes are the zygotes' templates and their runs so far.
	Zygotes zygote.Stats
}

// Stats reports the runner's state.
func (r *Runner) Stats() Stats {
	return Stats{ReadyJails: r.jails.readyCount(), Zygotes: r.zygotes.Stats()}
}

// NewRunner starts the jail spawner, and readyJails, which keeps warm jails
// started ahead of their runs (0: each run's jail starts when it comes).
// Call it from a goroutine no one locks to its thread: the jails'
// parent-death signal follows the thread that started the spawner.
//
// It also gives Go a quarter of the CPUs, unless $GOMAXPROCS says
// otherwise: the server's own work is a small part of a run's CPU time
// (BENCHMARKS.md), and fewer of Go's processors mean fewer threads woken
// and less of the runtime's polling per run (measured on 2 CPUs: 12% less
// of the server's CPU time per run with one).
func NewRunner(warm int) (*Runner, error) {
	if warm < 0 {
		return nil, field.Errorf("Warm", "{Warm} %d: give 0 or more jails", warm)
	}
	if os.Getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(max(1, runtime.GOMAXPROCS(0)/4))
	}
	sp, err := nsjail.NewSpawner()
	if err != nil {
		return nil, err
	}
	r := &Runner{spawner: sp}
	r.jails = newReadyJails(warm, sp, r.logger("serve"))
	// A child forked ahead for each template: a run finds its program
	// sandboxed and waiting.
	r.zygotes = zygote.New(sp, zygote.Config{Ahead: 1, Log: r.logger("zygote")})
	r.run = zygote.Dispatch(r.zygotes, r.jails.run)
	return r, nil
}

// logger writes lines of the server's log, as from part, with the fields
// of errors among their arguments spelled as the last run's caller
// spells them (Runner.names).
func (r *Runner) logger(part string) func(format string, args ...any) {
	return func(format string, args ...any) {
		var names func(string) string
		if n := r.names.Load(); n != nil {
			names = *n
		}
		fmt.Fprintf(os.Stderr, "microbox: %s: %s\n", part, field.Sprintf(names, format, args...))
	}
}

// Close ends the ready jails and the zygotes' templates, and waits for
// those being started or closed, then ends the spawner. Call it once every session has ended.
func (r *Runner) Close() error {
	r.jails.close()
	r.zygotes.Close()
	return r.spawner.Close()
}

// Session begins one request's runs; client names whom they are for in
// the server's log.
func (r *Runner) Session(client string) *Session {
	return &Session{runner: r, client: client}
}

// A Session is one request's runs. Its verdicts come before the jails are
// torn down: the kernel's teardown of the namespaces is no part of the
// caller's wait, and End finishes it once the caller has its answer.
type Session struct {
	runner    *Runner
	client    string
	teardowns []nsjail.Teardown
}

// Run runs s in a ready jail, or in a fresh one when none fits, or forked
// from a zygote's template (zygote.Dispatch), and returns its verdict
// (never nil) as soon as the program has ended. A start that fails for
// want of descriptors is tried again (nsjail.StartRetried); if it never
// starts, the result says so (Unavailable), and the front end answers
// "busy" (HTTP 503).
func (s *Session) Run(ctx context.Context, spec *nsjail.Spec) *result.Result {
	if names := spec.FieldNames; names != nil {
		s.runner.names.Store(&names)
	}
	res, teardown := nsjail.StartRetried(ctx, func() (*result.Result, nsjail.Teardown) { return s.runner.run(ctx, spec) })
	s.teardowns = append(s.teardowns, teardown)
	return res
}

// Probe runs s in a fresh jail of the runner's spawner, never in one
// started ahead nor forked from a zygote, and tears it down before it
// returns: a health check's run (internal/health), which must neither take
// a jail a caller's run would use nor change the shape of those started
// ahead. Its verdict reaches no observer.
func (r *Runner) Probe(ctx context.Context, s *nsjail.Spec) *result.Result {
	return r.spawner.Run(ctx, s)
}

// CollectStaleGroups removes the groups of killed runs under the cgroup
// parent (cgroup.GC), if it is time: a server does it at most once a
// minute per parent, not with every run. It never touches a live run's
// group, and may go on while the session's run does.
func (s *Session) CollectStaleGroups(parent string) {
	if !s.runner.stale.due(parent) {
		return
	}
	removed, _ := cgroup.GC(parent)
	if s.runner.observer != nil && len(removed) > 0 {
		s.runner.observer.StaleGroupsCollected(len(removed))
	}
}

// Verdict tells the runner's observer the result the session's caller
// got: the run's, with what the layers above it made of it (a program
// the risk check refused never reaches Run).
func (s *Session) Verdict(r *result.Result) {
	if s.runner.observer != nil && r != nil {
		s.runner.observer.Verdict(r)
	}
}

// End finishes the session once its caller has the answer: the runs'
// teardowns, then the start of the ready jails it lacks for the next runs.
func (s *Session) End() {
	s.tearDown()
	s.runner.jails.refill()
}

// tearDown finishes the teardowns of the session's runs; the caller has
// its answer, so failures go to the server's log.
func (s *Session) tearDown() {
	for _, teardown := range s.teardowns {
		if err := teardown(); err != nil {
			fmt.Fprintf(os.Stderr, "microbox: serve: cleanup after a run of %s: %v\n", s.client, err)
		}
	}
	s.teardowns = nil
}
