package batch

// Ceilings: the most a task may ask for. A limit's ceiling is the base's
// own value (a task may lower a limit, not raise it) unless the operator
// raised it with --max-FLAG; the task's data (code, stdin, files, redact
// patterns, preload) have ceilings of their own. Prepare refuses a task
// over one as bad input naming the key, the value and the ceiling.

import (
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"time"

	units "github.com/docker/go-units"

	"github.com/microbox/microbox/field"
	"github.com/microbox/microbox/nsjail"
)

// Ceiling is one ceiling, set by the operator's flag --max-Name.
type Ceiling struct {
	Name string // the flag's name after "--max-"
	Key  string // the task key it bounds
	Kind Kind   // of its value: size, duration, float or count
	// Default is a data ceiling's default; "" for a limit's, which is
	// the base's own value.
	Default string
	// Hard, if set, is the most the ceiling itself may be.
	Hard float64
	Doc  string // the flag's help
	// Eval: it applies to eval's tasks too, which carry its samples'
	// code and its problems' input (their limits come from eval's own
	// flags).
	Eval bool
	// measure is a data ceiling's measure of a task: n, with how to say
	// it ("is %d bytes"); ok false when the task does not set the key.
	measure func(t *Task) (n int, say string, ok bool)
	field   *Field // a limit's field
	// Session: it bounds sessions (internal/session), not a task; only a
	// server has them.
	Session bool
}

// Ceilings lists every ceiling: the limits' (those of Fields marked
// Ceiling), then the data's.
var Ceilings = append(ceilingList(), sessionCeilings...)

func ceilingList() []Ceiling {
	var list []Ceiling
	for i := range Fields {
		if f := &Fields[i]; f.Ceiling {
			list = append(list, Ceiling{Name: f.Flag, Key: f.Key, Kind: f.Kind, field: f,
				Doc: fmt.Sprintf("the most a task may ask for as %q (default: --%s's value: a task may lower its limits, not raise them)", f.Key, f.Flag)})
		}
	}
	str := func(p *string) (int, bool) {
		if p == nil {
			return 0, false
		}
		return len(*p), true
	}
	data := []Ceiling{
		{Name: "code", Key: "code", Kind: KindSize, Default: "16M", Hard: nsjail.MaxCode, Eval: true, Doc: "the longest program a task may send as \"code\" (at most 16M)",
			measure: func(t *Task) (int, string, bool) { n, ok := str(t.Code); return n, "is %d bytes", ok }},
		{Name: "stdin", Key: "stdin", Kind: KindSize, Default: "16M", Eval: true, Doc: "the most bytes a task may send as \"stdin\"",
			measure: func(t *Task) (int, string, bool) { n, ok := str(t.Stdin); return n, "is %d bytes", ok }},
		{Name: "files", Key: "files", Kind: KindCount, Default: "1000", Doc: "the most files a task may send in \"files\"",
			measure: func(t *Task) (int, string, bool) {
				return len(t.Files) + len(t.FilesBase64), "has %d files", t.Files != nil || t.FilesBase64 != nil
			}},
		{Name: "file-bytes", Key: "files", Kind: KindSize, Default: "64M", Doc: "the most bytes a task may send in \"files\" and \"files_base64\", all files together (base64 counted decoded)",
			measure: func(t *Task) (int, string, bool) {
				n := 0
				for name, data := range t.Files {
					n += len(name) + len(data)
				}
				for name, b64 := range t.FilesBase64 {
					n += len(name) + base64.StdEncoding.DecodedLen(len(b64))
				}
				return n, "hold %d bytes", t.Files != nil || t.FilesBase64 != nil
			}},
		{Name: "fetch", Key: "fetch", Kind: KindCount, Default: "100", Doc: "the most files a task may name in \"fetch\"",
			measure: func(t *Task) (int, string, bool) { return len(t.Fetch), "names %d files", t.Fetch != nil }},
		// The fetched bytes are bounded as they are read (the run's
		// Spec.FetchMaxFile and FetchMaxTotal), not by the task.
		{Name: "fetch-file-bytes", Key: "fetch", Kind: KindSize, Default: "16M", Doc: "the most bytes one fetched file may hold (a larger one is fetched as an error)"},
		{Name: "fetch-bytes", Key: "fetch", Kind: KindSize, Default: "64M", Doc: "the most bytes a task's fetched files may hold together (those past it are fetched as errors)"},
		{Name: "redact-patterns", Key: "redact_patterns", Kind: KindCount, Default: "16", Doc: "the most patterns a task may send in \"redact_patterns\"",
			measure: func(t *Task) (int, string, bool) {
				return len(t.RedactPatterns), "has %d patterns", t.RedactPatterns != nil
			}},
		{Name: "redact-pattern-bytes", Key: "redact_patterns", Kind: KindSize, Default: "1K", Doc: "the longest pattern a task may send in \"redact_patterns\"",
			measure: func(t *Task) (int, string, bool) {
				n := 0
				for _, p := range t.RedactPatterns {
					n = max(n, len(p))
				}
				return n, "has a pattern of %d bytes", t.RedactPatterns != nil
			}},
		{Name: "preload", Key: "preload", Kind: KindCount, Default: "32", Doc: "the most modules a task may name in \"preload\"",
			measure: func(t *Task) (int, string, bool) { return len(t.Preload), "names %d modules", t.Preload != nil }},
	}
	return append(list, data...)
}

// CeilingsFor are the ceilings that apply in a front end: "eval" (its
// own), "batch" (every task's), "server" (serve, mcp: those and the
// sessions').
func CeilingsFor(frontEnd string) []Ceiling {
	var in []Ceiling
	for _, c := range Ceilings {
		if frontEnd == "eval" && !c.Eval || c.Session && frontEnd != "server" {
			continue
		}
		in = append(in, c)
	}
	return in
}

// Limits are the ceilings in force for a front end's tasks: the zero
// Limits is every default (the base's own values for the limits).
type Limits struct {
	values map[string]float64 // by Ceiling.Name; absent: the default
	// owner is who may raise a ceiling, "server" or "batch", for the
	// message; "" is "server".
	owner string
	// evalRuns: the limits' ceilings do not apply (eval's).
	evalRuns bool
}

// NewLimits are the ceilings of frontEnd ("server", "batch" or "eval")
// with the operator's given ones (by Ceiling.Name, as the flags write
// them) over the defaults, checked against base: no ceiling may be under
// the base's own value, which every task that leaves the field alone
// gets.
func NewLimits(frontEnd string, base nsjail.Options, given map[string]string) (Limits, error) {
	l := Limits{values: map[string]float64{}, owner: frontEnd, evalRuns: frontEnd == "eval"}
	for _, c := range CeilingsFor(frontEnd) {
		text, ok := given[c.Name]
		if !ok {
			continue
		}
		v, err := c.parse(text)
		if err != nil {
			return l, err
		}
		if c.Hard > 0 && v > c.Hard {
			return l, fmt.Errorf("--max-%s %s: give at most %s", c.Name, text, c.format(c.Hard))
		}
		if c.field != nil {
			// A base with no limit (cpu_time 0) keeps its own: the
			// ceiling bounds what a task asks for.
			if own := c.baseValue(base); own > v && !math.IsInf(own, 1) {
				name := "{" + c.field.Name + "}"
				return l, field.Errorf(c.field.Name, "--max-%s %s is under "+name+" %s, which every task that leaves %q alone gets: raise --max-%s or lower "+name,
					c.Name, text, c.format(own), c.Key, c.Name)
			}
		}
		l.values[c.Name] = v
	}
	return l, nil
}

// parse reads a ceiling's flag.
func (c *Ceiling) parse(text string) (float64, error) {
	bad := func(want string) error { return fmt.Errorf("--max-%s %q: give %s", c.Name, text, want) }
	switch c.Kind {
	case KindSize:
		n, err := units.RAMInBytes(text)
		if err != nil || n <= 0 {
			return 0, bad("a positive size such as 256M or 1g")
		}
		return float64(n), nil
	case KindDuration:
		d, err := time.ParseDuration(text)
		if err != nil || d <= 0 {
			return 0, bad("a positive duration such as 10s or 2m")
		}
		return float64(d), nil
	}
	f, err := strconv.ParseFloat(text, 64)
	if err != nil || !(f > 0) || math.IsInf(f, 0) || c.Kind == KindCount && f != math.Trunc(f) {
		return 0, bad("a positive number")
	}
	return f, nil
}

// format writes a ceiling's value as its flag would.
func (c *Ceiling) format(v float64) string {
	switch {
	case math.IsInf(v, 1):
		return "none"
	case c.Kind == KindSize:
		return formatSize(int64(v))
	case c.Kind == KindDuration:
		return time.Duration(v).String()
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

// formatSize writes n bytes in the largest unit that holds it exactly.
func formatSize(n int64) string {
	for _, u := range []struct {
		suffix string
		size   int64
	}{{"P", 1 << 50}, {"T", 1 << 40}, {"G", 1 << 30}, {"M", 1 << 20}, {"K", 1 << 10}} {
		if n >= u.size && n%u.size == 0 {
			return strconv.FormatInt(n/u.size, 10) + u.suffix
		}
	}
	return strconv.FormatInt(n, 10)
}

// asked is a limit's value in o, a task's options, as a ceiling
// compares it (+Inf for a 0 that means none).
func (c *Ceiling) asked(o nsjail.Options) float64 {
	f := c.raw(o)
	if f == 0 && c.field.ZeroIsNone {
		return math.Inf(1)
	}
	return f
}

// baseValue is a limit's value in the base, as the ceiling it is by
// default: +Inf where the base has none (a 0: cpu_time's none, or a
// cgroup's limit under NoCgroup, which refuses any).
func (c *Ceiling) baseValue(base nsjail.Options) float64 {
	if f := c.raw(base); f != 0 {
		return f
	}
	return math.Inf(1)
}

// raw is a limit's field in o as a number.
func (c *Ceiling) raw(o nsjail.Options) float64 {
	v := reflect.ValueOf(o).FieldByName(c.field.Name)
	if v.CanFloat() {
		return v.Float()
	}
	return float64(v.Int())
}

// Value is the ceiling named name (a Ceiling's Name) in force, for tasks
// over base.
func (l Limits) Value(name string, base nsjail.Options) float64 {
	for _, c := range Ceilings {
		if c.Name == name {
			return l.value(&c, base)
		}
	}
	panic("batch: no ceiling " + name)
}

func (l Limits) value(c *Ceiling, base nsjail.Options) float64 {
	if v, ok := l.values[c.Name]; ok {
		return v
	}
	if c.field != nil {
		return c.baseValue(base)
	}
	v, _ := c.parse(c.Default)
	return v
}

// Over is the message for a task over a ceiling: what it asks for
// (`"mem" 1g is`, or for data `"code" is 20000000 bytes,`), the ceiling, and
// how to get past it.
func (l Limits) Over(what, name, ceiling string) string {
	owner, raise := "server", "start the server with"
	switch l.owner {
	case "batch":
		owner, raise = "batch", "run the batch with"
	case "eval":
		owner, raise = "eval", "run the eval with"
	}
	return fmt.Sprintf("%s over this %s's ceiling %s: ask for at most %s, or %s --max-%s", what, owner, ceiling, ceiling, raise, name)
}

// check refuses a task that asks for more than a ceiling: o is the base
// with the task applied.
func (l Limits) check(base, o nsjail.Options, t *Task) error {
	for i := range Ceilings {
		c := &Ceilings[i]
		if l.evalRuns && !c.Eval || c.Session {
			continue
		}
		ceiling := l.value(c, base)
		if c.field != nil {
			v := t.value(c.Key)
			if !v.IsValid() {
				continue
			}
			asked := c.asked(o)
			if asked > ceiling {
				what := fmt.Sprintf("%q %v is", c.Key, v.Elem().Interface())
				if math.IsInf(asked, 1) {
					what = fmt.Sprintf("%q %v (no limit) is", c.Key, v.Elem().Interface())
				}
				return badInput(errors.New(l.Over(what, c.Name, c.format(ceiling))))
			}
			continue
		}
		if c.measure == nil {
			continue
		}
		if n, say, ok := c.measure(t); ok && float64(n) > ceiling {
			return badInput(errors.New(l.Over(fmt.Sprintf("%q "+say+",", c.Key, n), c.Name, c.format(ceiling))))
		}
	}
	return nil
}
