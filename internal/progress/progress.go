// Package progress draws the live status line of a long series of runs
// (microbox batch, microbox eval): a bar, done/total, rate, ETA and how
// many runs ended in each status or verdict, then a summary.
//
// It is drawn here rather than by a progress-bar library: the ones
// measured (schollz/progressbar, cheggaaa/pb, vbauerster/mpb) add 1.9 to
// 3.4 ms to every start of microbox through their package initialisation
// (net/http, regexp and Unicode tables), and every `microbox exec` would pay
// that for a line only batch and eval draw.
package progress

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Bar counts finished runs and, when shown, draws them. A Bar that is not
// shown still counts, for the summary.
type Bar struct {
	out   io.Writer // nil when not shown
	unit  string
	began time.Time

	mu     sync.Mutex
	total  int64 // -1 until known
	done   int64
	counts map[string]int
	order  []string  // labels in the order shown
	drawn  time.Time // last redraw, to draw at most every redrawEvery
}

const (
	redrawEvery = 100 * time.Millisecond
	barWidth    = 30
)

// New makes a bar of total runs (-1: not known yet) counted in unit, drawn
// on out (nil: not shown), which shows the counts of the given labels in
// their order, others after them.
func New(out io.Writer, total int64, unit string, labels []string) *Bar {
	b := &Bar{out: out, unit: unit, began: time.Now(), total: total, counts: map[string]int{}, order: labels}
	if out != nil {
		b.draw(b.began)
	}
	return b
}

// IsTerminal reports whether f is a terminal, where a bar can be drawn.
func IsTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// Elapsed is the time since the bar was made.
func (b *Bar) Elapsed() time.Duration { return time.Since(b.began) }

// SetTotal fixes the total once the end of a stream is reached.
func (b *Bar) SetTotal(n int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.total < 0 {
		b.total = n
	}
}

// Add counts one finished run; label "" (a task that never ran) is not
// counted.
func (b *Bar) Add(label string) {
	if label == "" {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.done++
	if !slices.Contains(b.order, label) {
		b.order = append(b.order, label)
	}
	b.counts[label]++
	if now := time.Now(); b.out != nil && (now.Sub(b.drawn) >= redrawEvery || b.done == b.total) {
		b.draw(now)
	}
}

// draw rewrites the status line in place; the caller holds b.mu (or is the
// only goroutine).
func (b *Bar) draw(now time.Time) {
	b.drawn = now
	fmt.Fprint(b.out, "\r\x1b[K"+b.line(now.Sub(b.began)))
}

// line renders the status after elapsed time, e.g.
// "[=======>      ] 1200/16400 24.3 runs/s ETA 10m25s | ok 1100 nonzero 100".
func (b *Bar) line(elapsed time.Duration) string {
	var s strings.Builder
	rate := 0.0
	if secs := elapsed.Seconds(); secs > 0 {
		rate = float64(b.done) / secs
	}
	if b.total > 0 {
		filled := int(int64(barWidth) * min(b.done, b.total) / b.total)
		s.WriteString("[" + strings.Repeat("=", filled))
		if filled < barWidth {
			s.WriteString(">" + strings.Repeat(" ", barWidth-filled-1))
		}
		fmt.Fprintf(&s, "] %d/%d", b.done, b.total)
	} else {
		fmt.Fprintf(&s, "%d", b.done)
	}
	fmt.Fprintf(&s, " %.1f %s/s", rate, b.unit)
	if b.total > 0 && b.done < b.total && rate > 0 {
		eta := time.Duration(float64(b.total-b.done) / rate * float64(time.Second))
		fmt.Fprintf(&s, " ETA %s", eta.Round(time.Second))
	}
	if c := b.countsText(" "); c != "" {
		s.WriteString(" | " + c)
	}
	return s.String()
}

// countsText lists the counts, e.g. "ok 12 nonzero 3".
func (b *Bar) countsText(sep string) string {
	var parts []string
	for _, l := range b.order {
		if n := b.counts[l]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", l, n))
		}
	}
	return strings.Join(parts, sep)
}

// Finish draws the line a last time and prints a summary under it.
func (b *Bar) Finish(interrupted bool) {
	if b.out == nil {
		return
	}
	b.mu.Lock()
	b.draw(time.Now())
	b.mu.Unlock()
	fmt.Fprintln(b.out)
	if interrupted {
		fmt.Fprintln(b.out, "microbox: interrupted")
	}
	fmt.Fprintln(b.out, "microbox: "+b.summary())
}

// summary says how many runs ended how, and the throughput.
func (b *Bar) summary() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	secs := time.Since(b.began).Seconds()
	return fmt.Sprintf("%d %s in %.1f s (%.1f %s/s): %s", b.done, b.unit, secs, float64(b.done)/secs, b.unit, b.countsText(", "))
}
