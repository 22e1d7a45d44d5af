//go:build !server

package main

// In the default build (bin/microbox), `serve` and `mcp` are the server
// build's (bin/microbox-server, built with -tags server): net/http,
// Prometheus's client and the MCP SDK cost every start of a binary that
// links them milliseconds (BENCHMARKS.md), which every `microbox exec`
// would pay. Here the two commands start microbox-server in this
// process's place, with the same arguments, so users type `microbox serve
// ...` as ever.

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"

	"github.com/spf13/cobra"
)

// serverEnv names the server build's binary, when it is not next to this
// one.
const serverEnv = "MICROBOX_SERVER"

func serveCommand(*invocation) *cobra.Command {
	return serverCommand("serve", "Serve exec for one-shot callers, and the HTTP API (microbox-server)")
}

func mcpCommand(*invocation) *cobra.Command {
	return serverCommand("mcp", "Serve the run_python tool to an agent over MCP on stdio (microbox-server)")
}

// serverCommand is a command of the server build's, which it starts.
func serverCommand(name, short string) *cobra.Command {
	return &cobra.Command{
		Use:                name,
		Short:              short,
		DisableFlagParsing: true, // every flag, --help too, is the server build's
		RunE: func(_ *cobra.Command, args []string) error {
			return execServer(name, args)
		},
	}
}

// execServer replaces this process with microbox-server's command name:
// $MICROBOX_SERVER, else the microbox-server beside this binary.
func execServer(name string, args []string) error {
	path := os.Getenv(serverEnv)
	if path == "" {
		self, err := os.Executable()
		if err != nil {
			return usagef("microbox %s: find this binary's directory: %v; name microbox-server with $%s", name, err, serverEnv)
		}
		path = filepath.Join(filepath.Dir(self), "microbox-server")
	}
	err := syscall.Exec(path, append([]string{path, name}, args...), os.Environ())
	var pe *os.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	return usagef("microbox %s is in microbox-server, the server build: %s: %v; build it with make (bin/microbox-server), install it beside microbox (make install), or name it with $%s",
		name, path, err, serverEnv)
}
