package httpapi

// /run_code's requests as SandboxFusion's server (FastAPI, pydantic)
// takes them: keys it does not know are ignored, bad input is 422 with
// {"detail": [...]}, numbers may come as strings; and what it says of
// itself: GET /v1/ping, executor_pod_name. docs/sandboxfusion.md
// tabulates each field and behaviour.

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"net/http"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// fusionPing is SandboxFusion's health check: GET answers "pong".
const fusionPing = "/v1/ping"

// ping is GET /v1/ping.
func ping(w http.ResponseWriter, r *http.Request) { writeJSON(w, http.StatusOK, "pong") }

// fusion is what /run_code keeps for the server's life.
type fusion struct {
	// workdir is the runs' working directory, a name such as Python's
	// tempfile gives (SandboxFusion runs each in one): one per server, so
	// that its runs share a jail's shape (and a zygote's template).
	workdir string
	// pod is executor_pod_name: the node's name.
	pod *string

	mu      sync.Mutex
	logged  map[string]bool // unknown keys already logged
	stopped bool            // maxLoggedKeys reached: no more are
}

// maxLoggedKeys bounds the unknown keys logged (and remembered): a
// caller sending new names each time must not fill the log or memory.
const maxLoggedKeys = 64

func newFusion() *fusion {
	return &fusion{workdir: "/tmp/" + tempName(""), pod: podName(), logged: map[string]bool{}}
}

// podEnv are the variables that name the node, first set first:
// SandboxFusion's own (MY_POD_NAME), then those a Kubernetes manifest
// commonly sets from the downward API.
var podEnv = []string{"MY_POD_NAME", "POD_NAME", "NODE_NAME"}

// podName is the node's name: from podEnv, else the host name.
func podName() *string {
	for _, k := range podEnv {
		if v := os.Getenv(k); v != "" {
			return &v
		}
	}
	if h, err := os.Hostname(); err == nil && h != "" {
		return &h
	}
	return nil
}

// tempName is a name as Python's tempfile makes one: "tmp", eight
// characters of its alphabet, then suffix.
func tempName(suffix string) string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789_"
	b := make([]byte, 8)
	rand.Read(b)
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return "tmp" + string(b) + suffix
}

// ignored logs the request's keys that RunCodeRequest does not have, each
// once for the server's life (SandboxFusion ignores them: so does
// microbox, but an operator sees what callers send in vain).
func (f *fusion) ignored(raw map[string]json.RawMessage) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, k := range slices.Sorted(maps.Keys(raw)) {
		if runCodeKey(k) || f.logged[k] || f.stopped {
			continue
		}
		if len(f.logged) == maxLoggedKeys {
			f.stopped = true
			fmt.Fprintf(os.Stderr, "microbox: /run_code: %d unknown fields logged; no more will be\n", maxLoggedKeys)
			return
		}
		f.logged[k] = true
		name := k
		if len(name) > 64 {
			name = name[:64] + "..."
		}
		fmt.Fprintf(os.Stderr, "microbox: /run_code: ignored the unknown field %q, as SandboxFusion does (logged once)\n", name)
	}
}

// runCodeKey reports whether RunCodeRequest has key (exactly: pydantic
// matches keys by their case).
func runCodeKey(key string) bool {
	for f := range reflect.TypeFor[runCodeRequest]().Fields() {
		if f.Tag.Get("json") == key {
			return true
		}
	}
	return false
}

// runCodeRequired are the keys RunCodeRequest requires.
var runCodeRequired = map[string]bool{"code": true, "language": true}

// fusionNullable are the keys whose value may be null (Optional in
// RunCodeRequest).
var fusionNullable = map[string]bool{"stdin": true}

// fusionDetail is one entry of FastAPI's 422 answer, as pydantic words it.
type fusionDetail struct {
	Type  string         `json:"type"`
	Loc   []any          `json:"loc"`
	Msg   string         `json:"msg"`
	Input any            `json:"input"`
	Ctx   map[string]any `json:"ctx,omitempty"`
}

// fusionInvalid is FastAPI's 422 answer.
type fusionInvalid struct {
	Detail []fusionDetail `json:"detail"`
}

// writeDetail answers 422 {"detail": problems}, as FastAPI answers a
// request that does not validate.
func writeDetail(w http.ResponseWriter, problems []fusionDetail) {
	writeJSON(w, http.StatusUnprocessableEntity, fusionInvalid{problems})
}

// decodeRunCode reads a /run_code body as FastAPI reads RunCodeRequest:
// the keys it has, each checked for its type (all problems at once);
// raw is the body's object, unknown keys included.
func decodeRunCode(body []byte) (req runCodeRequest, raw map[string]json.RawMessage, problems []fusionDetail) {
	if !json.Valid(body) {
		var syntax *json.SyntaxError
		err := json.Unmarshal(body, new(any))
		pos := int64(len(body))
		if errors.As(err, &syntax) {
			pos = syntax.Offset
		}
		return req, nil, []fusionDetail{{Type: "json_invalid", Loc: []any{"body", pos}, Msg: "JSON decode error",
			Input: map[string]any{}, Ctx: map[string]any{"error": strings.TrimPrefix(fmt.Sprint(err), "json: ")}}}
	}
	if err := json.Unmarshal(body, &raw); err != nil || raw == nil {
		return req, nil, []fusionDetail{{Type: "model_attributes_type", Loc: []any{"body"},
			Msg: "Input should be a valid dictionary or object to extract fields from", Input: json.RawMessage(body)}}
	}
	v := reflect.ValueOf(&req).Elem()
	for f := range v.Type().Fields() {
		key := f.Tag.Get("json")
		value, ok := raw[key]
		switch {
		case !ok && runCodeRequired[key]:
			problems = append(problems, fusionDetail{Type: "missing", Loc: []any{"body", key}, Msg: "Field required", Input: json.RawMessage(body)})
		case !ok, isNull(value) && fusionNullable[key]:
		default:
			dst := reflect.New(f.Type)
			if err := json.Unmarshal(value, dst.Interface()); err != nil || isNull(value) {
				problems = append(problems, typeProblems(key, f.Type, value, err)...)
				continue
			}
			v.FieldByIndex(f.Index).Set(dst.Elem())
		}
	}
	return req, raw, problems
}

// isNull reports whether a JSON value is null.
func isNull(value json.RawMessage) bool { return bytes.Equal(bytes.TrimSpace(value), []byte("null")) }

// typeProblems are pydantic's entries for a value of key that is not of
// its type t: one for each element that is not a string, in a dictionary
// or a list of strings that is one; else one for the value.
func typeProblems(key string, t reflect.Type, value json.RawMessage, err error) []fusionDetail {
	var elems map[string]json.RawMessage
	var list []json.RawMessage
	var problems []fusionDetail
	notString := func(loc any, v json.RawMessage) {
		var s *string
		if json.Unmarshal(v, &s) != nil || s == nil && !(t.Kind() == reflect.Map && isNull(v)) {
			problems = append(problems, fusionDetail{Type: "string_type", Loc: []any{"body", key, loc}, Msg: "Input should be a valid string", Input: v})
		}
	}
	switch {
	case t.Kind() == reflect.Map && json.Unmarshal(value, &elems) == nil && elems != nil:
		for _, name := range slices.Sorted(maps.Keys(elems)) {
			notString(name, elems[name])
		}
	case t.Kind() == reflect.Slice && json.Unmarshal(value, &list) == nil && list != nil:
		for i, v := range list {
			notString(i, v)
		}
	}
	if len(problems) > 0 {
		return problems
	}
	return []fusionDetail{typeProblem(key, t, value, err)}
}

// typeProblem is pydantic's entry for a value of key that is not of its
// type t: err says how, when a lax type refused it.
func typeProblem(key string, t reflect.Type, value json.RawMessage, err error) fusionDetail {
	d := fusionDetail{Loc: []any{"body", key}, Input: value}
	var lax *laxError
	switch {
	case errors.As(err, &lax):
		d.Type, d.Msg = lax.typ, lax.msg
	case t == reflect.TypeFor[*laxFloat]():
		d.Type, d.Msg = "float_type", "Input should be a valid number"
	case t == reflect.TypeFor[*laxInt]():
		d.Type, d.Msg = "int_type", "Input should be a valid integer"
	case t.Kind() == reflect.Map:
		d.Type, d.Msg = "dict_type", "Input should be a valid dictionary"
	case t.Kind() == reflect.Slice:
		d.Type, d.Msg = "list_type", "Input should be a valid list"
	default:
		d.Type, d.Msg = "string_type", "Input should be a valid string"
	}
	return d
}

// laxFloat is a float as pydantic's lax mode takes one: a number, or a
// string that is one.
type laxFloat float64

func (f *laxFloat) UnmarshalJSON(b []byte) error {
	n, err := laxNumber(b)
	if err != nil {
		return &laxError{"float_type", "Input should be a valid number"}
	}
	if n == nil {
		return &laxError{"float_parsing", "Input should be a valid number, unable to parse string as a number"}
	}
	*f = laxFloat(*n)
	return nil
}

// laxInt is an int as pydantic's lax mode takes one: a whole number
// (5.0 too), or a string that is one.
type laxInt int64

func (i *laxInt) UnmarshalJSON(b []byte) error {
	n, err := laxNumber(b)
	switch {
	case err != nil:
		return &laxError{"int_type", "Input should be a valid integer"}
	case n == nil:
		return &laxError{"int_parsing", "Input should be a valid integer, unable to parse string as an integer"}
	case *n != math.Trunc(*n) || math.Abs(*n) > 1<<62:
		return &laxError{"int_from_float", "Input should be a valid integer, got a number with a fractional part"}
	}
	*i = laxInt(*n)
	return nil
}

// laxNumber reads a JSON number, or a string holding one (nil: a string
// that does not); an error for any other value.
func laxNumber(b []byte) (*float64, error) {
	var n float64
	if err := json.Unmarshal(b, &n); err == nil && !isNull(b) {
		return &n, nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil || isNull(b) {
		return nil, errors.New("not a number")
	}
	n, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil || math.IsInf(n, 0) || math.IsNaN(n) {
		return nil, nil
	}
	return &n, nil
}

// laxError is a lax type's refusal, as pydantic types it.
type laxError struct{ typ, msg string }

func (e *laxError) Error() string { return e.msg }

// fieldProblem is a request's value that microbox cannot run, in the
// key it came in.
type fieldProblem struct {
	key string
	msg string
}

func (e *fieldProblem) Error() string { return e.msg }

// fieldError is a fieldProblem in key.
func fieldError(key, format string, args ...any) error {
	return &fieldProblem{key: key, msg: fmt.Sprintf(format, args...)}
}

// invalid is the 422 entry of a request microbox refuses: in its key
// when the problem names one, else in the body; as pydantic words a
// validator's refusal.
func invalid(err error, raw map[string]json.RawMessage, body []byte) fusionDetail {
	d := fusionDetail{Type: "value_error", Loc: []any{"body"}, Msg: "Value error, " + err.Error(), Input: json.RawMessage(body)}
	var fp *fieldProblem
	if errors.As(err, &fp) {
		d.Loc, d.Input = []any{"body", fp.key}, raw[fp.key]
	}
	return d
}
