// Command microbox runs untrusted Python in a Linux-namespace sandbox.
//
// This package only parses the command line and prints results; the jail is
// in package nsjail, limits in cgroup, the system-call filter in seccomp and
// the root filesystem in rootfs.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/microbox/microbox/nsjail"
)

// usageError is bad input from the caller: it is reported on one line and
// microbox exits with nsjail.ExitSandboxError.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return usageError{fmt.Sprintf(format, args...)}
}

func main() {
	root := &cobra.Command{
		Use:           "microbox",
		Short:         "Run untrusted Python in a Linux-namespace sandbox",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(subcommands(os.Args[1:])...)
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return usagef("%v (see %s --help)", err, c.CommandPath())
	})
	if err := root.Execute(); err != nil {
		fail(err)
	}
}

// commands are microbox's subcommands, by name.
var commands = []struct {
	name  string
	build func() *cobra.Command
}{
	{"exec", execCommand}, {"gc", gcCommand}, {"batch", batchCommand}, {"eval", evalCommand},
	{"rootfs", rootfsCommand}, {"doctor", doctorCommand}, {"check", checkCommand},
}

// subcommands builds the command that args name, or all of them when args
// name none (help, completion, a typo to suggest a fix for). Building every
// command's flags takes about a millisecond, which a `microbox exec` would
// otherwise pay on every run.
func subcommands(args []string) []*cobra.Command {
	for _, c := range commands {
		if len(args) > 0 && args[0] == c.name {
			return []*cobra.Command{c.build()}
		}
	}
	var all []*cobra.Command
	for _, c := range commands {
		all = append(all, c.build())
	}
	return all
}

// fail reports an error that stopped microbox before any run: one line on
// stderr and, under --json, a sandbox_error result on stdout.
func fail(err error) {
	msg := strings.TrimSpace(err.Error())
	fmt.Fprintf(os.Stderr, "microbox: %s\n", msg)
	if wantsJSON(os.Args[1:]) {
		printJSON(&nsjail.Result{Status: nsjail.StatusSandboxError, Error: &msg, Cgroup: "none"})
	}
	os.Exit(nsjail.ExitSandboxError)
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

func printJSON(v any) {
	enc := json.NewEncoder(os.Stdout)
	enc.SetEscapeHTML(false)
	enc.Encode(v)
}
