package nsjail

import (
	"bytes"
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
	tee      io.Writer // streams the output on, if set
	keep     bool      // keep a copy for the Result
	buf      bytes.Buffer
	total    int64
	exceeded chan struct{} // closed when the program wrote past the limit
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
	chunk := make([]byte, 64<<10)
	for {
		n, err := r.Read(chunk)
		if n > 0 {
			c.take(chunk[:n])
		}
		if err != nil {
			return
		}
	}
}

func (c *capture) take(b []byte) {
	room := c.limit - c.total
	c.total += int64(len(b))
	if room > 0 {
		if int64(len(b)) > room {
			b = b[:room]
		}
		if c.keep {
			c.buf.Write(b)
		}
		if c.tee != nil {
			c.tee.Write(b)
		}
	}
	if c.total > c.limit {
		c.once.Do(func() { close(c.exceeded) })
	}
}

// fill copies the captured text into a Result, invalid UTF-8 replaced,
// and still within the limit: a replacement (3 bytes) can outgrow the
// byte it replaces, and whoever holds results (batch) counts on the cap.
// Text cut for that is marked truncated too.
func (c *capture) fill(text *string, truncated *bool) {
	*text = strings.ToValidUTF8(c.buf.String(), "\uFFFD")
	*truncated = c.total > c.limit
	if int64(len(*text)) > c.limit {
		*text = cutAtRune(*text, int(c.limit))
		*truncated = true
	}
}

// cutAtRune is s cut to at most n bytes, at a character boundary, in a
// string of its own (not holding on to all of s).
func cutAtRune(s string, n int) string {
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return strings.Clone(s[:n])
}
