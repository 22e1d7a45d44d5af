package batch

import (
	"context"
	"encoding/json"
	"runtime"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/microbox/microbox/cgroup"
	"github.com/microbox/microbox/field"
	"github.com/microbox/microbox/internal/policy"
	"github.com/microbox/microbox/internal/policy/redact"
	"github.com/microbox/microbox/internal/policy/risk"
	"github.com/microbox/microbox/internal/zygote"
	"github.com/microbox/microbox/nsjail"
	"github.com/microbox/microbox/result"
)

// Item is one task on its way through a pool.
type Item struct {
	Seq  int    // position among the tasks, from 0: the output order
	Line int    // line number in the input, copied into the result
	Raw  []byte // the task's line, decoded by the worker; or
	Task *Task  // the task already decoded

	Result  *Result // set by the worker
	Skipped bool    // the pool was stopped before it started
}

// size is about the bytes a finished item holds: its output, which the
// output limit caps, and the rest of its result.
func (it *Item) size() int64 {
	if it.Result == nil || it.Result.Result == nil {
		return 0
	}
	n := int64(len(it.Result.Stdout)+len(it.Result.Stderr)+512) + it.Result.FetchedBytes()
	if c := it.Result.Compile; c != nil {
		n += int64(len(c.Stderr)) // the compiler's messages, up to the compile output limit
	}
	return n
}

// Label is what a progress bar counts the item as: its status, or "" if
// it never ran.
func (it *Item) Label() string {
	if it.Skipped {
		return ""
	}
	return string(it.Result.Status)
}

// Result is one line of batch output: exec's JSON result, after the
// task's id and input line, with what the policy layers add after it (as
// policy.Result has them).
type Result struct {
	ID   json.RawMessage `json:"id"`
	Line int             `json:"line,omitempty"`
	*result.Result
	Redactions []redact.Redaction `json:"redactions,omitempty"`
	Risk       *risk.Report       `json:"risk,omitempty"`
}

// PoolOptions size a pool.
type PoolOptions struct {
	// Jobs is how many runs go at once.
	Jobs int
	// Pin gives each worker's runs a CPU of their own, when Jobs is at
	// most the CPUs this process may use.
	Pin bool
	// Layers are the policy layers' settings every task starts from
	// (the cache directory of the module policy's bytecode, the audit
	// log).
	Layers policy.Options
	// Run, if set, runs every task's spec (a server's jails) instead of
	// a spawner per worker; Pin is then ignored.
	Run policy.Runner
	// Remote tasks came over the network: they may not name host files
	// (Task.CheckRemote).
	Remote bool
	// Limits are the ceilings of what a task may ask for (Prepare).
	Limits Limits
}

// WorkerPool runs items on a fixed number of workers.
type WorkerPool struct {
	base   nsjail.Options // prepared
	layers policy.Options
	run    policy.Runner // nil: a spawner per worker
	remote bool
	limits Limits
	jobs   int
	cpus   []int // with Pin, worker i's runs go to cpus[i]
}

// NewWorkerPool prepares a pool whose tasks start from base, which the caller
// has prepared. Runs whose microbox died earlier leave cgroups behind,
// which are removed once here, not before every run.
func NewWorkerPool(base nsjail.Options, o PoolOptions) (*WorkerPool, error) {
	p := &WorkerPool{base: base, layers: o.Layers, run: o.Run, remote: o.Remote, limits: o.Limits, jobs: o.Jobs}
	if o.Run != nil {
		return p, nil // the runner's owner collects stale groups
	}
	if !base.NoCgroup {
		cgroup.GC(base.CgroupParent)
	}
	if o.Pin {
		cpus, err := allowedCPUs()
		if err != nil {
			return nil, err
		}
		// With more workers than CPUs, some would share one: the kernel
		// balances that better than a fixed assignment.
		if o.Jobs <= len(cpus) {
			p.cpus = cpus
		}
	}
	return p, nil
}

// allowedCPUs lists the CPUs this process may run on.
func allowedCPUs() ([]int, error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return nil, field.Errorf("Pin", "{Pin}: read the allowed CPUs: %v", err)
	}
	var cpus []int
	for cpu := range len(set) * 64 {
		if set.IsSet(cpu) {
			cpus = append(cpus, cpu)
		}
	}
	return cpus, nil
}

// Run runs the items from todo and sends each, with its result, to the
// channel it returns, which is closed once todo is closed and drained.
// Once ctx is done, runs in progress are killed and the items not yet
// started are sent back skipped.
//
// Fair shares: each run's cgroup caps it at its CPUs, and with Pin each
// worker's runs have a CPU of their own. The cap alone bounds a run's
// average, not its bursts: a run of many processes can spend its quota on
// every CPU at once early in each CFS period, slowing its neighbours by a
// quarter or more (BENCHMARKS.md); pinned, it cannot leave its CPU.
func (p *WorkerPool) Run(ctx context.Context, todo <-chan *Item) <-chan *Item {
	done := make(chan *Item, p.jobs)
	var wg sync.WaitGroup
	for w := range p.jobs {
		wg.Go(func() {
			run := p.run
			if run == nil {
				unpin := func() {}
				if p.cpus != nil {
					unpin = pinWorker(p.cpus[w])
				}
				// A spawner per worker, started from its thread: a jail
				// then costs a clone rather than an exec of microbox. If
				// it cannot start, each run tries on its own and reports
				// why.
				run = nsjail.Run
				sp, err := newSpawner(ctx)
				unpin()
				if err == nil {
					defer sp.Close()
					// Templates start only for tasks that ask for a zygote
					// (the base's options, or the task's own keys). Each
					// forks the worker's next child once a run ends, while
					// the worker writes its result and takes its next task:
					// the chain of hand-offs a fork is (template, PID 1,
					// program) otherwise left the CPU idle between runs
					// (BENCHMARKS.md, forked runs).
					zygotes := zygote.New(sp, zygote.Config{Templates: 2, Ahead: 1, FieldNames: p.base.FieldNames})
					defer zygotes.Close()
					run = forkOrRun(zygotes, sp)
				}
				run = retried(run)
			}
			tds := newTeardowns() // its runs' teardowns, beside its next runs (teardown.go)
			defer tds.wait()
			for it := range todo {
				d := &deferred{}
				p.runItem(withDeferred(ctx, d), it, run)
				tds.after(d, func() *result.Result { return runResult(it) }, func() { done <- it })
			}
		})
	}
	go func() {
		wg.Wait()
		close(done)
	}()
	return done
}

// forkOrRun runs a spec as zygote.Dispatch says: one that asks for a
// zygote in a child of the worker's own templates (its CPU's, with Pin),
// each forked when its run comes; any other with the spawner.
func forkOrRun(zygotes *zygote.TemplatePool, sp *nsjail.Spawner) policy.Runner {
	run := zygote.Dispatch(zygotes, sp.RunEarly)
	return func(ctx context.Context, s *nsjail.Spec) *result.Result {
		res, teardown := run(ctx, s)
		return settleLater(ctx, res, teardown)
	}
}

// newSpawner starts a worker's spawner, trying again for a while if the
// process is out of descriptors (the other workers' runs hold them).
func newSpawner(ctx context.Context) (sp *nsjail.Spawner, err error) {
	nsjail.RetryWhile(ctx, func() bool {
		sp, err = nsjail.NewSpawner()
		return nsjail.NoDescriptors(err)
	})
	return sp, err
}

// retried is run, a start that fails for want of descriptors tried again
// while the other workers' runs end (nsjail.StartRetried).
func retried(run policy.Runner) policy.Runner {
	return func(ctx context.Context, s *nsjail.Spec) *result.Result {
		res, _ := nsjail.StartRetried(ctx, func() (*result.Result, nsjail.Teardown) {
			return run(ctx, s), nsjail.NoTeardown // run has settled it
		})
		return res
	}
}

// pinWorker ties the calling goroutine to its OS thread and that thread to
// cpu, for the worker's spawner to be started from: the spawner, and the
// jails it clones, with their programs, inherit the affinity. It is a
// placement, not a boundary: a program may widen its own affinity
// (cpu.max still caps what it uses). unpin gives the thread back its
// affinity and the runtime the thread: a goroutine locked to its thread
// makes each of its wake-ups a hand-off between two threads, several a
// run. A thread whose affinity could not be given back stays locked, and
// ends with the worker instead of returning pinned to the runtime's pool.
func pinWorker(cpu int) (unpin func()) {
	runtime.LockOSThread()
	var was, set unix.CPUSet
	known := unix.SchedGetaffinity(0, &was) == nil
	set.Set(cpu)
	unix.SchedSetaffinity(0, &set)
	return func() {
		if known && unix.SchedSetaffinity(0, &was) == nil {
			runtime.UnlockOSThread()
		}
	}
}

// runResult is the result of it's run, nil if it has none.
func runResult(it *Item) *result.Result {
	if it.Result == nil {
		return nil
	}
	return it.Result.Result
}

// runItem decodes and runs one task with run; a task that cannot run
// gets a sandbox_error result saying why.
func (p *WorkerPool) runItem(ctx context.Context, it *Item, run policy.Runner) {
	if ctx.Err() != nil {
		it.Skipped = true
		return
	}
	t, id := it.Task, json.RawMessage(nil)
	var err error
	if t == nil {
		t, id, err = decodeTask(it.Raw)
	} else {
		id = t.ID
	}
	it.Result = &Result{ID: id, Line: it.Line}
	var r *Run
	if err == nil && p.remote {
		err = t.CheckRemote()
	}
	if err == nil {
		r, err = Prepare(ctx, p.base, p.layers, p.limits, t)
	}
	if err != nil {
		it.Result.Result = result.SandboxError(err.Error())
	} else {
		res := r.Execute(ctx, Host{Run: run})
		it.Result.Result, it.Result.Redactions, it.Result.Risk = res.Result, res.Redactions, res.Risk
	}
	if it.Result.Seccomp == "" { // a spec refused before the jail was made
		it.Result.Seccomp = p.base.SeccompMode()
	}
}
