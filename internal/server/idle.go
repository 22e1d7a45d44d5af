package server

import (
	"errors"
	"sync"
	"time"
)

// errIdle ends a server that had no client for Options.IdleExit.
var errIdle = errors.New("idle")

// idleExit calls its exit once no client has been served for its
// duration. A nil *idleExit never exits.
type idleExit struct {
	mu      sync.Mutex
	active  int  // clients being served
	exiting bool // the timer fired with none: no client is taken any more
	timer   *time.Timer
	after   time.Duration
}

func newIdleExit(after time.Duration, exit func()) *idleExit {
	i := &idleExit{}
	i.timer = time.AfterFunc(after, func() {
		i.mu.Lock()
		fire := i.active == 0 && !i.exiting
		i.exiting = i.exiting || fire
		i.mu.Unlock()
		if fire {
			exit()
		}
	})
	i.after = after
	return i
}

// begin counts a client in; false once the exit is under way, when the
// client must be turned away (it then runs in-process).
func (i *idleExit) begin() bool {
	if i == nil {
		return true
	}
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.exiting {
		return false
	}
	i.active++
	i.timer.Stop()
	return true
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
