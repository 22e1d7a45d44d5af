package httpapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/microbox/microbox/internal/batch"
	"github.com/microbox/microbox/internal/policy"
	"github.com/microbox/microbox/internal/service"
)

// runIDHeader carries a run's id in the answer to a run started with
// POST /v1/runs?wait=false.
const runIDHeader = "Microbox-Run-Id"

// postRun is POST /v1/runs: a batch task (less "file") in, exec's JSON
// result out once the run ends, or with ?wait=false its id at once.
func (a *API) postRun(w http.ResponseWriter, r *http.Request) {
	wait, ok := boolParam(w, r, "wait", true)
	if !ok {
		return
	}
	body, ok := a.readBody(w, r)
	if !ok {
		return
	}
	t, err := batch.DecodeTask(body)
	if err != nil {
		writeError(w, http.StatusBadRequest, "%v", err)
		return
	}
	a.run(w, r, t, wait, func(res *policy.Result) { writeResult(w, http.StatusOK, res) })
}

// run admits and prepares a task, then runs it and answers the result
// with respond, or, unless wait, answers its id at once (202).
func (a *API) run(w http.ResponseWriter, r *http.Request, t *batch.Task, wait bool, respond func(*policy.Result)) {
	a.runAnswering(w, r, t, wait, func(err error) { writeError(w, http.StatusBadRequest, "%v", err) }, respond)
}

// runAnswering is run with badInput answering a task the service refuses
// as bad input (/run_code answers it as SandboxFusion does).
func (a *API) runAnswering(w http.ResponseWriter, r *http.Request, t *batch.Task, wait bool, badInput func(error), respond func(*policy.Result)) {
	tk, run, err := a.svc.Admit(r.Context(), t)
	switch {
	case errors.Is(err, service.ErrBusy):
		writeError(w, http.StatusTooManyRequests, "busy: %v; try again after Retry-After seconds", err)
		return
	case batch.IsBadInput(err):
		badInput(err)
		return
	case err != nil:
		respond(a.svc.NotRun(err)) // microbox's fault: a verdict, as exec gives one
		return
	}
	admitted(r)
	respond = unlessUnavailable(w, respond)
	client := "http " + r.RemoteAddr
	if !wait {
		id := a.svc.Start(tk, run, client)
		w.Header().Set("Location", "/v1/runs/"+id)
		w.Header().Set(runIDHeader, id)
		writeJSON(w, http.StatusAccepted, service.Status{ID: id, State: service.StateQueued})
		return
	}
	a.svc.Run(callerContext(r), tk, run, client, respond)
}

// callerContext ends when the caller goes away (its connection closes)
// or the server stops, with a cause the verdict can say.
func callerContext(r *http.Request) context.Context {
	ctx, cancel := context.WithCancelCause(context.Background())
	context.AfterFunc(r.Context(), func() {
		cancel(errors.New("the caller closed its connection before the run ended"))
	})
	return ctx
}

// getRun is GET /v1/runs/{id}: the state of a run started with
// ?wait=false, and its result once done.
func (a *API) getRun(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	st, ok := a.svc.Status(id)
	if !ok {
		a.noRun(w, id)
		return
	}
	writeStatus(w, st)
}

// deleteRun is DELETE /v1/runs/{id}: kills the run (its verdict says who
// did) and answers its final state; a finished run is left as it was.
func (a *API) deleteRun(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	st, ok, err := a.svc.Kill(r.Context(), id, fmt.Errorf("killed by DELETE /v1/runs/%s from %s", id, r.RemoteAddr))
	switch {
	case !ok:
		a.noRun(w, id)
	case err != nil:
		writeError(w, http.StatusServiceUnavailable, "the run was killed, but its result did not come before the request ended: GET /v1/runs/%s for it", id)
	default:
		writeStatus(w, st)
	}
}

func (a *API) noRun(w http.ResponseWriter, id string) {
	writeError(w, http.StatusNotFound, "no run %q: it never was, or its result expired (kept %v after the run, %d and %d bytes of results at most, the oldest going first); start runs with POST /v1/runs?wait=false",
		id, a.cfg.Service.Keep, a.cfg.Service.MaxKept, a.cfg.Service.KeptBytes)
}

// postBatch is POST /v1/batch: tasks as JSON lines in, each result as a
// JSON line out as soon as it is written (the batch contract; ?order=input
// for the tasks' order, else as runs finish; ?jobs=N at most N at once).
// An error after the results began is the last line: {"error": "..."}.
func (a *API) postBatch(w http.ResponseWriter, r *http.Request) {
	o := service.BatchOptions{MaxHeld: 64 << 20}
	switch order := r.URL.Query().Get("order"); order {
	case "", "completed":
	case "input":
		o.Ordered = true
	default:
		writeError(w, http.StatusBadRequest, "order=%q: want input or completed", order)
		return
	}
	if j := r.URL.Query().Get("jobs"); j != "" {
		n, err := strconv.Atoi(j)
		if err != nil || n < 1 {
			writeError(w, http.StatusBadRequest, "jobs=%q: give a number of runs at once, 1 or more", j)
			return
		}
		o.Jobs = n
	}
	rc := http.NewResponseController(w)
	rc.EnableFullDuplex() // results go out while tasks come in
	in := &bodyReader{r: r.Body, rc: rc, timeout: a.cfg.ReadTimeout, maxLine: a.cfg.MaxBody}
	out := &flushWriter{w: w, rc: rc}
	w.Header().Set("Content-Type", "application/x-ndjson")
	err := a.svc.Batch(callerContext(r), in, out, o, "http "+r.RemoteAddr)
	switch {
	case errors.Is(err, service.ErrBatchBusy):
		writeError(w, http.StatusTooManyRequests, "busy: %v; try again after Retry-After seconds", err)
	case err != nil && !out.wrote:
		writeError(w, in.status(err), "%v", err)
	case err != nil:
		writeJSONLine(out, map[string]string{"error": err.Error()})
	case !out.wrote:
		w.WriteHeader(http.StatusOK) // no tasks: no results
	}
}

// readBody reads a request's whole body, at most MaxBody bytes within
// ReadTimeout, into a buffer of its length when it has one; a failure is
// answered (413, 408, 400), a body over MaxBody at once, unread.
func (a *API) readBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	b := bodyReader{maxLine: a.cfg.MaxBody, timeout: a.cfg.ReadTimeout}
	if r.ContentLength > a.cfg.MaxBody {
		w.Header().Set("Connection", "close")
		writeError(w, http.StatusRequestEntityTooLarge, "%v", b.explain(errLineTooLong))
		return nil, false
	}
	rc := http.NewResponseController(w)
	rc.SetReadDeadline(time.Now().Add(a.cfg.ReadTimeout))
	data, err := readAll(http.MaxBytesReader(w, r.Body, a.cfg.MaxBody), r.ContentLength)
	if err != nil {
		// The deadline stays: net/http drains what is left of the body
		// after the answer, which must not wait for a caller that
		// sends nothing more.
		w.Header().Set("Connection", "close")
		writeError(w, b.status(err), "%v", b.explain(err))
		return nil, false
	}
	// No deadline once the body is in: the server's read that notices a
	// caller going away must not end the run when it passes.
	rc.SetReadDeadline(time.Time{})
	return data, true
}

// readAll reads r to its end: size bytes when size is known (no more
// memory than that), else as io.ReadAll does.
func readAll(r io.Reader, size int64) ([]byte, error) {
	if size < 0 {
		return io.ReadAll(r)
	}
	data := make([]byte, size)
	if _, err := io.ReadFull(r, data); err != nil {
		return nil, err
	}
	return data, nil
}

// boolParam reads the query parameter name as a boolean (def if absent);
// a value that is not one is answered 400.
func boolParam(w http.ResponseWriter, r *http.Request, name string, def bool) (bool, bool) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def, true
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		writeError(w, http.StatusBadRequest, "%s=%q: want true or false", name, v)
		return false, false
	}
	return b, true
}

// bodyReader reads a streamed body: each read must come within timeout
// (a caller may send tasks as it makes them, but not hold the connection
// idle without end), and no line may pass maxLine bytes.
type bodyReader struct {
	r       io.Reader
	rc      *http.ResponseController
	timeout time.Duration
	maxLine int64
	line    int64 // bytes since the last newline
}

var errLineTooLong = errors.New("line too long")

func (b *bodyReader) Read(p []byte) (int, error) {
	b.rc.SetReadDeadline(time.Now().Add(b.timeout))
	n, err := b.r.Read(p)
	if err == io.EOF {
		b.rc.SetReadDeadline(time.Time{}) // as readBody's, once the body is in
	}
	for _, c := range p[:n] {
		b.line++
		if c == '\n' {
			b.line = 0
		}
		if b.line > b.maxLine {
			return n, b.explain(errLineTooLong)
		}
	}
	if err != nil && err != io.EOF {
		err = b.explain(err)
	}
	return n, err
}

// explain says what went wrong reading a body, and what to do.
func (b *bodyReader) explain(err error) error {
	var tooLarge *http.MaxBytesError
	var ne net.Error
	switch {
	case errors.As(err, &tooLarge), errors.Is(err, errLineTooLong):
		return fmt.Errorf("the request is over %d bytes (a batch: a line is); send less, or raise the server's --http-max-body: %w", b.maxLine, errLineTooLong)
	case errors.As(err, &ne) && ne.Timeout():
		return fmt.Errorf("the request's body did not arrive within %v; send it at once: %w", b.timeout, errSlowBody)
	}
	return fmt.Errorf("read the request: %w", err)
}

var errSlowBody = errors.New("slow body")

// status is the HTTP status of a failed read.
func (b *bodyReader) status(err error) int {
	switch {
	case errors.Is(err, errLineTooLong):
		return http.StatusRequestEntityTooLarge
	case errors.Is(err, errSlowBody):
		return http.StatusRequestTimeout
	}
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		return http.StatusRequestEntityTooLarge
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return http.StatusRequestTimeout
	}
	return http.StatusBadRequest
}

// flushWriter sends what is written at once: a batch's caller sees each
// result as it is written.
type flushWriter struct {
	w     http.ResponseWriter
	rc    *http.ResponseController
	wrote bool
}

func (f *flushWriter) Write(p []byte) (int, error) {
	f.wrote = true
	n, err := f.w.Write(p)
	if err == nil {
		err = f.rc.Flush()
	}
	return n, err
}
