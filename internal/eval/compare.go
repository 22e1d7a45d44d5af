package eval

import (
	"fmt"
	"math"
	"math/big"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/microbox/microbox/field"
)

// The comparison rules of eval stdio's outputs; whitespace is ASCII's:
// space, tab, LF, CR, VT and FF.
const (
	// CompareExact: the output is the expected output, byte for byte.
	CompareExact = "exact"
	// CompareLines: the output's lines are the expected output's, each
	// compared after removing its trailing whitespace (so CRLF is LF), and
	// blank lines at the end ignored (so a final newline, or its absence,
	// does not matter).
	CompareLines = "lines"
	// CompareTokens: the output's whitespace-separated tokens are the
	// expected output's, in order, whatever whitespace and lines separate
	// them.
	CompareTokens = "tokens"
)

// Compare is how a program's output is held against the expected one.
// With a FloatTolerance, two tokens that are both numbers match when they
// are both integers of the same value, or when they differ by at most
// FloatTolerance, absolutely or relative to the expected value (|got -
// want| <= FloatTolerance × max(1, |want|)); other tokens must be equal.
// Under lines, lines are then compared token by token. Errors name its
// fields.
type Compare struct {
	Mode           string
	FloatTolerance float64
}

// Check validates the rule.
func (c Compare) Check() error {
	switch c.Mode {
	case CompareExact, CompareLines, CompareTokens:
	default:
		return field.Errorf("Compare", "{Compare} %q: want exact, lines or tokens", c.Mode)
	}
	if c.FloatTolerance < 0 || math.IsNaN(c.FloatTolerance) || math.IsInf(c.FloatTolerance, 0) {
		return field.Errorf("FloatTolerance", "{FloatTolerance} %v: give a tolerance of 0 or more, e.g. 1e-6", c.FloatTolerance)
	}
	if c.FloatTolerance > 0 && c.Mode == CompareExact {
		return field.Errorf("FloatTolerance", "{FloatTolerance} compares numbers as tokens, which {Compare} exact does not split: use lines or tokens")
	}
	return nil
}

// Match reports whether got matches want, and if not, where they first
// differ, in one line.
func (c Compare) Match(got, want string) (bool, string) {
	switch c.Mode {
	case CompareExact:
		return matchExact(got, want)
	case CompareTokens:
		return c.matchSeq("token", fields(got), fields(want), c.tokenEqual)
	}
	equal := func(g, w string) bool { return g == w }
	if c.FloatTolerance > 0 {
		equal = func(g, w string) bool { ok, _ := c.matchSeq("", fields(g), fields(w), c.tokenEqual); return ok }
	}
	return c.matchSeq("line", lines(got), lines(want), equal)
}

// matchSeq compares two sequences (of lines or tokens) item by item.
func (c Compare) matchSeq(item string, got, want []string, equal func(g, w string) bool) (bool, string) {
	for i := 0; i < max(len(got), len(want)); i++ {
		switch {
		case i >= len(got):
			return false, fmt.Sprintf("%s %d: got the end of the output, want %s", item, i+1, snippet(want[i]))
		case i >= len(want):
			return false, fmt.Sprintf("%s %d: got %s, want the end of the output", item, i+1, snippet(got[i]))
		case !equal(got[i], want[i]):
			return false, fmt.Sprintf("%s %d: got %s, want %s", item, i+1, snippet(got[i]), snippet(want[i]))
		}
	}
	return true, ""
}

// matchExact compares byte for byte.
func matchExact(got, want string) (bool, string) {
	if got == want {
		return true, ""
	}
	i := 0
	for i < len(got) && i < len(want) && got[i] == want[i] {
		i++
	}
	rest := func(s string) string {
		if i == len(s) {
			return "the end of the output"
		}
		return snippet(s[i:])
	}
	return false, fmt.Sprintf("byte %d: got %s, want %s", i+1, rest(got), rest(want))
}

// tokenEqual compares two tokens, numbers within the tolerance.
func (c Compare) tokenEqual(got, want string) bool {
	if got == want {
		return true
	}
	number, integer := numberRE()
	if c.FloatTolerance == 0 || !number.MatchString(got) || !number.MatchString(want) {
		return false
	}
	if integer.MatchString(got) && integer.MatchString(want) {
		g, _ := new(big.Int).SetString(got, 10)
		w, _ := new(big.Int).SetString(want, 10)
		return g.Cmp(w) == 0
	}
	g, gerr := strconv.ParseFloat(got, 64)
	w, werr := strconv.ParseFloat(want, 64)
	if gerr != nil || werr != nil { // out of range
		return false
	}
	return math.Abs(g-w) <= c.FloatTolerance*math.Max(1, math.Abs(w))
}

// Numbers as compared with a tolerance: decimal, with an optional sign,
// fraction and exponent (no inf, nan or hexadecimal). Compiled at the
// first comparison, not at every start of microbox.
var numberRE = sync.OnceValues(func() (*regexp.Regexp, *regexp.Regexp) {
	return regexp.MustCompile(`^[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?$`), regexp.MustCompile(`^[+-]?[0-9]+$`)
})

func isSpace(r rune) bool {
	return r == ' ' || r == '\t' || r == '\n' || r == '\r' || r == '\v' || r == '\f'
}

// fields are s's whitespace-separated tokens.
func fields(s string) []string { return strings.FieldsFunc(s, isSpace) }

// lines are s's lines without trailing whitespace, and without the blank
// lines at its end.
func lines(s string) []string {
	ls := strings.Split(s, "\n")
	for i, l := range ls {
		ls[i] = strings.TrimRightFunc(l, isSpace)
	}
	for len(ls) > 0 && ls[len(ls)-1] == "" {
		ls = ls[:len(ls)-1]
	}
	return ls
}

// snippet quotes the start of s for a message.
func snippet(s string) string {
	const most = 40
	if len(s) <= most {
		return strconv.Quote(s)
	}
	return strconv.Quote(strings.ToValidUTF8(s[:most], "")) + "..."
}
