package main

// `microbox doctor`: the host's checks (package doctor) for the run exec's
// flags describe, as text or JSON; the exit status says whether such a run
// works.

import (
	"os"

	"github.com/spf13/cobra"

	"github.com/microbox/microbox/internal/doctor"
)

func doctorCommand() *cobra.Command {
	f := &execFlags{}
	var asJSON bool
	c := &cobra.Command{
		Use:   "doctor [flags]",
		Short: "Check that this host can run sandboxes, and explain how to fix what it cannot",
		Long: `Check what a run needs on this host, one line each with ok, warn or fail
and a fix: user namespaces, the cgroup mode and controllers, delegation for
this user, seccomp, tmpfs and overlay, the root's Python, a real run with
timing, and whether an exec here is served or runs in-process.

It checks the run exec's flags describe (the same flags, same defaults), so
"microbox doctor --cgroup-parent /my/group" checks runs made there. Exit
status: 0 if such a run works, 1 if it would fail, 125 on bad flags.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return runDoctor(f, c, asJSON)
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print the report as one JSON object")
	f.sandboxFlags(c)
	return c
}

func runDoctor(f *execFlags, c *cobra.Command, asJSON bool) error {
	o, err := f.options(c)
	if err != nil {
		return err
	}
	rep, err := doctor.Run(o)
	if err != nil {
		return flagError(err)
	}
	rep.Checks = append(rep.Checks, execPathCheck())
	if asJSON {
		printJSON(rep)
	} else {
		rep.Print(os.Stdout)
	}
	if !rep.OK {
		os.Exit(1)
	}
	return nil
}
