// Package service runs tasks for microbox's network front ends, the HTTP
// API (internal/httpapi) and the MCP tool (internal/mcptool): a task is
// a batch task (internal/batch's one schema, built into runs there as for
// `microbox batch`), run through the policy layers in a server's jails
// (internal/server's Runner). The service adds what a network caller
// needs: admission to its run slots (runslots.go: a bounded number of
// runs at once and a bounded queue, ErrBusy past it), runs in the
// background with ids, status and kill, and batches that stream.
package service

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/microbox/microbox/internal/batch"
	"github.com/microbox/microbox/internal/policy"
	"github.com/microbox/microbox/internal/progress"
	"github.com/microbox/microbox/internal/server"
	"github.com/microbox/microbox/nsjail"
	"github.com/microbox/microbox/result"
)

// Config sizes a service.
type Config struct {
	// Base is every task's starting point, prepared (its FieldNames
	// spell the fields a task cannot set); Layers the policy layers'.
	Base   nsjail.Options
	Layers policy.Options
	// Limits are the ceilings of what a task may ask for.
	Limits batch.Limits
	// Concurrency is how many runs go at once; Queue how many more may
	// wait for a slot.
	Concurrency, Queue int
	// Keep is how long the result of a background run is kept after it
	// ends, MaxKept how many such results at most, and KeptBytes how
	// many bytes of them (resultSize), the oldest going first.
	Keep      time.Duration
	MaxKept   int
	KeptBytes int64
}

// A Service runs tasks until its context ends.
type Service struct {
	ctx    context.Context // ends when the server stops: every run ends
	runner *server.Runner
	cfg    Config
	slots  *runSlots
	runs   *table
	active sync.WaitGroup // runs and batches under way

	mu      sync.Mutex
	batches int // batches streaming, at most cfg.Queue
}

// New is a service of runner's until ctx ends; its cause is what each
// run still under way then reports.
func New(ctx context.Context, runner *server.Runner, cfg Config) (*Service, error) {
	if cfg.Concurrency < 1 || cfg.Queue < 0 {
		return nil, fmt.Errorf("service: %d runs at once and a queue of %d: give at least 1 and 0", cfg.Concurrency, cfg.Queue)
	}
	return &Service{ctx: ctx, runner: runner, cfg: cfg, slots: newRunSlots(cfg.Concurrency, cfg.Queue),
		runs: newTable(cfg.Keep, cfg.MaxKept, cfg.KeptBytes)}, nil
}

// Wait returns once every run and batch has ended: after the service's
// context ends, they end at once.
func (s *Service) Wait() { s.active.Wait() }

// Admit takes a place for a task's run (a slot, or a place in the queue;
// ErrBusy when the queue is full), then checks the task and builds its
// run. The place comes first: building a run can cost (redact patterns
// compile), and a caller refused for a full server must cost nothing; the
// runs being built are bounded as the runs are. On an error the place is
// given back; the error is the task's fault when batch.IsBadInput says
// so, else microbox's.
func (s *Service) Admit(ctx context.Context, t *batch.Task) (*Ticket, *batch.Run, error) {
	if err := t.CheckRemote(); err != nil {
		return nil, nil, err
	}
	tk, err := s.slots.admit(false)
	if err != nil {
		return nil, nil, err
	}
	r, err := batch.Prepare(ctx, s.cfg.Base, s.cfg.Layers, s.cfg.Limits, t)
	if err != nil {
		tk.release()
		return nil, nil, err
	}
	return tk, r, nil
}

// NotRun is the result of a task that could not be built for a reason of
// microbox's (not the task's): a sandbox_error, as exec gives one.
func (s *Service) NotRun(err error) *policy.Result {
	return &policy.Result{Result: result.NotRun(result.StatusSandboxError, err.Error(), s.cfg.Base.SeccompMode())}
}

// Run runs r on the ticket's slot (after its wait in the queue), ending
// it early when ctx or the service's context ends (with their cause in
// the verdict), and calls answer with the result. The slot is given back
// first: it is the run's, not its answer's, so a caller that does not
// read its answer holds up no other run, and one that sends its next run
// as soon as it has an answer finds the slot free. The jail's teardown
// goes on beside answer, off the caller's clock. client names the caller
// in the server's log.
func (s *Service) Run(ctx context.Context, tk *Ticket, r *batch.Run, client string, answer func(*policy.Result)) {
	s.active.Add(1)
	defer s.active.Done()
	ctx, done := s.bound(ctx)
	defer done()
	s.run(ctx, tk, r, client, nil, answer)
}

// bound is ctx, ended also when the service's context ends, with its
// cause; done lets it go.
func (s *Service) bound(ctx context.Context) (_ context.Context, done func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(s.ctx, func() { cancel(context.Cause(s.ctx)) })
	return ctx, func() {
		stop()
		cancel(nil)
	}
}

// run waits for the ticket's slot, then runs r; started, if set, hears
// when the program's run begins.
func (s *Service) run(ctx context.Context, tk *Ticket, r *batch.Run, client string, started func(), answer func(*policy.Result)) {
	if err := tk.wait(ctx); err != nil { // wait gave the place back
		res := &policy.Result{Result: result.NotRun(result.StatusSandboxError,
			"not started: "+err.Error(), r.Spec.SeccompMode)}
		s.runner.Session(client).Verdict(res.Result)
		answer(res)
		return
	}
	if started != nil {
		started()
	}
	session := s.runner.Session(client)
	res := r.Execute(ctx, batch.Host{Run: session.Run, CollectStaleGroups: session.CollectStaleGroups, Verdict: session.Verdict})
	tk.release() // the run has ended: its slot is the next run's
	s.tearDown(session)
	answer(res)
}

// tearDown ends a session in the background (the jail's teardown, jails
// started for the next runs), beside the answer; Service.Wait waits for
// it.
func (s *Service) tearDown(session *server.Session) {
	s.active.Add(1)
	go func() {
		defer s.active.Done()
		session.End()
	}()
}

// Start runs r in the background and returns its id at once; Status
// follows it, Kill ends it. It ends with the service.
func (s *Service) Start(tk *Ticket, r *batch.Run, client string) string {
	ctx, cancel := context.WithCancelCause(s.ctx)
	e := s.runs.add(cancel)
	s.active.Add(1)
	go func() {
		defer s.active.Done()
		defer cancel(nil)
		s.run(ctx, tk, r, client, func() { e.setState(StateRunning) }, func(res *policy.Result) {
			e.finish(res)
			s.runs.finished(e)
		})
	}()
	return e.id
}

// Status is the background run id's state, and its result once done;
// false if there is no such run (never was, or its result expired).
func (s *Service) Status(id string) (Status, bool) {
	e, ok := s.runs.get(id)
	if !ok {
		return Status{}, false
	}
	return e.status(), true
}

// Kill ends the background run id, with cause as the verdict's reason
// (a run still queued is not started), and returns its final status once
// it has one, or ctx's error. A finished run is left as it was.
func (s *Service) Kill(ctx context.Context, id string, cause error) (Status, bool, error) {
	e, ok := s.runs.get(id)
	if !ok {
		return Status{}, false, nil
	}
	e.cancel(cause)
	select {
	case <-e.done:
		return e.status(), true, nil
	case <-ctx.Done():
		return Status{}, true, ctx.Err()
	}
}

// BatchOptions shape one streamed batch.
type BatchOptions struct {
	Jobs    int  // runs at once, at most the service's concurrency (0: that)
	Ordered bool // results in the tasks' order, else as they finish
	MaxHeld int64
}

// ErrBatchBusy refuses a batch when as many batches as the queue holds
// are streaming already.
var ErrBatchBusy = errors.New("as many batches as the queue holds are streaming")

// Batch runs the tasks of in (JSON lines, the batch contract) and writes
// each result to out as a JSON line, as `microbox batch` does; each run
// takes one of the service's slots, waiting for it in line.
func (s *Service) Batch(ctx context.Context, in io.Reader, out io.Writer, o BatchOptions, client string) error {
	if !s.enterBatch() {
		return ErrBatchBusy
	}
	defer s.leaveBatch()
	s.active.Add(1)
	defer s.active.Done()
	ctx, done := s.bound(ctx)
	defer done()
	jobs := s.cfg.Concurrency
	if o.Jobs > 0 && o.Jobs < jobs {
		jobs = o.Jobs
	}
	pool, err := batch.NewWorkerPool(s.cfg.Base, batch.PoolOptions{Jobs: jobs, Layers: s.cfg.Layers, Remote: true,
		Limits: s.cfg.Limits, Run: s.batchRunner(client)})
	if err != nil {
		return err
	}
	return pool.Stream(ctx, in, out, batch.StreamOptions{Ordered: o.Ordered, MaxPending: 4 * jobs, MaxHeld: o.MaxHeld,
		Progress: progress.New(nil, -1, "runs", nil)}) // counted, not drawn
}

// batchRunner runs a batch's specs on the service's slots.
func (s *Service) batchRunner(client string) policy.Runner {
	return func(ctx context.Context, spec *nsjail.Spec) *result.Result {
		tk, _ := s.slots.admit(true)
		defer tk.release()
		if err := tk.wait(ctx); err != nil {
			return result.NotRun(result.StatusSandboxError, "not started: "+err.Error(), spec.SeccompMode)
		}
		session := s.runner.Session(client)
		defer session.End()
		res := session.Run(ctx, spec)
		session.Verdict(res)
		return res
	}
}

func (s *Service) enterBatch() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.batches >= max(s.cfg.Queue, 1) {
		return false
	}
	s.batches++
	return true
}

func (s *Service) leaveBatch() {
	s.mu.Lock()
	s.batches--
	s.mu.Unlock()
}

// Stats are the service's counts now.
type Stats struct {
	Running, Queued, Batches, Kept int
	KeptBytes                      int64 // the kept results' size (resultSize)
	server.Stats
}

// Stats reports the service's state.
func (s *Service) Stats() Stats {
	running, queued := s.slots.counts(s.cfg.Concurrency)
	s.mu.Lock()
	batches := s.batches
	s.mu.Unlock()
	kept, keptBytes := s.runs.count()
	return Stats{Running: running, Queued: queued, Batches: batches, Kept: kept, KeptBytes: keptBytes, Stats: s.runner.Stats()}
}
