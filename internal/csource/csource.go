// Package csource reads the constants microbox's C sources share with its
// Go code, for the tests that hold the two sides equal. The C halves (the
// jail's init, exec's client) run before the Go runtime starts and include
// no header Go could read: they share numbers and strings written on both
// sides, which a change to one side alone would break at run time.
//
// It reads the text only, and only the simple forms those files use:
// object-like #defines whose value is one token or one string literal, and
// functions found by name.
package csource

import (
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
)

// File is a C source's text.
type File struct {
	path    string
	text    string
	defines map[string]string // macro name → its value, as written
}

// define is an object-like macro with a value: a string literal, or a
// token that ends at a space or a comment. A function-like macro has no
// space before its parenthesis and does not match.
var define = regexp.MustCompile(`(?m)^[ \t]*#[ \t]*define[ \t]+([A-Za-z_]\w*)[ \t]+("(?:[^"\\\n]|\\.)*"|[^\s/]+)`)

// Read reads the C source at path.
func Read(path string) (*File, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read C source: %w", err)
	}
	f := &File{path: path, text: string(b), defines: map[string]string{}}
	for _, m := range define.FindAllStringSubmatch(f.text, -1) {
		f.defines[m[1]] = m[2]
	}
	return f, nil
}

// Define is the value of the macro name, as written.
func (f *File) Define(name string) (string, error) {
	v, ok := f.defines[name]
	if !ok {
		return "", fmt.Errorf("%s: no #define %s", f.path, name)
	}
	return v, nil
}

// Int is the macro name as an integer: decimal, hexadecimal or octal, with
// or without C's u and l suffixes.
func (f *File) Int(name string) (int64, error) {
	v, err := f.Define(name)
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseInt(strings.TrimRight(v, "uUlL"), 0, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: #define %s %s is not an integer: %w", f.path, name, v, err)
	}
	return n, nil
}

// String is the macro name as a string literal's value.
func (f *File) String(name string) (string, error) {
	v, err := f.Define(name)
	if err != nil {
		return "", err
	}
	s, err := strconv.Unquote(v)
	if err != nil {
		return "", fmt.Errorf("%s: #define %s %s is not a string: %w", f.path, name, v, err)
	}
	return s, nil
}

// Body is the body of the function name, between its braces: from the
// first brace after its parameter list to the brace that closes it (braces
// and quotes in strings, character constants and comments do not count).
func (f *File) Body(name string) (string, error) {
	head := regexp.MustCompile(`(?m)^[^\n;]*\b` + regexp.QuoteMeta(name) + `\([^)]*\)\s*\{`)
	loc := head.FindStringIndex(f.text)
	if loc == nil {
		return "", fmt.Errorf("%s: no function %s", f.path, name)
	}
	depth, quote := 0, byte(0)
	for i := loc[1] - 1; i < len(f.text); i++ {
		c := f.text[i]
		switch {
		case quote == 0 && strings.HasPrefix(f.text[i:], "//"): // a comment's "don't" quotes nothing
			i += max(strings.IndexByte(f.text[i:], '\n'), 0)
		case quote == 0 && strings.HasPrefix(f.text[i:], "/*"):
			i += max(strings.Index(f.text[i:], "*/")+1, 0)
		case quote != 0 && c == '\\':
			i++
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '"' || c == '\'':
			quote = c
		case c == '{':
			depth++
		case c == '}':
			if depth--; depth == 0 {
				return f.text[loc[1]:i], nil
			}
		}
	}
	return "", fmt.Errorf("%s: function %s does not end", f.path, name)
}
