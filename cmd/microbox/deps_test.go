package main

import (
	"os/exec"
	"strings"
	"testing"
)

// Every package linked into microbox runs its initialisation at every
// start, so at every `microbox exec`. These were measured to cost
// milliseconds each (BENCHMARKS.md, "What changed the one-shot cost") and
// were taken out; this keeps them out, including through a new
// dependency's own imports.
func TestNoHeavyStartupDependencies(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool on PATH to list the binary's packages")
	}
	out, err := exec.Command(goBin, "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	heavy := []string{
		"net/http",                   // TLS, HTTP/2 tables, x509
		"google.golang.org/protobuf", // descriptor registration
		"github.com/cilium/ebpf",
		"github.com/godbus/dbus",
		"github.com/containerd/cgroups",
		"github.com/google/go-containerregistry",
		"github.com/klauspost/compress",
		"github.com/schollz/progressbar",
	}
	for _, pkg := range strings.Fields(string(out)) {
		for _, h := range heavy {
			if pkg == h || strings.HasPrefix(pkg, h+"/") {
				t.Errorf("microbox links %s: its package initialisation would slow every start (measure it; see BENCHMARKS.md)", pkg)
			}
		}
	}
}
