package httpapi

// Answers whose size callers decide (a run's stdout and stderr, up to its
// output limit each) are written to the connection a piece at a time,
// never encoded whole: a NUL byte is six bytes of JSON (\u0000), and one
// buffer holding 16 MiB of them encoded, grown by doubling and copied,
// took the server to 977 MiB. A caller that stops reading loses its
// connection after the write timeout.

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/microbox/microbox/internal/policy"
	"github.com/microbox/microbox/internal/service"
	"github.com/microbox/microbox/result"
)

// longStrings are the long strings of an answer, held aside: the answer
// is encoded with a placeholder in place of each, and each is written in
// pieces where its placeholder was.
type longStrings []string

// placeholderPrefix is random, so that no caller can put a placeholder in
// an answer: only the strings held put one there.
var placeholderPrefix = func() string {
	b := make([]byte, 16)
	rand.Read(b) // never fails (crypto/rand)
	return "microbox-" + hex.EncodeToString(b) + "-"
}()

// hold puts s aside and returns its placeholder.
func (l *longStrings) hold(s string) string {
	*l = append(*l, s)
	return placeholderPrefix + strconv.Itoa(len(*l)-1)
}

// result is r with its stdout and stderr held: a copy, for r may be a
// kept result that other requests read at the same time.
func (l *longStrings) result(r *result.Result) *result.Result {
	c := *r
	c.Stdout, c.Stderr = l.hold(r.Stdout), l.hold(r.Stderr)
	return &c
}

// policyResult is res with its output held (longStrings.result).
func (l *longStrings) policyResult(res *policy.Result) *policy.Result {
	c := *res
	if res.Result != nil {
		c.Result = l.result(res.Result)
	}
	return &c
}

// writeResult answers a run's result.
func writeResult(w http.ResponseWriter, status int, res *policy.Result) {
	var l longStrings
	writeAnswer(w, status, l.policyResult(res), l)
}

// writeStatus answers a background run's state, with its result if done.
func writeStatus(w http.ResponseWriter, st service.Status) {
	var l longStrings
	if st.Result != nil {
		st.Result = l.policyResult(st.Result)
	}
	writeAnswer(w, http.StatusOK, st, l)
}

// writeJSON answers v, a value of the server's own size, as one JSON
// line with its Content-Length (writeAnswer).
func writeJSON(w http.ResponseWriter, status int, v any) { writeAnswer(w, status, v, nil) }

// writeAnswer answers v as one JSON line, with its length (a client can
// read exactly the answer, on a connection it keeps), long's strings in
// place of their placeholders in v. Its memory is v's encoding without
// them, and a piece of one: they are escaped twice, once to count the
// answer's length, once to write it.
func writeAnswer(w http.ResponseWriter, status int, v any, long longStrings) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf) // as exec prints results: <, > and & as they are
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		writeError(w, http.StatusInternalServerError, "encode the answer: %v", err)
		return
	}
	parts, err := split(buf.Bytes(), long)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "encode the answer: %v", err)
		return
	}
	var size countWriter
	writeParts(&size, parts)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.FormatInt(size.n, 10))
	w.WriteHeader(status)
	writeParts(w, parts)
}

// A part of an answer: encoded bytes, or a long string to escape.
type part struct {
	encoded []byte
	long    *string
}

// split cuts an encoded answer at the placeholders of long, each in
// quotes as encoding/json wrote it.
func split(encoded []byte, long longStrings) ([]part, error) {
	type at struct{ start, end, i int }
	var cuts []at
	for i := range long {
		quoted := `"` + placeholderPrefix + strconv.Itoa(i) + `"`
		start := bytes.Index(encoded, []byte(quoted))
		if start < 0 {
			return nil, fmt.Errorf("long string %d is not in the answer", i)
		}
		cuts = append(cuts, at{start + 1, start + len(quoted) - 1, i}) // the quotes stay
	}
	slices.SortFunc(cuts, func(a, b at) int { return a.start - b.start })
	var parts []part
	last := 0
	for _, c := range cuts {
		parts = append(parts, part{encoded: encoded[last:c.start]}, part{long: &long[c.i]})
		last = c.end
	}
	return append(parts, part{encoded: encoded[last:]}), nil
}

// writeParts writes the parts, the long strings escaped as JSON; it
// stops at the first error (the caller's connection is then gone).
func writeParts(w io.Writer, parts []part) error {
	var e stringEscaper
	for _, p := range parts {
		var err error
		if p.long != nil {
			err = e.write(w, *p.long)
		} else {
			_, err = w.Write(p.encoded)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// escapePiece is how much of a long string is escaped at once: at most
// six times as many bytes of JSON.
const escapePiece = 32 << 10

// stringEscaper escapes strings as encoding/json does (HTML characters
// as they are), a piece at a time.
type stringEscaper struct {
	buf bytes.Buffer
	enc *json.Encoder
}

// write writes s escaped, without its quotes.
func (e *stringEscaper) write(w io.Writer, s string) error {
	if e.enc == nil {
		e.enc = json.NewEncoder(&e.buf)
		e.enc.SetEscapeHTML(false)
	}
	for len(s) > 0 {
		n := pieceEnd(s, escapePiece)
		e.buf.Reset()
		if err := e.enc.Encode(s[:n]); err != nil {
			return err
		}
		b := e.buf.Bytes()
		if _, err := w.Write(b[1 : len(b)-2]); err != nil { // less the quotes and the newline
			return err
		}
		s = s[n:]
	}
	return nil
}

// pieceEnd is where a piece of at most n bytes of s ends: before a byte
// that starts a character, so that a character cut in two is not taken
// for two invalid bytes (each of which encoding/json writes as \ufffd).
func pieceEnd(s string, n int) int {
	if len(s) <= n {
		return len(s)
	}
	for i := n; i > n-utf8.UTFMax; i-- {
		if utf8.RuneStart(s[i]) {
			return i
		}
	}
	return n // bytes that are no character's: invalid however cut
}

// countWriter counts what is written to it.
type countWriter struct{ n int64 }

func (c *countWriter) Write(p []byte) (int, error) {
	c.n += int64(len(p))
	return len(p), nil
}

// writeDeadlines bounds each write of an answer by timeout: a caller that
// stops reading loses its connection, and no more (its run's slot is
// given back when the run ends). The deadline is set when a request
// comes (for what net/http writes itself, such as 100 Continue), before
// each write of the handler's, and once more when the handler returns,
// for what net/http still has to send.
func writeDeadlines(timeout time.Duration, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		dw := &deadlineWriter{ResponseWriter: w, rc: http.NewResponseController(w), timeout: timeout}
		dw.extend()
		next.ServeHTTP(dw, r)
		dw.extend()
	})
}

// deadlineWriter is a ResponseWriter whose writes each have timeout.
type deadlineWriter struct {
	http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
}

func (d *deadlineWriter) extend() { d.rc.SetWriteDeadline(time.Now().Add(d.timeout)) }

func (d *deadlineWriter) Write(p []byte) (int, error) {
	d.extend()
	return d.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (d *deadlineWriter) Unwrap() http.ResponseWriter { return d.ResponseWriter }
