package main

// `microbox serve`: its flags into server.Options; the server
// (internal/server) hands each client's `microbox exec` to serveExec. The
// client is client.c.

import (
	"context"
	"runtime"

	"github.com/spf13/cobra"

	"github.com/microbox/microbox/internal/server"
)

func serveCommand(*invocation) *cobra.Command {
	o := server.Options{Handler: serveExec}
	c := &cobra.Command{
		Use:   "serve [--socket PATH]",
		Short: "Run exec for one-shot callers without a Go start per run",
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
once.`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			return flagError(server.Serve(o))
		},
	}
	c.Flags().StringVar(&o.Socket, "socket", "", "socket to listen on (default: $"+server.SocketEnv+", else "+server.DefaultSocket+")")
	c.Flags().IntVar(&o.Warm, "warm", runtime.NumCPU(), "jails to keep started ahead of their runs (0: start each run's jail when it comes)")
	return c
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
