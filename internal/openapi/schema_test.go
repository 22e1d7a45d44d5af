package openapi

import (
	"encoding/json"
	"github.com/microbox/microbox/result"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/microbox/microbox/internal/policy"
)

// extended is a result with fields added, as a new field of the result
// contract would be.
type extended struct {
	policy.Result
	Added    *int     `json:"added"`
	Optional string   `json:"optional,omitempty"`
	List     []string `json:"list"`
}

// A field added to a result's type is in its schema, required unless
// omitempty, null among its values where encoding/json writes a nil as
// null; its embedded result's fields are all there too, described.
func TestSchemaFollowsTheType(t *testing.T) {
	s, err := ResultTypes.Schema(reflect.TypeFor[extended]())
	if err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]string{
		"added": `{"anyOf":[{"type":"integer"},{"type":"null"}]}`, "optional": `{"type":"string"}`,
		"list": `{"anyOf":[{"items":{"type":"string"},"type":"array"},{"type":"null"}]}`,
	} {
		if got := schemaJSON(t, s.Properties[key]); got != want {
			t.Errorf("%s: %s, want %s", key, got, want)
		}
	}
	for _, key := range []string{"added", "list", "status", "exit_code", "stdout"} {
		if !slices.Contains(s.Required, key) {
			t.Errorf("%q is not required: %v", key, s.Required)
		}
	}
	for _, key := range []string{"optional", "limit", "redactions", "risk"} {
		if slices.Contains(s.Required, key) {
			t.Errorf("%q, omitted when empty, is required", key)
		}
	}
	if p := s.Properties["status"]; p == nil || len(p.Value.Enum) != len(result.Statuses) || !strings.Contains(p.Value.Description, "verdict") {
		t.Errorf("status: %s: want the statuses and the description", schemaJSON(t, p))
	}
	if p := s.Properties["risk"]; p == nil || isOrNull(p.Value) || p.Value.Properties["score"] == nil {
		t.Errorf("risk (a pointer left out when nil): %s", schemaJSON(t, p))
	}
}

// request is a request type: every field optional but those required,
// and null taken by every pointer, slice or map.
type request struct {
	Code  *string           `json:"code"`
	Files map[string]string `json:"files,omitempty"`
	N     int               `json:"n"`
}

func TestRequestSchema(t *testing.T) {
	s, err := Types{}.Request(reflect.TypeFor[request](), "code")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(s.Required, []string{"code"}) || schemaJSON(t, s.Properties["code"]) != `{"type":"string"}` {
		t.Errorf("required %v, code %s: want code required, a string", s.Required, schemaJSON(t, s.Properties["code"]))
	}
	if !isOrNull(s.Properties["files"].Value) || isOrNull(s.Properties["n"].Value) {
		t.Errorf("files %s, n %s: want a map or null, an integer", schemaJSON(t, s.Properties["files"]), schemaJSON(t, s.Properties["n"]))
	}
	if _, err := (Types{}).Request(reflect.TypeFor[request](), "nope"); err == nil {
		t.Error("a required key the type does not have was taken")
	}
}

// A description of a field the type does not have (renamed, removed) is
// refused: the descriptions cannot drift from the type either.
func TestDocsOfMissingField(t *testing.T) {
	types := Types{Docs: map[reflect.Type]map[string]string{reflect.TypeFor[request](): {"gone": "x"}}}
	if _, err := types.Schema(reflect.TypeFor[request]()); err == nil || !strings.Contains(err.Error(), `"gone"`) {
		t.Errorf("got %v, want an error naming the field", err)
	}
}

func schemaJSON(t *testing.T, ref *openapi3.SchemaRef) string {
	t.Helper()
	if ref == nil {
		return "<none>"
	}
	b, err := json.Marshal(ref.Value)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
