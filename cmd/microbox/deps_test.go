package main

import (
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/microbox/microbox/result"
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
	out, err := exec.Command(goBin, "list", "-deps", ".").Output() // the default build, bin/microbox
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

// The server build (bin/microbox-server, -tags server) has what its
// commands need: the reverse of the check above, so that the split cannot
// quietly leave serve --http or mcp out of both binaries.
func TestServerBuildDependencies(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool on PATH to list the binary's packages")
	}
	out, err := exec.Command(goBin, "list", "-deps", "-tags", "server", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps -tags server: %v", err)
	}
	deps := strings.Fields(string(out))
	for _, want := range []string{"net/http", "github.com/prometheus/client_golang/prometheus",
		"github.com/modelcontextprotocol/go-sdk/mcp", "github.com/microbox/microbox/internal/httpapi"} {
		if !slices.Contains(deps, want) {
			t.Errorf("the server build does not link %s", want)
		}
	}
}

// The default build starts the server build for serve and mcp; without
// it, one line says where it looked and how to fix it.
func TestServeNeedsTheServerBuild(t *testing.T) {
	for _, command := range []string{"serve", "mcp"} {
		cmd := exec.Command(microbox, command, "--help")
		cmd.Env = append(os.Environ(), "MICROBOX_SERVER=/nonexistent/microbox-server")
		_, errOut, code := runCmd(t, cmd)
		msg := strings.TrimSpace(string(errOut))
		if code != result.ExitSandboxError || strings.Count(msg, "\n") != 0 || !strings.Contains(msg, "/nonexistent/microbox-server") ||
			!strings.Contains(msg, "make") {
			t.Errorf("%s without the server build: exit %d, %q", command, code, msg)
		}
		out, _, code := runCmd(t, exec.Command(microbox, command, "--help"))
		if code != 0 || !strings.Contains(string(out), "microbox "+command) {
			t.Errorf("%s --help through the server build: exit %d\n%s", command, code, out)
		}
	}
}
