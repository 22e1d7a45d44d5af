// Package httpapi is microbox's HTTP API, served by `microbox serve
// --http` beside the exec socket and with the same jails
// (internal/server's Runner): runs (POST /v1/runs, GET and DELETE
// /v1/runs/{id}), batches (POST /v1/batch), SandboxFusion's POST
// /run_code (and its GET /v1/ping), the MCP tool over streamable HTTP (/mcp), /healthz and
// Prometheus's /metrics. Every run is a batch task built by
// internal/batch and run by internal/service, as `microbox batch` and the
// MCP tool run theirs; docs/http-api.md is the reference.
//
// Bad input gets one line of JSON, {"error": "..."}, with a status of its
// own: 400 (not a valid request), 401 (no or a wrong token), 404 (no such
// path or run), 405 (method), 408 (the body was too slow), 413 (too
// large), 429 (busy: Retry-After), 503 (stopping, or out of descriptors
// for a run: Retry-After; at /healthz, runs cannot work here:
// internal/health). 401 and 403 close the connection. /run_code answers
// a request that does not validate as SandboxFusion's server does: 422
// with FastAPI's {"detail": [...]}.
package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/microbox/microbox/internal/health"
	"golang.org/x/net/netutil"

	"github.com/microbox/microbox/internal/mcptool"
	"github.com/microbox/microbox/internal/policy"
	"github.com/microbox/microbox/internal/server"
	"github.com/microbox/microbox/internal/service"
	"github.com/microbox/microbox/internal/session"
)

// Config is the API's: where it listens and its limits.
type Config struct {
	// Addr is HOST:PORT or unix:PATH (Listen); Token the bearer token
	// ("" for none; Listen refuses a non-loopback address without one).
	Addr, Token string
	// MaxBody bounds a request's body, and each line of a batch's.
	MaxBody int64
	// ReadTimeout bounds the wait for a request's headers and body (for
	// a batch, for each read of its body).
	ReadTimeout time.Duration
	// BodyBudget bounds the bytes of bodies read and not yet admitted,
	// all requests together (bodyBudget); at least MaxBody.
	BodyBudget int64
	// WriteTimeout bounds each write of an answer (writeDeadlines).
	WriteTimeout time.Duration
	// IdleTimeout closes a kept-alive connection idle that long.
	IdleTimeout time.Duration
	// MaxConns caps the open connections (past it, new ones wait until
	// one closes); MaxUnauthConns those that have not yet shown the
	// token (past it, the oldest is closed). See conns.go.
	MaxConns, MaxUnauthConns int
	// Service sizes the runs (service.Config).
	Service service.Config
	// Version is microbox's, for /healthz and the MCP server.
	Version string
	// Health tells /healthz whether runs can work here (nil: it answers
	// 200 while the server serves).
	Health *health.Checker
}

// API is the HTTP front end of a server: a server.FrontEnd.
type API struct {
	cfg      Config
	listener net.Listener
	svc      *service.Service
	stop     context.CancelCauseFunc // ends the service's runs
	token    *tokenCheck
	conns    *connGuard
	unix     bool // a Unix socket: no browser can reach it
	metrics  *metrics
	handler  http.Handler
	bodies   *bodyBudget
	fusion   *fusion          // /run_code's state (sandboxfusion.go)
	routed   []route          // the paths served, for the OpenAPI document
	openAPI  []byte           // GET /openapi.json's answer (openapi.go)
	sessions *session.Manager // ended with the service
}

// New listens at cfg.Addr and makes the API of runner's jails; the
// runner's verdicts feed /metrics from now on.
func New(runner *server.Runner, cfg Config) (*API, error) {
	l, err := Listen(cfg.Addr, cfg.Token)
	if err != nil {
		return nil, err
	}
	ctx, stop := context.WithCancelCause(context.Background())
	svc, err := service.New(ctx, runner, cfg.Service)
	if err != nil {
		l.Close()
		stop(nil)
		return nil, err
	}
	a := &API{cfg: cfg, listener: netutil.LimitListener(l, cfg.MaxConns), svc: svc, stop: stop,
		token: newTokenCheck(cfg.Token), conns: newConnGuard(cfg.MaxUnauthConns, cfg.Token == ""),
		unix: strings.HasPrefix(cfg.Addr, UnixPrefix), bodies: newBodyBudget(cfg.BodyBudget, cfg.MaxBody, cfg.ReadTimeout)}
	a.fusion = newFusion()
	a.metrics = newMetrics(svc)
	if a.sessions, err = session.NewManager(session.Config{Base: cfg.Service.Base, Layers: cfg.Service.Layers, Limits: cfg.Service.Limits}); err != nil {
		l.Close()
		stop(nil)
		return nil, err
	}
	a.metrics.reg.MustRegister(sessionMetrics(a.sessions)...)
	runner.Observe(a.metrics)
	a.handler = a.routes()
	if a.openAPI, err = openAPIDocument(cfg.Version, a.routed); err != nil {
		l.Close()
		a.sessions.Close()
		stop(err)
		svc.Wait()
		return nil, err
	}
	return a, nil
}

// Serve serves until ctx ends: then the runs under way are killed (their
// verdicts say the server stopped), answered, and Serve returns once
// their handlers have.
func (a *API) Serve(ctx context.Context) error {
	srv := &http.Server{
		Handler:           a.handler,
		ReadHeaderTimeout: a.cfg.ReadTimeout,
		IdleTimeout:       a.cfg.IdleTimeout,
		MaxHeaderBytes:    64 << 10,
	}
	a.conns.install(srv)
	fmt.Fprintf(os.Stderr, "microbox: serving the HTTP API on %s; %s\n", describe(a.listener, a.token), a.connLimits())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(a.listener) }()
	select {
	case err := <-served:
		a.stop(errors.New("the HTTP API failed"))
		a.sessions.Close()
		a.svc.Wait()
		return fmt.Errorf("serve the HTTP API: %w", err)
	case <-ctx.Done():
	}
	a.stop(fmt.Errorf("the server is stopping (%v)", context.Cause(ctx)))
	a.sessions.Close() // a server's sessions end with it (docs/sessions.md)
	// Handlers answer as soon as their runs are killed; the bound is for
	// clients that do not read their answer.
	shutdown, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := srv.Shutdown(shutdown)
	a.svc.Wait()
	if err != nil {
		srv.Close()
	}
	return nil
}

// connLimits describes the caps on connections, for the server's log.
func (a *API) connLimits() string {
	unauth := ""
	if a.token != nil {
		unauth = fmt.Sprintf(", %d of them without the token", a.cfg.MaxUnauthConns)
	}
	return fmt.Sprintf("at most %d connections%s, closed after %v idle", a.cfg.MaxConns, unauth, a.cfg.IdleTimeout)
}

// routes are the API's endpoints, behind the access checks.
func (a *API) routes() http.Handler {
	mux := http.NewServeMux()
	handle := func(path string, methods map[string]http.HandlerFunc) {
		a.routed = append(a.routed, route{path, slices.Sorted(maps.Keys(methods))})
		mux.Handle(path, a.metrics.instrument(path, byMethod(methods)))
	}
	handle("/v1/runs", map[string]http.HandlerFunc{http.MethodPost: a.bodies.limit(http.HandlerFunc(a.postRun))})
	handle("/v1/runs/{id}", map[string]http.HandlerFunc{http.MethodGet: a.getRun, http.MethodDelete: a.deleteRun})
	handle("/v1/batch", map[string]http.HandlerFunc{http.MethodPost: a.postBatch}) // bounded line by line
	handle("/run_code", map[string]http.HandlerFunc{http.MethodPost: a.bodies.limit(http.HandlerFunc(a.runCode))})
	handle(fusionPing, map[string]http.HandlerFunc{http.MethodGet: ping})
	a.sessionRoutes(handle)
	handle("/healthz", map[string]http.HandlerFunc{http.MethodGet: a.healthz})
	handle("/metrics", map[string]http.HandlerFunc{http.MethodGet: a.metrics.serve})
	handle("/openapi.json", map[string]http.HandlerFunc{http.MethodGet: a.serveOpenAPI})
	mux.Handle("/mcp", a.metrics.instrument("/mcp", a.bodies.limit(mcptool.HTTPHandler(a.svc, a.sessions, a.cfg.Version, a.cfg.MaxBody))))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "no such endpoint %s: see docs/http-api.md for the API's paths", r.URL.Path)
	})
	return recoverPanics(writeDeadlines(a.cfg.WriteTimeout, a.access(mux)))
}

// access lets a request through if it carries the token (when there is
// one; /healthz never needs it), and refuses what a browser sends on a
// web page's behalf: a request from another origin, or one for a host
// name other than the address it came to (DNS rebinding), either of which
// would let any page run code here.
func (a *API) access(next http.Handler) http.Handler {
	cross := http.NewCrossOriginProtection()
	cross.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Connection", "close")
		writeError(w, http.StatusForbidden, "a cross-origin request from a browser: call the API from a program, not a web page")
	}))
	return cross.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if a.token == nil && !a.unix && !loopbackHost(r.Host) {
			w.Header().Set("Connection", "close") // a refused caller keeps no descriptor
			writeError(w, http.StatusForbidden, "host %q is not this machine's loopback: without a token, the API answers requests for 127.0.0.1, [::1] or localhost only", r.Host)
			return
		}
		if a.token != nil && r.URL.Path != "/healthz" && r.URL.Path != fusionPing {
			if !a.token.allows(r.Header.Get("Authorization")) {
				w.Header().Set("WWW-Authenticate", `Bearer realm="microbox"`)
				w.Header().Set("Connection", "close")
				writeError(w, http.StatusUnauthorized, "missing or wrong bearer token: send Authorization: Bearer TOKEN, the token of the server's --http-token-file")
				return
			}
			a.conns.authenticated(r)
		}
		next.ServeHTTP(w, r)
	}))
}

// loopbackHost reports whether a request's Host names the loopback.
func loopbackHost(hostport string) bool {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		host = hostport
	}
	return loopback(strings.Trim(host, "[]"))
}

// byMethod dispatches on the method, refusing others with 405 and the
// ones allowed.
func byMethod(methods map[string]http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h, ok := methods[r.Method]
		if !ok {
			allowed := strings.Join(slices.Sorted(maps.Keys(methods)), ", ")
			w.Header().Set("Allow", allowed)
			writeError(w, http.StatusMethodNotAllowed, "%s %s: the method is not allowed; use %s", r.Method, r.URL.Path, allowed)
			return
		}
		h(w, r)
	})
}

// recoverPanics turns a bug in one request into a 500 for that request,
// not the end of the server and every other run.
func recoverPanics(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if p := recover(); p != nil {
				if p == http.ErrAbortHandler {
					panic(p)
				}
				fmt.Fprintf(os.Stderr, "microbox: serve: HTTP %s %s: panic: %v\n%s", r.Method, r.URL.Path, p, debug.Stack())
				writeError(w, http.StatusInternalServerError, "microbox failed on this request (a bug; the server's log has the trace)")
			}
		}()
		next.ServeHTTP(w, r)
	})
}

// healthz answers whether runs can work here (readiness: 503 with the
// failed check and its fix when not), from the health checker's cached
// report, with the checks' details for callers with the token; with
// ?live, only that the server serves (liveness: no check, so a host's
// problem does not get the server restarted without end).
func (a *API) healthz(w http.ResponseWriter, r *http.Request) {
	st := a.svc.Stats()
	answer := map[string]any{"status": "ok", "version": a.cfg.Version,
		"running": st.Running, "queued": st.Queued, "ready_jails": st.ReadyJails}
	code := http.StatusOK
	if a.cfg.Health != nil && !r.URL.Query().Has("live") {
		detail := a.token == nil || a.token.allows(r.Header.Get("Authorization"))
		code = a.cfg.Health.Report(r.Context()).Answer(answer, detail)
	}
	writeJSON(w, code, answer)
}

// writeError answers bad input: one line of JSON naming the problem and
// the fix.
func writeError(w http.ResponseWriter, status int, format string, args ...any) {
	if status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "1")
	}
	writeJSON(w, status, map[string]string{"error": fmt.Sprintf(format, args...)})
}

// unlessUnavailable is respond, but for a run that never started for
// want of the server's descriptors (result.Result's Unavailable), which
// is answered 503 with Retry-After: no verdict, the same request may be
// sent again.
func unlessUnavailable(w http.ResponseWriter, respond func(*policy.Result)) func(*policy.Result) {
	return func(res *policy.Result) {
		if res.Unavailable == nil {
			respond(res)
			return
		}
		writeError(w, http.StatusServiceUnavailable, "the run could not start: the server is %v; try again after Retry-After seconds (its operator may raise its RLIMIT_NOFILE, or lower --http-concurrency)", res.Unavailable)
	}
}

// writeJSONLine writes v as one JSON line to a stream already answered.
func writeJSONLine(w io.Writer, v any) {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.Encode(v)
}
