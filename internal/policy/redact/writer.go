package redact

// Redaction of output as it streams, and of a run's captured output.

import (
	"bytes"
	"io"

	"github.com/microbox/microbox/result"
)

// Limits of the streaming Writer. A line longer than maxLine is passed
// on in pieces, so a secret that straddles a piece boundary can escape; a
// private key block is held until its END line or maxBlock, whichever
// comes first.
const (
	maxLine  = 64 << 10
	maxBlock = 64 << 10
)

// Writer redacts a stream a line at a time (output that streams to the
// caller rather than being captured). Output is held until its line is complete, so a prompt without a
// newline appears when the line ends or the run does. It is used by one
// goroutine at a time (one per stream). Once its meter stops, it passes
// on Withheld in place of the rest of the stream.
type Writer struct {
	r       *Redactor
	m       *Meter
	w       io.Writer
	buf     []byte
	held    int // complete lines at the start of buf, held (a key block)
	counts  []int
	stopped bool
}

// NewWriter redacts what is written to it and passes it on to w, charging
// the time it takes to m.
func (r *Redactor) NewWriter(w io.Writer, m *Meter) *Writer {
	return &Writer{r: r, m: m, w: w, counts: make([]int, len(r.patterns))}
}

// Write takes the program's bytes and passes on every complete line,
// redacted. It reports success for all of p: the program's output is
// drained whatever the terminal does.
func (rw *Writer) Write(p []byte) (int, error) {
	if rw.stopped {
		return len(p), nil
	}
	rw.buf = append(rw.buf, p...)
	// Nothing more can pass until a line ends or the unfinished line
	// outgrows its limit; looking only then keeps a stream of tiny writes
	// linear.
	if bytes.IndexByte(p, '\n') < 0 && len(rw.buf)-rw.held <= maxLine {
		return len(p), nil
	}
	cut, end := rw.passable()
	if cut > 0 {
		rw.emit(rw.buf[:cut])
		rw.buf = append(rw.buf[:0], rw.buf[cut:]...)
	}
	rw.held = max(end-cut, 0)
	if rw.stopped {
		rw.buf, rw.held = nil, 0 // nothing more passes
	}
	return len(p), nil
}

// passable is how much of the buffer can be redacted and passed on now
// (cut), and where its complete lines end (end): up to the last newline,
// except an unfinished private key block, which is held so that it is
// masked whole; or everything, when it is too long to hold.
func (rw *Writer) passable() (cut, end int) {
	end = bytes.LastIndexByte(rw.buf, '\n') + 1
	if begin := openKeyBlock(rw.buf[:end]); begin >= 0 {
		if len(rw.buf)-begin <= maxBlock {
			return begin, end
		}
		return len(rw.buf), end
	}
	if end == 0 && len(rw.buf) > maxLine {
		return len(rw.buf), end
	}
	return end, end
}

// openKeyBlock is the start of the line holding a private key's BEGIN
// marker that has no END after it, or -1.
func openKeyBlock(b []byte) int {
	begin := bytes.LastIndex(b, []byte("-----BEGIN "))
	if begin < 0 || !bytes.Contains(b[begin:], []byte("PRIVATE KEY")) {
		return -1
	}
	if bytes.Contains(b[begin:], []byte("-----END ")) {
		return -1
	}
	return bytes.LastIndexByte(b[:begin], '\n') + 1
}

// emit passes on b redacted, or, once the meter has stopped, Withheld
// (once) and nothing more.
func (rw *Writer) emit(b []byte) {
	text, counts, err := rw.r.redact(string(b), rw.m)
	if err != nil {
		rw.stopped = true
		io.WriteString(rw.w, Withheld)
		return
	}
	addCounts(rw.counts, counts)
	io.WriteString(rw.w, text)
}

// Flush passes on what is left at the end of the run.
func (rw *Writer) Flush() {
	if len(rw.buf) > 0 && !rw.stopped {
		rw.emit(rw.buf)
	}
	rw.buf, rw.held = rw.buf[:0], 0
}

// Result masks the captured stdout and stderr of res (and its compile
// step's stderr) and lists what was
// masked, charging the time it takes to m. streams are the Writers the
// output went through if it streamed (nil ones are skipped): they are
// flushed, and what they masked is what counts, since the captured copy
// is the same output again. If m stopped any of it, the captured streams
// are replaced with Withheld (empty ones stay empty), nothing is listed,
// and the error is m's.
func (r *Redactor) Result(res *result.Result, m *Meter, streams ...*Writer) ([]Redaction, error) {
	counts := make([]int, len(r.patterns))
	stdout, c, err := r.redact(res.Stdout, m)
	addCounts(counts, c)
	stderr := ""
	if err == nil {
		stderr, c, err = r.redact(res.Stderr, m)
		addCounts(counts, c)
	}
	// A compile step's messages quote the program's source.
	var compile string
	var compileCounts []int
	if err == nil && res.Compile != nil {
		compile, compileCounts, err = r.redact(res.Compile.Stderr, m)
	}
	var streamed []int
	for _, w := range streams {
		if w == nil {
			continue
		}
		w.Flush()
		if w.stopped && err == nil {
			err = m.Err()
		}
		if streamed == nil {
			streamed = make([]int, len(r.patterns))
		}
		addCounts(streamed, w.counts)
	}
	if err != nil {
		withhold(&res.Stdout)
		withhold(&res.Stderr)
		if res.Compile != nil {
			withhold(&res.Compile.Stderr)
		}
		return nil, err
	}
	res.Stdout, res.Stderr = stdout, stderr
	if streamed != nil {
		counts = streamed
	}
	if res.Compile != nil {
		res.Compile.Stderr = compile
		addCounts(counts, compileCounts)
	}
	return r.summary(counts), nil
}

// withhold replaces a stream that could not be redacted.
func withhold(s *string) {
	if *s != "" {
		*s = Withheld
	}
}
