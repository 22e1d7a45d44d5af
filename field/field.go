// Package field lets a library name the input at fault in an error by the
// field of its options, and each front end spell that name its own way: a
// command-line flag (--mem), a JSON key ("mem"), a Go field (Memory).
//
// A message marks field names as {Name}:
//
//	err := field.Errorf("TmpfsSize", "{TmpfsSize} (%d bytes) exceeds {Memory}", size)
//	err.Error()                  // "TmpfsSize (67108864 bytes) exceeds Memory"
//	field.Message(err, flagName) // "--tmpfs-size (67108864 bytes) exceeds --mem"
//
// Message finds the error anywhere in a chain of wrapped errors. Sprintf
// spells a message that is not an error (a report's fix) the same way.
package field

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// Error is bad input in one field of a library's options.
type Error struct {
	// Name is the field at fault, as its Go name (e.g. "TmpfsSize").
	Name   string
	format string // with {Name} markers
	args   []any
}

// Errorf is an Error in field name; format may mark any field, name
// included, as {Field}, and its verbs take args as fmt.Sprintf's do.
func Errorf(name, format string, args ...any) *Error {
	return &Error{Name: name, format: format, args: args}
}

// Error spells the fields by their Go names.
func (e *Error) Error() string { return e.Spell(nil) }

// Unwrap is the first error among the arguments, if any.
func (e *Error) Unwrap() error {
	for _, a := range e.args {
		if err, ok := a.(error); ok {
			return err
		}
	}
	return nil
}

// Spell is the message with each field spelled as name says; a nil name,
// or one that returns "", keeps the Go name. Arguments that are errors
// with fields of their own are spelled the same way.
func (e *Error) Spell(name func(field string) string) string {
	format := marker.ReplaceAllStringFunc(e.format, func(m string) string {
		f := m[1 : len(m)-1]
		if name != nil {
			if s := name(f); s != "" {
				f = s
			}
		}
		return strings.ReplaceAll(f, "%", "%%")
	})
	args := append([]any(nil), e.args...)
	for i, a := range args {
		if err, ok := a.(error); ok && Is(err) {
			args[i] = Message(err, name)
		}
	}
	return fmt.Sprintf(format, args...)
}

// Sprintf is a message that is not an error (a report's line, a hint)
// with its markers spelled as name says, as Spell spells an Error's.
func Sprintf(name func(field string) string, format string, args ...any) string {
	return (&Error{format: format, args: args}).Spell(name)
}

// marker is a {Field} in a format: a Go identifier, dots allowed.
var marker = regexp.MustCompile(`\{[A-Z][A-Za-z0-9.]*\}`)

// Message is err's text with the field names of the first Error in its
// chain spelled as name says; other errors are err.Error().
func Message(err error, name func(field string) string) string {
	var fe *Error
	if !errors.As(err, &fe) {
		return err.Error()
	}
	return strings.Replace(err.Error(), fe.Error(), fe.Spell(name), 1)
}

// Is reports whether err is, or wraps, an Error.
func Is(err error) bool {
	var fe *Error
	return errors.As(err, &fe)
}
