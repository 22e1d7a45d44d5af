package main

import (
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/microbox/microbox/internal/lang"
	"github.com/microbox/microbox/nsjail"
)

// langFlags are the program's language and its compile step's limits,
// which exec, batch and eval share (docs/languages.md).
type langFlags struct {
	name                                      string
	compileTimeout, compileMem, compileOutput string
}

func (f *langFlags) register(c *cobra.Command) {
	fl := c.Flags()
	fl.StringVar(&f.name, "lang", lang.Python, "the program's language: "+strings.Join(lang.Names(), ", "))
	fl.StringVar(&f.compileTimeout, "compile-timeout", nsjail.DefaultCompileTimeout.String(), "wall-clock limit of a compiled language's compile step")
	fl.StringVar(&f.compileMem, "compile-mem", "512M", "memory limit of the compile step")
	fl.StringVar(&f.compileOutput, "compile-output-limit", "16M", "cap on each of the compile step's stdout (the binary) and stderr")
}

// apply sets the language fields of o.
func (f *langFlags) apply(o *nsjail.Options) error {
	o.Language = f.name
	var err error
	var d time.Duration
	if d, err = nsjail.ParseDuration("CompileTimeout", f.compileTimeout); err != nil {
		return flagError(err)
	}
	o.CompileTimeout = d
	if o.CompileMemory, err = nsjail.ParseSize("CompileMemory", f.compileMem); err != nil {
		return flagError(err)
	}
	if o.CompileOutputLimit, err = nsjail.ParseSize("CompileOutputLimit", f.compileOutput); err != nil {
		return flagError(err)
	}
	return nil
}

// pythonOnly refuses --lang other than Python for an eval mode whose
// harness is a Python program around the sample (humaneval, mbpp).
func pythonOnly(mode string, o nsjail.Options) error {
	if l, err := lang.Lookup(o.Language); err == nil && !l.IsPython() {
		return usagef("--lang %s: eval %s judges Python programs with a Python harness; use eval stdio for other languages", o.Language, mode)
	}
	return nil
}
