package main

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"time"
)

// progress draws a live status line on stderr: a bar, done/total, rate,
// ETA and how many runs ended in each status (or verdict). A progress that
// is not shown still counts, for the summary.
//
// It is drawn here rather than by a progress-bar library: the ones
// measured (schollz/progressbar, cheggaaa/pb, vbauerster/mpb) add 1.9 to
// 3.4 ms to every start of microbox through their package initialisation
// (net/http, regexp and Unicode tables), and every `microbox exec` would pay
// that for a line only batch and eval draw.
type progress struct {
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

// statusOrder lists the statuses from best to worst, for the counts.
var statusOrder = []string{"ok", "nonzero", "signaled", "timeout", "memory", "output_limit", "sandbox_error"}

// newProgress makes a progress of total runs (-1: not known yet), which
// shows the counts of the given labels in their order, others after them.
func newProgress(show bool, total int64, unit string, labels []string) *progress {
	p := &progress{unit: unit, began: time.Now(), total: total, counts: map[string]int{}, order: labels}
	if show {
		p.out = os.Stderr
		p.draw(p.began)
	}
	return p
}

// setTotal fixes the total once the end of a stream is reached.
func (p *progress) setTotal(n int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.total < 0 {
		p.total = n
	}
}

// add counts one finished run; label "" (a task that never ran) is not
// counted.
func (p *progress) add(label string) {
	if label == "" {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done++
	if !slices.Contains(p.order, label) {
		p.order = append(p.order, label)
	}
	p.counts[label]++
	if now := time.Now(); p.out != nil && (now.Sub(p.drawn) >= redrawEvery || p.done == p.total) {
		p.draw(now)
	}
}

// draw rewrites the status line in place; the caller holds p.mu (or is the
// only goroutine).
func (p *progress) draw(now time.Time) {
	p.drawn = now
	fmt.Fprint(p.out, "\r\x1b[K"+p.line(now.Sub(p.began)))
}

// line renders the status after elapsed time, e.g.
// "[=======>      ] 1200/16400 24.3 runs/s ETA 10m25s | ok 1100 nonzero 100".
func (p *progress) line(elapsed time.Duration) string {
	var b strings.Builder
	rate := 0.0
	if secs := elapsed.Seconds(); secs > 0 {
		rate = float64(p.done) / secs
	}
	if p.total > 0 {
		filled := int(int64(barWidth) * min(p.done, p.total) / p.total)
		b.WriteString("[" + strings.Repeat("=", filled))
		if filled < barWidth {
			b.WriteString(">" + strings.Repeat(" ", barWidth-filled-1))
		}
		fmt.Fprintf(&b, "] %d/%d", p.done, p.total)
	} else {
		fmt.Fprintf(&b, "%d", p.done)
	}
	fmt.Fprintf(&b, " %.1f %s/s", rate, p.unit)
	if p.total > 0 && p.done < p.total && rate > 0 {
		eta := time.Duration(float64(p.total-p.done) / rate * float64(time.Second))
		fmt.Fprintf(&b, " ETA %s", eta.Round(time.Second))
	}
	if c := p.countsText(" "); c != "" {
		b.WriteString(" | " + c)
	}
	return b.String()
}

// countsText lists the counts, e.g. "ok 12 nonzero 3".
func (p *progress) countsText(sep string) string {
	var parts []string
	for _, l := range p.order {
		if n := p.counts[l]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", l, n))
		}
	}
	return strings.Join(parts, sep)
}

// finish draws the line a last time and prints a summary under it.
func (p *progress) finish(interrupted bool) {
	if p.out == nil {
		return
	}
	p.mu.Lock()
	p.draw(time.Now())
	p.mu.Unlock()
	fmt.Fprintln(p.out)
	if interrupted {
		fmt.Fprintln(p.out, "microbox: interrupted")
	}
	fmt.Fprintln(p.out, "microbox: "+p.summary())
}

// summary says how many runs ended how, and the throughput.
func (p *progress) summary() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	secs := time.Since(p.began).Seconds()
	return fmt.Sprintf("%d %s in %.1f s (%.1f %s/s): %s", p.done, p.unit, secs, float64(p.done)/secs, p.unit, p.countsText(", "))
}
