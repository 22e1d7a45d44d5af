package mcptool

// The tool's input schema, derived from the task's declaration
// (batch.Fields): the fields the MCP tool accepts, each with one JSON
// type, or anyOf where a field takes a number or a string.

import (
	"encoding/json"

	"github.com/microbox/microbox/internal/batch"
)

// taskSchema is the JSON schema of the tool's input.
func taskSchema() json.RawMessage {
	props := map[string]any{}
	for _, f := range batch.FieldsIn(batch.InMCP) {
		p := kindSchema(f.Kind)
		p["description"] = f.Doc
		if f.Enum != nil {
			p["enum"] = f.Enum
		}
		props[f.Key] = p
	}
	schema, err := json.Marshal(map[string]any{
		"type":                 "object",
		"description":          "A run: the program and the options it changes; the server's defaults apply to the rest, and its ceilings bound the limits (a microbox batch task, less id and file).",
		"properties":           props,
		"required":             []string{"code"},
		"additionalProperties": false,
	})
	if err != nil {
		panic(err)
	}
	return schema
}

// kindSchema is the schema of a value of kind k.
func kindSchema(k batch.Kind) map[string]any {
	str := map[string]any{"type": "string"}
	switch k {
	case batch.KindSize:
		return map[string]any{"anyOf": []any{map[string]any{"type": "integer", "minimum": 1}, str}}
	case batch.KindDuration:
		return map[string]any{"anyOf": []any{map[string]any{"type": "number", "minimum": 0}, str}}
	case batch.KindCount:
		return map[string]any{"type": "integer", "minimum": 0}
	case batch.KindFloat:
		return map[string]any{"type": "number", "exclusiveMinimum": 0}
	case batch.KindBool:
		return map[string]any{"type": "boolean"}
	case batch.KindList:
		return map[string]any{"type": "array", "items": str}
	case batch.KindMap:
		return map[string]any{"type": "object", "additionalProperties": str}
	}
	return str
}
