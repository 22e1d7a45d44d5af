package openapi

// Schemas of Go types as encoding/json writes and reads them, for the
// answers (result.Result and the types that carry it) and for request
// types that are Go structs (SandboxFusion's): kin-openapi's openapi3gen
// walks the json tags, and the customizer below makes its schemas JSON
// Schema 2020-12 as OpenAPI 3.1 has it. A field without omitempty is
// required; a pointer, slice or map that encoding/json may write as null
// takes null too, as an anyOf of two single-typed branches (not a type
// array, which some agent frameworks reject in an MCP tool's schemas).

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3gen"
)

// Types says what a Go type's json tags do not: the values of string
// types that take only some, and what fields mean.
type Types struct {
	// Enums are the values of string types that take only these.
	Enums map[reflect.Type][]string
	// Docs describe a struct type's fields, by JSON key.
	Docs map[reflect.Type]map[string]string
	// Marshaled are the schemas of types that write or read their own
	// JSON (json.Marshaler, json.Unmarshaler), whose Go fields say
	// nothing of it. Such a type without one here is an error, not a
	// wrong schema.
	Marshaled map[reflect.Type]*openapi3.Schema
}

// With is ts and more: more's enums and descriptions besides ts's.
func (ts Types) With(more Types) Types {
	out := Types{Enums: maps.Clone(ts.Enums), Docs: maps.Clone(ts.Docs), Marshaled: maps.Clone(ts.Marshaled)}
	if out.Enums == nil {
		out.Enums = map[reflect.Type][]string{}
	}
	if out.Docs == nil {
		out.Docs = map[reflect.Type]map[string]string{}
	}
	if out.Marshaled == nil {
		out.Marshaled = map[reflect.Type]*openapi3.Schema{}
	}
	maps.Copy(out.Enums, more.Enums)
	maps.Copy(out.Docs, more.Docs)
	maps.Copy(out.Marshaled, more.Marshaled)
	return out
}

// Schema is the schema of the JSON that encoding/json writes of a t: an
// answer's.
func (ts Types) Schema(t reflect.Type) (*openapi3.Schema, error) {
	return ts.generate(t, false)
}

// Request is the schema of the JSON that encoding/json reads into a t: a
// request's, whose keys are all optional but those required.
func (ts Types) Request(t reflect.Type, required ...string) (*openapi3.Schema, error) {
	s, err := ts.generate(t, true)
	if err != nil {
		return nil, err
	}
	for _, key := range required {
		prop := s.Properties[key]
		if prop == nil {
			return nil, fmt.Errorf("openapi: %v has no field %q to require", t, key)
		}
		if isOrNull(prop.Value) { // a required field takes a value
			prop.Value = notNull(prop.Value)
		}
	}
	s.Required = required
	return s, nil
}

// generate is t's schema, that of what encoding/json reads when decode,
// else of what it writes.
func (ts Types) generate(t reflect.Type, decode bool) (*openapi3.Schema, error) {
	c := customizer{ts, decode}
	ref, err := openapi3gen.NewGenerator(openapi3gen.UseAllExportedFields(), openapi3gen.SchemaCustomizer(c.customize)).GenerateSchemaRef(t)
	if err != nil {
		return nil, fmt.Errorf("openapi: the schema of %v: %w", t, err)
	}
	inline(ref.Value)
	return ref.Value, nil
}

// inline drops the names openapi3gen gives the schemas within s as
// references (the Go types' names, which no document defines): each is
// written in place. A type that holds itself (a result's compile step,
// a result of its own) is written once more in place, without the
// properties that lead back to it: a compile step has no compile step.
func inline(s *openapi3.Schema) { inlineUnder(s, nil) }

func inlineUnder(s *openapi3.Schema, path []*openapi3.Schema) {
	path = append(path, s)
	for _, ref := range children(s) {
		if ref == nil {
			continue
		}
		ref.Ref = ""
		if slices.Contains(path, ref.Value) {
			ref.Value = without(ref.Value, path)
			continue
		}
		inlineUnder(ref.Value, path)
	}
}

// children are the schemas s is made of.
func children(s *openapi3.Schema) openapi3.SchemaRefs {
	return slices.Concat(s.AnyOf, s.OneOf, s.AllOf, slices.Collect(maps.Values(s.Properties)),
		openapi3.SchemaRefs{s.Items, s.AdditionalProperties.Schema})
}

// without is a copy of s less the properties that are, or may be, one of
// the schemas of path.
func without(s *openapi3.Schema, path []*openapi3.Schema) *openapi3.Schema {
	c := *s
	c.Properties = openapi3.Schemas{}
	for key, p := range s.Properties {
		cyclic := slices.Contains(path, p.Value)
		for _, branch := range p.Value.AnyOf {
			cyclic = cyclic || slices.Contains(path, branch.Value)
		}
		if !cyclic {
			c.Properties[key] = p
		}
	}
	return &c
}

var (
	marshaler   = reflect.TypeFor[json.Marshaler]()
	unmarshaler = reflect.TypeFor[json.Unmarshaler]()
)

// customizer makes openapi3gen's schemas those of JSON Schema 2020-12.
type customizer struct {
	Types
	decode bool // of what encoding/json reads, not writes
}

// customize makes openapi3gen's schema of t (reached through a pointer
// when schema.Nullable) one of JSON Schema 2020-12.
func (ts customizer) customize(_ string, t reflect.Type, _ reflect.StructTag, schema *openapi3.Schema) error {
	if slices.Contains([]string{"int32", "int64", "float", "double"}, schema.Format) {
		schema.Format = "" // OpenAPI's formats of Go's numbers, not JSON Schema's
	}
	if own, ok := ts.Marshaled[t]; ok {
		nullable := schema.Nullable
		*schema = *own
		schema.Nullable = nullable
	} else if err := ts.ownJSON(t); err != nil {
		return err
	}
	if values, ok := ts.Enums[t]; ok {
		for _, v := range values {
			schema.Enum = append(schema.Enum, v)
		}
	}
	if t.Kind() == reflect.Struct && schema.Properties != nil {
		if err := ts.object(t, schema); err != nil {
			return err
		}
	}
	if schema.Nullable {
		schema.Nullable = false
		*schema = *orNull(schema)
	}
	return nil
}

// ownJSON refuses a type that writes (an answer's) or reads (a
// request's) its own JSON: its schema must be declared.
func (ts customizer) ownJSON(t reflect.Type) error {
	switch p := reflect.PointerTo(t); {
	case !ts.decode && p.Implements(marshaler):
		return fmt.Errorf("openapi: %v writes its own JSON (MarshalJSON): declare its schema in Types.Marshaled", t)
	case ts.decode && p.Implements(unmarshaler):
		return fmt.Errorf("openapi: %v reads its own JSON (UnmarshalJSON): declare its schema in Types.Marshaled", t)
	}
	return nil
}

// object sets what the object of struct t requires, which of its
// properties take null, and their descriptions. Written, a field without
// omitempty is always there, and null only if it is a nil pointer, slice
// or map; read, any field may be absent, and null for any of those.
func (ts customizer) object(t reflect.Type, schema *openapi3.Schema) error {
	fields := jsonFields(t)
	for _, f := range fields {
		prop := schema.Properties[f.key]
		if prop == nil || prop.Value == nil {
			return fmt.Errorf("openapi: %v's field %q has no schema", t, f.key)
		}
		p := prop.Value
		nilable := f.typ.Kind() == reflect.Slice || f.typ.Kind() == reflect.Map
		switch {
		case f.omitEmpty && !ts.decode && isOrNull(p): // a nil pointer is left out
			prop.Value = notNull(p)
		case (ts.decode || !f.omitEmpty) && nilable && !isAny(p):
			prop.Value = orNull(p)
		}
		if !f.omitEmpty && !ts.decode {
			schema.Required = append(schema.Required, f.key)
		}
		if doc, ok := ts.Docs[f.owner][f.key]; ok {
			prop.Value.Description = doc
		}
	}
	return ts.checkDocs(fields)
}

// checkDocs refuses a description of a field that the struct declaring
// the fields does not have (one renamed or removed).
func (ts customizer) checkDocs(fields []jsonField) error {
	keys := map[reflect.Type]map[string]bool{}
	for _, f := range fields {
		if keys[f.owner] == nil {
			keys[f.owner] = map[string]bool{}
		}
		keys[f.owner][f.key] = true
	}
	for owner, have := range keys {
		for key := range ts.Docs[owner] {
			if !have[key] {
				return fmt.Errorf("openapi: a description of %v's field %q, which it does not have", owner, key)
			}
		}
	}
	return nil
}

// orNull is s, or null: branches of one type each (s's own branches,
// when it is an anyOf of them, beside null's).
func orNull(s *openapi3.Schema) *openapi3.Schema {
	null := openapi3.NewSchemaRef("", &openapi3.Schema{Type: &openapi3.Types{openapi3.TypeNull}})
	if s.Type == nil && len(s.AnyOf) > 0 && s.Properties == nil {
		c := *s
		c.AnyOf = append(slices.Clip(s.AnyOf), null)
		return &c
	}
	inner := *s
	return &openapi3.Schema{AnyOf: openapi3.SchemaRefs{openapi3.NewSchemaRef("", &inner), null}}
}

// isOrNull reports whether s is an orNull.
func isOrNull(s *openapi3.Schema) bool {
	n := len(s.AnyOf)
	return n >= 2 && s.AnyOf[n-1].Value.Type.Is(openapi3.TypeNull)
}

// notNull is the orNull s less its null, with s's description. Its one
// other branch is itself when s has none: inline knows a type that holds
// itself by its schema's address.
func notNull(s *openapi3.Schema) *openapi3.Schema {
	rest := s.AnyOf[:len(s.AnyOf)-1]
	if len(rest) > 1 {
		out := *s
		out.AnyOf = slices.Clip(rest)
		return &out
	}
	if s.Description == "" {
		return rest[0].Value
	}
	out := *rest[0].Value
	out.Description = s.Description
	return &out
}

// isAny reports whether s takes any value (json.RawMessage's).
func isAny(s *openapi3.Schema) bool {
	return s.Type == nil && s.AnyOf == nil && s.Properties == nil
}

// jsonField is a field of a struct's JSON object.
type jsonField struct {
	key       string
	omitEmpty bool
	typ       reflect.Type
	owner     reflect.Type // the struct that declares it (one embedded, or the object's own)
}

// jsonFields are the fields of struct t's JSON object as encoding/json
// writes them: tagged exported fields, those of embedded structs without
// a key of their own in their place.
func jsonFields(t reflect.Type) []jsonField {
	var fields []jsonField
	for f := range t.Fields() {
		tag := f.Tag.Get("json")
		key, opts, _ := strings.Cut(tag, ",")
		embedded := f.Type
		if embedded.Kind() == reflect.Pointer {
			embedded = embedded.Elem()
		}
		switch {
		case tag == "-", !f.IsExported() && !f.Anonymous:
		case f.Anonymous && key == "" && embedded.Kind() == reflect.Struct:
			fields = append(fields, jsonFields(embedded)...)
		case f.IsExported():
			if key == "" {
				key = f.Name
			}
			fields = append(fields, jsonField{key: key, omitEmpty: slices.Contains(strings.Split(opts, ","), "omitempty"), typ: f.Type, owner: t})
		}
	}
	return fields
}
