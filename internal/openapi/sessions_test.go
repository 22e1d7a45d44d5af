package openapi

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/microbox/microbox/internal/session"
)

// A cell's request: code required, a string, described; timeout a
// number, a string or null, each branch of one type, at one level.
func TestCellRequestSchema(t *testing.T) {
	s, err := SessionTypes.Request(reflect.TypeFor[session.CellRequest](), "code")
	if err != nil {
		t.Fatal(err)
	}
	if code := s.Properties["code"].Value; !code.Type.Is("string") || code.Description == "" {
		t.Errorf("code %s: want a described string", schemaJSON(t, s.Properties["code"]))
	}
	timeout := s.Properties["timeout"].Value
	var types []string
	for _, b := range timeout.AnyOf {
		if b.Value.Type == nil || len(*b.Value.Type) != 1 {
			t.Errorf("timeout's branch %s is not of one type", schemaJSON(t, b))
			continue
		}
		types = append(types, (*b.Value.Type)[0])
	}
	if !slices.Equal(types, []string{"number", "string", "null"}) {
		t.Errorf("timeout %s: want anyOf number, string, null", schemaJSON(t, s.Properties["timeout"]))
	}
}

// A session's create request takes the keys session.CreateFields
// declares, and no others.
func TestCreateRequestSchema(t *testing.T) {
	s, err := SessionTypes.Request(reflect.TypeFor[session.CreateRequest]())
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, f := range session.CreateFields() {
		want = append(want, f.Key)
	}
	var got []string
	for k := range s.Properties {
		got = append(got, k)
	}
	if slices.Sort(got); !slices.Equal(got, slices.Sorted(slices.Values(want))) {
		t.Errorf("keys %v, want %v", got, want)
	}
	if s.AdditionalProperties.Has == nil || *s.AdditionalProperties.Has {
		t.Errorf("other keys are taken: %s", must(json.Marshal(s)))
	}
}

// lax reads its own JSON.
type lax float64

func (l *lax) UnmarshalJSON(b []byte) error { return json.Unmarshal(b, (*float64)(l)) }

// A request type that reads its own JSON without a declared schema is an
// error, not a schema of its Go type.
func TestOwnJSONRequestUndeclared(t *testing.T) {
	type req struct {
		N lax `json:"n"`
	}
	if _, err := (Types{}).Request(reflect.TypeFor[req]()); err == nil || !strings.Contains(err.Error(), "UnmarshalJSON") {
		t.Errorf("got %v, want an error saying the type reads its own JSON", err)
	}
}

func must(b []byte, err error) string {
	if err != nil {
		panic(err)
	}
	return string(b)
}
