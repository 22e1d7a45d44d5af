package redact

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"regexp/syntax"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/microbox/microbox/field"
	"github.com/microbox/microbox/result"
)

// scan, a search at a time through a reader, finds exactly the secrets
// Go's FindAllStringSubmatchIndex finds: the context before each search
// (\b, ^, \A), empty matches, groups, case folding, runes of several
// bytes and bytes that are not UTF-8.
func TestScanFindsWhatFindAllFinds(t *testing.T) {
	exprs := []string{`a`, `ab|a`, `a|ab`, `\bab`, `\Bb`, `^x`, `(?m)^x`, `\Ax`, `x$`, `(?m)x$`, `x\z`,
		`\b`, `(?m)^`, `a*b`, `(?U)a+`, `(?i)AB`, `é+`, `[^a ]+`, `\Qa)b`, `(a)|b`, `(?P<secret>b)c`,
		`x(?P<secret>a*)`, `.`, `(?s).b`, `\x{FFFD}`, `[ab]{2,3}`, `a\b|b\B`, `ab(?:cd)?`}
	alphabet := []string{"a", "b", "c", "x", " ", "\n", "é", "\xff", "ab", "a)b"}
	rng := rand.New(rand.NewPCG(1, 2))
	texts := []string{"", "a", "xab ab xx", "x\nx\nxa\n", "abababab", "é é ée", "\xffa\xfeb\xff", "a)b A)B ab"}
	for range 300 {
		var b strings.Builder
		for range rng.IntN(24) {
			b.WriteString(alphabet[rng.IntN(len(alphabet))])
		}
		texts = append(texts, b.String())
	}
	for _, expr := range exprs {
		p, err := customPattern("x=" + expr)
		if err != nil {
			if !strings.Contains(err.Error(), "empty string") {
				t.Fatalf("%s: %v", expr, err)
			}
			p = mustPattern("x", expr, nil, false) // scan on its own, as custom patterns cannot be
		}
		for _, text := range texts {
			var want []span
			for _, m := range p.re.FindAllStringSubmatchIndex(text, -1) {
				want = p.add(want, m, 0, 0, 0)
			}
			got, err := p.scan(text, 0, 0, unmetered().clock(), nil)
			if err != nil || !slices.Equal(got, want) {
				t.Errorf("%s in %q: scan %v (%v), FindAll %v", expr, text, got, err, want)
			}
		}
	}
}

// A custom pattern is searched for only in output that holds a literal
// every match holds.
func TestRequiredLiterals(t *testing.T) {
	for expr, want := range map[string][]string{
		`ticket=T-\d+`:              {"ticket=T-"},
		`[\s\S]{0,1000}secret`:      {"secret"},
		`(a+)+b`:                    {"a"},
		`(foo|barbaz)\d(quux)`:      {"quux"},
		`(foo|barbaz)\d`:            {"barbaz", "foo"},
		`(?i)secret`:                nil,
		`[\s\S]*x|\d`:               nil,
		`(?:abc)?\d+`:               nil,
		`(?:key){2,}=(?P<secret>.)`: {"key"},
		`\x{FFFD}x`:                 nil,
	} {
		tree, err := syntax.Parse(expr, syntax.Perl)
		if err != nil {
			t.Fatal(err)
		}
		if got := requiredLiterals(tree); !slices.Equal(got, want) {
			t.Errorf("%s: %q, want %q", expr, got, want)
		}
	}
	// Output without the literal costs nothing, whatever the program.
	r := testRedactor(t, `slow=[\s\S]{0,1000}secret`)
	out := strings.Repeat("x", 1<<20)
	if got, _, err := r.redact(out, NewMeter(time.Second)); err != nil || got != out {
		t.Fatalf("error %v", err)
	}
}

// costly is output that patterns as cheap to write as these cost many
// seconds of the server's CPU to search, tens of microseconds a byte: a
// large compiled program (counted repetition) and a search that reads to
// the end of the text for each of its matches.
var costly = []struct{ pattern, output string }{
	{`slow=[\s\S]{0,1000}z`, strings.Repeat("abcdefghijklmnopqrstuvwxy\n", 40<<10) + "z"},
	{`slow=[\s\S]*z|a`, strings.Repeat("a", 250<<10)},
}

// When a pattern costs more than the budget, redaction stops once the
// budget is spent, and the output is withheld, not passed on unmasked.
func TestRedactBudgetStopsCostlyPatterns(t *testing.T) {
	const budget = 100 * time.Millisecond
	for _, c := range costly {
		r := testRedactor(t, c.pattern)
		m := NewMeter(budget)
		res := &result.Result{Stdout: c.output, Stderr: "a@b.io\n"}
		start := time.Now()
		got, err := r.Result(res, m)
		took := time.Since(start)
		var fe *field.Error
		if !errors.As(err, &fe) || fe.Name != "RedactBudget" || !strings.Contains(err.Error(), "100ms") {
			t.Errorf("%s: error %v, want one naming RedactBudget and its 100ms", c.pattern, err)
		}
		if res.Stdout != Withheld || res.Stderr != Withheld || got != nil {
			t.Errorf("%s: stdout %.40q stderr %q redactions %v: want both withheld", c.pattern, res.Stdout, res.Stderr, got)
		}
		if m.Spent() < budget || took > 10*budget {
			t.Errorf("%s: charged %v, returned after %v, for a budget of %v", c.pattern, m.Spent(), took, budget)
		}
	}
}

// The caller leaving stops redaction at once, whatever budget is left.
func TestRedactCancelStops(t *testing.T) {
	r := testRedactor(t, costly[0].pattern)
	m := NewMeter(time.Hour)
	ctx, cancel := context.WithCancelCause(context.Background())
	context.AfterFunc(ctx, func() { m.Cancel(context.Cause(ctx)) })
	gone := errors.New("the caller left")
	time.AfterFunc(50*time.Millisecond, func() { cancel(gone) })
	res := &result.Result{Stdout: costly[0].output}
	start := time.Now()
	_, err := r.Result(res, m)
	if !errors.Is(err, gone) || res.Stdout != Withheld {
		t.Fatalf("error %v, stdout %.40q: want the cause, and the output withheld", err, res.Stdout)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("returned %v after it began, 50 ms of it before the cancel", took)
	}
}

// Streamed output passes on what was redacted before the budget ran out,
// then the notice, then nothing: not the rest unmasked.
func TestWriterWithholdsOnceStopped(t *testing.T) {
	const budget = 50 * time.Millisecond
	r := testRedactor(t, costly[0].pattern)
	m := NewMeter(budget)
	var out bytes.Buffer
	w := r.NewWriter(&out, m)
	start := time.Now()
	w.Write([]byte("first a@b.io\n"))
	w.Write([]byte(costly[0].output + "\n"))
	w.Write([]byte("last a@b.io\n"))
	res := &result.Result{}
	if _, err := r.Result(res, m, w); err == nil {
		t.Fatal("no error")
	}
	if took := time.Since(start); took > 10*budget {
		t.Errorf("took %v for a budget of %v", took, budget)
	}
	if want := "first [REDACTED_EMAIL]\n" + Withheld; out.String() != want {
		t.Fatalf("streamed %.80q, want %q", out.String(), want)
	}
}
