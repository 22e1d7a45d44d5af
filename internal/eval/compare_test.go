package eval

import (
	"strings"
	"testing"
)

// Each rule on the cases that tell the rules apart.
func TestCompare(t *testing.T) {
	cases := []struct {
		got, want string
		lines     bool
		tokens    bool
		exact     bool
		float     bool // tokens with --float-tolerance 1e-6
		floatLine bool // lines with --float-tolerance 1e-6
	}{
		{"3\n", "3\n", true, true, true, true, true},
		{"3", "3\n", true, true, false, true, true},                                               // the final newline
		{"3 \t\r\n\n\n", "3\n", true, true, false, true, true},                                    // trailing whitespace, blank lines at the end
		{"3\r\n4\r\n", "3\n4\n", true, true, false, true, true},                                   // CRLF
		{" 3\n", "3\n", false, true, false, true, true},                                           // leading whitespace
		{"1  2\n", "1 2\n", false, true, false, true, true},                                       // spaces inside a line
		{"1\n2\n", "1 2\n", false, true, false, true, false},                                      // the lines differ, not the tokens
		{"1\n\n2\n", "1\n2\n", false, true, false, true, false},                                   // a blank line inside
		{"0.3333333\n", "0.333333333\n", false, false, false, true, true},                         // within 1e-6
		{"0.3334\n", "0.333333333\n", false, false, false, false, false},                          // not within 1e-6
		{"1000000.5\n", "1000000\n", false, false, false, true, true},                             // within 1e-6 relatively
		{"1e-7\n", "0\n", false, false, false, true, true},                                        // within 1e-6 absolutely
		{"007\n", "7\n", false, false, false, true, true},                                         // integers: the same value
		{"123456789012345678901\n", "123456789012345678900\n", false, false, false, false, false}, // integers: exact, however large
		{"nan\n", "nan\n", true, true, true, true, true},                                          // not a number: compared as text
		{"inf\n", "1e400\n", false, false, false, false, false},
		{"YES\n", "yes\n", false, false, false, false, false}, // case counts
		{"", "\n", true, true, false, true, true},             // nothing is a blank output
		{"x\n", "", false, false, false, false, false},
	}
	rules := []struct {
		c    Compare
		pick func(i int) bool
	}{
		{Compare{Mode: CompareLines}, func(i int) bool { return cases[i].lines }},
		{Compare{Mode: CompareTokens}, func(i int) bool { return cases[i].tokens }},
		{Compare{Mode: CompareExact}, func(i int) bool { return cases[i].exact }},
		{Compare{Mode: CompareTokens, FloatTolerance: 1e-6}, func(i int) bool { return cases[i].float }},
		{Compare{Mode: CompareLines, FloatTolerance: 1e-6}, func(i int) bool { return cases[i].floatLine }},
	}
	for _, r := range rules {
		if err := r.c.Check(); err != nil {
			t.Fatal(err)
		}
		for i, c := range cases {
			ok, diff := r.c.Match(c.got, c.want)
			if ok != r.pick(i) || ok != (diff == "") {
				t.Errorf("%+v: Match(%q, %q) = %v %q, want %v", r.c, c.got, c.want, ok, diff, r.pick(i))
			}
		}
	}
}

// A failed comparison says where, in one line.
func TestCompareMessages(t *testing.T) {
	for _, c := range []struct {
		c         Compare
		got, want string
		msg       string
	}{
		{Compare{Mode: CompareLines}, "1\n2\n", "1\n3\n", `line 2: got "2", want "3"`},
		{Compare{Mode: CompareLines}, "1\n", "1\n3\n", `line 2: got the end of the output, want "3"`},
		{Compare{Mode: CompareLines}, "1\n2\n", "1\n", `line 2: got "2", want the end of the output`},
		{Compare{Mode: CompareTokens}, "1 2 4", "1 2 3", `token 3: got "4", want "3"`},
		{Compare{Mode: CompareExact}, "ab\n", "ac\n", `byte 2: got "b\n", want "c\n"`},
		{Compare{Mode: CompareExact}, "a", "a\n", `byte 2: got the end of the output, want "\n"`},
		{Compare{Mode: CompareLines}, strings.Repeat("x", 100), "y", `line 1: got "` + strings.Repeat("x", 40) + `"..., want "y"`},
	} {
		if ok, msg := c.c.Match(c.got, c.want); ok || msg != c.msg {
			t.Errorf("%+v: Match(%q, %q) = %v %q, want %q", c.c, c.got, c.want, ok, msg, c.msg)
		}
	}
}

func TestCompareCheck(t *testing.T) {
	for _, c := range []Compare{{Mode: "fuzzy"}, {Mode: CompareLines, FloatTolerance: -1}, {Mode: CompareExact, FloatTolerance: 1e-6}} {
		if err := c.Check(); err == nil {
			t.Errorf("%+v: accepted", c)
		}
	}
}
