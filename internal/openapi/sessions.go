package openapi

// The sessions' types (internal/session), as the schemas of the HTTP
// API's session routes and of the MCP session tools' input and output:
// what their fields mean, and the schemas of the request types whose JSON
// is their own (docs/sessions.md says it at length).

import (
	"reflect"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/microbox/microbox/internal/batch"
	"github.com/microbox/microbox/internal/session"
)

// SessionTypes are what the sessions' types do not say themselves,
// besides ResultTypes (the times they write).
var SessionTypes = ResultTypes.With(Types{
	Docs: map[reflect.Type]map[string]string{
		reflect.TypeFor[session.Info](): {
			"id":              "The session's id.",
			"state":           "alive, or ended (reason and error say why).",
			"reason":          "Why it ended: " + strings.Join(session.Reasons, ", ") + ".",
			"error":           "What ended it, in one line, when that was a failure.",
			"python":          "The interpreter's Python version.",
			"idle_expires_at": "When it ends unless a request comes first.",
			"ends_by":         "When it ends at the latest (its max_lifetime).",
			"cells":           "How many cells it has run.",
		},
		reflect.TypeFor[session.CellRequest](): {
			"code":    "The cell's Python code; the value of a trailing expression is answered.",
			"stdin":   "The cell's standard input.",
			"timeout": "The cell's wall-clock limit: seconds, or a duration such as \"30s\"; absent or null: the session's.",
		},
		reflect.TypeFor[session.CellResult](): {
			"status":  "ok, error (it raised: error), timeout (interrupted; the session goes on) or ended (the session ended under it: session.reason).",
			"value":   "The repr of the cell's trailing expression, unless None.",
			"display": "What it displayed, each a map of MIME type to content: image/png (base64), text/plain.",
			"error":   "The exception it raised, with its traceback from the cell on.",
			"session": "The session after the cell.",
		},
	},
	Marshaled: map[reflect.Type]*openapi3.Schema{
		reflect.TypeFor[session.CreateRequest](): FieldsSchema(session.CreateFields()),
		reflect.TypeFor[session.Duration]():      kindSchema(batch.KindDuration),
	},
})
