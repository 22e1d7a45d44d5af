package httpapi

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/microbox/microbox/internal/batch"
)

// The document follows the declarations with no change of its own: a
// field declared for the API (batch.Fields) is in its Task with its
// kind's schema and its description, one declared for batch lines only
// is not; a route the server serves is among its paths even with no
// description of its own.
func TestOpenAPIFollowsTheDeclarations(t *testing.T) {
	saved := batch.Fields
	t.Cleanup(func() { batch.Fields = saved })
	batch.Fields = append(slices.Clone(saved),
		batch.Field{Key: "added_limit", Kind: batch.KindSize, Where: batch.InAPI, Doc: "A limit added."},
		batch.Field{Key: "added_line_only", Kind: batch.KindCount, Where: batch.InLine})
	raw, err := openAPIDocument("test", []route{{"/v1/runs", []string{"POST"}}, {"/v1/added", []string{"GET", "POST"}}})
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Paths      map[string]map[string]any
		Components struct {
			Schemas map[string]struct {
				Properties map[string]struct {
					Description string
					AnyOf       []struct{ Type string }
				}
			}
		}
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	task := doc.Components.Schemas["Task"].Properties
	added, ok := task["added_limit"]
	var types []string
	for _, b := range added.AnyOf {
		types = append(types, b.Type)
	}
	if !ok || added.Description != "A limit added." || !slices.Equal(types, []string{"integer", "string"}) {
		t.Errorf("the added field in the document: %+v (present %v); want a size's schema, integer or string, and its description", added, ok)
	}
	if _, ok := task["added_line_only"]; ok {
		t.Errorf("a field declared for batch lines only is in the API's Task")
	}
	if _, ok := task["code"]; !ok {
		t.Errorf("the declared fields are not in Task: %v", task)
	}
	if ops := doc.Paths["/v1/added"]; ops["get"] == nil || ops["post"] == nil {
		t.Errorf("a route served without a description of its own is not in the document: %v", doc.Paths)
	}
}
