package server

import (
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/microbox/microbox/internal/csource"
	"github.com/microbox/microbox/result"
)

// clientSource is the client's C, which runs before Go starts and shares
// no header with this package.
const clientSource = "../../cmd/microbox/client.c"

// The client and the server write down the same constants: a change to one
// side alone would send every client to the wrong socket, or make it
// misread the server's answer, at run time.
func TestClientCConstants(t *testing.T) {
	c, err := csource.Read(clientSource)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"SOCKET_ENV": SocketEnv, "DEFAULT_SOCKET": DefaultSocket, "SERVE_MAGIC": magic} {
		if got, err := c.String(name); err != nil || got != want {
			t.Errorf("client.c's %s is %q (%v), the server's %q", name, got, err, want)
		}
	}
	for name, want := range map[string]int64{"SERVE_FALLBACK": fallback, "EXIT_SANDBOX_ERROR": result.ExitSandboxError} {
		if got, err := c.Int(name); err != nil || got != want {
			t.Errorf("client.c's %s is %d (%v), Go's %d", name, got, err, want)
		}
	}
}

// strncmp is one test of wanted: the prefix and the count of bytes it
// compares.
var strncmp = regexp.MustCompile(`strncmp\(e, ("(?:[^"\\]|\\.)*"), (\d+)\)`)

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
	for _, m := range strncmp.FindAllStringSubmatch(body, -1) {
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
