package nsjail

import (
	"bytes"
	"os"
	"runtime"
	"strings"
	"testing"
	"unicode/utf8"
)

func drained(t *testing.T, limit int64, chunks ...string) *capture {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	c := newCapture(limit, nil, true)
	go c.drain(r)
	for _, s := range chunks {
		w.WriteString(s)
	}
	w.Close()
	<-c.done
	return c
}

func exceeded(c *capture) bool {
	select {
	case <-c.exceeded:
		return true
	default:
		return false
	}
}

func TestCaptureLimit(t *testing.T) {
	c := drained(t, 4, "ab", "cd")
	if exceeded(c) || string(c.buf) != "abcd" {
		t.Fatalf("exactly the limit: exceeded=%v %q", exceeded(c), c.buf)
	}
	// One byte past the limit, arriving after the limit was filled exactly.
	c = drained(t, 4, "abcd", "e")
	var text string
	var truncated bool
	c.fill(&text, &truncated)
	if !exceeded(c) || !truncated || text != "abcd" {
		t.Fatalf("past the limit: exceeded=%v truncated=%v %q", exceeded(c), truncated, text)
	}
}

func TestCaptureTee(t *testing.T) {
	r, w, _ := os.Pipe()
	var tee bytes.Buffer
	c := newCapture(3, &tee, false)
	go c.drain(r)
	w.WriteString("hello")
	w.Close()
	<-c.done
	if tee.String() != "hel" || len(c.buf) != 0 {
		t.Fatalf("tee %q kept %q", tee.String(), c.buf)
	}
}

// Invalid UTF-8, replaced, stays within the limit: the text a result
// holds is never larger than the cap.
func TestCaptureReplacementWithinLimit(t *testing.T) {
	c := newCapture(10, nil, true)
	c.take([]byte("\xffa\xffb\xffc\xff"))
	var text string
	var truncated bool
	c.fill(&text, &truncated)
	if len(text) > 10 || !utf8.ValidString(text) || !truncated || text != "\uFFFDa\uFFFDb" {
		t.Fatalf("text %q (%d bytes) truncated %v", text, len(text), truncated)
	}
}

// The text is what strings.ToValidUTF8 makes of the bytes, cut at a
// character boundary within the limit, whatever mix of valid and invalid
// bytes the program wrote.
func TestCaptureTextAsToValidUTF8(t *testing.T) {
	inputs := []string{"", "plain", "h\u00e9llo \u4e16\u754c", "\xff", "\xff\xfe\xfd", "a\xffb\xfe\xfdc",
		"\xe4\xb8", "\xe4\xb8x", "\uFFFD\xff", strings.Repeat("\x00\xff", 300), strings.Repeat("\u4e16\xc3", 100)}
	for _, in := range inputs {
		for _, limit := range []int{1, 2, 3, 4, 7, 64, 1 << 10} {
			c := newCapture(int64(limit), nil, true)
			c.take([]byte(in))
			var text string
			var truncated bool
			c.fill(&text, &truncated)
			// As before: the kept bytes made valid, then cut at a
			// character boundary within the limit.
			want := strings.ToValidUTF8(in[:min(len(in), limit)], "\uFFFD")
			cut := len(want) > limit
			for len(want) > limit || !utf8.ValidString(want) {
				want = want[:len(want)-1]
			}
			if text != want || truncated != (len(in) > limit || cut) {
				t.Errorf("%q limit %d: %q truncated %v, want %q", in, limit, text, truncated, want)
			}
		}
	}
}

// Output of invalid bytes at the limit costs a few times the limit to
// turn into a result, not the several copies of up to three times it
// that a string conversion, a replacement pass and a cut would take: a
// server holds one per stream of every run in flight.
func TestCaptureFillMemory(t *testing.T) {
	const limit = 4 << 20
	in := []byte(strings.Repeat("\xffa", limit/2))
	c := newCapture(limit, nil, true)
	for p := in; len(p) > 0; p = p[min(len(p), 64<<10):] {
		c.take(p[:min(len(p), 64<<10)])
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	var text string
	var truncated bool
	c.fill(&text, &truncated)
	runtime.ReadMemStats(&after)
	if got := after.TotalAlloc - before.TotalAlloc; got > 2*limit {
		t.Errorf("fill allocated %d bytes for a %d-byte limit; want at most twice the limit", got, limit)
	}
	if len(text) > limit || !truncated {
		t.Errorf("%d bytes, truncated %v", len(text), truncated)
	}
}
