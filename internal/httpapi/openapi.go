package httpapi

// GET /openapi.json: the API's OpenAPI 3.1 document, built once when the
// server starts from what the handlers decode and encode with
// (internal/openapi): the task's fields from their declaration, the
// answers' schemas from their Go types, SandboxFusion's from the types
// /run_code decodes and encodes. Below, each route says what its
// parameters and statuses mean; a route the server serves that has no
// description here is still listed, with the answers every route may
// give.

import (
	"fmt"
	"maps"
	"net/http"
	"reflect"
	"strconv"
	"time"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/microbox/microbox/internal/batch"
	"github.com/microbox/microbox/internal/doctor"
	"github.com/microbox/microbox/internal/openapi"
	"github.com/microbox/microbox/internal/policy"
	"github.com/microbox/microbox/internal/service"
)

// route is a path the API serves and its methods.
type route struct {
	path    string
	methods []string
}

// healthAnswer is GET /healthz's answer, as healthz and health.Report's
// Answer write it.
type healthAnswer struct {
	Status     string         `json:"status"`
	Version    string         `json:"version"`
	Running    int            `json:"running"`
	Queued     int            `json:"queued"`
	ReadyJails int            `json:"ready_jails"`
	Checks     []doctor.Check `json:"checks,omitempty"`
	CheckedAt  *time.Time     `json:"checked_at,omitempty"`
	Error      string         `json:"error,omitempty"`
}

// sandboxFusionTypes say what SandboxFusion's fields mean.
var sandboxFusionTypes = openapi.Types{Docs: map[reflect.Type]map[string]string{
	reflect.TypeFor[runCodeRequest](): {
		"language":        "The program's language (docs/http-api.md lists those the server runs).",
		"run_timeout":     "The run's time limit in seconds, at most the server's timeout ceiling.",
		"memory_limit_MB": "MiB, at most the server's memory ceiling; 0 or less: the server's own limit.",
		"files":           "Files to write before the run, {path: base64 content}; a null content is no file.",
	},
	reflect.TypeFor[runCodeResponse](): {
		"status": "Success (exited 0), Failed (the program failed or passed a limit) or SandboxError (microbox's failure, or a refusal).",
	},
	reflect.TypeFor[commandRunResult](): {
		"status": "Finished, TimeLimitExceeded, or Error (the program did not run).",
	},
	reflect.TypeFor[runJupyterRequest](): {
		"cells":           "The cells' Python code, run in order in one interpreter.",
		"cell_timeout":    "Each cell's time limit in seconds; 0: only the total bounds them.",
		"total_timeout":   "The time limit of all the cells in seconds (default 45).",
		"kernel":          "python3, the only one.",
		"memory_limit_MB": "MiB; 0 or less: the server's own limit.",
		"files":           "Files to write before the first cell, {path: base64 content}.",
		"fetch_files":     "Files to answer (base64) after the last cell.",
	},
	reflect.TypeFor[runJupyterResponse](): {
		"status": "Success (every cell ran), Failed (a cell ran out of time or the session ended) or SandboxError (microbox's failure).",
		"driver": "How the cells' run ended: Finished, TimeLimitExceeded or Error.",
		"cells":  "Each cell run, as Jupyter's outputs.",
	},
},
	// pydantic's lax numbers: a number, or a string that is one
	// (SandboxFusion documents the number).
	Marshaled: map[reflect.Type]*openapi3.Schema{
		reflect.TypeFor[laxFloat](): openapi.Typed(openapi3.TypeNumber),
		reflect.TypeFor[laxInt]():   openapi.Typed(openapi3.TypeInteger),
	},
}

// errorAnswer is every refusal's answer (writeError).
type errorAnswer struct {
	Error string `json:"error"`
}

// schemas are the document's named schemas.
type schemas struct {
	task, result, status, batchLine, refusal, runCode, runCodeAnswer, runCodeInvalid, health *openapi3.SchemaRef
	sessions                                                                                 sessionSchemas
}

// openAPIDocument is the API's OpenAPI document, as JSON, of the routes
// served.
func openAPIDocument(version string, routes []route) ([]byte, error) {
	d := openapi.NewDocument(&openapi3.Info{Title: "microbox", Version: version,
		Description: "microbox's HTTP API: runs of untrusted Python in a Linux-namespace sandbox, each answered with its verdict (the result contract), and SandboxFusion's /run_code. The reference is docs/http-api.md; the MCP tool at /mcp describes itself (tools/list)."},
		openapi.SessionTypes.With(sandboxFusionTypes))
	task := openapi.TaskSchema(batch.InAPI)
	task.Description = "A run: the program and the options it changes (a microbox batch task, less file); the server's defaults apply to the rest, and its ceilings bound the limits. Unknown fields are refused."
	s := schemas{
		task:           d.Component("Task", task),
		result:         openapi.Answer[policy.Result](d, "Result"),
		status:         openapi.Answer[service.Status](d, "RunStatus"),
		batchLine:      openapi.Answer[batch.Result](d, "BatchResult"),
		refusal:        openapi.Answer[errorAnswer](d, "Error"),
		runCode:        openapi.Request[runCodeRequest](d, "RunCodeRequest", "code", "language"),
		runCodeAnswer:  openapi.Answer[runCodeResponse](d, "RunCodeResponse"),
		runCodeInvalid: openapi.Answer[fusionInvalid](d, "ValidationError"),
		health:         openapi.Answer[healthAnswer](d, "Health"),
		sessions:       newSessionSchemas(d),
	}
	ops := operations(s)
	maps.Copy(ops, sessionOperations(s))
	for _, r := range routes {
		for _, m := range r.methods {
			op, ok := ops[m+" "+r.path]
			if !ok {
				op = undescribed(s, r.path)
			}
			d.Add(m, r.path, op)
		}
	}
	return d.JSON()
}

// operations describe the routes, by "METHOD PATTERN" (the ServeMux's).
func operations(s schemas) map[string]*openapi3.Operation {
	json := func(ref *openapi3.SchemaRef) openapi3.Content { return openapi.Content("application/json", ref) }
	runID := openapi.PathParam("id", "The run's id, from the answer to POST /v1/runs?wait=false.")
	return map[string]*openapi3.Operation{
		"POST /v1/runs": {
			OperationID: "run", Summary: "Run a program and answer its result",
			Description: "Status 200 whatever the verdict; with ?wait=false, 202 at once with the run's id (GET /v1/runs/{id} for its state and result).",
			Parameters: openapi3.Parameters{openapi.Query("wait", "false: start the run in the background and answer its id at once.",
				openapi.Typed(openapi3.TypeBoolean))},
			RequestBody: openapi.JSONBody("The task.", s.task),
			Responses: withErrors(s, map[int]*openapi3.ResponseRef{
				http.StatusOK: openapi.Response("The run's result (the result contract).", json(s.result)),
				http.StatusAccepted: openapi.Response("Started in the background (wait=false).", json(s.status),
					&openapi.Header{Name: "Location", Type: openapi3.TypeString, Description: "/v1/runs/{id}"},
					&openapi.Header{Name: runIDHeader, Type: openapi3.TypeString, Description: "The run's id."}),
			}, http.StatusBadRequest, http.StatusRequestTimeout, http.StatusRequestEntityTooLarge, http.StatusTooManyRequests, http.StatusServiceUnavailable),
		},
		"GET /v1/runs/{id}": {
			OperationID: "getRun", Summary: "A background run's state, and its result once done",
			Parameters: openapi3.Parameters{runID},
			Responses: withErrors(s, map[int]*openapi3.ResponseRef{
				http.StatusOK: openapi.Response("The run's state.", json(s.status)),
			}, http.StatusNotFound),
		},
		"DELETE /v1/runs/{id}": {
			OperationID: "killRun", Summary: "Kill a background run and answer its final state",
			Description: "A finished run is left as it was.",
			Parameters:  openapi3.Parameters{runID},
			Responses: withErrors(s, map[int]*openapi3.ResponseRef{
				http.StatusOK: openapi.Response("The run's final state.", json(s.status)),
			}, http.StatusNotFound, http.StatusServiceUnavailable),
		},
		"POST /v1/batch": {
			OperationID: "batch", Summary: "Run tasks sent as JSON lines; stream each result as a JSON line",
			Description: "The body is tasks, one JSON object (the Task schema) a line. Each result is written as soon as it is known; an error after the results began is the last line, {\"error\": ...}.",
			Parameters: openapi3.Parameters{
				openapi.Query("order", "input: the results in the tasks' order; completed (the default): as runs finish.", openapi.Enum("input", "completed")),
				openapi.Query("jobs", "At most this many runs at once.", &openapi3.Schema{Type: &openapi3.Types{openapi3.TypeInteger}, Min: new(1.0)}),
			},
			RequestBody: &openapi3.RequestBodyRef{Value: openapi3.NewRequestBody().WithRequired(true).
				WithDescription("Tasks as JSON lines (each line a Task).").WithContent(openapi.Content("application/x-ndjson", s.task))},
			Responses: withErrors(s, map[int]*openapi3.ResponseRef{
				http.StatusOK: openapi.Response("Results as JSON lines: each line a BatchResult, or a last line {\"error\": ...}.",
					openapi.Content("application/x-ndjson", openapi3.NewSchemaRef("", anyOf(s.batchLine, s.refusal)))),
			}, http.StatusBadRequest, http.StatusRequestTimeout, http.StatusRequestEntityTooLarge, http.StatusTooManyRequests, http.StatusServiceUnavailable),
		},
		"POST /run_code": {
			OperationID: "runCode", Summary: "SandboxFusion's run_code",
			Description: "SandboxFusion's request and response; docs/http-api.md tabulates how microbox maps them.",
			RequestBody: openapi.JSONBody("SandboxFusion's RunCodeRequest.", s.runCode),
			Responses: withErrors(s, map[int]*openapi3.ResponseRef{
				http.StatusOK: openapi.Response("SandboxFusion's RunCodeResponse.", json(s.runCodeAnswer)),
				http.StatusUnprocessableEntity: openapi.Response("The request does not validate, or microbox refuses it: FastAPI's {\"detail\": [...]}, each entry naming the field (loc) and, for microbox's refusals, the fix (msg).",
					json(s.runCodeInvalid)),
			}, http.StatusRequestTimeout, http.StatusRequestEntityTooLarge, http.StatusTooManyRequests, http.StatusServiceUnavailable),
		},
		"GET /healthz": {
			OperationID: "health", Summary: "Whether runs can work here (readiness), or with ?live that the server serves",
			Security: &openapi3.SecurityRequirements{{}},
			Parameters: openapi3.Parameters{openapi.Query("live", "Present: answer only that the server serves, without checks (liveness).",
				openapi.Typed(openapi3.TypeString))},
			Responses: withErrors(s, map[int]*openapi3.ResponseRef{
				http.StatusOK:                 openapi.Response("Runs can work here.", json(s.health)),
				http.StatusServiceUnavailable: openapi.Response("A check failed: status fail, and error names it, why and the fix.", json(s.health), retryAfter),
			}),
		},
		"GET /metrics": {
			OperationID: "metrics", Summary: "Prometheus's metrics",
			Responses: withErrors(s, map[int]*openapi3.ResponseRef{
				http.StatusOK: openapi.Response("Prometheus's text format.", openapi.Content("text/plain", openapi3.NewSchemaRef("", openapi.Typed(openapi3.TypeString)))),
			}),
		},
		"GET " + fusionPing: {
			OperationID: "ping", Summary: "SandboxFusion's ping",
			Responses: withErrors(s, map[int]*openapi3.ResponseRef{
				http.StatusOK: openapi.Response("\"pong\".", json(openapi3.NewSchemaRef("", openapi.Enum("pong")))),
			}),
		},
		"GET /openapi.json": {
			OperationID: "openapi", Summary: "This document",
			Responses: withErrors(s, map[int]*openapi3.ResponseRef{
				http.StatusOK: openapi.Response("The API's OpenAPI document.", json(openapi3.NewSchemaRef("", openapi.Typed(openapi3.TypeObject)))),
			}),
		},
	}
}

// undescribed is the operation of a route at pattern not described
// above: its path's parameters, and the answers every route may give.
func undescribed(s schemas, pattern string) *openapi3.Operation {
	params := openapi.PathParams(pattern, func(string) string { return "See docs/http-api.md." })
	return &openapi3.Operation{Summary: "See docs/http-api.md", Parameters: params, Responses: withErrors(s, map[int]*openapi3.ResponseRef{
		http.StatusOK: openapi.Response("The answer.", nil),
	}, http.StatusBadRequest, http.StatusNotFound, http.StatusTooManyRequests, http.StatusServiceUnavailable)}
}

// retryAfter is the header of 429 and 503 (writeError).
var retryAfter = &openapi.Header{Name: "Retry-After", Type: openapi3.TypeInteger, Description: "Seconds to wait before sending the request again."}

// withErrors are an operation's answers with the refusals of statuses,
// and those any route may give: 401 (the token), 403 (a browser's
// request, or a host name not the loopback's) and 500 (a bug).
func withErrors(s schemas, answers map[int]*openapi3.ResponseRef, statuses ...int) *openapi3.Responses {
	refusal := func(status int, headers ...*openapi.Header) *openapi3.ResponseRef {
		return openapi.Response(fmt.Sprintf("%s: {\"error\"} names the problem and the fix.", http.StatusText(status)),
			openapi.Content("application/json", s.refusal), headers...)
	}
	answers[http.StatusUnauthorized] = refusal(http.StatusUnauthorized,
		&openapi.Header{Name: "WWW-Authenticate", Type: openapi3.TypeString, Description: "Bearer realm=\"microbox\""})
	answers[http.StatusForbidden] = refusal(http.StatusForbidden)
	answers[http.StatusInternalServerError] = refusal(http.StatusInternalServerError)
	for _, status := range statuses {
		if status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable {
			answers[status] = refusal(status, retryAfter)
		} else {
			answers[status] = refusal(status)
		}
	}
	return openapi.Responses(answers)
}

// anyOf is a value of one of the schemas.
func anyOf(refs ...*openapi3.SchemaRef) *openapi3.Schema {
	return &openapi3.Schema{AnyOf: refs}
}

// serveOpenAPI is GET /openapi.json.
func (a *API) serveOpenAPI(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(a.openAPI)))
	w.Write(a.openAPI)
}
