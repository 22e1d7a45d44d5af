package httpapi

// Sessions (internal/session): POST /v1/sessions, GET and DELETE
// /v1/sessions/{id}, POST /v1/sessions/{id}/cells, GET
// /v1/sessions/{id}/files (the listing) and PUT, GET and DELETE
// /v1/sessions/{id}/files/{path...} (raw bytes). docs/sessions.md is
// the reference.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/microbox/microbox/internal/session"
)

// sessionRoutes adds the sessions' endpoints to handle.
func (a *API) sessionRoutes(handle func(string, map[string]http.HandlerFunc)) {
	handle(sessionsPattern, map[string]http.HandlerFunc{http.MethodPost: a.bodies.limit(http.HandlerFunc(a.postSession))})
	handle(sessionPattern, map[string]http.HandlerFunc{http.MethodGet: a.getSession, http.MethodDelete: a.deleteSession})
	handle(cellsPattern, map[string]http.HandlerFunc{http.MethodPost: a.bodies.limit(http.HandlerFunc(a.postCell))})
	handle(filesPattern, map[string]http.HandlerFunc{http.MethodGet: a.listFiles})
	handle(filePattern, map[string]http.HandlerFunc{
		http.MethodPut: a.refuseLargeFile(a.bodies.limitTo(http.HandlerFunc(a.putFile), a.fileCap)), http.MethodGet: a.getFile, http.MethodDelete: a.deleteFile})
	handle(jupyterPattern, map[string]http.HandlerFunc{http.MethodPost: a.bodies.limit(http.HandlerFunc(a.runJupyter))})
}

// sessionMetrics are the sessions' gauge and counts of ends by reason.
func sessionMetrics(m *session.Manager) []prometheus.Collector {
	list := []prometheus.Collector{prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "microbox_sessions",
		Help: "Sessions alive."}, func() float64 { return float64(m.Stats().Live) })}
	for _, reason := range session.Reasons {
		list = append(list, prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "microbox_sessions_ended_total",
			Help: "Sessions ended, by reason.", ConstLabels: prometheus.Labels{"reason": reason}},
			func() float64 { return float64(m.Stats().Ended[reason]) }))
	}
	return list
}

func (a *API) postSession(w http.ResponseWriter, r *http.Request) {
	body, ok := a.readBody(w, r)
	if !ok {
		return
	}
	// The session outlives the request: its start is not the request's.
	s, err := a.sessions.Create(context.WithoutCancel(r.Context()), body)
	if err != nil {
		writeSessionError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, s.Info())
}

// session is the live session the path names, or the answer that it is
// not (404, or 410 with how it ended).
func (a *API) session(w http.ResponseWriter, r *http.Request) (*session.Session, bool) {
	s, ended, ok := a.sessions.Get(r.PathValue("id"))
	switch {
	case !ok:
		writeError(w, http.StatusNotFound, "no session %q: create one with POST /v1/sessions", r.PathValue("id"))
	case s == nil:
		writeSessionError(w, &session.EndedError{Info: ended})
	}
	return s, s != nil
}

func (a *API) getSession(w http.ResponseWriter, r *http.Request) {
	s, ended, ok := a.sessions.Get(r.PathValue("id"))
	switch {
	case !ok:
		writeError(w, http.StatusNotFound, "no session %q: create one with POST /v1/sessions", r.PathValue("id"))
	case s == nil:
		writeJSON(w, http.StatusOK, ended)
	default:
		writeJSON(w, http.StatusOK, s.Info())
	}
}

func (a *API) deleteSession(w http.ResponseWriter, r *http.Request) {
	s, ended, ok := a.sessions.Get(r.PathValue("id"))
	switch {
	case !ok:
		writeError(w, http.StatusNotFound, "no session %q", r.PathValue("id"))
	case s == nil:
		writeJSON(w, http.StatusOK, ended) // ended already: nothing more to do
	default:
		writeJSON(w, http.StatusOK, s.End())
	}
}

func (a *API) postCell(w http.ResponseWriter, r *http.Request) {
	s, ok := a.session(w, r)
	if !ok {
		return
	}
	body, ok := a.readBody(w, r)
	if !ok {
		return
	}
	var req session.CellRequest
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, "a cell is a JSON object {\"code\": ..., \"stdin\": ..., \"timeout\": ...}: %v", err)
		return
	}
	res, err := s.RunCell(req)
	if err != nil {
		writeSessionError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

func (a *API) listFiles(w http.ResponseWriter, r *http.Request) {
	s, ok := a.session(w, r)
	if !ok {
		return
	}
	files, truncated, err := s.ListFiles()
	if err != nil {
		writeSessionError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, session.Listing{Files: files, Truncated: truncated})
}

func (a *API) putFile(w http.ResponseWriter, r *http.Request) {
	s, ok := a.session(w, r)
	if !ok {
		return
	}
	path := r.PathValue("path")
	if err := session.CheckPath(path); err != nil {
		writeSessionError(w, err)
		return
	}
	limit, flag := a.fileLimit(s)
	data, ok := a.readFileBody(w, r, limit, flag)
	if !ok {
		return
	}
	if err := s.PutFile(path, data); err != nil {
		writeSessionError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, session.Written{Path: path, Size: len(data)})
}

// fileCap is the largest file r's session takes, its body's share of
// the body budget: a PUT holds its file in the server's memory while it
// waits for the session, whose earlier requests may take a while. No
// live session: none (the handler answers 404 or 410, the body unread).
func (a *API) fileCap(r *http.Request) int64 {
	if s, _, _ := a.sessions.Get(r.PathValue("id")); s != nil {
		limit, _ := a.fileLimit(s)
		return limit
	}
	return 0
}

// fileLimit is the largest file a PUT to s may send, and the flag that
// sets it: the session's own cap, or the body budget when that is
// smaller (a file over the budget could never be admitted, and would get
// 429 on every try instead of its 413).
func (a *API) fileLimit(s *session.Session) (int64, string) {
	if budget := a.cfg.BodyBudget; budget > 0 && budget < s.FileCap() {
		return budget, "--http-body-budget"
	}
	return s.FileCap(), "--max-session-file-bytes"
}

// refuseLargeFile answers 413 to a PUT whose announced length is over
// its session's file limit before next takes a share of the body budget:
// the share would be the whole limit, so a busy server answered 429
// (try again) to a file it would never take, and each such PUT held the
// budget from everyone else meanwhile.
func (a *API) refuseLargeFile(next http.Handler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if s, _, _ := a.sessions.Get(r.PathValue("id")); s != nil {
			if limit, flag := a.fileLimit(s); r.ContentLength > limit {
				fileTooLarge(w, r.ContentLength, flag, limit)
				return
			}
		}
		next.ServeHTTP(w, r)
	}
}

// fileTooLarge answers 413 to a file of n bytes over limit, which flag
// sets, its body unread.
func fileTooLarge(w http.ResponseWriter, n int64, flag string, limit int64) {
	w.Header().Set("Connection", "close")
	writeError(w, http.StatusRequestEntityTooLarge, "the file is %d bytes, over the server's %s %d", n, flag, limit)
}

// readFileBody reads a file's raw bytes, at most limit of them, which
// flag sets.
func (a *API) readFileBody(w http.ResponseWriter, r *http.Request, limit int64, flag string) ([]byte, bool) {
	if r.ContentLength > limit {
		fileTooLarge(w, r.ContentLength, flag, limit)
		return nil, false
	}
	rc := http.NewResponseController(w)
	rc.SetReadDeadline(time.Now().Add(a.cfg.ReadTimeout))
	data, err := readAll(http.MaxBytesReader(w, r.Body, limit), r.ContentLength)
	if err != nil {
		w.Header().Set("Connection", "close")
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			writeError(w, http.StatusRequestEntityTooLarge, "the file is over the server's %s %d", flag, limit)
		} else {
			writeError(w, http.StatusBadRequest, "read the file: %v", err)
		}
		return nil, false
	}
	rc.SetReadDeadline(time.Time{})
	return data, true
}

func (a *API) getFile(w http.ResponseWriter, r *http.Request) {
	s, ok := a.session(w, r)
	if !ok {
		return
	}
	data, err := s.GetFile(r.PathValue("path"))
	if err != nil {
		writeSessionError(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.Itoa(len(data)))
	w.WriteHeader(http.StatusOK)
	w.Write(data)
}

func (a *API) deleteFile(w http.ResponseWriter, r *http.Request) {
	s, ok := a.session(w, r)
	if !ok {
		return
	}
	if err := s.DeleteFile(r.PathValue("path")); err != nil {
		writeSessionError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, session.Deleted{Path: r.PathValue("path"), Deleted: true})
}

// endedAnswer is the 410 of a request to a session that has ended: why
// the request failed, and how the session ended.
type endedAnswer struct {
	Error   string       `json:"error"`
	Session session.Info `json:"session"`
}

// writeSessionError answers a session's error with its status.
func writeSessionError(w http.ResponseWriter, err error) {
	var ended *session.EndedError
	switch {
	case errors.As(err, &ended):
		writeJSON(w, http.StatusGone, endedAnswer{Error: err.Error(), Session: ended.Info})
	case errors.Is(err, session.ErrBusy):
		writeError(w, http.StatusTooManyRequests, "%v", err)
	case errors.Is(err, session.ErrClosed):
		writeError(w, http.StatusServiceUnavailable, "%v", err)
	case errors.Is(err, session.ErrNotFound):
		writeError(w, http.StatusNotFound, "%v", err)
	case errors.Is(err, session.ErrTooLarge):
		writeError(w, http.StatusRequestEntityTooLarge, "%v", err)
	case session.IsBadInput(err):
		writeError(w, http.StatusBadRequest, "%v", err)
	default:
		writeError(w, http.StatusInternalServerError, "%v", err)
	}
}
