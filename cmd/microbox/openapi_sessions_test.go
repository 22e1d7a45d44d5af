package main

// The session routes' and /run_jupyter's real answers are what the
// document says (TestOpenAPIAnswers's server: at most one session).

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/microbox/microbox/internal/session"
)

// checkSessions checks /run_jupyter's answers, then a session's: its
// create, cells of each status, its files put, read, listed and deleted,
// the refusals (400, 404, 410, 413, 429) and its end.
func checkSessions(c *openAPICheck) {
	c.t.Helper()
	b64 := base64.StdEncoding.EncodeToString([]byte("42"))
	c.call(http.MethodPost, "/run_jupyter", `{"cells": ["a = 1", "a", "print(a)", "raise ValueError('no')"], "cell_timeout": 5,
		"total_timeout": 30, "kernel": "python3", "memory_limit_MB": 128, "files": {"in.txt": "`+b64+`"}, "fetch_files": ["in.txt", "none"]}`,
		nil, http.StatusOK, true)
	c.call(http.MethodPost, "/run_jupyter", `{"cells": ["import time; time.sleep(30)"], "total_timeout": 0.5}`, nil, http.StatusOK, true)
	c.call(http.MethodPost, "/run_jupyter", `{"cells": []}`, nil, http.StatusBadRequest, true)
	c.call(http.MethodPost, "/run_jupyter", `{"code": "1"}`, nil, http.StatusBadRequest, false)

	var info session.Info
	json.Unmarshal(c.call(http.MethodPost, "/v1/sessions", `{"mem": "128M", "timeout": "10s", "idle_ttl": 120, "max_lifetime": "5m", "env": {"A": "1"}}`,
		nil, http.StatusCreated, true), &info)
	c.call(http.MethodPost, "/v1/sessions", "", nil, http.StatusTooManyRequests, true) // the server's one session is taken
	c.call(http.MethodPost, "/v1/sessions", `{"code": "1"}`, nil, http.StatusBadRequest, false)
	c.call(http.MethodPost, "/v1/sessions", `{"idle_ttl": "soon"}`, nil, http.StatusBadRequest, true)
	at := "/v1/sessions/" + info.ID
	c.call(http.MethodGet, at, "", nil, http.StatusOK, true)
	for _, cell := range []string{`{"code": "x = 41"}`, `{"code": "x + 1"}`, `{"code": "print(input())", "stdin": "hi\n", "timeout": 5}`,
		`{"code": "raise ValueError('no')", "timeout": "5s"}`, `{"code": "import time; time.sleep(30)", "timeout": 0.5, "stdin": null}`} {
		c.call(http.MethodPost, at+"/cells", cell, nil, http.StatusOK, true)
	}
	c.call(http.MethodPost, at+"/cells", `{"stdin": "x"}`, nil, http.StatusBadRequest, false)
	c.call(http.MethodPost, at+"/cells", `{"code": "1", "timeout": "soon"}`, nil, http.StatusBadRequest, true)
	c.call(http.MethodPost, at+"/cells", `{"code": "`+strings.Repeat("1", 70<<10)+`"}`, nil, http.StatusRequestEntityTooLarge, true)

	raw := http.Header{"Authorization": c.auth["Authorization"], "Content-Type": {"application/octet-stream"}}
	c.call(http.MethodPut, at+"/files/in.bin", "\x00\x01\xfe\xff", raw, http.StatusOK, true)
	c.call(http.MethodPut, at+"/files/%FF", "x", raw, http.StatusBadRequest, true)
	c.call(http.MethodGet, at+"/files/in.bin", "", nil, http.StatusOK, true)
	c.call(http.MethodGet, at+"/files/none.txt", "", nil, http.StatusNotFound, true)
	// A path's slashes as %2F, as the document's {path} has them.
	if code, answer := c.s.do(c.t, http.MethodPut, at+"/files/d%2Fx.txt", "x", raw); code != http.StatusOK {
		c.t.Errorf("PUT d%%2Fx.txt: %d %s", code, answer)
	}
	if listing := c.call(http.MethodGet, at+"/files", "", nil, http.StatusOK, true); !strings.Contains(string(listing), `"path":"d/x.txt"`) {
		c.t.Errorf("the listing %s has no d/x.txt", listing)
	}
	c.call(http.MethodDelete, at+"/files/in.bin", "", nil, http.StatusOK, true)
	c.call(http.MethodDelete, at+"/files/in.bin", "", nil, http.StatusNotFound, true)

	c.call(http.MethodDelete, at, "", nil, http.StatusOK, true)
	c.call(http.MethodDelete, at, "", nil, http.StatusOK, true) // ended already
	c.call(http.MethodGet, at, "", nil, http.StatusOK, true)
	c.call(http.MethodPost, at+"/cells", `{"code": "1"}`, nil, http.StatusGone, true)
	c.call(http.MethodGet, at+"/files", "", nil, http.StatusGone, true)
	c.call(http.MethodPut, at+"/files/x", "x", raw, http.StatusGone, true)
	c.call(http.MethodGet, at+"/files/x", "", nil, http.StatusGone, true)
	c.call(http.MethodDelete, at+"/files/x", "", nil, http.StatusGone, true)
	unknown := "/v1/sessions/0123456789abcdef"
	c.call(http.MethodGet, unknown, "", nil, http.StatusNotFound, true)
	c.call(http.MethodDelete, unknown, "", nil, http.StatusNotFound, true)
	c.call(http.MethodPost, unknown+"/cells", `{"code": "1"}`, nil, http.StatusNotFound, true)
	c.call(http.MethodGet, unknown+"/files", "", nil, http.StatusNotFound, true)
	c.call(http.MethodGet, "/v1/ping", "", nil, http.StatusOK, true)
}
