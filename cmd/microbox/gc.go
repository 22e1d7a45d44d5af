package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/microbox/microbox/cgroup"
)

func gcCommand() *cobra.Command {
	var parent string
	c := &cobra.Command{
		Use:   "gc",
		Short: "Remove cgroups left behind by microbox runs whose supervisor died",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			removed, err := cgroup.GC(parent)
			for _, d := range removed {
				fmt.Println("removed", d)
			}
			return err
		},
	}
	c.Flags().StringVar(&parent, "cgroup-parent", "", "cgroup under which run cgroups were made (default: microbox's own)")
	return c
}
