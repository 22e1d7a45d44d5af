package server

// The server's jails, all started by one nsjail.Spawner, and those started
// ahead of their runs (Spawner.Start): a run that finds one ready skips the
// cgroup, the namespaces' creation and the mounts, and is left with its
// files and the program's start. Each jail runs one program, as a cold one
// would; readyJails only moves the set-up off the caller's clock.

import (
	"context"
	"sync"

	"github.com/microbox/microbox/nsjail"
	"github.com/microbox/microbox/result"
)

// readyJails keeps up to size jails ready in the shape (cgroup limits and
// mounts) of the last run asked for: callers send the same options run after
// run, and a run of another shape makes it start over with that one.
type readyJails struct {
	size    int
	spawner *nsjail.Spawner
	log     func(format string, args ...any) // the server's log (Runner.logger)

	mu       sync.Mutex
	shape    nsjail.Shape // what ready jails were started for
	keyed    bool         // shape is set
	gen      int          // bumped when the shape changes
	ready    []*nsjail.Jail
	starting int
	closed   bool
	failing  bool // the last start failed: wait for the next run to retry

	// background counts jails being started or closed off the runs' path:
	// close waits for them, or a server stopping while one starts would
	// leave its cgroup behind.
	background sync.WaitGroup
}

func newReadyJails(size int, sp *nsjail.Spawner, log func(format string, args ...any)) *readyJails {
	return &readyJails{size: size, spawner: sp, log: log}
}

// run runs s in a ready jail, or in a fresh one when none fits; the
// caller must call teardown (see nsjail.RunEarly).
func (p *readyJails) run(ctx context.Context, s *nsjail.Spec) (res *result.Result, teardown nsjail.Teardown) {
	if p.size > 0 {
		// An error here is the cold run's to report.
		if shape, err := nsjail.ShapeOf(s); err == nil {
			if j := p.take(shape); j != nil {
				return j.Run(ctx, s, shape)
			}
		}
	}
	return p.spawner.RunEarly(ctx, s)
}

// take returns a ready jail of the shape, or nil; refill, once the run is
// over, starts jails for the next runs.
func (p *readyJails) take(shape nsjail.Shape) *nsjail.Jail {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	if !p.keyed || !shape.Equal(p.shape) {
		for _, j := range p.ready {
			p.closeLater(j)
		}
		p.ready = nil
		p.shape, p.keyed, p.failing = shape, true, false
		p.gen++
	}
	p.failing = false
	for n := len(p.ready); n > 0; n-- {
		j := p.ready[n-1]
		p.ready = p.ready[:n-1]
		if j.Alive() {
			return j
		}
		p.closeLater(j)
	}
	return nil
}

// readyCount is how many jails wait for a run.
func (p *readyJails) readyCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.ready)
}

// closeLater closes a jail in the background; mu is held.
func (p *readyJails) closeLater(j *nsjail.Jail) {
	p.background.Add(1)
	go func() {
		defer p.background.Done()
		j.Close()
	}()
}

// refill starts the jails it lacks. Session.End calls it when a run
// has ended and its client has the result: started during the run, they
// would compete with the program for the CPUs (measured: it cost the run
// most of what the ready jail saved it).
func (p *readyJails) refill() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.closed && p.keyed {
		p.fill()
	}
}

// fill starts jails until size are ready or on their way; mu is held.
func (p *readyJails) fill() {
	for !p.closed && !p.failing && len(p.ready)+p.starting < p.size {
		p.starting++
		p.background.Add(1)
		go func(shape nsjail.Shape, gen int) {
			defer p.background.Done()
			p.start(shape, gen)
		}(p.shape, p.gen)
	}
}

func (p *readyJails) start(shape nsjail.Shape, gen int) {
	j, err := p.spawner.Start(shape)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.starting--
	switch {
	case err != nil:
		// Runs go on cold, and report the same error if it lasts.
		p.log("start a jail ahead of its run: %v", err)
		p.failing = true
	case p.closed || gen != p.gen:
		p.closeLater(j)
		p.fill()
	default:
		p.ready = append(p.ready, j)
	}
}

// close ends the ready jails, and waits for those still starting, which
// end as they come, and for those closing. The spawner stays for them: it
// ends with the server.
func (p *readyJails) close() {
	p.mu.Lock()
	p.closed = true
	ready := p.ready
	p.ready = nil
	p.mu.Unlock()
	for _, j := range ready {
		j.Close()
	}
	p.background.Wait()
}
