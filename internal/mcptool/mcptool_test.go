package mcptool

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/microbox/microbox/internal/batch"
)

// propertySchema is one property of the input schema.
type propertySchema struct {
	Type  string
	AnyOf []propertySchema
	Enum  []string
}

// types are the JSON types a property takes: one, or anyOf's.
func (p propertySchema) types() []string {
	if p.Type != "" {
		return []string{p.Type}
	}
	var ts []string
	for _, a := range p.AnyOf {
		ts = append(ts, a.types()...)
	}
	return ts
}

// sample is a JSON value of type typ.
func sample(typ string, enum []string) string {
	switch typ {
	case "string":
		if enum != nil {
			return fmt.Sprintf("%q", enum[0])
		}
		return `"1s"` // a duration, and as text what a string field takes
	case "integer":
		return "2"
	case "number":
		return "0.5"
	case "boolean":
		return "true"
	case "array":
		return `["json"]`
	case "object":
		return `{"a": "1"}`
	}
	panic(typ)
}

// The tool's input is the declared task fields the tool accepts, key by
// key, each with one JSON type (or anyOf), and the task's decoder takes
// a value of each type the schema offers and refuses one it does not:
// the schema and the decoder agree.
func TestInputSchemaIsTheDeclaration(t *testing.T) {
	var schema struct {
		Properties           map[string]propertySchema
		Required             []string
		AdditionalProperties bool
	}
	if err := json.Unmarshal(inputSchema, &schema); err != nil {
		t.Fatal(err)
	}
	var declared []string
	for _, f := range batch.FieldsIn(batch.InMCP) {
		declared = append(declared, f.Key)
	}
	var props []string
	for k := range schema.Properties {
		props = append(props, k)
	}
	slices.Sort(declared)
	slices.Sort(props)
	if !slices.Equal(declared, props) {
		t.Errorf("the tool's input has %v, the declaration %v", props, declared)
	}
	for _, key := range []string{"zygote", "zygote_fallback", "preload", "stdin"} {
		if _, ok := schema.Properties[key]; !ok {
			t.Errorf("the schema has no %q", key)
		}
	}
	if _, ok := schema.Properties["file"]; ok {
		t.Errorf("the schema offers \"file\", a host file")
	}
	all := []string{"string", "integer", "number", "boolean", "array", "object"}
	for key, p := range schema.Properties {
		types := p.types()
		if len(types) == 0 || p.Type != "" && p.AnyOf != nil {
			t.Errorf("%s: types %v: want one type, or anyOf", key, types)
		}
		for _, typ := range all {
			if typ == "number" && slices.Contains(types, "integer") {
				continue // a size's fraction is refused when it applies, not by the decoder
			}
			line := fmt.Sprintf(`{"code": "1", %q: %s}`, key, sample(typ, p.Enum))
			_, err := batch.DecodeTask([]byte(line))
			offered := slices.Contains(types, typ) || typ == "integer" && slices.Contains(types, "number")
			if offered && err != nil {
				t.Errorf("%s: the schema offers %s, the task refuses it: %v", key, typ, err)
			}
			if !offered && err == nil {
				t.Errorf("%s: the task takes a %s, the schema does not offer it (%v)", key, typ, types)
			}
		}
	}
	if !slices.Equal(schema.Required, []string{"code"}) || schema.AdditionalProperties {
		t.Errorf("required %v, additional properties %v", schema.Required, schema.AdditionalProperties)
	}
	if err := json.Unmarshal(outputSchema, new(map[string]any)); err != nil {
		t.Errorf("output schema: %v", err)
	}
}

// Every key of a task but those a network caller cannot send is in the
// tool's input.
func TestInputSchemaIsTheTask(t *testing.T) {
	var schema struct{ Properties map[string]any }
	json.Unmarshal(inputSchema, &schema)
	for f := range reflect.TypeFor[batch.Task]().Fields() {
		key, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if _, ok := schema.Properties[key]; !ok && key != "id" && key != "file" && key != "-" {
			t.Errorf("task key %q is not in the tool's input", key)
		}
	}
}

// Both schemas give every value one JSON type, never a type array, and
// every schema within them constrains its value (what the MCP inspector's
// --strict checks, TestMCPInspectorStrict); the output's nullable fields
// take null as an anyOf branch of its own.
func TestSchemasOneTypePerProperty(t *testing.T) {
	for name, raw := range map[string]json.RawMessage{"input": inputSchema, "output": outputSchema} {
		var schema any
		if err := json.Unmarshal(raw, &schema); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		walkSchemas(schema, name, func(path string, s map[string]any) {
			if _, ok := s["type"].(string); !ok && s["anyOf"] == nil && s["enum"] == nil {
				t.Errorf("%s: type %v: want one JSON type (or anyOf branches of one each)", path, s["type"])
			}
		})
	}
	var output struct{ Properties map[string]map[string]any }
	json.Unmarshal(outputSchema, &output)
	exit := output.Properties["exit_code"]["anyOf"]
	if b, _ := json.Marshal(exit); string(b) != `[{"type":"integer"},{"type":"null"}]` {
		t.Errorf("exit_code: anyOf %s: want an integer or null", b)
	}
}

// walkSchemas calls f on every schema within s (s's path named at).
func walkSchemas(s any, at string, f func(string, map[string]any)) {
	m, ok := s.(map[string]any)
	if !ok {
		return
	}
	f(at, m)
	props, _ := m["properties"].(map[string]any)
	for name, p := range props {
		walkSchemas(p, at+".properties."+name, f)
	}
	for _, key := range []string{"items", "additionalProperties"} {
		if sub, ok := m[key].(map[string]any); ok {
			walkSchemas(sub, at+"."+key, f)
		}
	}
	if branches, ok := m["anyOf"].([]any); ok {
		for i, b := range branches {
			walkSchemas(b, fmt.Sprintf("%s.anyOf[%d]", at, i), f)
		}
	}
}
