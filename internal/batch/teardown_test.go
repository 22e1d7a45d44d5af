package batch

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/microbox/microbox/result"
)

// A worker's next run starts while its last run's teardown goes on; the
// last run's item is passed on only once that teardown has ended, with
// its cleanup error, as a run settled at once has it.
func TestTeardownBesideNextRun(t *testing.T) {
	tds := newTeardowns()
	release := make(chan struct{})
	res := &result.Result{Status: result.StatusOK}
	d := &deferred{}
	got := settleLater(withDeferred(context.Background(), d), res, func() error {
		<-release
		return errors.New("remove cgroup x: device or resource busy")
	})
	if got != res || res.Error != nil {
		t.Fatalf("settleLater changed the result before its teardown: %+v", got)
	}
	passed, next := make(chan struct{}), make(chan struct{})
	go func() {
		tds.after(d, func() *result.Result { return res }, func() { close(passed) })
		close(next) // the worker goes on to its next run
	}()
	select {
	case <-next:
	case <-time.After(20 * time.Second): // a deadlock guard, not a timing
		t.Fatal("the worker waited for its last run's teardown before its next run")
	}
	select {
	case <-passed:
		t.Fatal("the item was passed on before its run's teardown ended")
	default:
	}
	close(release)
	tds.wait()
	select {
	case <-passed:
	default:
		t.Fatal("wait returned before the item was passed on")
	}
	if res.Error == nil || *res.Error != "cleanup: remove cgroup x: device or resource busy" {
		t.Fatalf("the cleanup error is not the result's: %v", res.Error)
	}
}

// A run tried again tears its earlier attempt down first; a run without
// a worker's deferral is settled at once.
func TestTeardownRetriedAndUndeferred(t *testing.T) {
	d := &deferred{}
	ctx := withDeferred(context.Background(), d)
	var order []string
	settleLater(ctx, &result.Result{}, func() error { order = append(order, "first"); return nil })
	settleLater(ctx, &result.Result{}, func() error { order = append(order, "second"); return nil })
	if len(order) != 1 || order[0] != "first" {
		t.Fatalf("after a retry, torn down %v; want the first attempt only", order)
	}
	res := settleLater(context.Background(), &result.Result{Status: result.StatusOK}, func() error { return errors.New("gone wrong") })
	if res.Error == nil || *res.Error != "cleanup: gone wrong" {
		t.Fatalf("a run outside a worker was not settled at once: %v", res.Error)
	}
}
