package main

// The HTTP API's OpenAPI document (GET /openapi.json, internal/openapi):
// it is a valid OpenAPI 3.1 document by kin-openapi's validator, and the
// server's real answers over a real listener (verdicts, refusals,
// background runs, batches, /run_code) are what it says, status, headers
// and body, as kin-openapi's request and response validators judge them.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"

	"github.com/microbox/microbox/internal/batch"
	"github.com/microbox/microbox/internal/service"
	"github.com/microbox/microbox/result"
)

// loadOpenAPI fetches the server's document and checks that it is valid
// OpenAPI 3.1.
func loadOpenAPI(t *testing.T, s *apiServer, header http.Header) *openapi3.T {
	t.Helper()
	code, body := s.do(t, http.MethodGet, "/openapi.json", "", header)
	if code != http.StatusOK {
		t.Fatalf("GET /openapi.json: %d %s", code, body)
	}
	doc, err := openapi3.NewLoader().LoadFromData(body)
	if err != nil {
		t.Fatalf("load the document: %v", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("the document is not valid OpenAPI: %v", err)
	}
	if !doc.IsOpenAPI31OrLater() {
		t.Errorf("openapi %q: want 3.1", doc.OpenAPI)
	}
	return doc
}

// The document is valid OpenAPI 3.1, describes the native API's and
// /run_code's operations, and its schemas are the declarations': the
// task's keys are batch.Fields' for the API, the result's those of
// result.Result's json tags.
func TestOpenAPIDocument(t *testing.T) {
	s := startAPI(t)
	doc := loadOpenAPI(t, s, nil)
	for path, methods := range map[string][]string{"/v1/runs": {"POST"}, "/v1/runs/{id}": {"GET", "DELETE"},
		"/v1/batch": {"POST"}, "/run_code": {"POST"}, "/healthz": {"GET"}, "/openapi.json": {"GET"},
		"/v1/sessions": {"POST"}, "/v1/sessions/{id}": {"GET", "DELETE"}, "/v1/sessions/{id}/cells": {"POST"},
		"/v1/sessions/{id}/files": {"GET"}, "/v1/sessions/{id}/files/{path}": {"PUT", "GET", "DELETE"}, "/run_jupyter": {"POST"}} {
		item := doc.Paths.Value(path)
		for _, m := range methods {
			if item == nil || item.GetOperation(m) == nil {
				t.Errorf("no %s %s in the document", m, path)
			}
		}
	}
	var fields []string
	for _, f := range batch.FieldsIn(batch.InAPI) {
		fields = append(fields, f.Key)
	}
	if task := componentKeys(doc, "Task"); !slices.Equal(task, slices.Sorted(slices.Values(fields))) {
		t.Errorf("the document's Task has %v; the API's declared fields are %v", task, fields)
	}
	var tags []string
	for f := range reflect.TypeFor[result.Result]().Fields() {
		if key, _, _ := strings.Cut(f.Tag.Get("json"), ","); key != "-" {
			tags = append(tags, key)
		}
	}
	for _, key := range tags {
		if !slices.Contains(componentKeys(doc, "Result"), key) {
			t.Errorf("the document's Result has no %q", key)
		}
	}
}

// componentKeys are the property names of a component schema, sorted.
func componentKeys(doc *openapi3.T, name string) []string {
	ref := doc.Components.Schemas[name]
	if ref == nil {
		return nil
	}
	return slices.Sorted(func(yield func(string) bool) {
		for k := range ref.Value.Properties {
			if !yield(k) {
				return
			}
		}
	})
}

// openAPICheck sends requests to a server and checks each answer
// against the server's own document.
type openAPICheck struct {
	t      *testing.T
	s      *apiServer
	doc    *openapi3.T
	router routers.Router
	auth   http.Header
}

// call sends a request (with the token unless header says otherwise),
// checks that its status is want and that the answer is as the document
// says, and the request too when valid; it returns the answer's body.
func (c *openAPICheck) call(method, path, body string, header http.Header, want int, valid bool) []byte {
	c.t.Helper()
	if header == nil {
		header = c.auth
	}
	req, err := http.NewRequest(method, c.s.url+path, strings.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header = header.Clone()
	if body != "" && req.Header.Get("Content-Type") == "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatal(err)
	}
	if resp.StatusCode != want {
		c.t.Errorf("%s %s %.200s: %d %.300s; want %d", method, path, body, resp.StatusCode, answer, want)
	}
	req.Body = io.NopCloser(strings.NewReader(body))
	c.check(req, body, resp, answer, valid)
	return answer
}

// check validates the request (when valid) and the answer against the
// document; a batch's JSON lines are checked a line at a time.
func (c *openAPICheck) check(req *http.Request, body string, resp *http.Response, answer []byte, valid bool) {
	c.t.Helper()
	route, params, err := c.router.FindRoute(req)
	if err != nil {
		c.t.Errorf("%s %s: no route in the document: %v", req.Method, req.URL.Path, err)
		return
	}
	ndjson := strings.HasPrefix(resp.Header.Get("Content-Type"), "application/x-ndjson")
	opts := &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc,
		IncludeResponseStatus: true, ExcludeRequestBody: req.URL.Path == "/v1/batch", ExcludeResponseBody: ndjson}
	in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route, Options: opts}
	if valid {
		if err := openapi3filter.ValidateRequest(context.Background(), in); err != nil {
			c.t.Errorf("%s %s %.200s: the document refuses the request: %v", req.Method, req.URL.Path, body, err)
		}
	}
	out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: resp.StatusCode,
		Header: resp.Header, Body: io.NopCloser(bytes.NewReader(answer)), Options: opts}
	if err := openapi3filter.ValidateResponse(context.Background(), out); err != nil {
		c.t.Errorf("%s %s %.200s: the answer %d %.300s is not the document's: %v", req.Method, req.URL.Path, body, resp.StatusCode, answer, err)
	}
	if ndjson {
		c.checkLines(route, resp.StatusCode, answer)
	}
}

// checkLines checks each JSON line of an answer against the schema of
// its content.
func (c *openAPICheck) checkLines(route *routers.Route, status int, answer []byte) {
	c.t.Helper()
	schema := route.Operation.Responses.Status(status).Value.Content.Get("application/x-ndjson").Schema.Value
	sc := bufio.NewScanner(bytes.NewReader(answer))
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var v any
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			c.t.Errorf("a line of %s is not JSON: %.200s", route.Path, sc.Bytes())
			continue
		}
		if err := schema.VisitJSON(v, openapi3.EnableJSONSchema2020()); err != nil {
			c.t.Errorf("a line of %s is not the document's: %.300s: %v", route.Path, sc.Bytes(), err)
		}
	}
}

// The server's answers are what its document says: runs with each kind
// of verdict, refusals (400, 401, 403, 404, 413, 429), background runs
// queued, running, killed and done, a batch's lines, /run_code's,
// sessions' and /run_jupyter's (checkSessions), health and metrics.
func TestOpenAPIAnswers(t *testing.T) {
	tokenFile := filepath.Join(t.TempDir(), "token")
	token := "0123456789abcdef0123456789abcdef"
	os.WriteFile(tokenFile, []byte(token), 0o600)
	s := startAPI(t, "--http-token-file", tokenFile, "--http-concurrency", "1", "--http-queue", "1",
		"--http-max-body", "64K", "--max-timeout", "120s", "--max-sessions", "1")
	auth := http.Header{"Authorization": {"Bearer " + token}}
	doc := loadOpenAPI(t, s, auth)
	router, err := legacy.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}
	c := &openAPICheck{t: t, s: s, doc: doc, router: router, auth: auth}

	for _, task := range []string{
		`{"code": "print(1)"}`,
		`{"code": "import sys; sys.exit(3)", "stdin": "x", "args": ["a"], "env": {"A": "1"}, "files": {"f.txt": "1"}}`,
		`{"code": "import os; os.abort()"}`,
		`{"code": "while True: pass", "timeout": 0.5}`,
		`{"code": "print('x' * 5000)", "output_limit": "1K", "mem": "128M", "cpus": 0.5, "pids": 16}`,
		`{"code": "print('AKIAABCDEFGHIJKLMNOP')", "redact": true}`,
		`{"code": "import os; print(os.getpid())", "max_risk": 0}`,
		`{"code": "import socket", "deny_modules": ["socket"], "cpu_time": "2s"}`,
	} {
		c.call(http.MethodPost, "/v1/runs", task, nil, http.StatusOK, true)
	}
	for _, bad := range []string{`not json`, `{"code": "1", "mem": "12Q"}`, `{"code": "1", "nope": 1}`, `{"code": "1", "file": "/etc/passwd"}`} {
		c.call(http.MethodPost, "/v1/runs", bad, nil, http.StatusBadRequest, false)
	}
	c.call(http.MethodPost, "/v1/runs", `{"code": "print(1)"}`, http.Header{}, http.StatusUnauthorized, true)
	crossSite := http.Header{"Sec-Fetch-Site": {"cross-site"}, "Origin": {"http://example.invalid"}, "Authorization": auth["Authorization"]}
	c.call(http.MethodPost, "/v1/runs", `{"code": "print(1)"}`, crossSite, http.StatusForbidden, true)
	big := fmt.Sprintf(`{"code": "print(1)", "stdin": %q}`, strings.Repeat("x", 70<<10))
	c.call(http.MethodPost, "/v1/runs", big, nil, http.StatusRequestEntityTooLarge, true)

	checkBackgroundRuns(c)

	tasks := "{\"id\": 1, \"code\": \"print(1)\"}\n{\"id\": \"two\", \"code\": \"print(2)\", \"redact\": true}\nnot json\n{\"file\": \"/etc/passwd\"}\n"
	c.call(http.MethodPost, "/v1/batch?order=input&jobs=1", tasks, http.Header{"Authorization": auth["Authorization"],
		"Content-Type": {"application/x-ndjson"}}, http.StatusOK, true)
	c.call(http.MethodPost, "/v1/batch?order=sideways", "", nil, http.StatusBadRequest, false)

	b64 := base64.StdEncoding.EncodeToString([]byte("42"))
	for _, req := range []string{
		`{"code": "print(open('data.txt').read())", "language": "python", "files": {"data.txt": "` + b64 + `"}}`,
		`{"code": "import sys; sys.exit(2)", "language": "python", "stdin": "", "run_timeout": 5, "memory_limit_MB": 128}`,
		`{"code": "while True: pass", "language": "python", "run_timeout": 0.5}`,
	} {
		c.call(http.MethodPost, "/run_code", req, nil, http.StatusOK, true)
	}
	c.call(http.MethodPost, "/run_code", `{"code": "print(1)", "language": "python", "files": {"a": "%%%"}}`, nil, http.StatusUnprocessableEntity, true)
	c.call(http.MethodPost, "/run_code", `{"language": "python"}`, nil, http.StatusUnprocessableEntity, false)

	checkSessions(c)

	c.call(http.MethodGet, "/healthz", "", http.Header{}, http.StatusOK, true)
	c.call(http.MethodGet, "/healthz?live", "", http.Header{}, http.StatusOK, true)
	c.call(http.MethodGet, "/metrics", "", nil, http.StatusOK, true)
	c.call(http.MethodGet, "/openapi.json", "", nil, http.StatusOK, true)
	c.call(http.MethodGet, "/openapi.json", "", http.Header{}, http.StatusUnauthorized, true)
}

// checkBackgroundRuns starts runs with ?wait=false on a server of one
// slot and a queue of one: the first runs, the second is queued, a third
// is refused (429); then they are killed, and end.
func checkBackgroundRuns(c *openAPICheck) {
	c.t.Helper()
	var first, second service.Status
	json.Unmarshal(c.call(http.MethodPost, "/v1/runs?wait=false", `{"code": "import time; time.sleep(60)", "timeout": 120}`, nil, http.StatusAccepted, true), &first)
	json.Unmarshal(c.call(http.MethodPost, "/v1/runs?wait=false", `{"code": "print(2)"}`, nil, http.StatusAccepted, true), &second)
	c.call(http.MethodPost, "/v1/runs", `{"code": "print(3)"}`, nil, http.StatusTooManyRequests, true)
	c.call(http.MethodPost, "/run_code", `{"code": "print(3)", "language": "python"}`, nil, http.StatusTooManyRequests, true)
	c.call(http.MethodPost, "/v1/runs?wait=maybe", `{"code": "print(3)"}`, nil, http.StatusBadRequest, false)
	c.call(http.MethodGet, "/v1/runs/"+second.ID, "", nil, http.StatusOK, true) // queued
	c.call(http.MethodGet, "/v1/runs/"+first.ID, "", nil, http.StatusOK, true)  // queued or running
	c.call(http.MethodDelete, "/v1/runs/"+first.ID, "", nil, http.StatusOK, true)
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		var st service.Status
		json.Unmarshal(c.call(http.MethodGet, "/v1/runs/"+second.ID, "", nil, http.StatusOK, true), &st)
		if st.State == service.StateDone {
			break
		}
	}
	c.call(http.MethodDelete, "/v1/runs/"+second.ID, "", nil, http.StatusOK, true) // done: left as it was
	c.call(http.MethodGet, "/v1/runs/0123456789abcdef0123456789abcdef", "", nil, http.StatusNotFound, true)
	c.call(http.MethodDelete, "/v1/runs/0123456789abcdef0123456789abcdef", "", nil, http.StatusNotFound, true)
}
