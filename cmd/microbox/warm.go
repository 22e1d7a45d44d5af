package main

// The server's jails started ahead of their runs (nsjail.Start): a run that
// finds one ready skips the cgroup, the init's start and the namespaces'
// creation (measured: about 4 ms less per run than through a server
// without them), and is left with its mounts and the program's start.
// Each jail runs one program, as a cold one would; the pool only moves
// the set-up off the caller's clock.

import (
	"context"
	"fmt"
	"os"
	"sync"

	"github.com/microbox/microbox/cgroup"
	"github.com/microbox/microbox/nsjail"
)

// warmPool keeps up to size jails ready for the cgroup limits of the last run
// asked for: callers send the same flags run after run, and a run with
// other limits makes the pool start over with those.
type warmPool struct {
	size int

	mu       sync.Mutex
	opts     *cgroup.Options // what ready jails were started for
	keyed    bool            // opts is set (nil opts: runs without a cgroup)
	gen      int             // bumped when opts change
	ready    []*nsjail.Jail
	starting int
	closed   bool
	failing  bool // the last start failed: wait for the next run to retry
}

func newWarmPool(size int) *warmPool { return &warmPool{size: size} }

// run runs s in a ready jail, or in a fresh one when none fits.
func (p *warmPool) run(ctx context.Context, s *nsjail.Spec) *nsjail.Result {
	if j := p.take(s); j != nil {
		return j.Run(ctx, s)
	}
	return nsjail.Run(ctx, s)
}

// take returns a ready jail for s, or nil; refill, once the run is over,
// starts jails for the next runs.
func (p *warmPool) take(s *nsjail.Spec) *nsjail.Jail {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || p.size == 0 {
		return nil
	}
	if !p.keyed || !cgroup.SameOptions(p.opts, s.Cgroup) {
		for _, j := range p.ready {
			go j.Close()
		}
		p.ready = nil
		p.opts, p.keyed, p.failing = copyOptions(s.Cgroup), true, false
		p.gen++
	}
	p.failing = false
	for n := len(p.ready); n > 0; n-- {
		j := p.ready[n-1]
		p.ready = p.ready[:n-1]
		if j.Alive() {
			return j
		}
		go j.Close()
	}
	return nil
}

// refill starts the jails the pool lacks. The server calls it when a run
// has ended and its client has the result: started during the run, they
// would compete with the program for the CPUs (measured: it cost the run
// most of what the ready jail saved it).
func (p *warmPool) refill() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.closed && p.keyed {
		p.fill()
	}
}

// fill starts jails until size are ready or on their way; mu is held.
func (p *warmPool) fill() {
	for !p.failing && len(p.ready)+p.starting < p.size {
		p.starting++
		go p.start(p.opts, p.gen)
	}
}

func (p *warmPool) start(opts *cgroup.Options, gen int) {
	j, err := nsjail.Start(opts)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.starting--
	switch {
	case err != nil:
		// Runs go on cold, and report the same error if it lasts.
		fmt.Fprintf(os.Stderr, "microbox: serve: start a jail ahead of its run: %v\n", err)
		p.failing = true
	case p.closed || gen != p.gen:
		go j.Close()
		p.fill()
	default:
		p.ready = append(p.ready, j)
	}
}

// close ends the ready jails; those still starting end as they come.
func (p *warmPool) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	for _, j := range p.ready {
		j.Close()
	}
	p.ready = nil
}

func copyOptions(o *cgroup.Options) *cgroup.Options {
	if o == nil {
		return nil
	}
	c := *o
	return &c
}
