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
	"github.com/microbox/microbox/internal/httpapi"
	"github.com/microbox/microbox/internal/interrupt"
	"github.com/microbox/microbox/internal/mcptool"
	"github.com/microbox/microbox/internal/policy"
	"github.com/microbox/microbox/internal/server"
	"github.com/microbox/microbox/internal/service"
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
}

// register adds the flags to c.
func (f *apiFlags) register(c *cobra.Command) {
	f.sandboxFlags(c)
	f.ceilings.register(c, "server")
	fl := c.Flags()
	fl.IntVar(&f.concurrency, "http-concurrency", runtime.NumCPU(), "network runs at once")
	fl.IntVar(&f.queue, "http-queue", 4*runtime.NumCPU(), "network runs that may wait for a slot; past it, 429 (busy)")
	fl.StringVar(&f.keep, "http-keep", "10m", "how long the result of a run started with ?wait=false is kept")
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
	layers := policy.Options{PID: os.Getpid(), CacheDir: processInvocation().cacheDir()}
	return service.Config{Base: base, Layers: layers, Limits: limits, Concurrency: f.concurrency, Queue: f.queue,
		Keep: keep, MaxKept: 10000}, nil
}

func serveCommand(*invocation) *cobra.Command {
	o := server.Options{Handler: serveExec}
	f := &apiFlags{}
	var addr, tokenFile, maxBody string
	var readTimeout time.Duration
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
			if addr == "" {
				return flagError(server.Serve(o))
			}
			return serveHTTP(c, o, f, addr, tokenFile, maxBody, readTimeout)
		},
	}
	c.Flags().StringVar(&o.Socket, "socket", "", "socket to listen on (default: $"+server.SocketEnv+", else "+server.DefaultSocket+")")
	c.Flags().IntVar(&o.Warm, "warm", runtime.NumCPU(), "jails to keep started ahead of their runs (0: start each run's jail when it comes)")
	c.Flags().StringVar(&addr, "http", "", "also serve the HTTP API on `ADDR`: 127.0.0.1:8080, unix:/PATH, or another address with --http-token-file (default: off)")
	c.Flags().StringVar(&tokenFile, "http-token-file", "", "bearer token every API request but /healthz must carry, read from `FILE` (mode 0600)")
	c.Flags().StringVar(&maxBody, "http-max-body", "32M", "largest API request body (and batch line)")
	c.Flags().DurationVar(&readTimeout, "http-read-timeout", 10*time.Second, "longest wait for an API request's headers and body (a slower one gets 408)")
	f.register(c)
	return c
}

// serveHTTP serves the exec socket and the HTTP API side by side, on one
// runner.
func serveHTTP(c *cobra.Command, o server.Options, f *apiFlags, addr, tokenFile, maxBody string, readTimeout time.Duration) error {
	if readTimeout <= 0 {
		return usagef("--http-read-timeout %s: give a positive duration such as 10s", readTimeout)
	}
	cfg := httpapi.Config{Addr: addr, ReadTimeout: readTimeout, Version: versionString()}
	var err error
	if cfg.Service, err = f.config(c); err != nil {
		return err
	}
	if cfg.MaxBody, err = nsjail.ParseSize("HTTPMaxBody", maxBody); err != nil {
		return flagError(err)
	}
	if tokenFile != "" {
		if cfg.Token, err = httpapi.ReadToken(tokenFile); err != nil {
			return flagError(err)
		}
	}
	runner, err := server.NewRunner(o.Warm)
	if err != nil {
		return flagError(err)
	}
	defer runner.Close()
	api, err := httpapi.New(runner, cfg)
	if err != nil {
		return flagError(err)
	}
	o.Runner, o.FrontEnds = runner, []server.FrontEnd{api}
	return flagError(server.Serve(o))
}

func mcpCommand(*invocation) *cobra.Command {
	f := &apiFlags{}
	var warm int
	c := &cobra.Command{
		Use:   "mcp",
		Short: "Serve the run_python tool to an agent over MCP on stdio",
		Long: `Serve microbox to an agent as a Model Context Protocol server on stdin and
stdout: one tool, run_python, whose input is a run's options (a batch task's
fields) and whose output is exec's result (docs/http-api.md). The flags below
are the runs' defaults. It ends when the client closes stdin, or on SIGTERM
or SIGINT, which end the runs under way.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return serveMCP(c, f, warm)
		},
	}
	c.Flags().IntVar(&warm, "warm", 1, "jails to keep started ahead of their runs")
	f.register(c)
	return c
}

// serveMCP serves the MCP tool on stdio until the client leaves or a
// signal comes.
func serveMCP(c *cobra.Command, f *apiFlags, warm int) error {
	cfg, err := f.config(c)
	if err != nil {
		return err
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
	err = mcptool.ServeStdio(ctx, svc, versionString())
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
	}
	return inv.run(req.Args, []*cobra.Command{execCommand(inv)})
}
