package server

import (
	"sync"
	"time"
)

// idleExit calls its exit once no client has been served for its
// duration, once. A nil *idleExit never exits.
type idleExit struct {
	mu      sync.Mutex
	active  int  // clients being served
	exiting bool // the exit was called
	timer   *time.Timer
	after   time.Duration
}

func newIdleExit(after time.Duration, exit func()) *idleExit {
	i := &idleExit{after: after}
	i.timer = time.AfterFunc(after, func() {
		i.mu.Lock()
		fire := i.active == 0 && !i.exiting
		i.exiting = i.exiting || fire
		i.mu.Unlock()
		if fire {
			exit()
		}
	})
	return i
}

// begin counts a client in.
func (i *idleExit) begin() {
	if i == nil {
		return
	}
	i.mu.Lock()
	defer i.mu.Unlock()
	i.active++
	i.timer.Stop()
}

// end counts a client out; the last one starts the clock again.
func (i *idleExit) end() {
	if i == nil {
		return
	}
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.active--; i.active == 0 && !i.exiting {
		i.timer.Reset(i.after)
	}
}

// exited reports whether the exit was called.
func (i *idleExit) exited() bool {
	if i == nil {
		return false
	}
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.exiting
}
