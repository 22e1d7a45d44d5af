package mcptool

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/microbox/microbox/internal/batch"
)

// The tool's input is a batch task's keys, less id and file (a network
// caller names no host file): one schema, held equal here.
func TestInputSchemaIsTheTask(t *testing.T) {
	var schema struct {
		Properties map[string]any
		Required   []string
	}
	if err := json.Unmarshal(inputSchema, &schema); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for f := range reflect.TypeFor[batch.Task]().Fields() {
		key, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if key != "id" && key != "file" && key != "-" { // "-": set in Go only
			keys = append(keys, key)
		}
	}
	var props []string
	for k := range schema.Properties {
		props = append(props, k)
	}
	slices.Sort(keys)
	slices.Sort(props)
	if !slices.Equal(keys, props) {
		t.Errorf("the tool's input has %v, a task %v", props, keys)
	}
	if !slices.Equal(schema.Required, []string{"code"}) {
		t.Errorf("required %v", schema.Required)
	}
	if err := json.Unmarshal(outputSchema, new(map[string]any)); err != nil {
		t.Errorf("output schema: %v", err)
	}
}
