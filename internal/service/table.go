package service

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"runtime/debug"
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
	// StateNotStarted: the server could not start it (it was out of
	// descriptors), which is no verdict on the program: Error says why,
	// and the same run may be sent again.
	StateNotStarted State = "not_started"
)

// States lists every state (the API's description enumerates them).
var States = []State{StateQueued, StateRunning, StateDone, StateNotStarted}

// A Status is a background run as its caller sees it.
type Status struct {
	ID     string         `json:"id"`
	State  State          `json:"state"`
	Result *policy.Result `json:"result,omitempty"`
	Error  string         `json:"error,omitempty"` // with StateNotStarted
}

// entry is one background run.
type entry struct {
	id     string
	cancel context.CancelCauseFunc
	done   chan struct{} // closed once result is set

	mu       sync.Mutex
	state    State
	result   *policy.Result
	err      string // StateNotStarted's reason
	finished time.Time
	size     int64 // resultSize(result), once done
}

func (e *entry) status() Status {
	e.mu.Lock()
	defer e.mu.Unlock()
	return Status{ID: e.id, State: e.state, Result: e.result, Error: e.err}
}

func (e *entry) setState(s State) {
	e.mu.Lock()
	e.state = s
	e.mu.Unlock()
}

// finish records res, or for a run that never started for want of the
// server's descriptors (res.Unavailable) that it did not start: no
// verdict, as a run waited for is answered 503 rather than one.
func (e *entry) finish(res *policy.Result) {
	e.mu.Lock()
	e.state, e.result, e.finished, e.size = StateDone, res, time.Now(), resultSize(res)
	if res.Unavailable != nil {
		e.state, e.result, e.err = StateNotStarted, nil, "the run could not start: the server is "+res.Unavailable.Error()+"; send it again"
	}
	e.mu.Unlock()
	close(e.done)
}

// resultOverhead is what resultSize counts for a result beyond its
// strings: the struct, its numbers, redaction counts, a risk report.
const resultOverhead = 1 << 10

// resultSize is about the bytes a kept result holds: its stdout, stderr,
// error and fetched files, and resultOverhead.
func resultSize(res *policy.Result) int64 {
	n := int64(resultOverhead)
	if r := res.Result; r != nil {
		n += int64(len(r.Stdout) + len(r.Stderr))
		if r.Error != nil {
			n += int64(len(*r.Error))
		}
		n += r.FetchedBytes() // up to --max-fetch-bytes
	}
	return n
}

// handBackBytes of results let go make the table hand their memory back
// to the system at once, rather than when Go's runtime gets to it (on an
// idle server, minutes later).
const handBackBytes = 16 << 20

// table holds the background runs: those under way, and finished ones
// for keep, at most maxKept of them and maxBytes of their results (the
// oldest go first; one result larger than maxBytes alone is kept alone).
// Results expire on a timer, whether or not anyone asks for them.
type table struct {
	mu        sync.Mutex
	runs      map[string]*entry
	done      []*entry // finished, oldest first
	doneBytes int64    // the sizes of done's results
	keep      time.Duration
	maxKept   int
	maxBytes  int64
	timer     *time.Timer // fires when done[0] expires
	freed     int64       // bytes of results let go since the last hand-back
}

func newTable(keep time.Duration, maxKept int, maxBytes int64) *table {
	return &table{runs: map[string]*entry{}, keep: keep, maxKept: maxKept, maxBytes: maxBytes}
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
	t.doneBytes += e.size
	t.expire(time.Now())
}

// get finds a run; expired results are gone.
func (t *table) get(id string) (*entry, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.expire(time.Now())
	e, ok := t.runs[id]
	return e, ok
}

// expire drops finished runs older than keep, and the oldest beyond
// maxKept or maxBytes, then sets the timer; mu is held.
func (t *table) expire(now time.Time) {
	t.drop(now)
	t.schedule(now)
}

func (t *table) drop(now time.Time) {
	n := 0
	for ; n < len(t.done) && t.over(n, now); n++ {
		e := t.done[n]
		delete(t.runs, e.id)
		t.doneBytes -= e.size
		t.freed += e.size
	}
	if n > 0 { // a new array: the old one would still hold what was dropped
		t.done = append([]*entry(nil), t.done[n:]...)
	}
}

// over says whether done[n], the oldest of done[n:], is to go.
func (t *table) over(n int, now time.Time) bool {
	left := len(t.done) - n
	return left > t.maxKept || (t.doneBytes > t.maxBytes && left > 1) || now.Sub(t.done[n].finished) > t.keep
}

// schedule sets the timer for when the oldest result expires or, with
// none left, at once if there is memory to hand back.
func (t *table) schedule(now time.Time) {
	var next time.Duration
	switch {
	case len(t.done) > 0:
		next = t.done[0].finished.Add(t.keep).Sub(now) + time.Millisecond
	case !t.handBack():
		return
	}
	if t.timer == nil {
		t.timer = time.AfterFunc(next, t.tick)
	} else {
		t.timer.Reset(next)
	}
}

// handBack says whether the results let go are worth handing their
// memory back to the system: handBackBytes, or less when none are left.
func (t *table) handBack() bool {
	return t.freed >= handBackBytes || (len(t.done) == 0 && t.freed >= handBackBytes/16)
}

// tick expires the results due, and hands the memory of what has been
// let go back to the system when handBack says so.
func (t *table) tick() {
	t.mu.Lock()
	now := time.Now()
	t.drop(now)
	hand := t.handBack()
	if hand {
		t.freed = 0
	}
	t.schedule(now)
	t.mu.Unlock()
	if hand {
		debug.FreeOSMemory()
	}
}

// count is how many runs the table holds, and the bytes of its results.
func (t *table) count() (int, int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.runs), t.doneBytes
}
