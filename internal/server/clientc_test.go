package server

import (
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/microbox/microbox/internal/csource"
	"github.com/microbox/microbox/result"
)

// clientSource is the client's C, which runs before Go starts, and
// clientHeader its declaration of MBX1, which Go cannot include.
const (
	clientSource = "../../cmd/microbox/client.c"
	clientHeader = "../../cmd/microbox/mbx1.h"
)

// The client and the server declare MBX1 once each, mbx1.h and
// protocol.go: a change to one side alone would send every client to the
// wrong socket, or make it misread the server's answer, at run time.
func TestClientCConstants(t *testing.T) {
	h, err := csource.Read(clientHeader)
	if err != nil {
		t.Fatal(err)
	}
	c, err := csource.Read(clientSource)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"SOCKET_ENV": SocketEnv, "DEFAULT_SOCKET": DefaultSocket, "SERVE_MAGIC": magic} {
		if got, err := h.String(name); err != nil || got != want {
			t.Errorf("mbx1.h's %s is %q (%v), the server's %q", name, got, err, want)
		}
	}
	for name, want := range map[string]int64{"SERVE_FALLBACK": fallback, "SERVE_HEADER": headerLen} {
		if got, err := h.Int(name); err != nil || got != want {
			t.Errorf("mbx1.h's %s is %d (%v), the server's %d", name, got, err, want)
		}
	}
	if got, err := c.Int("EXIT_SANDBOX_ERROR"); err != nil || got != result.ExitSandboxError {
		t.Errorf("client.c's EXIT_SANDBOX_ERROR is %d (%v), Go's %d", got, err, result.ExitSandboxError)
	}
	// Declared once: the client takes MBX1 from the header, not a copy.
	for _, name := range []string{"SOCKET_ENV", "DEFAULT_SOCKET", "SERVE_MAGIC", "SERVE_FALLBACK", "SERVE_HEADER"} {
		if v, err := c.Define(name); err == nil {
			t.Errorf("client.c defines %s (%s) again; mbx1.h declares it", name, v)
		}
	}
	if src, err := os.ReadFile(clientSource); err != nil || !strings.Contains(string(src), `#include "mbx1.h"`) {
		t.Error(`client.c does not #include "mbx1.h"`)
	}
}

// starts is one test of wanted: the prefix and the count of bytes it
// compares.
var starts = regexp.MustCompile(`starts\(e, ("(?:[^"\\]|\\.)*"), (\d+)\)`)

// The client sends the variables the server keeps: client.c's wanted
// compares NAME= for a name and a bare prefix for a family, and each count
// must be its string's length.
func TestClientSendsClientVariables(t *testing.T) {
	c, err := csource.Read(clientSource)
	if err != nil {
		t.Fatal(err)
	}
	body, err := c.Body("wanted")
	if err != nil {
		t.Fatal(err)
	}
	var sent []string
	for _, m := range starts.FindAllStringSubmatch(body, -1) {
		s, err := strconv.Unquote(m[1])
		if err != nil {
			t.Fatalf("%s: %v", m[0], err)
		}
		if n, _ := strconv.Atoi(m[2]); n != len(s) {
			t.Errorf("%s compares %d bytes of %d", m[0], n, len(s))
		}
		if name, ok := strings.CutSuffix(s, "="); ok {
			s = name
		} else if !strings.HasSuffix(s, "_") {
			t.Errorf("%s: a prefix the server cannot keep (a family of names ends in _)", m[0])
		}
		sent = append(sent, s)
	}
	slices.Sort(sent)
	kept := slices.Sorted(slices.Values(clientVariables))
	if !slices.Equal(sent, kept) {
		t.Errorf("client.c sends %q, the server keeps %q", sent, kept)
	}
}
