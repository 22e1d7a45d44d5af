package nsjail

import (
	"bytes"
	"os"
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
	if exceeded(c) || c.buf.String() != "abcd" {
		t.Fatalf("exactly the limit: exceeded=%v %q", exceeded(c), c.buf.String())
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
	if tee.String() != "hel" || c.buf.Len() != 0 {
		t.Fatalf("tee %q kept %q", tee.String(), c.buf.String())
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
