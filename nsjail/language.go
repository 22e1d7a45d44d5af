package nsjail

import (
	"path"
	"slices"
	"time"

	"github.com/microbox/microbox/cgroup"
	"github.com/microbox/microbox/field"
	"github.com/microbox/microbox/internal/lang"
	"github.com/microbox/microbox/rootfs"
)

// Compile-step defaults (Options.CompileTimeout, CompileMemory,
// CompileOutputLimit): SandboxFusion's compile_timeout of 10 s; the
// memory g++ needs for template-heavy contest code with room to spare;
// an output cap that bounds the compiler's messages and the binary
// alike (the binary leaves the compile jail on stdout).
const (
	DefaultCompileTimeout     = 10 * time.Second
	DefaultCompileMemory      = 512 << 20
	DefaultCompileOutputLimit = 16 << 20
)

// language is the run's language (Options.Language), looked up.
func (o *Options) language() (*lang.Language, error) {
	l, err := lang.Lookup(o.Language)
	if err != nil {
		return nil, field.Errorf("Language", "{Language}: %v", err)
	}
	return l, nil
}

// checkRoot is the cheap check of a root for the run's language: the
// interpreter for Python, the language's tools for the others.
func (o *Options) checkRoot(dir string) error {
	l, err := o.language()
	if err != nil {
		return err
	}
	if l.IsPython() {
		return rootfs.CheckPython(dir, o.Python)
	}
	return rootfs.CheckLanguage(dir, l)
}

// languageProgram sets the argv of a program in a language other than
// Python, whose code or file becomes a file in the working directory; a
// compiled one gets its compile step (Spec.Compile, completed by
// compileStep once the run's spec is) and runs the binary that step
// makes.
func (o *Options) languageProgram(s *Spec, l *lang.Language) error {
	if len(o.PythonFlags) > 0 {
		return field.Errorf("Language", "{Language} %s: interpreter options are Python's", l.Name)
	}
	if o.Pids > 0 && o.Pids < l.MinPids {
		return field.Errorf("Pids", "{Pids} %d is too few for {Language} %s, which starts worker threads before the program's first line: give at least %d", o.Pids, l.Name, l.MinPids)
	}
	src, err := o.source(l)
	if err != nil {
		return err
	}
	s.Files = append(s.Files, src)
	if !l.Compiled() {
		s.Argv = append(append(slices.Clone(l.Run), src.Path), o.Args...)
		return nil
	}
	s.Argv = append([]string{path.Join(o.Workdir, lang.Binary)}, o.Args...)
	s.Compile = &Spec{Argv: l.CompileStep(src.Path)}
	return nil
}

// source is the program as a file of the working directory: Code under
// the language's file name, or File under its own.
func (o *Options) source(l *lang.Language) (File, error) {
	switch {
	case o.Code != nil && o.File != "":
		return File{}, field.Errorf("Code", "give either {Code} or {File}, not both")
	case o.Code != nil:
		if len(*o.Code) > MaxCode {
			return File{}, field.Errorf("Code", "{Code} is %d bytes; at most %d fit in a run", len(*o.Code), MaxCode)
		}
		return File{Path: path.Join(o.Workdir, l.Source), Data: []byte(*o.Code), Mode: 0o644}, nil
	case o.File == "":
		return File{}, field.Errorf("Code", "no program: give {Code} or {File}")
	}
	return o.hostFile(HostFile{Host: o.File})
}

// compileStep completes s.Compile from the run's spec s: the same root,
// files, environment, filter and CPU and process limits, with the compile
// step's own time, memory and output limits; no stdin, and nothing
// streamed (its stdout is the binary, its stderr the compiler's
// messages, both kept for the result).
func (o *Options) compileStep(s *Spec) error {
	if s.Compile == nil {
		return nil
	}
	if err := o.checkCompileLimits(); err != nil {
		return err
	}
	c := *s
	c.Argv, c.Compile, c.Zygote = s.Compile.Argv, nil, nil
	c.Files = slices.Clone(s.Files)
	c.Stdin, c.Stdout, c.Stderr, c.Capture = nil, nil, nil, true
	c.Timeout, c.OutputLimit, c.CPUTime = o.CompileTimeout, o.CompileOutputLimit, 0
	c.Trace, c.Before = false, nil
	if s.Cgroup != nil {
		limits := s.Cgroup.Limits
		limits.Memory = o.CompileMemory
		c.Cgroup = &cgroup.Options{Limits: limits, Parent: s.Cgroup.Parent}
	}
	if err := c.Validate(); err != nil {
		return err
	}
	s.Compile = &c
	return nil
}

// checkCompileLimits refuses compile limits a compile step cannot run
// under (CheckRanges bounds them from above).
func (o *Options) checkCompileLimits() error {
	switch {
	case o.CompileTimeout <= 0:
		return field.Errorf("CompileTimeout", "{CompileTimeout} %s: give a positive duration such as 10s", o.CompileTimeout)
	case o.CompileOutputLimit <= 0:
		return field.Errorf("CompileOutputLimit", "{CompileOutputLimit} %d: give a positive size such as 16M", o.CompileOutputLimit)
	case o.NoCgroup:
		return nil
	case o.CompileMemory <= 0:
		return field.Errorf("CompileMemory", "{CompileMemory} %d: give a positive size such as 512M", o.CompileMemory)
	case o.TmpfsSize > o.CompileMemory:
		return field.Errorf("CompileMemory", "{CompileMemory} (%d bytes) is under {TmpfsSize} (%d bytes), whose pages count against it: raise {CompileMemory} or lower {TmpfsSize}", o.CompileMemory, o.TmpfsSize)
	}
	return nil
}

// zygoteLanguage says what a zygote does with a language other than
// Python's: a template is a Python interpreter, so --zygote (which
// promises a fork) is refused by name, and --zygote-fallback starts the
// run cold, as it does any run no template can take.
func (o *Options) zygoteLanguage() (bool, error) {
	l, err := o.language()
	if err != nil || l.IsPython() {
		return true, err
	}
	if o.Zygote {
		return false, field.Errorf("Zygote", "{Zygote} forks a warm Python interpreter, and {Language} %s is not Python: run it without {Zygote}, or with {ZygoteFallback}, which starts it cold", l.Name)
	}
	return false, nil
}
