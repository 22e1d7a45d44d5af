package mcptool

// The tool's schemas, from the same declarations as the HTTP API's
// OpenAPI document (internal/openapi): its input is the task's fields the
// tool accepts (batch.Fields), its output the result contract's Go type;
// each property of one JSON type, or anyOf branches of one type each
// (null among them), as clients that map tool schemas onto single-typed
// dialects need.

import (
	"encoding/json"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/microbox/microbox/internal/batch"
	"github.com/microbox/microbox/internal/openapi"
)

// taskSchema is the JSON schema of the tool's input.
func taskSchema() json.RawMessage {
	s := openapi.TaskSchema(batch.InMCP)
	s.Description = "A run: the program and the options it changes; the server's defaults apply to the rest, and its ceilings bound the limits (a microbox batch task, less id and file)."
	return marshal(s)
}

// resultSchema is the JSON schema of the tool's output.
func resultSchema() json.RawMessage {
	s, err := openapi.ResultSchema()
	if err != nil {
		panic(err) // the result's types are the program's own: a bug
	}
	s.Description = "How the run ended: microbox's result contract (fields are only ever added)."
	return marshal(s)
}

func marshal(s *openapi3.Schema) json.RawMessage {
	b, err := json.Marshal(s)
	if err != nil {
		panic(err)
	}
	return b
}
