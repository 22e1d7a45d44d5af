// Package batch runs many programs under one supervisor, each in a jail of
// its own as `microbox exec` would run it.
//
// A task (task.go) is one JSON object: a program and the options it
// changes over a base the caller prepared once (nsjail.Options.Prepare);
// its errors name its own keys, and the base's fields as the base's
// FieldNames do. A WorkerPool (workerpool.go) runs tasks on a fixed
// number of workers, each with a spawner of its own and, optionally, a CPU
// of its own. WorkerPool.Stream (stream.go) reads tasks as lines and
// writes each result as a line, in the tasks' order or as runs complete.
package batch

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"path"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/microbox/microbox/field"
	"github.com/microbox/microbox/nsjail"
)

// Task is one line of batch input; a nil field takes the base's value.
type Task struct {
	ID       json.RawMessage `json:"id"`
	Code     *string         `json:"code"`
	CodePath *string         `json:"code_path"`
	File     *string         `json:"file"`
	// Language and the compile step's limits (docs/languages.md).
	Language           *string           `json:"language"`
	CompileTimeout     *Quantity         `json:"compile_timeout"`
	CompileMem         *Quantity         `json:"compile_mem"`
	CompileOutputLimit *Quantity         `json:"compile_output_limit"`
	Stdin              *string           `json:"stdin"`
	Args               []string          `json:"args"`
	Files              map[string]string `json:"files"`
	Env                map[string]string `json:"env"`
	Mem                *Quantity         `json:"mem"`
	Timeout            *Quantity         `json:"timeout"`
	CPUTime            *Quantity         `json:"cpu_time"`
	CPUs               *float64          `json:"cpus"`
	Pids               *int64            `json:"pids"`
	OutputLimit        *Quantity         `json:"output_limit"`
	TmpfsSize          *Quantity         `json:"tmpfs_size"`
	// OutputMode and MemoryRlimit: what exceeding output_limit and mem
	// does in the program (nsjail.Options' fields of the same names).
	OutputMode   *string `json:"output_mode"`
	MemoryRlimit *bool   `json:"memory_rlimit"`
	Workdir      *string `json:"workdir"`
	// The policy layers (package policy), as exec's flags of the same
	// names set them.
	DenyModules    []string `json:"deny_modules"`
	AllowModules   []string `json:"allow_modules"`
	Guard          *string  `json:"guard"`
	Redact         *bool    `json:"redact"`
	RedactPatterns []string `json:"redact_patterns"`
	MaxRisk        *int     `json:"max_risk"`
	// Zygote, ZygoteFallback and Preload: the run forks from a warm
	// interpreter with these modules imported (docs/zygote.md), as
	// --zygote, --zygote-fallback and --preload.
	Zygote         *bool    `json:"zygote"`
	ZygoteFallback *bool    `json:"zygote_fallback"`
	Preload        []string `json:"preload"`
	// FilesBase64 are files as Files, their contents base64: bytes a
	// JSON string cannot carry. Fetch names files to fetch after the run.
	FilesBase64 map[string]string `json:"files_base64"`
	Fetch       []string          `json:"fetch"`
	// Source is the program the policy layers judge, when Code is a
	// harness that runs it (eval's); set in Go, never from a task line.
	Source *string `json:"-"`
}

// Quantity is a size or a duration, written as a string ("256M", "3s") or
// as a number (bytes, seconds).
type Quantity struct {
	text   string
	number *float64
}

// String is the quantity as the task wrote it.
func (q Quantity) String() string {
	if n := q.number; n != nil {
		if *n == math.Trunc(*n) && math.Abs(*n) < 1e15 {
			return strconv.FormatFloat(*n, 'f', -1, 64) // 536870912, not 5.36870912e+08
		}
		return strconv.FormatFloat(*n, 'g', -1, 64)
	}
	return q.text
}

// Duration is the quantity of a duration set in Go, for a task built in Go.
func Duration(d time.Duration) *Quantity { return &Quantity{text: d.String()} }

// Bytes is the quantity of a size set in Go, for a task built in Go.
func Bytes(n int64) *Quantity { return &Quantity{text: strconv.FormatInt(n, 10)} }

func (q *Quantity) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		return json.Unmarshal(b, &q.text)
	}
	var n float64
	if err := json.Unmarshal(b, &n); err != nil {
		return errors.New(`want a string such as "3s" or "256M", or a number of seconds or bytes`)
	}
	q.number = &n
	return nil
}

// duration reads q as the duration of Options' field name; a number is
// seconds. One past what a Duration holds is its most, which the
// ceilings and Options' ranges refuse by name.
func (q *Quantity) duration(name string) (time.Duration, error) {
	if q.number == nil {
		return nsjail.ParseDuration(name, q.text)
	}
	n := *q.number
	if n < 0 {
		return 0, field.Errorf(name, "{"+name+"} %v: give a non-negative number of seconds", n)
	}
	if n*float64(time.Second) >= math.MaxInt64 {
		return math.MaxInt64, nil
	}
	return time.Duration(n * float64(time.Second)), nil
}

// size reads q as the size of Options' field name; a number is bytes,
// its most past what an int64 holds.
func (q *Quantity) size(name string) (int64, error) {
	if q.number == nil {
		return nsjail.ParseSize(name, q.text)
	}
	n := *q.number
	if n <= 0 || n != math.Trunc(n) {
		return 0, field.Errorf(name, "{"+name+"} %v: give a positive whole number of bytes", n)
	}
	if n >= math.MaxInt64 {
		return math.MaxInt64, nil // as a duration's
	}
	return int64(n), nil
}

// DecodeTask parses one task, as one input line of a batch holds it: see
// decodeTask.
func DecodeTask(line []byte) (*Task, error) {
	t, _, err := decodeTask(line)
	return t, err
}

// decodeTask parses one input line strictly: one JSON object, known
// fields only (a misspelt limit must not silently fall back to the
// default). The id is returned even when the rest is invalid, so that the
// error result can be matched to its task.
func decodeTask(line []byte) (*Task, json.RawMessage, error) {
	invalid := func(err error) error {
		return badInput(fmt.Errorf("not a valid task: %s", strings.TrimPrefix(err.Error(), "json: ")))
	}
	// The line is decoded in place, never copied whole: a server decodes
	// lines of up to its --http-max-body, and a json.Decoder's buffer (or
	// a raw copy) would cost it several times that again.
	t := &Task{}
	err := json.Unmarshal(line, t)
	var syntax *json.SyntaxError
	switch {
	case errors.As(err, &syntax) && strings.Contains(syntax.Error(), "after top-level value"):
		first := line[:syntax.Offset-1]
		return nil, lineID(first), invalid(errors.New("more than one JSON value on the line"))
	case errors.As(err, &syntax) && strings.Contains(syntax.Error(), "end of JSON input"):
		return nil, nil, invalid(io.ErrUnexpectedEOF) // as a stream's decoder says it
	case err != nil:
		return nil, lineID(line), invalid(err)
	}
	if err := unknownKey(line); err != nil {
		return nil, t.ID, invalid(err)
	}
	return t, t.ID, nil
}

// unknownKey refuses a key Task does not have (a misspelt limit must not
// silently fall back to the default), as a json.Decoder's
// DisallowUnknownFields would, matching keys as encoding/json does (case
// folded); the values are passed over, not copied.
func unknownKey(line []byte) error {
	var keys map[string]skipValue
	if err := json.Unmarshal(line, &keys); err != nil {
		return err
	}
	var unknown []string
	for k := range keys {
		if !taskKey[strings.ToLower(k)] {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		return fmt.Errorf("unknown field %q", slices.Min(unknown))
	}
	return nil
}

// skipValue takes any JSON value and keeps nothing of it.
type skipValue struct{}

func (*skipValue) UnmarshalJSON([]byte) error { return nil }

// taskKey holds Task's JSON keys, lower-cased.
var taskKey = func() map[string]bool {
	keys := map[string]bool{}
	for f := range reflect.TypeFor[Task]().Fields() {
		if k, _, _ := strings.Cut(f.Tag.Get("json"), ","); k != "" && k != "-" {
			keys[strings.ToLower(k)] = true
		}
	}
	return keys
}()

// lineID is the id of the line's JSON object, if it has one: an invalid
// task's error result is matched to its task by it.
func lineID(line []byte) json.RawMessage {
	var idOnly struct {
		ID json.RawMessage `json:"id"`
	}
	json.Unmarshal(line, &idOnly)
	return idOnly.ID
}

// taskOptions are a copy of the base options with the task applied,
// field by field as Fields declares them (Options refuses the limits that
// need a cgroup when the base has none).
func taskOptions(base nsjail.Options, t *Task) (nsjail.Options, error) {
	o := base
	o.FieldNames = t.fieldNames(base.FieldNames)
	o.Env = slices.Clone(base.Env)
	o.Files = slices.Clone(base.Files)
	o.Code, o.Args = nil, nil // the program is the task's alone
	if t.File != nil && *t.File == "" {
		return o, badInput(errors.New(`"file" is empty: give the path of an existing file`))
	}
	dst := reflect.ValueOf(&o).Elem()
	for _, f := range Fields {
		v := t.value(f.Key)
		special, ok := specialFields[f.Key] // files_base64 has no field of its own: it adds to Files
		if f.Layer || f.Name == "" && !ok || !v.IsValid() {
			continue
		}
		var err error
		if ok {
			err = special(&o, v.Interface())
		} else {
			err = setField(dst.FieldByName(f.Name), f, v)
		}
		if err != nil {
			return o, err
		}
	}
	return o, nil
}

// specialFields are the fields a task adds to the base's rather than
// replaces, or that change form on the way.
var specialFields = map[string]func(o *nsjail.Options, v any) error{
	"files": func(o *nsjail.Options, v any) error { return badInput(taskFiles(o, v.(map[string]string))) },
	"env":   func(o *nsjail.Options, v any) error { return badInput(taskEnv(o, v.(map[string]string))) },
	"stdin": func(o *nsjail.Options, v any) error {
		o.Stdin = strings.NewReader(*v.(*string))
		return nil
	},
	"files_base64": func(o *nsjail.Options, v any) error {
		return badInput(taskFilesBase64(o, v.(map[string]string)))
	},
}

// setField sets dst, a field of Options or of policy.Options, to the
// task's value v of field f.
func setField(dst reflect.Value, f Field, v reflect.Value) error {
	switch {
	case f.Kind == KindSize:
		n, err := v.Interface().(*Quantity).size(f.Name)
		dst.SetInt(n)
		return err
	case f.Kind == KindDuration:
		d, err := v.Interface().(*Quantity).duration(f.Name)
		dst.SetInt(int64(d))
		return err
	case v.Type() == dst.Type(): // a list, or a pointer kept as one (Code, MaxRisk)
		dst.Set(v)
	default: // a pointer to the value
		dst.Set(v.Elem())
	}
	return nil
}

// taskFiles adds the task's files: a relative name is put in the working
// directory, an absolute one where it says (under /tmp or the working
// directory; the jail checks).
func taskFiles(o *nsjail.Options, files map[string]string) error {
	for _, name := range slices.Sorted(maps.Keys(files)) {
		if name == "" {
			return errors.New(`"files": a file name is empty`)
		}
		dst := name
		if !path.IsAbs(name) {
			dst = path.Join(o.Workdir, name)
		}
		o.Files = append(o.Files, nsjail.File{Path: dst, Data: []byte(files[name]), Mode: 0o644})
	}
	return nil
}

// taskFilesBase64 adds the task's files_base64, decoded, as taskFiles
// adds its files.
func taskFilesBase64(o *nsjail.Options, files map[string]string) error {
	decoded := make(map[string]string, len(files))
	for name, b64 := range files {
		data, err := base64.StdEncoding.DecodeString(b64)
		if err != nil {
			return fmt.Errorf(`"files_base64": %q is not base64 (%v); send each file's content base64-encoded (RFC 4648, with padding)`, name, err)
		}
		decoded[name] = string(data)
	}
	if err := taskFiles(o, decoded); err != nil {
		return fmt.Errorf("%s", strings.Replace(err.Error(), `"files"`, `"files_base64"`, 1))
	}
	return nil
}

// taskEnv adds the task's variables over the base's environment.
func taskEnv(o *nsjail.Options, env map[string]string) error {
	for _, k := range slices.Sorted(maps.Keys(env)) {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return fmt.Errorf(`"env": %q is not a variable name`, k)
		}
		o.Env = append(o.Env, k+"="+env[k])
	}
	return nil
}

// taskLimits applies the task's limits (Options refuses those that need
// a cgroup when the base has none).
func taskLimits(o *nsjail.Options, t *Task) error {
	var err error
	for _, q := range []struct {
		q    *Quantity
		name string
		d    *time.Duration
		n    *int64
	}{
		{t.Timeout, "Timeout", &o.Timeout, nil}, {t.CPUTime, "CPUTime", &o.CPUTime, nil},
		{t.OutputLimit, "OutputLimit", nil, &o.OutputLimit}, {t.Mem, "Memory", nil, &o.Memory},
		{t.TmpfsSize, "TmpfsSize", nil, &o.TmpfsSize},
	} {
		switch {
		case q.q == nil:
		case q.d != nil:
			*q.d, err = q.q.duration(q.name)
		default:
			*q.n, err = q.q.size(q.name)
		}
		if err != nil {
			return err
		}
	}
	if t.CPUs != nil {
		o.CPUs = *t.CPUs
	}
	if t.Pids != nil {
		o.Pids = *t.Pids
	}
	return nil
}
