package service

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/microbox/microbox/internal/policy"
	"github.com/microbox/microbox/result"
)

// Slots go to tickets in the order they came; past the queue, ErrBusy; a
// ticket that gives up leaves the queue.
func TestAdmission(t *testing.T) {
	a := newRunSlots(1, 2)
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
		ids = append(ids, finish(tb, 0).id)
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

// finish ends a run in tb with stdout of n bytes.
func finish(tb *table, n int) *entry {
	e := tb.add(func(error) {})
	e.finish(&policy.Result{Result: &result.Result{Stdout: strings.Repeat("x", n)}})
	tb.finished(e)
	return e
}

// Kept results are bounded in bytes too, the oldest going first; one
// larger than the bound alone is kept alone.
func TestTableBytes(t *testing.T) {
	tb := newTable(time.Hour, 100, 3<<20)
	var es []*entry
	for range 4 {
		es = append(es, finish(tb, 1<<20))
	}
	if n, size := tb.count(); n != 2 || size > 3<<20 {
		t.Errorf("%d results of %d bytes kept under 3 MiB", n, size)
	}
	if _, ok := tb.get(es[3].id); !ok {
		t.Error("the newest result is gone")
	}
	big := finish(tb, 4<<20)
	if n, _ := tb.count(); n != 1 {
		t.Errorf("%d results kept beside one over the whole bound", n)
	}
	if _, ok := tb.get(big.id); !ok {
		t.Error("a result over the bound alone was not kept")
	}
}

// Results expire on a timer, with no get to notice; none stays reachable
// from the table.
func TestTableExpiresOnItsOwn(t *testing.T) {
	tb := newTable(20*time.Millisecond, 100, 1<<30)
	for range 3 {
		finish(tb, 10)
	}
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		tb.mu.Lock()
		n, held := len(tb.runs), cap(tb.done)
		tb.mu.Unlock()
		if n == 0 && held == 0 {
			return
		}
	}
	t.Fatal("expired results stayed in the table")
}
