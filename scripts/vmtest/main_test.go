package main

import (
	"bytes"
	"compress/gzip"
	"io"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The host trusts the guest's console only when its closing line agrees
// with its PASS/FAIL lines.
func TestConsoleVerdict(t *testing.T) {
	cases := []struct {
		console string
		ok      bool
	}{
		{"PASS a (1s)\nFAIL b: x\n1 passed, 1 failed\n", true}, // counts agree; failures are judged by run
		{"PASS a (1s)\r\nPASS b\r\n2 passed, 0 failed\r\n", true},
		{"PASS a\nkernel panic\n", false},       // no closing line: crashed
		{"PASS a\n2 passed, 0 failed\n", false}, // disagrees
		{"0 passed, 0 failed\n", false},         // ran nothing
		{"[ 1.0] noise\nPASS a\n1 passed, 0 failed\n", true},
	}
	for _, c := range cases {
		var echo bytes.Buffer
		s := scanConsole(strings.NewReader(c.console), &echo, time.Now())
		_, _, err := s.verdict()
		if (err == nil) != c.ok {
			t.Errorf("%q: verdict error %v, want ok=%v", c.console, err, c.ok)
		}
		if strings.Contains(echo.String(), "\r") {
			t.Errorf("%q: carriage returns echoed", c.console)
		}
	}
}

// The archive is gzipped newc cpio with parents before children and the
// trailer last, as the kernel's unpacker needs.
func TestCpioLayout(t *testing.T) {
	tr := tree{}
	tr.addData("/usr/bin/x", []byte("hello"), 0o755)
	tr.add("/lib", &entry{mode: syscall.S_IFLNK | 0o777, target: "usr/lib"})
	tr.add("/dev/console", &entry{mode: syscall.S_IFCHR | 0o600, rdev: [2]uint32{5, 1}})
	var buf bytes.Buffer
	if err := tr.writeCpio(&buf); err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(&buf)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(zr)
	var names []string
	for len(raw) > 0 {
		if string(raw[:6]) != "070701" {
			t.Fatalf("bad magic %q", raw[:6])
		}
		field := func(i int) int {
			v, _ := strconv.ParseUint(string(raw[6+8*i:14+8*i]), 16, 32)
			return int(v)
		}
		size, nameLen := field(6), field(11)
		name := string(raw[110 : 110+nameLen-1])
		names = append(names, name)
		off := align4(110 + nameLen)
		if name == "usr/bin/x" && string(raw[off:off+size]) != "hello" {
			t.Errorf("content %q", raw[off:off+size])
		}
		if name == "dev/console" && (field(9) != 5 || field(10) != 1) {
			t.Errorf("console rdev %d:%d", field(9), field(10))
		}
		raw = raw[align4(off+size):]
	}
	want := "dev dev/console lib usr usr/bin usr/bin/x TRAILER!!!"
	if got := strings.Join(names, " "); got != want {
		t.Fatalf("entries %q, want %q", got, want)
	}
}

func align4(n int) int { return (n + 3) &^ 3 }
