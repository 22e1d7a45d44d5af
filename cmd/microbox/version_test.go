package main

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// TestVersionFlag: `microbox --version` prints the version and commit
// stamped at build time (-ldflags -X main.version=... -X main.commit=...)
// and exits 0.
func TestVersionFlag(t *testing.T) {
	defer func(v, c string) { version, commit = v, c }(version, commit)
	version, commit = "v1.2.3-4-gabcdef0-dirty", "abcdef0"
	for _, arg := range []string{"--version", "-v"} {
		out, err := os.CreateTemp(t.TempDir(), "stdout")
		if err != nil {
			t.Fatal(err)
		}
		inv := &invocation{stdin: os.Stdin, stdout: out, stderr: out, getenv: os.Getenv}
		args := []string{arg}
		if status := inv.run(args, subcommands(inv, args)); status != 0 {
			t.Errorf("microbox %s: exit status %d, want 0", arg, status)
		}
		got, _ := os.ReadFile(out.Name())
		if want := "microbox version v1.2.3-4-gabcdef0-dirty (commit abcdef0)\n"; string(got) != want {
			t.Errorf("microbox %s printed %q, want %q", arg, got, want)
		}
	}
}

// TestVersionUnstamped: a binary built without -X (go build, as the test
// suite builds it) says "dev" and the commit Go's VCS stamp gives, or
// "unknown".
func TestVersionUnstamped(t *testing.T) {
	out, err := exec.Command(microbox, "--version").CombinedOutput()
	if err != nil {
		t.Fatalf("microbox --version: %v\n%s", err, out)
	}
	if !regexp.MustCompile(`^microbox version dev \(commit ([0-9a-f]{7}(-dirty)?|unknown)\)\n$`).Match(out) {
		t.Errorf("microbox --version printed %q", out)
	}
	if strings.Contains(string(out), "Usage") {
		t.Errorf("--version printed the usage: %q", out)
	}
}
