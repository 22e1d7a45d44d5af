package service

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"sync"
	"time"

	"github.com/microbox/microbox/internal/policy"
)

// State is where a run started in the background is.
type State string

const (
	StateQueued  State = "queued"  // waiting for a slot
	StateRunning State = "running" // its program runs
	StateDone    State = "done"    // its result is kept until it expires
)

// A Status is a background run as its caller sees it.
type Status struct {
	ID     string         `json:"id"`
	State  State          `json:"state"`
	Result *policy.Result `json:"result,omitempty"`
}

// entry is one background run.
type entry struct {
	id     string
	cancel context.CancelCauseFunc
	done   chan struct{} // closed once result is set

	mu       sync.Mutex
	state    State
	result   *policy.Result
	finished time.Time
}

func (e *entry) status() Status {
	e.mu.Lock()
	defer e.mu.Unlock()
	return Status{ID: e.id, State: e.state, Result: e.result}
}

func (e *entry) setState(s State) {
	e.mu.Lock()
	e.state = s
	e.mu.Unlock()
}

func (e *entry) finish(res *policy.Result) {
	e.mu.Lock()
	e.state, e.result, e.finished = StateDone, res, time.Now()
	e.mu.Unlock()
	close(e.done)
}

// table holds the background runs: those under way, and finished ones
// for keep, at most maxKept of them (the oldest go first).
type table struct {
	mu      sync.Mutex
	runs    map[string]*entry
	done    []*entry // finished, oldest first
	keep    time.Duration
	maxKept int
}

func newTable(keep time.Duration, maxKept int) *table {
	return &table{runs: map[string]*entry{}, keep: keep, maxKept: maxKept}
}

// add registers a new run with a fresh id; 128 random bits, so that one
// caller cannot guess, read or kill another's run.
func (t *table) add(cancel context.CancelCauseFunc) *entry {
	b := make([]byte, 16)
	rand.Read(b) // never fails (crypto/rand)
	e := &entry{id: hex.EncodeToString(b), cancel: cancel, done: make(chan struct{}), state: StateQueued}
	t.mu.Lock()
	t.runs[e.id] = e
	t.mu.Unlock()
	return e
}

// finished records that e is done, and lets expired results go.
func (t *table) finished(e *entry) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.done = append(t.done, e)
	t.expire()
}

// get finds a run; expired results are gone.
func (t *table) get(id string) (*entry, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.expire()
	e, ok := t.runs[id]
	return e, ok
}

// expire drops finished runs older than keep, and the oldest beyond
// maxKept; mu is held.
func (t *table) expire() {
	n := 0
	for n < len(t.done) && (len(t.done)-n > t.maxKept || time.Since(t.done[n].finished) > t.keep) {
		delete(t.runs, t.done[n].id)
		n++
	}
	t.done = t.done[n:]
}

// count is how many runs the table holds.
func (t *table) count() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.runs)
}
