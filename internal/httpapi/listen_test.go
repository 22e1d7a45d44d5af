package httpapi

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/microbox/microbox/field"
)

func TestTokenCheck(t *testing.T) {
	c := newTokenCheck("0123456789abcdef")
	for header, want := range map[string]bool{
		"Bearer 0123456789abcdef": true, "Bearer 0123456789abcde": false, "0123456789abcdef": false,
		"": false, "Bearer ": false, "Basic 0123456789abcdef": false,
	} {
		if got := c.allows(header); got != want {
			t.Errorf("%q: %v, want %v", header, got, want)
		}
	}
	if newTokenCheck("") != nil {
		t.Error("an empty token checks something")
	}
}

// A non-loopback address needs a token; names in errors are fields.
func TestListenRefusals(t *testing.T) {
	for addr, want := range map[string]string{
		"0.0.0.0:0": "{HTTPTokenFile}", "[::]:0": "{HTTPTokenFile}", "example:80": "{HTTPTokenFile}",
		"8080": "HOST:PORT", "unix:relative.sock": "absolute path",
	} {
		_, err := Listen(addr, "")
		if err == nil || !field.Is(err) || !strings.Contains(field.Message(err, func(f string) string { return "{" + f + "}" }), want) {
			t.Errorf("%s: %v, want a field error with %s", addr, err, want)
		}
	}
	for _, host := range []string{"127.0.0.1", "::1", "localhost", "127.0.0.2"} {
		if !loopback(host) {
			t.Errorf("%s is not loopback", host)
		}
	}
	if loopback("10.0.0.1") || loopback("0.0.0.0") {
		t.Error("a routable address counted as loopback")
	}
}

func TestReadToken(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "t")
	os.WriteFile(file, []byte("  0123456789abcdef0123\n"), 0o600)
	if tok, err := ReadToken(file); err != nil || tok != "0123456789abcdef0123" {
		t.Errorf("%q %v", tok, err)
	}
	os.Chmod(file, 0o640)
	if _, err := ReadToken(file); err == nil {
		t.Error("a group-readable token file was accepted")
	}
	os.WriteFile(file, []byte("short"), 0o600)
	os.Chmod(file, 0o600)
	if _, err := ReadToken(file); err == nil {
		t.Error("a short token was accepted")
	}
}
