package openapi

// The task's schema, from its declaration (batch.Fields): the native
// API's runs and batch lines and the MCP tool's input take the fields
// declared for them, each with one JSON type, or anyOf where a field
// takes a number or a string.

import (
	"github.com/getkin/kin-openapi/openapi3"

	"github.com/microbox/microbox/internal/batch"
)

// TaskSchema is the schema of a task as the front end where takes it:
// its declared fields and no others (the task's decoder refuses unknown
// keys), "code" required.
func TaskSchema(where batch.Where) *openapi3.Schema {
	return FieldsSchema(batch.FieldsIn(where), "code")
}

// FieldsSchema is the schema of an object of these fields and no others,
// the keys required among them.
func FieldsSchema(fields []batch.Field, required ...string) *openapi3.Schema {
	s := &openapi3.Schema{Type: &openapi3.Types{openapi3.TypeObject}, Properties: openapi3.Schemas{},
		Required: required, AdditionalProperties: openapi3.AdditionalProperties{Has: new(false)}}
	for _, f := range fields {
		s.Properties[f.Key] = openapi3.NewSchemaRef("", FieldSchema(f))
	}
	return s
}

// FieldSchema is the schema of a task field's value.
func FieldSchema(f batch.Field) *openapi3.Schema {
	s := kindSchema(f.Kind)
	s.Description = f.Doc
	for _, v := range f.Enum {
		s.Enum = append(s.Enum, v)
	}
	return s
}

// kindSchema is the schema of a value of kind k.
func kindSchema(k batch.Kind) *openapi3.Schema {
	switch k {
	case batch.KindSize: // bytes, or "256M"
		return anyOf(&openapi3.Schema{Type: typ(openapi3.TypeInteger), Min: new(1.0)}, typedSchema(openapi3.TypeString))
	case batch.KindDuration: // seconds, or "5s"
		return anyOf(&openapi3.Schema{Type: typ(openapi3.TypeNumber), Min: new(0.0)}, typedSchema(openapi3.TypeString))
	case batch.KindCount:
		return &openapi3.Schema{Type: typ(openapi3.TypeInteger), Min: new(0.0)}
	case batch.KindFloat:
		return &openapi3.Schema{Type: typ(openapi3.TypeNumber), ExclusiveMin: openapi3.ExclusiveBound{Value: new(0.0)}}
	case batch.KindBool:
		return typedSchema(openapi3.TypeBoolean)
	case batch.KindList:
		return &openapi3.Schema{Type: typ(openapi3.TypeArray), Items: openapi3.NewSchemaRef("", typedSchema(openapi3.TypeString))}
	case batch.KindMap:
		return &openapi3.Schema{Type: typ(openapi3.TypeObject),
			AdditionalProperties: openapi3.AdditionalProperties{Schema: openapi3.NewSchemaRef("", typedSchema(openapi3.TypeString))}}
	case batch.KindJSON:
		return &openapi3.Schema{} // any JSON value
	}
	return typedSchema(openapi3.TypeString)
}

func typ(t string) *openapi3.Types { return &openapi3.Types{t} }

func typedSchema(t string) *openapi3.Schema { return &openapi3.Schema{Type: typ(t)} }

// anyOf is a value of one of the schemas.
func anyOf(schemas ...*openapi3.Schema) *openapi3.Schema {
	s := &openapi3.Schema{}
	for _, b := range schemas {
		s.AnyOf = append(s.AnyOf, openapi3.NewSchemaRef("", b))
	}
	return s
}
