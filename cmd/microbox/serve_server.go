//go:build server

package main

// `microbox serve` and `microbox mcp`, in the server build
// (bin/microbox-server; the default build starts it for them, serve.go):
// flags into internal/server's Options, internal/httpapi's Config and
// internal/service's. The exec socket's clients are client.c; each of
// their runs is serveExec.

import (
	"context"
	"os"
	"runtime"
	"time"

	"github.com/spf13/cobra"

	"github.com/microbox/microbox/internal/batch"
	selfcheck "github.com/microbox/microbox/internal/health" // the package's tests declare a type health
	"github.com/microbox/microbox/internal/httpapi"
	"github.com/microbox/microbox/internal/interrupt"
	"github.com/microbox/microbox/internal/mcptool"
	"github.com/microbox/microbox/internal/policy"
	"github.com/microbox/microbox/internal/server"
	"github.com/microbox/microbox/internal/service"
	"github.com/microbox/microbox/internal/session"
	"github.com/microbox/microbox/nsjail"
)

// apiFlags are the options of runs that come over the network (the HTTP
// API, MCP): exec's sandbox flags as their defaults, and admission.
type apiFlags struct {
	execFlags
	ceilings    ceilingFlags
	concurrency int
	queue       int
	keep        string
	budget      budgetFlag
	memoryFlags
}

// memoryFlags bound the server's own memory (docs/server.md).
type memoryFlags struct {
	keepBytes string
}

func (m *memoryFlags) register(c *cobra.Command) {
	c.Flags().StringVar(&m.keepBytes, "http-keep-bytes", "256M", "bytes of results of runs started with ?wait=false kept at most (stdout, stderr, error and 1K each; the oldest go first)")
}

// register adds the flags to c.
func (f *apiFlags) register(c *cobra.Command) {
	f.sandboxFlags(c)
	f.ceilings.register(c, "server")
	fl := c.Flags()
	fl.IntVar(&f.concurrency, "http-concurrency", runtime.NumCPU(), "network runs at once")
	fl.IntVar(&f.queue, "http-queue", 4*runtime.NumCPU(), "network runs that may wait for a slot; past it, 429 (busy)")
	fl.StringVar(&f.keep, "http-keep", "10m", "how long the result of a run started with ?wait=false is kept")
	f.memoryFlags.register(c)
	f.budget.register(fl)
}

// config is the service's: the flags as every network run's base. Its
// errors name a task's key for a field a task may set, and the server's
// flag for the others (a caller cannot change those).
func (f *apiFlags) config(c *cobra.Command) (service.Config, error) {
	base, err := f.base(c)
	if err != nil {
		return service.Config{}, err
	}
	base.FieldNames = func(name string) string {
		if key := batch.TaskKey(name); key != "" {
			return key
		}
		if flag := flagName(name); flag != "" {
			return "the server's " + flag
		}
		return ""
	}
	limits, err := f.ceilings.limits(c, base)
	if err != nil {
		return service.Config{}, err
	}
	keep, err := nsjail.ParseDuration("HTTPKeep", f.keep)
	if err != nil {
		return service.Config{}, flagError(err)
	}
	keptBytes, err := nsjail.ParseSize("HTTPKeepBytes", f.keepBytes)
	if err != nil {
		return service.Config{}, flagError(err)
	}
	layers := policy.Options{PID: os.Getpid(), CacheDir: processInvocation().cacheDir(), RedactBudget: time.Duration(f.budget)}
	return service.Config{Base: base, Layers: layers, Limits: limits, Concurrency: f.concurrency, Queue: f.queue,
		Keep: keep, MaxKept: 10000, KeptBytes: keptBytes}, nil
}

func serveCommand(*invocation) *cobra.Command {
	o := server.Options{Handler: serveExec}
	f := &apiFlags{}
	h := &httpFlags{}
	c := &cobra.Command{
		Use:   "serve [--socket PATH] [--http ADDR]",
		Short: "Run exec for one-shot callers without a Go start per run, and the HTTP API",
		Long: `Listen on a Unix socket and run ` + "`microbox exec`" + ` for callers of the same
user, who keep calling ` + "`microbox exec`" + ` as before: when the socket exists, exec
hands its run to this server instead of starting Go (about 9 ms less per run
in BENCHMARKS.md). The server also keeps --warm jails started ahead in the
shape of the last run (its cgroup limits and mounts; fresh namespaces, cgroup
and mounts, each used for one run only), which takes about 3 ms more off a
run, and it answers before the jail's teardown. Runs, limits and results are
exactly those of an in-process exec; run cgroups are made under the server's
cgroup. SIGTERM or SIGINT stop the server and the runs it has under way, and
it waits for the jails it is starting to end too; a second signal ends it at
once.

With --http ADDR it also serves the HTTP API (docs/http-api.md) on the same
jails: runs, batches, SandboxFusion's /run_code, MCP at /mcp, /healthz and
/metrics. ADDR is 127.0.0.1:PORT (loopback), unix:PATH, or any other address
with --http-token-file. exec's sandbox flags below are the defaults of the
API's runs (exec's clients keep their own).`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if o.IdleExit < 0 {
				return usagef("--idle-exit %s: give a positive duration such as 10m, or 0 to serve until stopped", o.IdleExit)
			}
			if h.addr == "" {
				return flagError(server.Serve(o))
			}
			if o.IdleExit > 0 {
				return usagef("--idle-exit %s with --http %s: the HTTP API would stop too; drop --idle-exit, or serve the API from a server of its own", o.IdleExit, h.addr)
			}
			return serveHTTP(c, o, f, h)
		},
	}
	c.Flags().StringVar(&o.Socket, "socket", "", "socket to listen on (default: $"+server.SocketEnv+", else "+server.DefaultSocket+"; under socket activation, the socket passed)")
	c.Flags().DurationVar(&o.IdleExit, "idle-exit", 0, "exit once no exec client has come for this long (0: never); for a socket-activated server (deploy/systemd/microbox.socket), which the socket's next client starts again")
	c.Flags().IntVar(&o.Warm, "warm", runtime.NumCPU(), "jails to keep started ahead of their runs (0: start each run's jail when it comes)")
	f.register(c)
	h.register(c)
	return c
}

// httpFlags are the HTTP API's own: where it listens, who may use it,
// and what its callers may hold of the server (docs/server.md).
type httpFlags struct {
	addr, tokenFile, maxBody string
	readTimeout, healthEvery time.Duration
	answers                  answerFlags
	conns                    connFlags
}

func (h *httpFlags) register(c *cobra.Command) {
	fl := c.Flags()
	fl.StringVar(&h.addr, "http", "", "also serve the HTTP API on `ADDR`: 127.0.0.1:8080, unix:/PATH, or another address with --http-token-file (default: off)")
	fl.StringVar(&h.tokenFile, "http-token-file", "", "bearer token every API request but /healthz must carry, read from `FILE` (mode 0600)")
	fl.StringVar(&h.maxBody, "http-max-body", "32M", "largest API request body (and batch line)")
	fl.DurationVar(&h.readTimeout, "http-read-timeout", 10*time.Second, "longest wait for an API request's headers and body (a slower one gets 408)")
	fl.DurationVar(&h.healthEvery, "http-health-interval", selfcheck.DefaultEvery, "how long /healthz's self-check (a run in a jail) stands before a request makes a new one")
	h.answers.register(c)
	h.conns.register(c)
}

// answerFlags bound what callers' requests and answers hold of the
// server: bodies being read, and answers they do not read.
type answerFlags struct {
	bodyBudget   string
	writeTimeout time.Duration
}

func (b *answerFlags) register(c *cobra.Command) {
	c.Flags().StringVar(&b.bodyBudget, "http-body-budget", "", "bytes of request bodies the server holds before their runs are admitted, all requests together; past it, 429 (default: twice --http-max-body)")
	c.Flags().DurationVar(&b.writeTimeout, "http-write-timeout", 30*time.Second, "longest wait for a caller to take each piece of its answer; a caller that stops reading loses its connection")
}

// apply sets cfg's body budget and write timeout.
func (b *answerFlags) apply(cfg *httpapi.Config) error {
	if b.writeTimeout <= 0 {
		return usagef("--http-write-timeout %s: give a positive duration such as 30s", b.writeTimeout)
	}
	cfg.WriteTimeout, cfg.BodyBudget = b.writeTimeout, 2*cfg.MaxBody
	if b.bodyBudget == "" {
		return nil
	}
	budget, err := nsjail.ParseSize("HTTPBodyBudget", b.bodyBudget)
	if err != nil {
		return flagError(err)
	}
	if budget < cfg.MaxBody {
		return usagef("--http-body-budget %s is below --http-max-body (%d bytes): no body that large could be read; raise --http-body-budget", b.bodyBudget, cfg.MaxBody)
	}
	cfg.BodyBudget = budget
	return nil
}

// fitFiles refuses a --max-session-file-bytes given above the body
// budget, which holds a PUT's file whole while it waits: such a file
// could never be admitted. (Left at its default, the session file
// ceiling is held to the budget: a larger file gets 413 naming
// --http-body-budget.)
func fitFiles(c *cobra.Command, cfg *httpapi.Config) error {
	file := int64(cfg.Service.Limits.Value("session-file-bytes", cfg.Service.Base))
	if file <= cfg.BodyBudget || !c.Flags().Changed("max-session-file-bytes") {
		return nil
	}
	return usagef("--max-session-file-bytes %s is above the body budget (%d bytes, --http-body-budget, by default twice --http-max-body): a session file that large could never be admitted; raise --http-body-budget or lower --max-session-file-bytes",
		c.Flag("max-session-file-bytes").Value, cfg.BodyBudget)
}

// connFlags bound the API's connections (internal/httpapi's conns.go).
type connFlags struct {
	max, maxUnauth int
	idle           time.Duration
}

func (f *connFlags) register(c *cobra.Command) {
	fl := c.Flags()
	fl.IntVar(&f.max, "http-max-conns", 0, "open API connections at most; more wait until one closes (default: from RLIMIT_NOFILE, see docs/server.md)")
	fl.IntVar(&f.maxUnauth, "http-max-unauth-conns", 0, "open API connections that have not yet shown the token, at most; past it the oldest is closed (default: a quarter of --http-max-conns)")
	fl.DurationVar(&f.idle, "http-idle-timeout", 30*time.Second, "close a kept-alive API connection idle this long")
}

// apply sets cfg's connection limits, sizing the defaults from the
// descriptors the process may open and the runs it holds at once.
func (f *connFlags) apply(cfg *httpapi.Config) error {
	switch {
	case f.max < 0:
		return usagef("--http-max-conns %d: give a number of connections, 1 or more (0: the default)", f.max)
	case f.maxUnauth < 0:
		return usagef("--http-max-unauth-conns %d: give a number of connections, 1 or more (0: the default)", f.maxUnauth)
	case f.idle <= 0:
		return usagef("--http-idle-timeout %s: give a positive duration such as 30s", f.idle)
	}
	cfg.IdleTimeout, cfg.MaxConns, cfg.MaxUnauthConns = f.idle, f.max, f.maxUnauth
	if cfg.MaxConns == 0 {
		cfg.MaxConns = httpapi.DefaultMaxConns(httpapi.SoftNoFile(), cfg.Service.Concurrency)
	}
	if cfg.MaxUnauthConns == 0 {
		cfg.MaxUnauthConns = httpapi.DefaultMaxUnauthConns(cfg.MaxConns)
	}
	if cfg.MaxUnauthConns > cfg.MaxConns {
		return usagef("--http-max-unauth-conns %d is over --http-max-conns %d: connections with the token would find no room", cfg.MaxUnauthConns, cfg.MaxConns)
	}
	return nil
}

// serveHTTP serves the exec socket and the HTTP API side by side, on one
// runner.
func serveHTTP(c *cobra.Command, o server.Options, f *apiFlags, h *httpFlags) error {
	if h.readTimeout <= 0 {
		return usagef("--http-read-timeout %s: give a positive duration such as 10s", h.readTimeout)
	}
	if h.healthEvery <= 0 {
		return usagef("--http-health-interval %s: give a positive duration such as 30s", h.healthEvery)
	}
	cfg := httpapi.Config{Addr: h.addr, ReadTimeout: h.readTimeout, Version: versionString()}
	var err error
	if cfg.Service, err = f.config(c); err != nil {
		return err
	}
	if cfg.MaxBody, err = nsjail.ParseSize("HTTPMaxBody", h.maxBody); err != nil {
		return flagError(err)
	}
	if err := h.answers.apply(&cfg); err != nil {
		return err
	}
	if err := fitFiles(c, &cfg); err != nil {
		return err
	}
	if err := h.conns.apply(&cfg); err != nil {
		return err
	}
	if h.tokenFile != "" {
		if cfg.Token, err = httpapi.ReadToken(h.tokenFile); err != nil {
			return flagError(err)
		}
	}
	runner, err := server.NewRunner(o.Warm)
	if err != nil {
		return flagError(err)
	}
	defer runner.Close()
	cfg.Health = healthChecker(cfg.Service.Base, runner, h.healthEvery)
	defer cfg.Health.Close() // before the runner closes: its run may be under way
	api, err := httpapi.New(runner, cfg)
	if err != nil {
		return flagError(err)
	}
	o.Runner, o.FrontEnds = runner, []server.FrontEnd{api}
	return flagError(server.Serve(o))
}

// healthChecker checks, for /healthz, that runs of base work: its
// messages name the server's flags, for the operator who reads them.
func healthChecker(base nsjail.Options, runner *server.Runner, every time.Duration) *selfcheck.Checker {
	base.FieldNames = flagName
	return selfcheck.New(selfcheck.Config{Options: base, Run: runner.Probe, Every: every})
}

func mcpCommand(*invocation) *cobra.Command {
	f := &apiFlags{}
	var warm int
	var maxMessage string
	c := &cobra.Command{
		Use:   "mcp",
		Short: "Serve the run_python tool to an agent over MCP on stdio",
		Long: `Serve microbox to an agent as a Model Context Protocol server on stdin and
stdout: one tool, run_python, whose input is a run's options (a batch task's
fields) and whose output is exec's result (docs/http-api.md). The flags below
are the runs' defaults. It ends when the client closes stdin, once the calls
it sent are answered, or on SIGTERM or SIGINT, which end the runs under way.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return serveMCP(c, f, warm, maxMessage)
		},
	}
	c.Flags().IntVar(&warm, "warm", 1, "jails to keep started ahead of their runs")
	c.Flags().StringVar(&maxMessage, "max-message", "32M", "longest input line (one JSON-RPC message) kept; a longer one is answered with an error and skipped")
	f.register(c)
	return c
}

// serveMCP serves the MCP tool on stdio until the client leaves or a
// signal comes.
func serveMCP(c *cobra.Command, f *apiFlags, warm int, maxMessage string) error {
	cfg, err := f.config(c)
	if err != nil {
		return err
	}
	maxLine, err := nsjail.ParseSize("MaxMessage", maxMessage)
	if err != nil {
		return flagError(err)
	}
	runner, err := server.NewRunner(warm)
	if err != nil {
		return flagError(err)
	}
	defer runner.Close()
	ctx, stop := interrupt.Context(context.Background())
	defer stop()
	svc, err := service.New(ctx, runner, cfg)
	if err != nil {
		return flagError(err)
	}
	sessions, err := session.NewManager(session.Config{Base: cfg.Base, Layers: cfg.Layers, Limits: cfg.Limits})
	if err != nil {
		return err
	}
	err = mcptool.ServeStdio(ctx, svc, sessions, versionString(), int(maxLine))
	sessions.Close() // the client has gone: its sessions end with it
	svc.Wait()
	return err
}

// serveExec runs a client's `microbox exec` exactly as the client would
// have run it in-process, in the client's world: its descriptors,
// directory, environment and pid, its end as the run's end, and the
// server's jails.
func serveExec(ctx context.Context, req *server.Request, runs *server.Session) int {
	inv := &invocation{
		stdin: req.Stdin, stdinReader: req.StdinReader, stdout: req.Stdout, stderr: req.Stderr,
		dir: req.Dir, clientPID: req.PID, getenv: req.Getenv, ctx: ctx, runs: runs,
		moments: req.Moments,
	}
	return inv.run(req.Args, []*cobra.Command{execCommand(inv)})
}
