package seccomp

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"runtime"
	"testing"

	libseccomp "github.com/seccomp/libseccomp-golang"
)

var update = flag.Bool("update", false, "rewrite default_amd64.bpf from Default().Compile()")

const embeddedFile = "default_amd64.bpf"

// compilerOfRecord is the libseccomp that produces default_amd64.bpf
// (Debian 12's libseccomp2 2.5.4-1+deb12u1). Another release may compile
// the same policy to other bytes, if only because it knows other syscall
// names.
const compilerOfRecord = "2.5.4"

// TestEmbeddedDefault is the golden-file test of the precompiled default
// filter: the shipped bytes must be what libseccomp compiles from
// Default() now. With -update it rewrites the file instead.
func TestEmbeddedDefault(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skipf("no precompiled default filter for %s: Program compiles it at run time", runtime.GOARCH)
	}
	want, err := Default().Compile()
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile(embeddedFile, want, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s: %s, %d BPF instructions, libseccomp %s; rebuild to embed it",
			embeddedFile, PolicyVersion, len(want)/8, libseccompVersion())
		return
	}
	if !bytes.Equal(embeddedDefault, want) {
		note := ""
		if v := libseccompVersion(); v != compilerOfRecord {
			note = fmt.Sprintf("\nNote: this host's libseccomp is %s, not the compiler of record %s (Debian 12): "+
				"the difference may be the compiler's, not the policy's; regenerate on the compiler of record.", v, compilerOfRecord)
		}
		t.Fatalf("%s (%d instructions) differs from Default().Compile() (%d instructions, libseccomp %s).\n"+
			"If the policy changed, bump PolicyVersion; then rerun with -update:\n"+
			"\tgo test ./seccomp -run TestEmbeddedDefault -update%s",
			embeddedFile, len(embeddedDefault)/8, len(want)/8, libseccompVersion(), note)
	}
	got, err := Program(ModeDefault, "")
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("Program(ModeDefault) = %d bytes, %v; want the embedded filter", len(got), err)
	}
	got[0] ^= 0xff // callers get a copy
	if embeddedDefault[0] == got[0] {
		t.Fatal("Program(ModeDefault) returned the embedded bytes themselves, not a copy")
	}
}

func libseccompVersion() string {
	major, minor, micro := libseccomp.GetLibraryVersion()
	return fmt.Sprintf("%d.%d.%d", major, minor, micro)
}

func TestProgramModes(t *testing.T) {
	if prog, err := Program(ModeOff, ""); prog != nil || err != nil {
		t.Errorf("Program(off) = %d bytes, %v; want no filter", len(prog), err)
	}
	logged, err := Default().Log().Compile()
	if err != nil {
		t.Fatal(err)
	}
	if prog, err := Program(ModeLog, ""); err != nil || !bytes.Equal(prog, logged) {
		t.Errorf("Program(log) = %d bytes, %v; want Default().Log() compiled", len(prog), err)
	}
	if prog, err := Program(ModeProfile, "testdata/deny-getpid.json"); err != nil || len(prog) == 0 {
		t.Errorf("Program(profile) = %d bytes, %v", len(prog), err)
	}
	_, err = Program(ModeProfile, "testdata/no-such-profile.json")
	if _, ok := err.(*ProfileError); !ok {
		t.Errorf("a missing profile gives %T %v, want a *ProfileError", err, err)
	}
}

// BenchmarkProgramDefault is what a run pays for its filter now.
func BenchmarkProgramDefault(b *testing.B) {
	for b.Loop() {
		if _, err := Program(ModeDefault, ""); err != nil {
			b.Fatal(err)
		}
	}
}

// TestPolicyVersionDocumented: the security document names the default
// policy's version, so that users can tell which policy their runs had.
func TestPolicyVersionDocumented(t *testing.T) {
	doc, err := os.ReadFile("../docs/security.md")
	if err != nil {
		t.Skipf("no docs/security.md: %v", err)
	}
	if !bytes.Contains(doc, []byte("`"+PolicyVersion+"`")) {
		t.Errorf("docs/security.md does not name the default policy's version %s: update its System-call filter section", PolicyVersion)
	}
}
