package httpapi

// The session routes (sessions.go) and SandboxFusion's /run_jupyter
// (jupyter.go) in the OpenAPI document (openapi.go): their requests and
// answers are the session package's types and jupyter.go's, reflected as
// the run routes' are.

import (
	"net/http"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/microbox/microbox/internal/openapi"
	"github.com/microbox/microbox/internal/session"
)

// sessionSchemas are the session routes' named schemas.
type sessionSchemas struct {
	create, info, cell, cellResult, listing, written, deleted, ended, jupyter, jupyterAnswer *openapi3.SchemaRef
}

func newSessionSchemas(d *openapi.Document) sessionSchemas {
	create := openapi.Request[session.CreateRequest](d, "SessionRequest")
	create.Value.Description = "A session's settings: the task keys a session takes (their timeout is each cell's) and its lifetimes; the server's defaults apply to the rest, and its ceilings bound them. Unknown keys are refused."
	return sessionSchemas{
		create:        create,
		info:          openapi.Answer[session.Info](d, "Session"),
		cell:          openapi.Request[session.CellRequest](d, "CellRequest", "code"),
		cellResult:    openapi.Answer[session.CellResult](d, "CellResult"),
		listing:       openapi.Answer[session.Listing](d, "FileListing"),
		written:       openapi.Answer[session.Written](d, "FileWritten"),
		deleted:       openapi.Answer[session.Deleted](d, "FileDeleted"),
		ended:         openapi.Answer[endedAnswer](d, "SessionEnded"),
		jupyter:       openapi.Request[runJupyterRequest](d, "RunJupyterRequest", "cells"),
		jupyterAnswer: openapi.Answer[runJupyterResponse](d, "RunJupyterResponse"),
	}
}

// The session routes' ServeMux patterns (sessionRoutes).
const (
	sessionsPattern = "/v1/sessions"
	sessionPattern  = sessionsPattern + "/{id}"
	cellsPattern    = sessionPattern + "/cells"
	filesPattern    = sessionPattern + "/files"
	filePattern     = filesPattern + "/{path...}"
	jupyterPattern  = "/run_jupyter"
)

// sessionParams describe the session routes' path parameters.
func sessionParams(name string) string {
	if name == "path" {
		return "The file's path relative to the session's working directory, e.g. data/input.csv (its slashes as they are, or as %2F)."
	}
	return "The session's id, from the answer to POST /v1/sessions."
}

// sessionOperations describe the session routes and /run_jupyter, by
// "METHOD PATTERN".
func sessionOperations(s schemas) map[string]*openapi3.Operation {
	ss := s.sessions
	json := func(ref *openapi3.SchemaRef) openapi3.Content { return openapi.Content("application/json", ref) }
	params := func(pattern string) openapi3.Parameters { return openapi.PathParams(pattern, sessionParams) }
	bytes := openapi.Content("application/octet-stream", openapi3.NewSchemaRef("", openapi.Typed(openapi3.TypeString)))
	// answers are a route's: its 200 (201 when created), and a 410 with
	// how the session ended for a route of a live one.
	answers := func(status int, description string, content openapi3.Content, gone bool) map[int]*openapi3.ResponseRef {
		m := map[int]*openapi3.ResponseRef{status: openapi.Response(description, content)}
		if gone {
			m[http.StatusGone] = openapi.Response("The session has ended: error says why the request failed, session how it ended.", json(ss.ended))
		}
		return m
	}
	return map[string]*openapi3.Operation{
		"POST " + sessionsPattern: {
			OperationID: "createSession", Summary: "Start a session: a Python interpreter in a sandbox of its own that keeps its state between cells",
			Description: "docs/sessions.md is the reference. An empty body takes the server's defaults.",
			RequestBody: &openapi3.RequestBodyRef{Value: openapi3.NewRequestBody().WithDescription("The session's settings.").WithContent(json(ss.create))},
			Responses: withErrors(s, answers(http.StatusCreated, "The session, alive.", json(ss.info), false),
				http.StatusBadRequest, http.StatusRequestTimeout, http.StatusRequestEntityTooLarge, http.StatusTooManyRequests, http.StatusServiceUnavailable),
		},
		"GET " + sessionPattern: {
			OperationID: "getSession", Summary: "A session's state: alive, or how it ended",
			Parameters: params(sessionPattern),
			Responses:  withErrors(s, answers(http.StatusOK, "The session.", json(ss.info), false), http.StatusNotFound),
		},
		"DELETE " + sessionPattern: {
			OperationID: "deleteSession", Summary: "End a session and answer its final state",
			Description: "A session that has ended already is left as it was.",
			Parameters:  params(sessionPattern),
			Responses:   withErrors(s, answers(http.StatusOK, "The session, ended.", json(ss.info), false), http.StatusNotFound),
		},
		"POST " + cellsPattern: {
			OperationID: "runCell", Summary: "Run a cell in a session's interpreter",
			Description: "A session runs one request at a time, in order; status 200 whatever the cell did.",
			Parameters:  params(cellsPattern),
			RequestBody: openapi.JSONBody("The cell.", ss.cell),
			Responses: withErrors(s, answers(http.StatusOK, "The cell's answer.", json(ss.cellResult), true),
				http.StatusBadRequest, http.StatusNotFound, http.StatusRequestTimeout, http.StatusRequestEntityTooLarge, http.StatusServiceUnavailable),
		},
		"GET " + filesPattern: {
			OperationID: "listFiles", Summary: "List the files of a session's working directory",
			Parameters: params(filesPattern),
			Responses: withErrors(s, answers(http.StatusOK, "The listing.", json(ss.listing), true),
				http.StatusNotFound, http.StatusServiceUnavailable),
		},
		"PUT " + filePattern: {
			OperationID: "putFile", Summary: "Write a file into a session's working directory",
			Parameters: params(filePattern),
			RequestBody: &openapi3.RequestBodyRef{Value: openapi3.NewRequestBody().WithRequired(true).
				WithDescription("The file's bytes, at most the server's file ceiling.").WithContent(bytes)},
			Responses: withErrors(s, answers(http.StatusOK, "The file written.", json(ss.written), true),
				http.StatusBadRequest, http.StatusNotFound, http.StatusRequestEntityTooLarge, http.StatusServiceUnavailable),
		},
		"GET " + filePattern: {
			OperationID: "getFile", Summary: "Read a file of a session's working directory",
			Parameters: params(filePattern),
			Responses: withErrors(s, answers(http.StatusOK, "The file's bytes.", bytes, true),
				http.StatusBadRequest, http.StatusNotFound, http.StatusRequestEntityTooLarge, http.StatusServiceUnavailable),
		},
		"DELETE " + filePattern: {
			OperationID: "deleteFile", Summary: "Delete a file of a session's working directory",
			Parameters: params(filePattern),
			Responses: withErrors(s, answers(http.StatusOK, "The file deleted.", json(ss.deleted), true),
				http.StatusBadRequest, http.StatusNotFound, http.StatusServiceUnavailable),
		},
		"POST " + jupyterPattern: {
			OperationID: "runJupyter", Summary: "SandboxFusion's run_jupyter: cells in one interpreter, then its end",
			Description: "SandboxFusion's request and response; docs/sessions.md maps them.",
			RequestBody: openapi.JSONBody("SandboxFusion's RunJupyterRequest.", ss.jupyter),
			Responses: withErrors(s, answers(http.StatusOK, "SandboxFusion's RunJupyterResponse.", json(ss.jupyterAnswer), false),
				http.StatusBadRequest, http.StatusRequestTimeout, http.StatusRequestEntityTooLarge, http.StatusTooManyRequests, http.StatusServiceUnavailable),
		},
	}
}
