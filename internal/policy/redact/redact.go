// Package redact is output redaction: secrets in the program's stdout and
// stderr are replaced with a typed token before they leave microbox.
// Patterns are applied one after another, and where two matches overlap
// the earlier pattern wins. A built-in pattern whose matches hold no space
// runs only on the words (runs of non-space bytes) that hold one of its
// hints, literals every match contains: finding those is a fast substring
// search, and the regexp then sees a few short words instead of the whole
// output. A custom pattern's hints are found in its syntax
// (requiredLiterals): output that holds none of them is not searched.
//
// Go's regexp (RE2) never backtracks, but what it costs is the input's
// length times the size of the pattern's compiled program, which counted
// repetition multiplies (`[\s\S]{0,1000}z` is two thousand instructions,
// tens of microseconds a byte), and finding every match can read far past
// each one (`[\s\S]*z|a` reads to the end of the text for every "a"). So
// redaction is metered (Meter): a pattern reads the text through a reader
// that charges the time it takes and ends the text once the run's budget
// is spent or its caller has left, and the output is then withheld, never
// passed on unmasked.
package redact

import (
	"fmt"
	"io"
	"path"
	"regexp"
	"regexp/syntax"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/microbox/microbox/field"
)

// pattern is one kind of secret.
type pattern struct {
	kind string // lower case, as the result lists it
	re   *regexp.Regexp
	// secret is the index of the submatch to mask: a pattern may match
	// some context around the secret (a boundary) without masking it.
	secret int
	// hints are literals one of which every match contains (a custom
	// pattern's are requiredLiterals); none means the regexp runs on the
	// whole text.
	hints []string
	// words says the secret never holds a space (\s) and the pattern
	// finds it the same at the start of a word, so the regexp need only
	// run on the runs of non-space bytes that hold a hint.
	words bool
	// next is re for a search that starts past the text's first rune:
	// \A(?s:.)(?s:.*?)(re), read from the rune before the search's start,
	// so that \b, ^ and \A see what precedes it; its group 1 is re's
	// match, and re's groups follow.
	next *regexp.Regexp
	// prefix is a literal every match starts with ("" if none): a search
	// skips to it with a substring search.
	prefix string
}

// token is what a match is replaced with, e.g. [REDACTED_API_KEY].
func (p *pattern) token() string { return "[REDACTED_" + strings.ToUpper(p.kind) + "]" }

// ipv4Octet is 0-255 in decimal.
const ipv4Octet = `(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])`

// builtinPatterns is the documented list (README, "Output redaction"), in
// priority order.
var builtinPatterns = []struct {
	kind, re string
	hints    []string
	words    bool
}{
	// PEM private keys, to the END line or, when the output was cut off,
	// to the end of the text.
	{"private_key", `-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----(?s:.*?)(?:-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|\z)`,
		[]string{"PRIVATE KEY"}, false},
	// OpenAI/Anthropic-style sk- keys, AWS access key ids, GitHub, Slack
	// and Google API tokens.
	{"api_key", `\b(?:sk-[A-Za-z0-9_-]{20,}|(?:AKIA|ASIA)[0-9A-Z]{16}|gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,}|xox[abposr]-[A-Za-z0-9-]{10,}|AIza[0-9A-Za-z_-]{35})`,
		[]string{"sk-", "AKIA", "ASIA", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "xox", "AIza"}, true},
	// URLs with a password: postgres://user:pass@host/db, redis://:pw@host.
	{"connection_string", `\b[A-Za-z][A-Za-z0-9+.-]*://[^\s:/@'"]*:[^\s@/'"]+@[^\s'"<>]+`, []string{"://"}, true},
	{"email", `\b[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}\b`, []string{"@"}, true},
	// RFC 1918 addresses.
	{"private_ip", `\b(?:10\.` + ipv4Octet + `\.` + ipv4Octet + `\.` + ipv4Octet + `|172\.(?:1[6-9]|2[0-9]|3[01])\.` + ipv4Octet + `\.` + ipv4Octet + `|192\.168\.` + ipv4Octet + `\.` + ipv4Octet + `)\b`,
		[]string{"10.", "172.", "192.168."}, true},
	// Home directories of the host (Linux, macOS, Windows); the run's own
	// host paths are added by hostPathPattern.
	{"host_path", `(?:^|[^\w./\\-])(?P<secret>(?:/home|/root|/Users)\b(?:/[^\s'"<>|:;,)\]]*)?|[A-Za-z]:\\Users\\[^\s'"<>|]*)`,
		[]string{"/home", "/root", "/Users", `:\Users`}, true},
}

// builtins are builtinPatterns compiled, once per process.
var builtins = sync.OnceValue(func() []*pattern {
	var ps []*pattern
	for _, b := range builtinPatterns {
		ps = append(ps, mustPattern(b.kind, b.re, b.hints, b.words))
	}
	return ps
})

// Redactor masks secrets; it is safe for concurrent use.
type Redactor struct {
	patterns []*pattern
}

// New builds a Redactor from the custom patterns (NAME=REGEX,
// which come first: they name the caller's own secrets), the built-in
// list, and the host paths this run involves.
func New(custom []string, hostPaths []string) (*Redactor, error) {
	r := &Redactor{}
	for _, c := range custom {
		p, err := customPattern(c)
		if err != nil {
			return nil, err
		}
		r.patterns = append(r.patterns, p)
	}
	r.patterns = append(r.patterns, builtins()...)
	if p := hostPathPattern(hostPaths); p != nil {
		r.patterns = append(r.patterns, p)
	}
	return r, nil
}

var nameRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_]*$`) })

// customPattern parses one of RedactPatterns, NAME=REGEX. A submatch
// named secret, if any, is the part masked.
func customPattern(spec string) (*pattern, error) {
	name, expr, ok := strings.Cut(spec, "=")
	if !ok || !nameRE().MatchString(name) {
		return nil, field.Errorf("RedactPatterns", "{RedactPatterns} %q: write NAME=REGEX, NAME letters, digits and _", spec)
	}
	re, err := regexp.Compile(expr)
	if err != nil {
		return nil, field.Errorf("RedactPatterns", "{RedactPatterns} %s: %v", name, err)
	}
	if re.MatchString("") {
		return nil, field.Errorf("RedactPatterns", "{RedactPatterns} %s: the pattern matches the empty string", name)
	}
	p, err := newPattern(strings.ToLower(name), re, nil, false)
	if err != nil {
		return nil, field.Errorf("RedactPatterns", "{RedactPatterns} %s: %v", name, err)
	}
	return p, nil
}

func mustPattern(kind, expr string, hints []string, words bool) *pattern {
	p, err := newPattern(kind, regexp.MustCompile(expr), hints, words)
	if err != nil {
		panic(err)
	}
	return p
}

// newPattern is re as a pattern, with the regexp its searches past the
// text's start use (pattern.next).
func newPattern(kind string, re *regexp.Regexp, hints []string, words bool) (*pattern, error) {
	tree, err := syntax.Parse(re.String(), syntax.Perl)
	if err != nil {
		return nil, err
	}
	// The tree's String, not re's source: a \Q that the source leaves
	// open would quote the closing parenthesis.
	next, err := regexp.Compile(`\A(?s:.)(?s:.*?)(` + tree.String() + `)`)
	if err != nil {
		return nil, err
	}
	if next.NumSubexp() != re.NumSubexp()+1 {
		return nil, fmt.Errorf("the pattern's groups cannot be counted (%d, then %d)", re.NumSubexp(), next.NumSubexp())
	}
	if hints == nil {
		hints = requiredLiterals(tree)
	}
	prefix, _ := re.LiteralPrefix()
	return &pattern{kind: kind, re: re, secret: secretGroup(re), hints: hints, words: words, next: next, prefix: prefix}, nil
}

// secretGroup is the index of the submatch named secret, or 0.
func secretGroup(re *regexp.Regexp) int {
	if i := re.SubexpIndex("secret"); i > 0 {
		return i
	}
	return 0
}

// hostPathPattern masks the host paths a run involves (its prepared root,
// which /proc/self/mountinfo shows the program, and the like) as host_path.
// Paths the sandbox has itself (/, /tmp, /usr...) are left out: masking
// them would mask the program's own paths.
func hostPathPattern(paths []string) *pattern {
	var alts, kept []string
	for _, p := range paths {
		p = path.Clean(p)
		if !path.IsAbs(p) || strings.Count(p, "/") < 2 || sandboxHasPath(p) {
			continue
		}
		alt := regexp.QuoteMeta(p)
		if last := p[len(p)-1]; wordByte(last) {
			alt += `\b` // /srv/root must not match /srv/rootfs
		}
		alts, kept = append(alts, alt), append(kept, p)
	}
	if len(alts) == 0 {
		return nil
	}
	return mustPattern("host_path", `(?:^|[^\w./-])(?P<secret>(?:`+strings.Join(alts, "|")+`)(?:/[^\s'"<>|:;,)\]]*)?)`,
		kept, !strings.ContainsAny(strings.Join(kept, ""), " \t\n\f\r"))
}

// sandboxHasPath reports whether p is a path every sandbox has, so seeing
// it in the output says nothing about the host.
func sandboxHasPath(p string) bool {
	for _, d := range []string{"/usr", "/etc", "/proc", "/dev", "/tmp", "/bin", "/sbin", "/lib", "/lib64", "/run"} {
		if p == d || strings.HasPrefix(d, p+"/") {
			return true
		}
	}
	return false
}

func wordByte(b byte) bool {
	return b == '_' || '0' <= b && b <= '9' || 'a' <= b && b <= 'z' || 'A' <= b && b <= 'Z'
}

// Redaction is one kind of secret that was masked, and how often.
type Redaction struct {
	Kind  string `json:"kind"`
	Count int    `json:"count"`
}

// span is a match to mask: text[start:end], by pattern i.
type span struct{ start, end, pattern int }

// redact returns text with every secret replaced by its token, and how
// many of each pattern's secrets it masked (indexed like r.patterns),
// charging the time it takes to m; its error is m's when m stopped it, or
// had stopped before it began. Work that was done is not undone: a search
// that ends past the budget stops the next one.
func (r *Redactor) redact(text string, m *Meter) (string, []int, error) {
	if err := m.Err(); err != nil {
		return "", nil, err
	}
	counts := make([]int, len(r.patterns))
	c := m.clock()
	var taken []span // sorted by start, never overlapping
	for i, p := range r.patterns {
		found, err := p.find(text, i, c)
		if err != nil {
			return "", nil, err
		}
		taken = mergeSpans(taken, found)
	}
	if len(taken) == 0 {
		return text, counts, nil
	}
	var b strings.Builder
	b.Grow(len(text))
	last := 0
	for _, s := range taken {
		b.WriteString(text[last:s.start])
		b.WriteString(r.patterns[s.pattern].token())
		counts[s.pattern]++
		last = s.end
	}
	b.WriteString(text[last:])
	return b.String(), counts, nil
}

// find returns the spans to mask in text, sorted, labelled with the
// pattern's index i.
func (p *pattern) find(text string, i int, c *clock) ([]span, error) {
	switch {
	case len(p.hints) == 0:
		return p.scan(text, 0, i, c, nil)
	case !p.words:
		for _, h := range p.hints {
			if strings.Contains(text, h) {
				return p.scan(text, 0, i, c, nil)
			}
		}
		return nil, nil
	}
	var spans []span
	// Nearby words are matched together, in regions of up to
	// regionMax bytes: one regexp call per word would cost more in
	// calls than in matching when candidates are dense.
	regionStart, regionEnd := -1, -1
	flush := func() (err error) {
		if regionStart >= 0 {
			spans, err = p.match(text[regionStart:regionEnd], regionStart, i, c, spans)
		}
		return err
	}
	next := make([]int, len(p.hints)) // next occurrence of each hint; -1: none left
	for j, h := range p.hints {
		next[j] = strings.Index(text, h)
	}
	for pos := 0; pos < len(text); {
		at := -1
		for j, h := range p.hints {
			if next[j] >= 0 && next[j] < pos {
				if k := strings.Index(text[pos:], h); k >= 0 {
					next[j] = pos + k
				} else {
					next[j] = -1
				}
			}
			if next[j] >= 0 && (at < 0 || next[j] < at) {
				at = next[j]
			}
		}
		if at < 0 {
			break
		}
		// The run of non-space bytes around the hint: no match crosses
		// a space, so the regexp needs nothing else.
		start := at
		for start > pos && !isRegexpSpace(text[start-1]) {
			start--
		}
		end := at
		for end < len(text) && !isRegexpSpace(text[end]) {
			end++
		}
		if regionStart >= 0 && start-regionEnd <= regionGap && end-regionStart <= regionMax {
			regionEnd = end
		} else {
			if err := flush(); err != nil {
				return nil, err
			}
			regionStart, regionEnd = start, end
		}
		pos = end + 1
	}
	err := flush() // before spans is read: it appends to it
	return spans, err
}

// Words with candidates at most regionGap bytes apart are matched in one
// regexp call, up to regionMax bytes (small enough for Go's fast
// backtracking matcher).
const (
	regionGap = 64
	regionMax = 1024
)

// isRegexpSpace reports whether b is what RE2's \s matches.
func isRegexpSpace(b byte) bool {
	return b == ' ' || b == '\t' || b == '\n' || b == '\f' || b == '\r'
}

// match appends the spans of the pattern's matches in s, which starts at
// offset in the whole text: a region of at most regionMax bytes in one
// call, a longer one (a single long word) by scan, which the meter can
// stop.
func (p *pattern) match(s string, offset, i int, c *clock, spans []span) ([]span, error) {
	if len(s) > regionMax {
		return p.scan(s, offset, i, c, spans)
	}
	for _, m := range p.re.FindAllStringSubmatchIndex(s, -1) {
		spans = p.add(spans, m, 0, offset, i)
	}
	return spans, c.tick()
}

// add appends the secret of a match to spans: m are the submatches of a
// search whose group g is the pattern's match, at offset in the text.
func (p *pattern) add(spans []span, m []int, g, offset, i int) []span {
	if a, b := m[2*(g+p.secret)], m[2*(g+p.secret)+1]; a >= 0 && b > a {
		spans = append(spans, span{offset + a, offset + b, i})
	}
	return spans
}

// scan appends the spans of the pattern's matches in s (taken as a whole
// text), which starts at offset: the matches FindAllStringSubmatchIndex
// finds, one search at a time, each reading s through a meteredReader
// so that the clock's meter can end it.
func (p *pattern) scan(s string, offset, i int, c *clock, spans []span) ([]span, error) {
	r := &meteredReader{c: c}
	for pos := 0; pos < len(s); {
		if p.prefix != "" {
			k := strings.Index(s[pos:], p.prefix)
			if k < 0 {
				break
			}
			pos += k
		}
		re, g, from := p.re, 0, pos
		if pos > 0 {
			_, w := utf8.DecodeLastRuneInString(s[:pos])
			re, g, from = p.next, 1, pos-w
		}
		r.s, r.i = s[from:], 0
		m := re.FindReaderSubmatchIndex(r)
		if r.err != nil {
			return nil, r.err
		}
		if m == nil {
			break
		}
		spans = p.add(spans, m, g, offset+from, i)
		start, end := from+m[2*g], from+m[2*g+1]
		if end > start {
			pos = end
		} else { // empty: look again past the next rune, as FindAll does
			_, w := utf8.DecodeRuneInString(s[start:])
			pos = start + max(w, 1)
		}
	}
	return spans, c.tick()
}

// tickRunes is how many runes a meteredReader reads between two charges
// to its meter: few enough that a large program's steps do not run long
// past the budget, enough that reading the clock costs little.
const tickRunes = 32

// meteredReader gives a regexp s a rune at a time, as Go's regexp reads a
// string, and ends s early (an error the regexp takes for the text's end)
// once its clock's meter stops.
type meteredReader struct {
	s   string
	i   int
	n   int
	c   *clock
	err error
}

func (r *meteredReader) ReadRune() (rune, int, error) {
	if r.n++; r.n == tickRunes {
		r.n = 0
		if err := r.c.tick(); err != nil {
			r.err = err
		}
	}
	if r.err != nil {
		return 0, 0, r.err
	}
	if r.i >= len(r.s) {
		return 0, 0, io.EOF
	}
	if b := r.s[r.i]; b < utf8.RuneSelf {
		r.i++
		return rune(b), 1, nil
	}
	c, w := utf8.DecodeRuneInString(r.s[r.i:])
	r.i += w
	return c, w, nil
}

// mergeSpans adds the spans of found (sorted, not overlapping each
// other) that overlap nothing in taken, keeping the result sorted. It is
// one linear pass over both, so redaction stays linear in the output.
func mergeSpans(taken, found []span) []span {
	if len(found) == 0 {
		return taken
	}
	out := make([]span, 0, len(taken)+len(found))
	j := 0
	for _, f := range found {
		for j < len(taken) && taken[j].end <= f.start {
			out = append(out, taken[j])
			j++
		}
		if j < len(taken) && taken[j].start < f.end {
			continue // overlaps an earlier pattern's match
		}
		out = append(out, f)
	}
	return append(out, taken[j:]...)
}

// summary turns per-pattern counts into the result's list, one entry per
// kind in the patterns' order (a custom pattern may share a kind).
func (r *Redactor) summary(counts []int) []Redaction {
	var out []Redaction
	index := map[string]int{}
	for i, n := range counts {
		if n == 0 {
			continue
		}
		kind := r.patterns[i].kind
		if j, ok := index[kind]; ok {
			out[j].Count += n
			continue
		}
		index[kind] = len(out)
		out = append(out, Redaction{Kind: kind, Count: n})
	}
	return out
}

// addCounts adds b into a.
func addCounts(a, b []int) {
	for i := range b {
		a[i] += b[i]
	}
}
