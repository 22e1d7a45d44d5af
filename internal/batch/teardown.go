package batch

import (
	"context"
	"sync"

	"github.com/microbox/microbox/nsjail"
	"github.com/microbox/microbox/result"
)

// A run's teardown (its PID 1 reaped, its cgroup removed) comes after its
// result is complete. A worker starts its next run while the teardown goes
// on, and passes the item on once the teardown has ended, with its cleanup
// error as nsjail.Settle adds it: a pinned worker's CPU is not idle while a
// run's namespaces and cgroup go, and no item is out before its run is
// gone.
type teardowns struct {
	slots chan struct{} // teardowns in flight; a run waits while they are full
	wg    sync.WaitGroup
	// passed is closed once the worker's latest item is passed on: items
	// leave in the order their runs ended (a worker's results, with
	// --order completed, in its tasks' order), whichever teardown ends
	// first.
	passed chan struct{}
}

// teardownsInFlight is how many of a worker's runs may still be going
// while its next one starts.
const teardownsInFlight = 2

func newTeardowns() *teardowns {
	return &teardowns{slots: make(chan struct{}, teardownsInFlight)}
}

// deferred is where a worker's runner leaves a run's teardown instead of
// carrying it out (withDeferred, settleLater).
type deferred struct {
	teardown nsjail.Teardown
}

type deferredKey struct{}

// withDeferred is ctx, in which runs leave their teardown in d.
func withDeferred(ctx context.Context, d *deferred) context.Context {
	return context.WithValue(ctx, deferredKey{}, d)
}

// settleLater leaves teardown in ctx's deferred, if it has one, and
// returns res as it is; without one it settles the run now. A run tried
// again (nsjail.StartRetried) tears its earlier attempt down first.
func settleLater(ctx context.Context, res *result.Result, teardown nsjail.Teardown) *result.Result {
	d, ok := ctx.Value(deferredKey{}).(*deferred)
	if !ok {
		return nsjail.Settle(res, teardown)
	}
	if d.teardown != nil {
		d.teardown()
	}
	d.teardown = teardown
	return res
}

// after carries out d's teardown, if the run left one, beside the
// worker's next run, then adds its error to res and calls pass once the
// worker's earlier items have passed; it waits first while
// teardownsInFlight are going. Only the worker calls it.
func (t *teardowns) after(d *deferred, res func() *result.Result, pass func()) {
	prev, mine := t.passed, make(chan struct{})
	t.passed = mine
	inOrder := func() {
		if prev != nil {
			<-prev
		}
		pass()
		close(mine)
	}
	if d.teardown == nil {
		inOrder()
		return
	}
	t.slots <- struct{}{}
	t.wg.Go(func() {
		defer func() { <-t.slots }()
		if r := res(); r != nil {
			nsjail.Settle(r, d.teardown)
		} else {
			d.teardown()
		}
		inOrder()
	})
}

// wait waits for every teardown in flight, and its item's pass.
func (t *teardowns) wait() { t.wg.Wait() }
