package service

import (
	"context"
	"errors"
	"sync"
)

// ErrBusy refuses a run when every slot is taken and the queue is full:
// the caller is to try again later, not to wait in a backlog without end.
var ErrBusy = errors.New("every run slot is taken and the queue is full")

// runSlots hands out run slots, at most slots at once, to places that
// wait for them in order, at most queue of them.
type runSlots struct {
	mu      sync.Mutex
	free    int
	queue   int
	waiting []*Ticket
}

func newRunSlots(slots, queue int) *runSlots {
	return &runSlots{free: slots, queue: queue}
}

// A Ticket is one run's place: a slot, or a place in the queue until a
// slot is handed to it.
type Ticket struct {
	a       *runSlots
	granted chan struct{} // closed when the ticket holds a slot
	done    bool
}

// admit takes a slot if one is free, else a place in the queue; ErrBusy
// if the queue is full. force queues past the bound: a batch's workers,
// whose number the batch bounds, wait for a slot rather than fail.
func (a *runSlots) admit(force bool) (*Ticket, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	t := &Ticket{a: a, granted: make(chan struct{})}
	switch {
	case a.free > 0:
		a.free--
		close(t.granted)
	case len(a.waiting) < a.queue || force:
		a.waiting = append(a.waiting, t)
	default:
		return nil, ErrBusy
	}
	return t, nil
}

// wait waits until the ticket holds a slot; if ctx ends first, the
// ticket gives up its place and wait returns ctx's cause.
func (t *Ticket) wait(ctx context.Context) error {
	select {
	case <-t.granted:
		return nil
	case <-ctx.Done():
		t.release()
		return context.Cause(ctx)
	}
}

// release gives back the ticket's slot, to the first ticket waiting if
// any, or its place in the queue. It may be called more than once.
func (t *Ticket) release() {
	a := t.a
	a.mu.Lock()
	defer a.mu.Unlock()
	if t.done {
		return
	}
	t.done = true
	select {
	case <-t.granted:
	default: // still queued: leave the queue
		for i, w := range a.waiting {
			if w == t {
				a.waiting = append(a.waiting[:i], a.waiting[i+1:]...)
				return
			}
		}
		return
	}
	if len(a.waiting) > 0 {
		next := a.waiting[0]
		a.waiting = a.waiting[1:]
		close(next.granted)
		return
	}
	a.free++
}

// counts are the slots in use and the tickets waiting.
func (a *runSlots) counts(slots int) (running, queued int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slots - a.free, len(a.waiting)
}
