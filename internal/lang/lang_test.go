package lang

import (
	"slices"
	"strings"
	"testing"
)

// Names and aliases, in any case, find their language; "" is Python; an
// unknown name is refused with the names there are.
func TestLookup(t *testing.T) {
	for name, want := range map[string]string{"": "python", "PY": "python", "c": "c", "C++": "cpp",
		"cxx": "cpp", "nodejs": "node", "js": "node", "JavaScript": "node", "sh": "bash"} {
		if l, err := Lookup(name); err != nil || l.Name != want {
			t.Errorf("Lookup(%q) = %v, %v; want %s", name, l, err, want)
		}
	}
	if _, err := Lookup("cobol"); err == nil || !strings.Contains(err.Error(), "python, c, cpp, bash, node") {
		t.Errorf("Lookup(cobol): %v", err)
	}
}

// A compiled language's compile step runs its compiler through the shell
// that hands the binary out on stdout; the source comes before the
// libraries, which the linker takes after the objects that need them.
func TestCompileStep(t *testing.T) {
	l, _ := Lookup("cpp")
	argv := l.CompileStep("/tmp/x.cc")
	if argv[0] != CompileShell || !slices.Contains(argv, "/usr/bin/g++") {
		t.Fatalf("CompileStep = %q", argv)
	}
	src, lm := slices.Index(argv, "/tmp/x.cc"), slices.Index(argv, "-lm")
	if src < 0 || lm < src {
		t.Errorf("CompileStep = %q: the source must come before -lm", argv)
	}
	if py, _ := Lookup("python"); py.Compiled() || len(py.Tools()) != 0 {
		t.Errorf("python is compiled or has tools: %+v", py)
	}
}
