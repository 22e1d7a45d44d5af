package openapi

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
)

// A ServeMux pattern's path is an OpenAPI template: a wildcard of the
// rest of the path is a parameter of its own name, the end anchor goes.
func TestTemplate(t *testing.T) {
	for pattern, want := range map[string]struct {
		path   string
		params []string
	}{
		"/healthz":                          {"/healthz", nil},
		"/v1/runs/{id}":                     {"/v1/runs/{id}", []string{"id"}},
		"/v1/sessions/{id}/files/{path...}": {"/v1/sessions/{id}/files/{path}", []string{"id", "path"}},
		"/{$}":                              {"/", nil},
	} {
		if path, params := Template(pattern); path != want.path || !slices.Equal(params, want.params) {
			t.Errorf("Template(%q) = %q %v, want %q %v", pattern, path, params, want.path, want.params)
		}
	}
}

// An operation must declare its path's parameters: one that does not is
// the document's error, not an invalid document; PathParams declares
// them.
func TestAddChecksPathParams(t *testing.T) {
	op := func(params openapi3.Parameters) *openapi3.Operation {
		return &openapi3.Operation{Parameters: params, Responses: Responses(map[int]*openapi3.ResponseRef{
			http.StatusOK: Response("ok", nil)})}
	}
	const pattern = "/v1/things/{id}/files/{path...}"
	d := NewDocument(&openapi3.Info{Title: "t", Version: "1"}, Types{})
	d.Add(http.MethodGet, pattern, op(openapi3.Parameters{PathParam("id", "the id")}))
	if _, err := d.JSON(); err == nil || !strings.Contains(err.Error(), "path") {
		t.Errorf("an operation lacking {path}: %v, want an error naming it", err)
	}
	d = NewDocument(&openapi3.Info{Title: "t", Version: "1"}, Types{})
	d.Add(http.MethodGet, pattern, op(PathParams(pattern, func(name string) string { return "the " + name })))
	doc, err := d.Build()
	if err != nil {
		t.Fatal(err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Errorf("the document is not valid: %v", err)
	}
	if doc.Paths.Value("/v1/things/{id}/files/{path}") == nil {
		t.Errorf("no path /v1/things/{id}/files/{path}: %v", doc.Paths.InMatchingOrder())
	}
}
