package batch

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"

	"github.com/microbox/microbox/internal/progress"
	"github.com/microbox/microbox/result"
)

// StreamOptions shape a Stream.
type StreamOptions struct {
	// Ordered writes the results in the tasks' order, holding those that
	// finish early; else they are written as runs finish.
	Ordered bool
	// MaxPending bounds how many tasks may be started or held ahead of
	// the oldest unwritten one, and MaxHeld the bytes of the results held
	// (their output, which the output limit caps), so that, with Ordered,
	// memory stays bounded however slow one task is: past either, no task
	// starts until the oldest is written.
	MaxPending int
	MaxHeld    int64
	// Skip passes over the input's first Skip lines: a batch that was
	// stopped goes on after the line of its last result. Results keep
	// the input's own line numbers.
	Skip int
	// Shard is the part of the tasks this batch runs (the zero Shard:
	// all); results keep the input's line numbers, so the shards'
	// results merge by "line".
	Shard Shard
	// Done are the tasks that have their results already (ResumeOutput):
	// they are passed over. nil: none.
	Done *Done
	// FinishedOnly writes only the results of the runs that finished:
	// once the stream is stopped, a run it cut short gets no result line
	// (nor, in input order, does any task after it), so that the tasks
	// without a result are exactly those still to run (Done).
	FinishedOnly bool
	// Progress counts each result; Stream finishes it.
	Progress *progress.Bar
}

// Stream runs the tasks of in, one JSON object a line (blank lines
// skipped), and writes each result to out as a JSON line. A line that is
// not a valid task gets a sandbox_error result saying why. Once ctx is
// done, or out fails, runs in progress are killed, no task starts, and the
// results so far are written (with FinishedOnly, not those of the runs
// cut short). Each line is written whole or not at all (lineWriter).
func (p *WorkerPool) Stream(ctx context.Context, in io.Reader, out io.Writer, o StreamOptions) error {
	ctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	win := newWindow(ctx, o.MaxPending, o.MaxHeld)
	todo := make(chan *Item)
	readErr := make(chan error, 1)
	sel := selection{skip: o.Skip, shard: o.Shard, done: o.Done}
	go func() { readErr <- feedLines(ctx, in, sel, todo, win, o.Progress) }()
	done := p.Run(ctx, todo)
	w := newResultWriter(out, o.Ordered, win)
	var writeErr error
	for it := range done {
		if o.FinishedOnly && cutShort(ctx, it) {
			it.Skipped = true
		}
		o.Progress.Add(it.Label())
		if writeErr != nil {
			win.leave(0)
			continue
		}
		if err := w.put(it); err != nil {
			// Nobody is reading the results, or they have no room:
			// stop the batch.
			writeErr = err
			stop(writeErr)
		}
	}
	o.Progress.Finish(ctx.Err() != nil)
	if err := <-readErr; err != nil && writeErr == nil {
		return err
	}
	return writeErr
}

// cutShort reports whether it is a run that the stream's stop cut short:
// its verdict, a sandbox_error (the supervisor's "interrupted", a set-up
// that was stopped), came once the stream was stopped, and is not the
// task's own result.
func cutShort(ctx context.Context, it *Item) bool {
	return ctx.Err() != nil && !it.Skipped && it.Result.Status == result.StatusSandboxError
}

// selection is the tasks of the input a batch runs: past the first skip
// lines, the shard's, and not done already.
type selection struct {
	skip  int
	shard Shard
	done  *Done
}

// takes reports whether the batch runs the task on input line n, the
// k-th task (from 0), as far as its line tells: Done also checks its id.
func (s selection) takes(n, k int) bool {
	return n > s.skip && s.shard.Takes(k) && !s.done.hasLine(n)
}

// StatusLabels are the statuses, best first, as a progress bar of runs
// counts them.
func StatusLabels() []string {
	labels := make([]string, len(result.Statuses))
	for i, s := range result.Statuses {
		labels[i] = string(s)
	}
	return labels
}

// CountTasks counts the non-blank lines from f's offset to its end that
// the batch runs (past the first skip, the shard's, not done), and seeks
// back, for a progress bar's ETA; -1 if f is not a regular file.
func CountTasks(f *os.File, skip int, shard Shard, done *Done) int64 {
	sel := selection{skip: skip, shard: shard, done: done}
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return -1
	}
	start, err := f.Seek(0, io.SeekCurrent)
	if err != nil {
		return -1
	}
	defer f.Seek(start, io.SeekStart)
	r := bufio.NewReaderSize(f, 1<<16)
	var n int64
	blank, k := true, 0
	for line := 1; ; line++ {
		// A line longer than the buffer comes in several chunks.
		chunk, err := r.ReadSlice('\n')
		blank = blank && len(bytes.TrimSpace(chunk)) == 0
		if err == bufio.ErrBufferFull {
			line--
			continue
		}
		if !blank {
			if sel.takes(line, k) {
				n++
			}
			k++
		}
		blank = true
		if err == io.EOF {
			return n
		}
		if err != nil {
			return -1
		}
	}
}

// feedLines sends each non-blank line of in that sel takes as an item,
// entering the window for each, until in ends or ctx is done; then it
// closes todo.
func feedLines(ctx context.Context, in io.Reader, sel selection, todo chan<- *Item, win *window, bar *progress.Bar) error {
	defer close(todo)
	lines := make(chan lineOrErr)
	go readLines(ctx, in, sel, lines)
	seq := 0
	for {
		var l lineOrErr
		select {
		case l = <-lines:
		case <-ctx.Done():
			return nil
		}
		if l.err == io.EOF {
			bar.SetTotal(int64(seq))
			return nil
		}
		if l.err != nil {
			return fmt.Errorf("read tasks: %w", l.err)
		}
		if !win.enter() {
			return nil
		}
		select {
		case todo <- &Item{Seq: seq, Line: l.n, Raw: l.text}:
			seq++
		case <-ctx.Done():
			win.leave(0)
			return nil
		}
	}
}

type lineOrErr struct {
	n    int
	text []byte
	err  error
}

// readLines sends the non-blank lines of in that sel takes, then its
// error (io.EOF at the end). It runs apart from feedLines so that an
// interrupt is not held up by a read from a silent stdin.
func readLines(ctx context.Context, in io.Reader, sel selection, out chan<- lineOrErr) {
	r := bufio.NewReaderSize(in, 1<<16)
	for n, k := 1, 0; ; n++ {
		text, err := r.ReadBytes('\n')
		task := len(bytes.TrimSpace(text)) > 0
		if task {
			k++
		}
		run := task && sel.takes(n, k-1)
		if task && sel.done.hasLine(n) {
			if derr := sel.done.check(n, text); derr != nil {
				err = derr
			}
		}
		if run {
			select {
			case out <- lineOrErr{n: n, text: text}:
			case <-ctx.Done():
				return
			}
		}
		if err != nil {
			select {
			case out <- lineOrErr{err: err}:
			case <-ctx.Done():
			}
			return
		}
	}
}

// resultWriter writes results as JSON lines, in input order (holding those
// that finish early) or as they come; each item leaves the window when
// written (or passed over: the batch stopped before it ran, or cut it
// short). In input order, what it writes is always the results of the
// first tasks: after one that has none, it writes no more, so a stopped
// batch goes on after its last line (StreamOptions.Skip).
type resultWriter struct {
	out     lineWriter
	ordered bool
	next    int
	held    map[int]*Item
	win     *window
	gap     bool // in input order, a task before the next has no result
}

func newResultWriter(out io.Writer, ordered bool, win *window) *resultWriter {
	return &resultWriter{out: lineWriter{w: out}, ordered: ordered, held: map[int]*Item{}, win: win}
}

// put takes a finished item and writes what can be written now, each
// result at once: a reader streaming results sees each promptly.
func (w *resultWriter) put(it *Item) error {
	if !w.ordered {
		w.win.leave(0)
		return w.write(it)
	}
	w.held[it.Seq] = it
	w.win.hold(it.size())
	for {
		next, ok := w.held[w.next]
		if !ok {
			return nil
		}
		delete(w.held, w.next)
		w.next++
		w.win.leave(next.size())
		if err := w.write(next); err != nil {
			return err
		}
	}
}

func (w *resultWriter) write(it *Item) error {
	if it.Skipped {
		w.gap = w.ordered
		return nil
	}
	if w.gap {
		return nil
	}
	return w.out.put(it.Result)
}
