package main

// The operator's ceilings (--max-mem, --max-code, ...): one flag per
// ceiling that package batch declares, on serve, mcp, batch and eval.

import (
	"github.com/spf13/cobra"

	"github.com/microbox/microbox/internal/batch"
	"github.com/microbox/microbox/nsjail"
)

// ceilingFlags are the --max-* flags as typed, by the ceiling's name.
type ceilingFlags struct {
	frontEnd string // "server", "batch" or "eval"
	values   map[string]*string
}

// register adds the flags of frontEnd's ceilings to c.
func (f *ceilingFlags) register(c *cobra.Command, frontEnd string) {
	f.frontEnd, f.values = frontEnd, map[string]*string{}
	for _, ceil := range batch.CeilingsFor(frontEnd) {
		f.values[ceil.Name] = c.Flags().String("max-"+ceil.Name, ceil.Default, ceil.Doc)
	}
}

// limits are the ceilings in force for tasks over base: those the
// operator gave, the defaults for the rest.
func (f *ceilingFlags) limits(c *cobra.Command, base nsjail.Options) (batch.Limits, error) {
	given := map[string]string{}
	for name, v := range f.values {
		if c.Flags().Changed("max-" + name) {
			given[name] = *v
		}
	}
	l, err := batch.NewLimits(f.frontEnd, base, given)
	return l, flagError(err)
}
