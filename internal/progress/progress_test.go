package progress

import (
	"testing"
	"time"
)

func TestLine(t *testing.T) {
	b := New(nil, 400, "runs", []string{"ok", "nonzero", "timeout"})
	for range 100 {
		b.Add("ok")
	}
	b.Add("timeout")
	got := b.line(10 * time.Second)
	want := "[=======>                      ] 101/400 10.1 runs/s ETA 30s | ok 100 timeout 1"
	if got != want {
		t.Fatalf("line\n got %q\nwant %q", got, want)
	}
	b = New(nil, -1, "samples", nil)
	b.Add("passed")
	if got := b.line(time.Second); got != "1 1.0 samples/s | passed 1" {
		t.Fatalf("unknown total: %q", got)
	}
}
