package helper

import (
	"bytes"
	"io"
	"slices"
	"testing"

	"github.com/microbox/microbox/nsjail"
)

// A helper keeps the run's sandbox and none of its program.
func TestOptions(t *testing.T) {
	base := nsjail.Defaults()
	base.File, base.Args, base.Env, base.Workdir = "main.py", []string{"x"}, []string{"A=B"}, "/work"
	base.HostFiles, base.Stdout, base.Trace = []nsjail.HostFile{{Host: "data"}}, io.Discard, true
	base.Memory, base.RootFS = 64<<20, "/srv/root"
	o := options(base, []byte("src"), "print(1)", "arg")
	if o.Code == nil || *o.Code != "print(1)" || o.File != "" || !slices.Equal(o.Args, []string{"arg"}) ||
		!slices.Equal(o.PythonFlags, []string{"-I", "-S"}) {
		t.Fatalf("program: code %v file %q args %v flags %v", o.Code, o.File, o.Args, o.PythonFlags)
	}
	if o.Env != nil || o.HostFiles != nil || o.Workdir != "/tmp" || o.Stdout != nil || o.Trace || !o.Capture ||
		o.Timeout != timeout {
		t.Fatalf("the program's settings leaked into the helper: %+v", o)
	}
	if o.Memory != 64<<20 || o.RootFS != "/srv/root" {
		t.Fatalf("the sandbox was not kept: memory %d root %q", o.Memory, o.RootFS)
	}
	if in, _ := io.ReadAll(o.Stdin); !bytes.Equal(in, []byte("src")) {
		t.Fatalf("stdin %q", in)
	}
}
