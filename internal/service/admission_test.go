package service

import (
	"context"
	"errors"
	"testing"
	"time"
)

// Slots go to tickets in the order they came; past the queue, ErrBusy; a
// ticket that gives up leaves the queue.
func TestAdmission(t *testing.T) {
	a := newAdmission(1, 2)
	first, err := a.admit(false)
	if err != nil {
		t.Fatal(err)
	}
	second, _ := a.admit(false)
	third, _ := a.admit(false)
	if _, err := a.admit(false); !errors.Is(err, ErrBusy) {
		t.Fatalf("a full queue admitted: %v", err)
	}
	if running, queued := a.counts(1); running != 1 || queued != 2 {
		t.Fatalf("running %d queued %d", running, queued)
	}
	forced, err := a.admit(true)
	if err != nil {
		t.Fatalf("a batch's worker was refused: %v", err)
	}
	forced.release() // leaves the queue without a slot
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(errors.New("caller gone"))
	if err := second.wait(ctx); err == nil || err.Error() != "caller gone" {
		t.Fatalf("wait after the caller left: %v", err)
	}
	first.release()
	if err := third.wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	if running, queued := a.counts(1); running != 1 || queued != 0 {
		t.Fatalf("after hand-over: running %d queued %d", running, queued)
	}
	third.release()
	third.release() // twice is once
	if running, _ := a.counts(1); running != 0 {
		t.Fatalf("a released slot is still taken: %d", running)
	}
}

// Finished runs are kept for keep, and at most maxKept of them.
func TestTableExpiry(t *testing.T) {
	tb := newTable(time.Hour, 2, 1<<30)
	var ids []string
	for range 3 {
		e := tb.add(func(error) {})
		e.finish(nil)
		tb.finished(e)
		ids = append(ids, e.id)
	}
	if _, ok := tb.get(ids[0]); ok {
		t.Error("the oldest of three results was kept past maxKept 2")
	}
	if _, ok := tb.get(ids[2]); !ok || len(ids[2]) != 32 {
		t.Errorf("the newest result is gone, or its id %q is not 128 bits", ids[2])
	}
	tb.keep = 0
	if _, ok := tb.get(ids[2]); ok {
		t.Error("an expired result was kept")
	}
}
