// Package redact is output redaction: secrets in the program's stdout and
// stderr are replaced with a typed token before they leave microbox. Go's
// regexp (RE2) matches in time linear in the input, so no output can make
// this slow beyond its size. Patterns are applied one after another, and where
// two matches overlap the earlier pattern wins. A built-in pattern whose
// matches hold no space runs only on the words (runs of non-space bytes)
// that hold one of its hints, literals every match contains: finding
// those is a fast substring search, and the regexp then sees a few short
// words instead of the whole output.
package redact

import (
	"path"
	"regexp"
	"strings"
	"sync"

	"github.com/microbox/microbox/field"
)

// pattern is one kind of secret.
type pattern struct {
	kind string // lower case, as the result lists it
	re   *regexp.Regexp
	// secret is the index of the submatch to mask: a pattern may match
	// some context around the secret (a boundary) without masking it.
	secret int
	// hints are literals one of which every match contains; none means
	// the regexp runs on the whole text.
	hints []string
	// words says the secret never holds a space (\s) and the pattern
	// finds it the same at the start of a word, so the regexp need only
	// run on the runs of non-space bytes that hold a hint.
	words bool
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
	for _, b := range builtinPatterns {
		r.patterns = append(r.patterns, mustPattern(b.kind, b.re, b.hints, b.words))
	}
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
	return &pattern{kind: strings.ToLower(name), re: re, secret: secretGroup(re)}, nil
}

func mustPattern(kind, expr string, hints []string, words bool) *pattern {
	re := regexp.MustCompile(expr)
	return &pattern{kind: kind, re: re, secret: secretGroup(re), hints: hints, words: words}
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
// many of each pattern's secrets it masked (indexed like r.patterns).
func (r *Redactor) redact(text string) (string, []int) {
	counts := make([]int, len(r.patterns))
	var taken []span // sorted by start, never overlapping
	for i, p := range r.patterns {
		taken = mergeSpans(taken, p.find(text, i))
	}
	if len(taken) == 0 {
		return text, counts
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
	return b.String(), counts
}

// find returns the spans to mask in text, sorted, labelled with the
// pattern's index i.
func (p *pattern) find(text string, i int) []span {
	switch {
	case len(p.hints) == 0:
		return p.match(text, 0, i, nil)
	case !p.words:
		for _, h := range p.hints {
			if strings.Contains(text, h) {
				return p.match(text, 0, i, nil)
			}
		}
		return nil
	}
	var spans []span
	// Nearby words are matched together, in regions of up to
	// regionMax bytes: one regexp call per word would cost more in
	// calls than in matching when candidates are dense.
	regionStart, regionEnd := -1, -1
	flush := func() {
		if regionStart >= 0 {
			spans = p.match(text[regionStart:regionEnd], regionStart, i, spans)
		}
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
			flush()
			regionStart, regionEnd = start, end
		}
		pos = end + 1
	}
	flush()
	return spans
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
// offset in the whole text.
func (p *pattern) match(s string, offset, i int, spans []span) []span {
	for _, m := range p.re.FindAllStringSubmatchIndex(s, -1) {
		if a, b := m[2*p.secret], m[2*p.secret+1]; a >= 0 && b > a {
			spans = append(spans, span{offset + a, offset + b, i})
		}
	}
	return spans
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
