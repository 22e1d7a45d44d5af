package main

import (
	"testing"

	"github.com/microbox/microbox/internal/batch"
)

// The task's declaration and exec's flags agree: each declared flag
// exists, with the declared default, and spells the declared field in
// messages.
func TestFieldsAreExecFlags(t *testing.T) {
	c := execCommand(nil)
	for _, f := range batch.Fields {
		if f.Flag == "" {
			continue
		}
		fl := c.Flags().Lookup(f.Flag)
		if fl == nil {
			t.Errorf("%s: exec has no --%s", f.Key, f.Flag)
			continue
		}
		if f.Default != "" && fl.DefValue != f.Default && !(fl.DefValue == "[]" && f.Default == "") {
			t.Errorf("%s: --%s defaults to %q, the declaration says %q", f.Key, f.Flag, fl.DefValue, f.Default)
		}
		if flagName(f.Name) != "--"+f.Flag {
			t.Errorf("%s: field %s is spelled %q in exec's messages, want --%s", f.Key, f.Name, flagName(f.Name), f.Flag)
		}
	}
}
