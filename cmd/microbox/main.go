// Command microbox runs untrusted Python in a Linux-namespace sandbox.
//
// This package only parses the command line and prints results; the jail is
// in package nsjail, limits in cgroup, the system-call filter in seccomp and
// the root filesystem in rootfs.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/microbox/microbox/internal/interrupt"
	"github.com/microbox/microbox/internal/server"
	"github.com/microbox/microbox/nsjail"
	"github.com/microbox/microbox/result"
)

// usageError is bad input from the caller: it is reported on one line and
// microbox exits with result.ExitSandboxError.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return usageError{fmt.Sprintf(format, args...)}
}

func main() {
	if err := serverLost(); err != nil {
		os.Exit(processInvocation().fail(os.Args[1:], err))
	}
	goMain := nsjail.MomentNow("go-main")
	if len(os.Args) > 1 && os.Args[1] == "exec" {
		oneProcessor()
		// Its jail's PID 1 is cloned while Go parses the command line
		// (not for a help, which runs nothing).
		if !slices.Contains(os.Args[2:], "-h") && !slices.Contains(os.Args[2:], "--help") {
			nsjail.SpawnEarly()
		}
	}
	inv := processInvocation()
	inv.moments = processMoments(goMain)
	os.Exit(inv.run(os.Args[1:], subcommands(inv, os.Args[1:])))
}

// invocation is one command's world: where it reads and writes, which
// directory relative names start from and which environment it sees. It is
// microbox's own process, or, under `microbox serve`, a client's (serveExec).
type invocation struct {
	stdin, stdout, stderr *os.File
	stdinReader           io.Reader // reads stdin for the program; nil: stdin itself
	dir                   string    // relative names start here; "" for the process's own
	clientPID             int       // the client's pid; 0 for the process's own
	getenv                func(string) string
	ctx                   context.Context // nil: the process's signals end the run
	runs                  *server.Session // the server's runs for the client; nil: every run starts cold
	status                int             // exit status set by the command
	moments               []nsjail.Moment // the process's own, before its run, for --trace
}

func processInvocation() *invocation {
	return &invocation{stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr, getenv: os.Getenv}
}

// run executes the command args name among cmds and returns the exit
// status.
func (inv *invocation) run(args []string, cmds []*cobra.Command) int {
	root := &cobra.Command{
		Use:           "microbox",
		Short:         "Run untrusted Python in a Linux-namespace sandbox",
		Version:       versionString(), // --version (version.go)
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	// A served run's command line is exec's alone: no shell completion,
	// whose command cobra would otherwise build for every run.
	root.CompletionOptions.DisableDefaultCmd = inv.runs != nil
	root.AddCommand(cmds...)
	root.SetArgs(args)
	root.SetIn(inv.stdin)
	root.SetOut(inv.stdout)
	root.SetErr(inv.stderr)
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return usagef("%v (see %s --help)", err, c.CommandPath())
	})
	if err := root.Execute(); err != nil {
		return inv.fail(args, err)
	}
	return inv.status
}

// context is what ends a run early: for microbox's own process, Ctrl-C,
// SIGTERM or SIGHUP, after which the jail is killed and its cgroup removed
// before microbox exits.
func (inv *invocation) context() (context.Context, context.CancelFunc) {
	if inv.ctx != nil {
		return inv.ctx, func() {}
	}
	if ctx, stop, err := catchInterrupts(); err == nil {
		return ctx, stop
	}
	ctx, stop := interrupt.Context(context.Background())
	return ctx, stop
}

// cacheDir is the caller's user cache directory, found as
// os.UserCacheDir finds it, in the caller's environment; "" if it has none.
func (inv *invocation) cacheDir() string {
	if dir := inv.getenv("XDG_CACHE_HOME"); dir != "" {
		if !strings.HasPrefix(dir, "/") {
			return ""
		}
		return dir
	}
	if home := inv.getenv("HOME"); strings.HasPrefix(home, "/") {
		return home + "/.cache"
	}
	return ""
}

// pid is the microbox process the caller started.
func (inv *invocation) pid() int {
	if inv.clientPID != 0 {
		return inv.clientPID
	}
	return os.Getpid()
}

// path is name as the invocation's caller means it: relative names start
// in the caller's directory. It is not cleaned, so that ".." after a
// symbolic link resolves as the caller's own open would.
func (inv *invocation) path(name string) string {
	if inv.dir == "" || name == "" || strings.HasPrefix(name, "/") {
		return name
	}
	return inv.dir + "/" + name
}

// commands are microbox's subcommands, by name. Only exec, which `microbox
// serve` also runs for its clients, takes the invocation; the others are
// always microbox's own process.
var commands = []struct {
	name  string
	build func(*invocation) *cobra.Command
}{
	{"exec", execCommand}, {"serve", serveCommand}, {"gc", own(gcCommand)}, {"batch", own(batchCommand)},
	{"eval", own(evalCommand)}, {"rootfs", own(rootfsCommand)}, {"doctor", own(doctorCommand)},
	{"check", own(checkCommand)}, {"mcp", mcpCommand},
}

func own(build func() *cobra.Command) func(*invocation) *cobra.Command {
	return func(*invocation) *cobra.Command { return build() }
}

// subcommands builds the command that args name, or all of them when args
// name none (help, completion, a typo to suggest a fix for). Building every
// command's flags takes about a millisecond, which a `microbox exec` would
// otherwise pay on every run.
func subcommands(inv *invocation, args []string) []*cobra.Command {
	for _, c := range commands {
		if len(args) > 0 && args[0] == c.name {
			return []*cobra.Command{c.build(inv)}
		}
	}
	var all []*cobra.Command
	for _, c := range commands {
		all = append(all, c.build(inv))
	}
	return all
}

// fail reports an error that stopped microbox before any run: one line on
// stderr and, under --json, a sandbox_error result on stdout. It returns
// the exit status.
func (inv *invocation) fail(args []string, err error) int {
	msg := strings.TrimSpace(err.Error())
	fmt.Fprintf(inv.stderr, "microbox: %s\n", msg)
	if wantsJSON(args) {
		writeJSON(inv.stdout, &result.Result{Status: result.StatusSandboxError, Error: &msg, Cgroup: "none"})
	}
	return result.ExitSandboxError
}

// wantsJSON reports whether --json appears among microbox's own flags
// (before the program's file or -c, after which arguments are the program's).
func wantsJSON(args []string) bool {
	for _, a := range args {
		if a == "--json" {
			return true
		}
		if a == "--" || a == "-c" || strings.HasSuffix(a, ".py") {
			return false
		}
	}
	return false
}

func printJSON(v any) { writeJSON(os.Stdout, v) }

// writeJSON writes v as one JSON line, in one write.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("the result could not be written: %w", err)
	}
	return nil
}
