package redact

// The budget of one run's redaction: how long the server may spend
// masking a run's output (a custom pattern's compiled program can make
// each byte cost microseconds), and its end when the run's caller leaves.

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/microbox/microbox/field"
)

// Withheld replaces a stream whose redaction stopped before its end: what
// could not be masked is not passed on.
const Withheld = "[OUTPUT WITHHELD: redaction stopped]\n"

// A Meter is one run's budget for redaction, shared by its streams: each
// piece of work charges the time it took, and once the total passes the
// budget, or Cancel is called, every redaction under the meter stops
// within a few runes of input and reports why.
type Meter struct {
	budget time.Duration
	spent  atomic.Int64          // nanoseconds charged
	err    atomic.Pointer[error] // why it stopped, once it has
}

// NewMeter is a budget of d (more than zero) of redaction time.
func NewMeter(d time.Duration) *Meter { return &Meter{budget: d} }

// Cancel stops the redaction under the meter, with cause as the reason
// (the run's caller left).
func (m *Meter) Cancel(cause error) {
	m.stop(fmt.Errorf("redaction stopped: %w", cause))
}

// Spent is the time charged so far.
func (m *Meter) Spent() time.Duration { return time.Duration(m.spent.Load()) }

// Err is why the redaction stopped, or nil.
func (m *Meter) Err() error {
	if p := m.err.Load(); p != nil {
		return *p
	}
	return nil
}

func (m *Meter) stop(err error) {
	m.err.CompareAndSwap(nil, &err)
}

// charge adds d and reports whether the redaction must stop.
func (m *Meter) charge(d time.Duration) error {
	if m.spent.Add(int64(d)) > int64(m.budget) {
		m.stop(field.Errorf("RedactBudget", "redaction stopped: it took its whole budget ({RedactBudget} %v)", m.budget))
	}
	return m.Err()
}

// A clock charges one goroutine's work to a meter, from its last tick.
type clock struct {
	m    *Meter
	last time.Time
}

func (m *Meter) clock() *clock { return &clock{m: m, last: time.Now()} }

// tick charges the time since the last tick; its error says to stop.
func (c *clock) tick() error {
	now := time.Now()
	err := c.m.charge(now.Sub(c.last))
	c.last = now
	return err
}
