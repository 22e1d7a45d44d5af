package eval

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// Each layout of testdata/stdio_problems.jsonl read as it is published.
func TestReadStdioProblems(t *testing.T) {
	ps, err := ReadStdioProblems("testdata/stdio_problems.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]IOTest{
		"add":   {{"1 2\n", "3\n"}, {"10 -4\n", "6\n"}, {"2 2", "4"}},
		"ratio": {{"1 3\n", "0.333333333\n"}, {"2 8\n", "0.25\n"}},
		"words": {{"b a\nd c\n", "a b\nc d\n"}},
		// APPS: the id is a number; a list of lines is joined with newlines.
		"4001": {{"3\n1 2 3\n", "6\n"}, {"2\n5 7", "12"}},
		// CodeContests: public, private, then generated tests.
		"cc_max": {{"3\n1 5 2\n", "5\n"}, {"1\n-7\n", "-7\n"}, {"4\n9 9 0 3\n", "9\n"}, {"2\n100 -100\n", "100\n"}},
		// LiveCodeBench: the private cases compressed.
		"lcb_rev": {{"abc\n", "cba\n"}, {"hello\n", "olleh\n"}, {"ab\n", "ba\n"}},
	}
	for id, tests := range want {
		if got := ps.tests[id]; !slices.Equal(got, tests) {
			t.Errorf("%s: %q, want %q", id, got, tests)
		}
	}
	if len(ps.tests) != len(want) {
		t.Errorf("%d problems read, want %d", len(ps.tests), len(want))
	}
	for id, why := range map[string]string{"4002": "call-based", "4003": "no tests", "lcb_fn": "call-based"} {
		if !strings.Contains(ps.LeftOut[id], why) {
			t.Errorf("%s: left out %q, want %q", id, ps.LeftOut[id], why)
		}
	}
}

// LiveCodeBench's compressed test cases, made by Python as LiveCodeBench
// makes them, in every pickle protocol Python writes.
func TestLiveCodeBenchCompressed(t *testing.T) {
	const python = "/usr/bin/python3"
	if _, err := os.Stat(python); err != nil {
		t.Skipf("no %s to compress test cases with", python)
	}
	cases := `[{"input": "\u00e9\n` + strings.Repeat("x", 70000) + `", "output": "1\n", "testtype": "stdin"}]`
	out, err := exec.Command(python, "-c", `
import base64, pickle, sys, zlib
for protocol in range(2, pickle.HIGHEST_PROTOCOL + 1):
    print(base64.b64encode(zlib.compress(pickle.dumps(sys.argv[1], protocol=protocol))).decode())
`, cases).Output()
	if err != nil {
		t.Fatal(err)
	}
	for i, line := range strings.Fields(string(out)) {
		raw, _ := json.Marshal(line)
		got, err := liveCodeBenchCases(raw)
		if err != nil || len(got) != 1 || got[0].Input != "é\n"+strings.Repeat("x", 70000) || got[0].TestType != "stdin" {
			t.Errorf("protocol %d: %v %.40q", i+2, err, got)
		}
	}
}

// Only a pickled str is read: nothing else a pickle can hold.
func TestUnpickleString(t *testing.T) {
	good := []byte("\x80\x04\x95\x07\x00\x00\x00\x00\x00\x00\x00\x8c\x03abc\x94.")
	if s, err := unpickleString(good); err != nil || s != "abc" {
		t.Fatalf("%q %v", s, err)
	}
	for _, bad := range [][]byte{
		nil,
		[]byte("\x80\x04K\x01."),           // an int
		[]byte("cos\nsystem\n(S'ls'\ntR."), // a call
		[]byte("\x80\x04\x8c\x03abc\x8c\x01d\x94."), // two strings
		[]byte("\x80\x04\x8c\x05abc."),              // short
		[]byte("\x80\x04\x8c\x03abc.x"),             // trailing bytes
		[]byte("\x80\x04\x8c\x02\xff\xfe."),         // not UTF-8
		bytes.Repeat([]byte{0x80}, 3),
	} {
		if s, err := unpickleString(bad); err == nil {
			t.Errorf("%q: read as %q", bad, s)
		}
	}
}
