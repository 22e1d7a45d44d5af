package batch

import (
	"context"
	"sync"
)

// window bounds what an ordered batch keeps ahead of its oldest unwritten
// result: the tasks started or held (at most maxTasks), and the bytes of
// the results held (at most maxBytes, once passed no task starts until the
// oldest is written). Results are capped by the output limit, so memory
// stays within maxBytes plus a result per worker.
type window struct {
	mu       sync.Mutex
	cond     *sync.Cond
	tasks    int
	maxTasks int
	bytes    int64
	maxBytes int64 // 0: no bound
	done     bool
}

func newWindow(ctx context.Context, maxTasks int, maxBytes int64) *window {
	w := &window{maxTasks: maxTasks, maxBytes: maxBytes}
	w.cond = sync.NewCond(&w.mu)
	context.AfterFunc(ctx, func() {
		w.mu.Lock()
		w.done = true
		w.mu.Unlock()
		w.cond.Broadcast()
	})
	return w
}

// enter waits for room for one more task; false once ctx is done.
func (w *window) enter() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for !w.done && (w.tasks >= w.maxTasks || w.maxBytes > 0 && w.bytes > w.maxBytes) {
		w.cond.Wait()
	}
	if w.done {
		return false
	}
	w.tasks++
	return true
}

// hold counts the bytes of a result held for its turn.
func (w *window) hold(n int64) {
	w.mu.Lock()
	w.bytes += n
	w.mu.Unlock()
}

// leave ends a task's stay: its result (of n held bytes) is written.
func (w *window) leave(n int64) {
	w.mu.Lock()
	w.tasks--
	w.bytes -= n
	w.mu.Unlock()
	w.cond.Broadcast()
}
