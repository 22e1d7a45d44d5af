// Package lang declares, once, the languages a run can be written in:
// for each, the file the program becomes, the compile step (if any), the
// command that runs it and the Debian packages a root needs for it.
// nsjail builds a run's (and its compile step's) argv from this table,
// rootfs build installs its packages, and the front ends list its names.
package lang

import (
	"fmt"
	"slices"
	"strings"
)

// Language is one language a program may be written in.
type Language struct {
	// Name is how a caller names it (Options.Language, "language").
	Name string
	// Aliases are other names callers use for it: SandboxFusion's
	// ("nodejs", "js") and the common spellings ("c++", "javascript").
	Aliases []string
	// Source is the program's file name in the working directory when
	// the caller sends code rather than a file.
	Source string
	// Compile is the compiler's argv with the source file appended
	// (nil: the language is interpreted). The compiler runs in a jail
	// of its own and writes Binary in the working directory.
	Compile []string
	// CompileAfter follows the source on the compiler's command line
	// (libraries, which the linker takes after the objects that need
	// them).
	CompileAfter []string
	// Run is the argv the program's file (or, compiled, Binary) follows;
	// empty for a compiled program, which is its own executable.
	Run []string
	// Packages are the Debian packages a built root needs for it.
	Packages []string
	// Hello is a program that prints "hello": what a root's check runs.
	Hello string
	// MinPids is the fewest processes and threads a run needs to reach
	// the program's first line (the jail's init included); 0: the
	// jail's own minimum. Node starts V8's and libuv's worker threads
	// first, and below this it waits for them until the time limit.
	MinPids int64
}

// Binary is a compiled program's file name in the working directory.
const Binary = "main"

// Python is the language runs have when they name none.
const Python = "python"

// Languages are the languages microbox runs. Compiler flags follow what
// contest judges use (Codeforces, Judge0, SandboxFusion's C++): -O2,
// a fixed standard (GNU's dialect, which contest code leans on), libm
// linked; -x names the language whatever the file is called.
var Languages = []Language{
	{Name: Python, Aliases: []string{"python3", "py"}, Source: "main.py",
		Packages: []string{"python3-minimal"}, Hello: `print("hello")`},
	{Name: "c", Source: "main.c",
		Compile:      []string{"/usr/bin/gcc", "-O2", "-std=gnu17", "-pipe", "-o", Binary, "-x", "c"},
		CompileAfter: []string{"-lm"},
		Packages:     []string{"gcc", "libc6-dev"},
		Hello:        "#include <stdio.h>\nint main(void) { puts(\"hello\"); return 0; }\n"},
	{Name: "cpp", Aliases: []string{"c++", "cxx"}, Source: "main.cpp",
		Compile:      []string{"/usr/bin/g++", "-O2", "-std=gnu++17", "-pipe", "-o", Binary, "-x", "c++"},
		CompileAfter: []string{"-lm"},
		Packages:     []string{"g++", "libc6-dev"},
		Hello:        "#include <iostream>\nint main() { std::cout << \"hello\" << std::endl; }\n"},
	{Name: "bash", Aliases: []string{"sh"}, Source: "main.sh",
		Run: []string{"/usr/bin/bash"}, Packages: []string{"bash"}, Hello: `echo hello`},
	{Name: "node", Aliases: []string{"nodejs", "js", "javascript"}, Source: "main.js",
		Run: []string{"/usr/bin/node"}, Packages: []string{"nodejs"}, Hello: `console.log("hello")`,
		MinPids: 8},
}

// Names are the languages' names, in the table's order.
func Names() []string {
	var names []string
	for _, l := range Languages {
		names = append(names, l.Name)
	}
	return names
}

// NamesAndAliases lists every name Lookup takes, for a message.
func NamesAndAliases() string {
	var names []string
	for _, l := range Languages {
		names = append(names, l.Name)
		names = append(names, l.Aliases...)
	}
	return strings.Join(names, ", ")
}

// Lookup is the language a name or alias stands for; "" is Python.
func Lookup(name string) (*Language, error) {
	if name == "" {
		name = Python
	}
	for i := range Languages {
		l := &Languages[i]
		if strings.EqualFold(name, l.Name) || slices.ContainsFunc(l.Aliases, func(a string) bool { return strings.EqualFold(name, a) }) {
			return l, nil
		}
	}
	return nil, fmt.Errorf("unknown language %q: give one of %s", name, strings.Join(Names(), ", "))
}

// IsPython reports whether the language is Python, the only one the
// interpreter options, the zygote and the Python policy layers apply to.
func (l *Language) IsPython() bool { return l.Name == Python }

// Compiled reports whether programs are compiled before they run.
func (l *Language) Compiled() bool { return l.Compile != nil }

// CompileArgv is the compiler's argv for the source file src.
func (l *Language) CompileArgv(src string) []string {
	argv := append(slices.Clone(l.Compile), src)
	return append(argv, l.CompileAfter...)
}

// Tools are the executables a root must hold for the language (the
// compiler and the interpreter), as paths inside the root; Python's is
// the caller's interpreter, checked apart.
func (l *Language) Tools() []string {
	var tools []string
	if l.Compiled() {
		tools = append(tools, l.Compile[0])
	}
	if len(l.Run) > 0 {
		tools = append(tools, l.Run[0])
	}
	return tools
}

// A compiled program's compile step runs CompileShell with the compiler's
// argv as its arguments: the compiler's own output goes to stderr, and on
// success CompileCat writes the binary to stdout, which is how it leaves
// the compile jail (in memory, never through a host directory) for the
// run's scratch area.
const (
	CompileShell  = "/bin/sh"
	CompileCat    = "/bin/cat"
	compileScript = `"$@" >&2 && exec ` + CompileCat + ` ` + Binary
)

// CompileStep is the compile jail's argv for the source file src.
func (l *Language) CompileStep(src string) []string {
	return append([]string{CompileShell, "-c", compileScript, "sh"}, l.CompileArgv(src)...)
}
