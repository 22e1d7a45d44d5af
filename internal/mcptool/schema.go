package mcptool

// The tools' schemas, from the same declarations as the HTTP API's
// OpenAPI document (internal/openapi): run_python's input is the task's
// fields the tool accepts (batch.Fields), its output the result
// contract's Go type; the session tools' are reflected from their Go
// types (sessions.go) as the document's session routes are. Each
// property is of one JSON type, or anyOf branches of one type each (null
// among them), as clients that map tool schemas onto single-typed
// dialects need.

import (
	"encoding/json"
	"reflect"

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

// sessionTypes describe the session tools' types.
var sessionTypes = openapi.SessionTypes.With(sessionDocs)

// inSchema is the JSON schema of a tool's input of type T: what
// encoding/json reads into a T, the keys required, no others.
func inSchema[T any](required ...string) json.RawMessage {
	s, err := sessionTypes.Request(reflect.TypeFor[T](), required...)
	if err != nil {
		panic(err) // the tools' types are the program's own: a bug
	}
	s.AdditionalProperties = openapi3.AdditionalProperties{Has: new(false)}
	return marshal(s)
}

// outSchema is the JSON schema of a tool's output of type T: what
// encoding/json writes of a T.
func outSchema[T any]() json.RawMessage {
	s, err := sessionTypes.Schema(reflect.TypeFor[T]())
	if err != nil {
		panic(err)
	}
	return marshal(s)
}

func marshal(s *openapi3.Schema) json.RawMessage {
	b, err := json.Marshal(s)
	if err != nil {
		panic(err)
	}
	return b
}
