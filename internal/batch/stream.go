package batch

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
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
	// Progress counts each result; Stream finishes it.
	Progress *progress.Bar
}

// Stream runs the tasks of in, one JSON object a line (blank lines
// skipped), and writes each result to out as a JSON line. A line that is
// not a valid task gets a sandbox_error result saying why. Once ctx is
// done, or out fails, runs in progress are killed, no task starts, and the
// results so far are written.
func (p *Pool) Stream(ctx context.Context, in io.Reader, out io.Writer, o StreamOptions) error {
	ctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	win := newWindow(ctx, o.MaxPending, o.MaxHeld)
	todo := make(chan *Item)
	readErr := make(chan error, 1)
	go func() { readErr <- feedLines(ctx, in, o.Skip, o.Shard, todo, win, o.Progress) }()
	done := p.Run(ctx, todo)
	w := newResultWriter(out, o.Ordered, win)
	var writeErr error
	for it := range done {
		o.Progress.Add(it.Label())
		if writeErr != nil {
			win.leave(0)
			continue
		}
		err := w.put(it, len(done) == 0)
		if err != nil {
			// Nobody is reading the results: stop the batch.
			writeErr = fmt.Errorf("write results: %w", err)
			stop(writeErr)
		}
	}
	if writeErr == nil {
		writeErr = w.flush()
	}
	o.Progress.Finish(ctx.Err() != nil)
	if err := <-readErr; err != nil && writeErr == nil {
		return err
	}
	return writeErr
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

// CountTasks counts the non-blank lines from f's offset to its end, past
// the first skip, that are the shard's, and seeks back, for a progress
// bar's ETA; -1 if f is not a regular file.
func CountTasks(f *os.File, skip int, shard Shard) int64 {
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
			if line > skip && shard.Takes(k) {
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

// feedLines sends each non-blank line of in after the first skip that is
// the shard's as an item, entering the window for each, until in ends or
// ctx is done; then it closes todo.
func feedLines(ctx context.Context, in io.Reader, skip int, shard Shard, todo chan<- *Item, win *window, bar *progress.Bar) error {
	defer close(todo)
	lines := make(chan lineOrErr)
	go readLines(ctx, in, skip, shard, lines)
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

// readLines sends the non-blank lines of in after the first skip that
// are the shard's, then its error (io.EOF at the end). It runs apart from
// feedLines so that an interrupt is not held up by a read from a silent
// stdin.
func readLines(ctx context.Context, in io.Reader, skip int, shard Shard, out chan<- lineOrErr) {
	r := bufio.NewReaderSize(in, 1<<16)
	for n, k := 1, 0; ; n++ {
		text, err := r.ReadBytes('\n')
		task := len(bytes.TrimSpace(text)) > 0
		if task {
			k++
		}
		if task && n > skip && shard.Takes(k-1) {
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
// written (or passed over: the batch stopped before it ran).
type resultWriter struct {
	w       *bufio.Writer
	enc     *json.Encoder
	ordered bool
	next    int
	held    map[int]*Item
	win     *window
}

func newResultWriter(out io.Writer, ordered bool, win *window) *resultWriter {
	bw := bufio.NewWriterSize(out, 1<<16)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	return &resultWriter{w: bw, enc: enc, ordered: ordered, held: map[int]*Item{}, win: win}
}

// put takes a finished item and writes what can be written now. It
// flushes when idle is set (no other result is waiting), so a reader
// streaming results sees each promptly.
func (w *resultWriter) put(it *Item, idle bool) error {
	if !w.ordered {
		w.win.leave(0)
		if err := w.write(it); err != nil {
			return err
		}
	} else {
		w.held[it.Seq] = it
		w.win.hold(it.size())
		for {
			next, ok := w.held[w.next]
			if !ok {
				break
			}
			delete(w.held, w.next)
			w.next++
			w.win.leave(next.size())
			if err := w.write(next); err != nil {
				return err
			}
		}
	}
	if idle {
		return w.flush()
	}
	return nil
}

func (w *resultWriter) write(it *Item) error {
	if it.Skipped {
		return nil
	}
	return w.enc.Encode(it.Result)
}

func (w *resultWriter) flush() error { return w.w.Flush() }
