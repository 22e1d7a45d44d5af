package nsjail

import (
	"io"
	"os"
	"strings"
	"sync"
	"unicode/utf8"
)

// capture drains one of the program's output pipes, keeping at most limit
// bytes. Both pipes are drained at once by their own goroutines, so a
// program that fills stderr before writing stdout cannot deadlock.
type capture struct {
	limit    int64
	truncate bool      // past the limit, drop the rest and let the run go on (Spec.OutputTruncate)
	tee      io.Writer // streams the output on, if set
	keep     bool      // keep a copy for the Result
	buf      []byte    // what is kept, at most limit bytes
	total    int64
	exceeded chan struct{} // closed when the program wrote past the limit, unless truncate
	done     chan struct{} // closed at EOF
	once     sync.Once
}

func newCapture(limit int64, tee io.Writer, keep bool) *capture {
	return &capture{limit: limit, tee: tee, keep: keep,
		exceeded: make(chan struct{}), done: make(chan struct{})}
}

// drain reads r to EOF. Past the limit it keeps reading and discarding,
// so the writer never blocks while the supervisor kills the run.
func (c *capture) drain(r *os.File) {
	defer close(c.done)
	chunk := chunks.Get().(*[]byte)
	defer chunks.Put(chunk)
	for {
		n, err := r.Read(*chunk)
		if n > 0 {
			c.take((*chunk)[:n])
		}
		if err != nil {
			return
		}
	}
}

// chunks are drain's read buffers, kept between runs: two fresh 64 KiB
// buffers a run were half of what a forked run's supervisor allocated,
// each zeroed, and the garbage collector's pace. take copies what it
// keeps out of the chunk.
var chunks = sync.Pool{New: func() any {
	b := make([]byte, 64<<10)
	return &b
}}

func (c *capture) take(b []byte) {
	room := c.limit - c.total
	c.total += int64(len(b))
	if room > 0 {
		if int64(len(b)) > room {
			b = b[:room]
		}
		if c.keep {
			c.keepBytes(b)
		}
		if c.tee != nil {
			c.tee.Write(b)
		}
	}
	if c.over() {
		c.once.Do(func() { close(c.exceeded) })
	}
}

// over reports whether the program wrote past the limit and that ends
// the run (not truncate).
func (c *capture) over() bool { return c.total > c.limit && !c.truncate }

// keepBytes appends b (within the limit) to what is kept. The buffer
// grows by doubling but never past the limit: a server holds one per
// stream of every run in flight, and its memory bound counts them.
func (c *capture) keepBytes(b []byte) {
	if need := len(c.buf) + len(b); need > cap(c.buf) {
		grown := make([]byte, len(c.buf), min(int(c.limit), max(2*cap(c.buf), need, 4<<10)))
		copy(grown, c.buf)
		c.buf = grown
	}
	c.buf = append(c.buf, b...)
}

// fill copies the captured text into a Result, invalid UTF-8 replaced,
// and still within the limit: a replacement (3 bytes) can outgrow the
// byte it replaces, and whoever holds results (batch) counts on the cap.
// Text cut for that is marked truncated too. The kept bytes are let go:
// the text is the only copy from here on.
func (c *capture) fill(text *string, truncated *bool) {
	var cut bool
	*text, cut = validText(c.buf, int(c.limit))
	*truncated = c.total > c.limit || cut
	c.buf = nil
}

// validText is b as strings.ToValidUTF8(b, "\uFFFD") has it (each run of
// invalid bytes one replacement character), cut at a character boundary
// to at most limit bytes (cut says whether it was), built in one
// allocation: text that is mostly replacements would otherwise take
// several copies of up to three times its size.
func validText(b []byte, limit int) (text string, cut bool) {
	if utf8.Valid(b) {
		if len(b) <= limit {
			return string(b), false
		}
		n := limit
		for n > 0 && !utf8.RuneStart(b[n]) {
			n--
		}
		return string(b[:n]), true
	}
	var sb strings.Builder
	sb.Grow(min(2*len(b), limit)) // a replacement for one byte in two at most doubles it
	const replacement = "\uFFFD"
	invalid := false
	for len(b) > 0 {
		r, size := utf8.DecodeRune(b)
		piece := b[:size]
		if r == utf8.RuneError && size == 1 {
			b = b[1:]
			if invalid {
				continue // the rest of a run of invalid bytes
			}
			invalid, piece = true, []byte(replacement)
		} else {
			invalid = false
			b = b[size:]
		}
		if sb.Len()+len(piece) > limit {
			return sb.String(), true
		}
		sb.Write(piece)
	}
	return sb.String(), false
}
