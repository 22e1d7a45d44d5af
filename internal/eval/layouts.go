package eval

import (
	"bytes"
	"compress/zlib"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// IOTest is one stdin/stdout test: the program is fed Input and must
// print Output.
type IOTest struct {
	Input  string `json:"input"`
	Output string `json:"output"`
}

// StdioLayouts says which fields of a problems line eval stdio reads, for
// its help: its own layout and the published ones, as they are.
const StdioLayouts = `Each problems line is one problem, in one of these layouts (the first that
matches):
  {"task_id", "tests": [{"input": "...", "output": "..."}, ...]}
  APPS, TACO: "input_output", a JSON string (or object) of {"inputs": [...],
    "outputs": [...]}, an input or output given as a list of lines joined
    with newlines; a problem with "fn_name" is call-based and left out
  CodeContests: "public_tests", then "private_tests", then "generated_tests",
    each {"input": [...], "output": [...]}
  LiveCodeBench: "public_test_cases", then "private_test_cases", each a JSON
    string of [{"input", "output", "testtype"}] (private ones may be
    base64 of zlib of a pickled JSON string, as published); a problem with
    a test whose testtype is not "stdin" is call-based and left out
The problem's id is "task_id", else APPS's "problem_id", else
LiveCodeBench's "question_id", else CodeContests' "name" (numbers are
matched as their decimal text). Problems without tests are left out too.`

// idKeys are the fields a problem's id is read from, in order.
var idKeys = []string{"task_id", "problem_id", "question_id", "name"}

// stdioProblem is one line of a stdio problems file, read in any layout;
// leftOut says why a problem cannot be judged by stdin and stdout.
type stdioProblem struct {
	id      string
	tests   []IOTest
	leftOut string
}

// parseStdioProblem reads one problems line.
func parseStdioProblem(line []byte) (*stdioProblem, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(line, &m); err != nil {
		return nil, fmt.Errorf("not a JSON object: %v", err)
	}
	p := &stdioProblem{}
	var err error
	if p.id, err = problemID(m); err != nil {
		return nil, err
	}
	switch {
	case m["tests"] != nil:
		p.tests, err = ownTests(m["tests"])
	case m["input_output"] != nil:
		p.tests, p.leftOut, err = appsTests(m["input_output"])
	case m["public_tests"] != nil || m["private_tests"] != nil || m["generated_tests"] != nil:
		p.tests, err = codeContestsTests(m)
	case m["public_test_cases"] != nil || m["private_test_cases"] != nil:
		p.tests, p.leftOut, err = liveCodeBenchTests(m)
	default:
		return nil, fmt.Errorf("problem %q has no tests: want \"tests\", \"input_output\" (APPS, TACO), \"public_tests\"... (CodeContests) or \"public_test_cases\"... (LiveCodeBench)", p.id)
	}
	if err != nil {
		return nil, fmt.Errorf("problem %q: %v", p.id, strings.TrimPrefix(err.Error(), "json: "))
	}
	if p.leftOut == "" && len(p.tests) == 0 {
		p.leftOut = "it has no tests"
	}
	return p, nil
}

// problemID is the first id field the line has.
func problemID(m map[string]json.RawMessage) (string, error) {
	for _, k := range idKeys {
		if raw, ok := m[k]; ok {
			id, ok := idText(raw)
			if !ok {
				return "", fmt.Errorf("%q is not a string or a number", k)
			}
			return id, nil
		}
	}
	return "", errors.New(`no "task_id" (nor APPS's "problem_id", LiveCodeBench's "question_id" or CodeContests' "name")`)
}

// jsonInString decodes raw into v, whether raw is the JSON value itself
// or a string holding it (as APPS and LiveCodeBench publish theirs).
func jsonInString(raw json.RawMessage, v any) error {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		raw = json.RawMessage(s)
	}
	return json.Unmarshal(raw, v)
}

// ownTests reads our own layout's tests, each of which must have both
// an input and an output.
func ownTests(raw json.RawMessage) ([]IOTest, error) {
	var given []struct{ Input, Output *string }
	if err := json.Unmarshal(raw, &given); err != nil {
		return nil, fmt.Errorf("tests: %v", err)
	}
	tests := make([]IOTest, len(given))
	for i, t := range given {
		if t.Input == nil || t.Output == nil {
			return nil, fmt.Errorf("test %d: give both \"input\" and \"output\" (strings)", i+1)
		}
		tests[i] = IOTest{*t.Input, *t.Output}
	}
	return tests, nil
}

// appsTests reads APPS's (and TACO's) input_output.
func appsTests(raw json.RawMessage) ([]IOTest, string, error) {
	var s string
	if json.Unmarshal(raw, &s) == nil && strings.TrimSpace(s) == "" {
		return nil, "it has no tests", nil
	}
	var io struct {
		Inputs, Outputs json.RawMessage
		FnName          string `json:"fn_name"`
	}
	if err := jsonInString(raw, &io); err != nil {
		return nil, "", fmt.Errorf("input_output: %v", err)
	}
	if io.FnName != "" {
		return nil, fmt.Sprintf("it is call-based (fn_name %q)", io.FnName), nil
	}
	var inputs, outputs []linesOrText
	if err := json.Unmarshal(io.Inputs, &inputs); err != nil {
		return nil, "", fmt.Errorf("input_output: inputs: %v", err)
	}
	if err := json.Unmarshal(io.Outputs, &outputs); err != nil {
		return nil, "", fmt.Errorf("input_output: outputs: %v", err)
	}
	if len(inputs) != len(outputs) {
		return nil, "", fmt.Errorf("input_output: %d inputs but %d outputs", len(inputs), len(outputs))
	}
	tests := make([]IOTest, len(inputs))
	for i := range tests {
		tests[i] = IOTest{Input: string(inputs[i]), Output: string(outputs[i])}
	}
	return tests, "", nil
}

// linesOrText is a string, or a list of lines joined with newlines.
type linesOrText string

func (t *linesOrText) UnmarshalJSON(b []byte) error {
	var s string
	if json.Unmarshal(b, &s) == nil {
		*t = linesOrText(s)
		return nil
	}
	var lines []string
	if err := json.Unmarshal(b, &lines); err != nil {
		return errors.New("an input or output is neither a string nor a list of strings")
	}
	*t = linesOrText(strings.Join(lines, "\n"))
	return nil
}

// codeContestsTests reads CodeContests' three sets of tests, in order.
func codeContestsTests(m map[string]json.RawMessage) ([]IOTest, error) {
	var tests []IOTest
	for _, k := range []string{"public_tests", "private_tests", "generated_tests"} {
		if m[k] == nil {
			continue
		}
		var set struct {
			Input  []string `json:"input"`
			Output []string `json:"output"`
		}
		if err := json.Unmarshal(m[k], &set); err != nil {
			return nil, fmt.Errorf("%s: %v", k, err)
		}
		if len(set.Input) != len(set.Output) {
			return nil, fmt.Errorf("%s: %d inputs but %d outputs", k, len(set.Input), len(set.Output))
		}
		for i := range set.Input {
			tests = append(tests, IOTest{Input: set.Input[i], Output: set.Output[i]})
		}
	}
	return tests, nil
}

// liveCodeBenchTests reads LiveCodeBench's public and private test cases.
func liveCodeBenchTests(m map[string]json.RawMessage) ([]IOTest, string, error) {
	var tests []IOTest
	for _, k := range []string{"public_test_cases", "private_test_cases"} {
		if m[k] == nil {
			continue
		}
		cases, err := liveCodeBenchCases(m[k])
		if err != nil {
			return nil, "", fmt.Errorf("%s: %v", k, err)
		}
		for _, c := range cases {
			if c.TestType != "stdin" {
				return nil, fmt.Sprintf("it is call-based (testtype %q)", c.TestType), nil
			}
			tests = append(tests, c.IOTest)
		}
	}
	return tests, "", nil
}

type liveCodeBenchCase struct {
	IOTest
	TestType string `json:"testtype"`
}

// liveCodeBenchCases decodes one field of test cases: JSON (in a string
// or not), or as LiveCodeBench publishes its private ones, base64 of
// zlib of a pickled str holding the JSON.
func liveCodeBenchCases(raw json.RawMessage) ([]liveCodeBenchCase, error) {
	var cases []liveCodeBenchCase
	jerr := jsonInString(raw, &cases)
	if jerr == nil {
		return cases, nil
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return nil, jerr
	}
	text, err := decompressCases(s)
	if err != nil {
		return nil, fmt.Errorf("neither JSON (%v) nor compressed test cases (%v)", strings.TrimPrefix(jerr.Error(), "json: "), err)
	}
	if err := json.Unmarshal([]byte(text), &cases); err != nil {
		return nil, fmt.Errorf("compressed test cases: %v", err)
	}
	return cases, nil
}

// decompressCases undoes base64, zlib and the pickle of a str.
func decompressCases(s string) (string, error) {
	data, err := base64.StdEncoding.DecodeString(strings.TrimSpace(s))
	if err != nil {
		return "", fmt.Errorf("base64: %v", err)
	}
	zr, err := zlib.NewReader(bytes.NewReader(data))
	if err != nil {
		return "", fmt.Errorf("zlib: %v", err)
	}
	pickled, err := io.ReadAll(zr)
	if err != nil {
		return "", fmt.Errorf("zlib: %v", err)
	}
	return unpickleString(pickled)
}

// unpickleString reads a pickle of one Python str, and nothing else: the
// opcodes pickle.dumps(str) writes in protocols 2 to 5 (PROTO, FRAME, the
// string, a memo entry, STOP). Nothing is ever executed.
func unpickleString(b []byte) (string, error) {
	bad := errors.New("not a pickled str")
	take := func(n uint64) ([]byte, bool) {
		if uint64(len(b)) < n {
			return nil, false
		}
		out := b[:n]
		b = b[n:]
		return out, true
	}
	var text []byte
	for {
		op, ok := take(1)
		if !ok {
			return "", bad
		}
		var n uint64
		switch op[0] {
		case 0x80: // PROTO
			ok = len(b) >= 1 && text == nil
			b = b[min(1, len(b)):]
		case 0x95: // FRAME: its length only
			_, ok = take(8)
		case 0x94: // MEMOIZE
		case 'q': // BINPUT
			_, ok = take(1)
		case 'r': // LONG_BINPUT
			_, ok = take(4)
		case 0x8c, 'X', 0x8d: // SHORT_BINUNICODE, BINUNICODE, BINUNICODE8
			if text != nil {
				return "", bad
			}
			size := map[byte]uint64{0x8c: 1, 'X': 4, 0x8d: 8}[op[0]]
			var l []byte
			if l, ok = take(size); ok {
				var le [8]byte
				copy(le[:], l)
				n = binary.LittleEndian.Uint64(le[:])
				text, ok = take(n)
			}
		case '.': // STOP
			if text == nil || len(b) != 0 || !utf8.Valid(text) {
				return "", bad
			}
			return string(text), nil
		default:
			return "", bad
		}
		if !ok {
			return "", bad
		}
	}
}
