// Package openapi builds the HTTP API's OpenAPI 3.1 document (GET
// /openapi.json) from the declarations the server itself decodes and
// encodes with, so that the two cannot drift: a task's fields from
// batch.Fields (fields.go), the answers' schemas from the result
// contract's Go types and any other request or answer type by reflection
// over its json tags (schema.go, results.go). The MCP tool's input and
// output schemas come from the same functions. kin-openapi's types hold
// the document; its validator checks it and the server's real answers in
// the tests.
package openapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
)

// Version is the OpenAPI version of the document, whose schemas are JSON
// Schema 2020-12 (OpenAPI 3.1's dialect).
const Version = "3.1.0"

// BearerScheme names the security scheme of the server's bearer token.
const BearerScheme = "bearer"

// Document is an OpenAPI document being built; the first error of any
// step is Build's.
type Document struct {
	t     *openapi3.T
	types Types
	err   error
}

// NewDocument starts a document of an API, the Go types of whose answers
// and requests types describes.
func NewDocument(info *openapi3.Info, types Types) *Document {
	t := &openapi3.T{OpenAPI: Version, Info: info, Paths: openapi3.NewPaths(),
		Components: &openapi3.Components{Schemas: openapi3.Schemas{}, SecuritySchemes: openapi3.SecuritySchemes{
			BearerScheme: &openapi3.SecuritySchemeRef{Value: &openapi3.SecurityScheme{Type: "http", Scheme: "bearer",
				Description: "The token of the server's --http-token-file, when it has one: Authorization: Bearer TOKEN."}},
		}},
		// The token is needed where the server has one; /healthz says
		// otherwise for itself.
		Security: openapi3.SecurityRequirements{{BearerScheme: {}}, {}},
	}
	return &Document{t: t, types: types}
}

// Component adds the schema s as components/schemas/name, and returns a
// reference to it.
func (d *Document) Component(name string, s *openapi3.Schema) *openapi3.SchemaRef {
	d.t.Components.Schemas[name] = openapi3.NewSchemaRef("", s)
	return openapi3.NewSchemaRef("#/components/schemas/"+name, s)
}

// Answer adds the schema of the JSON encoding/json writes of a T as a
// component (Types.Schema).
func Answer[T any](d *Document, name string) *openapi3.SchemaRef {
	s, err := d.types.Schema(reflect.TypeFor[T]())
	d.fail(err)
	return d.Component(name, s)
}

// Request adds the schema of the JSON encoding/json reads into a T, with
// the keys required (Types.Request), as a component.
func Request[T any](d *Document, name string, required ...string) *openapi3.SchemaRef {
	s, err := d.types.Request(reflect.TypeFor[T](), required...)
	d.fail(err)
	return d.Component(name, s)
}

func (d *Document) fail(err error) {
	if d.err == nil {
		d.err = err
	}
}

// Add adds an operation at method and the path of the ServeMux pattern
// the server serves it at (Template), whose parameters it must declare.
func (d *Document) Add(method, pattern string, op *openapi3.Operation) {
	path, params := Template(pattern)
	var declared []string
	for _, p := range op.Parameters {
		if p.Value != nil && p.Value.In == openapi3.ParameterInPath {
			declared = append(declared, p.Value.Name)
		}
	}
	if !slices.Equal(slices.Sorted(slices.Values(declared)), slices.Sorted(slices.Values(params))) {
		d.fail(fmt.Errorf("openapi: %s %s declares the path parameters %v, not its path's %v", method, pattern, declared, params))
	}
	if d.t.Paths.Value(path) == nil {
		d.t.Paths.Set(path, &openapi3.PathItem{})
	}
	if d.t.Paths.Value(path).GetOperation(method) != nil {
		d.fail(fmt.Errorf("openapi: %s %s is described twice", method, path))
	}
	d.t.Paths.Value(path).SetOperation(method, op)
}

// Template is the OpenAPI path template of a ServeMux pattern's path,
// and the names of its parameters: a wildcard of the rest of the path,
// {name...}, is {name} (whose slashes a client may write as %2F, which
// ServeMux decodes), and the end anchor {$} is dropped.
func Template(pattern string) (string, []string) {
	segments := strings.Split(pattern, "/")
	var params []string
	for i, seg := range segments {
		if !strings.HasPrefix(seg, "{") || !strings.HasSuffix(seg, "}") {
			continue
		}
		name := strings.TrimSuffix(seg[1:len(seg)-1], "...")
		if name == "$" {
			segments[i] = ""
			continue
		}
		segments[i] = "{" + name + "}"
		params = append(params, name)
	}
	return strings.Join(segments, "/"), params
}

// PathParams are the path parameters of a ServeMux pattern (Template),
// each described as what describe says of its name.
func PathParams(pattern string, describe func(name string) string) openapi3.Parameters {
	_, names := Template(pattern)
	var params openapi3.Parameters
	for _, name := range names {
		params = append(params, PathParam(name, describe(name)))
	}
	return params
}

// Build is the document, or the first error in making it.
func (d *Document) Build() (*openapi3.T, error) {
	if d.err != nil {
		return nil, d.err
	}
	if d.t.Paths.Len() == 0 {
		return nil, errors.New("openapi: the document has no paths")
	}
	return d.t, nil
}

// JSON is the document as JSON.
func (d *Document) JSON() ([]byte, error) {
	t, err := d.Build()
	if err != nil {
		return nil, err
	}
	return json.Marshal(t)
}

// Content is a body of mediaType whose schema is s.
func Content(mediaType string, s *openapi3.SchemaRef) openapi3.Content {
	return openapi3.Content{mediaType: openapi3.NewMediaType().WithSchemaRef(s)}
}

// JSONBody is a request body of JSON whose schema is s.
func JSONBody(description string, s *openapi3.SchemaRef) *openapi3.RequestBodyRef {
	return &openapi3.RequestBodyRef{Value: openapi3.NewRequestBody().WithRequired(true).
		WithDescription(description).WithContent(Content("application/json", s))}
}

// Response is an answer: its description, its body (nil: none) and the
// headers it carries.
func Response(description string, content openapi3.Content, headers ...*Header) *openapi3.ResponseRef {
	r := openapi3.NewResponse().WithDescription(description)
	if content != nil {
		r.Content = content
	}
	for _, h := range headers {
		if r.Headers == nil {
			r.Headers = openapi3.Headers{}
		}
		r.Headers[h.Name] = &openapi3.HeaderRef{Value: &openapi3.Header{Parameter: openapi3.Parameter{
			Description: h.Description, Schema: openapi3.NewSchemaRef("", typedSchema(h.Type))}}}
	}
	return &openapi3.ResponseRef{Value: r}
}

// Header is a response header.
type Header struct {
	Name, Type, Description string
}

// Responses are an operation's answers, by status.
func Responses(byStatus map[int]*openapi3.ResponseRef) *openapi3.Responses {
	r := openapi3.NewResponses()
	for status, resp := range byStatus {
		if http.StatusText(status) == "" {
			panic("openapi: no HTTP status " + strconv.Itoa(status))
		}
		r.Set(strconv.Itoa(status), resp)
	}
	return r
}

// Query is an optional query parameter of an operation.
func Query(name, description string, s *openapi3.Schema) *openapi3.ParameterRef {
	return &openapi3.ParameterRef{Value: openapi3.NewQueryParameter(name).WithDescription(description).WithSchema(s)}
}

// PathParam is a parameter in an operation's path.
func PathParam(name, description string) *openapi3.ParameterRef {
	return &openapi3.ParameterRef{Value: openapi3.NewPathParameter(name).WithDescription(description).
		WithSchema(typedSchema(openapi3.TypeString))}
}

// Enum is a string schema of these values.
func Enum(values ...string) *openapi3.Schema {
	s := typedSchema(openapi3.TypeString)
	for _, v := range values {
		s.Enum = append(s.Enum, v)
	}
	return s
}

// Typed is a schema of one JSON type.
func Typed(t string) *openapi3.Schema { return typedSchema(t) }
