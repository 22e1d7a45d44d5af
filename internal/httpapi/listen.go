package httpapi

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"net"
	"os"
	"strings"

	"github.com/microbox/microbox/field"
	"github.com/microbox/microbox/internal/server"
)

// UnixPrefix marks an address that is a Unix socket's path.
const UnixPrefix = "unix:"

// Listen opens the API's listener: a Unix socket (unix:PATH), made as the
// exec socket is (mode 0600 in a directory only the server's user may
// write), or TCP. A TCP address that is not loopback is refused without a
// token: the API runs code for whoever reaches it. token is the bearer
// token every request but /healthz must carry ("" for none).
func Listen(addr, token string) (net.Listener, error) {
	if path, ok := strings.CutPrefix(addr, UnixPrefix); ok {
		if !strings.HasPrefix(path, "/") {
			return nil, field.Errorf("HTTP", "{HTTP} %s: give the socket's absolute path, unix:/run/microbox/http.sock", addr)
		}
		return server.Listen(path)
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, field.Errorf("HTTP", "{HTTP} %q: give HOST:PORT, e.g. 127.0.0.1:8080, or unix:PATH", addr)
	}
	if !loopback(host) && token == "" {
		return nil, field.Errorf("HTTP", "{HTTP} %s can be reached from other hosts: give {HTTPTokenFile} FILE (a bearer token every request must carry), or listen on 127.0.0.1", addr)
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, field.Errorf("HTTP", "{HTTP} %s: %v", addr, err)
	}
	return l, nil
}

// loopback reports whether host names this machine's loopback only.
func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// ReadToken reads the bearer token from file: its contents less the
// surrounding white space. A file others may read is refused, as a
// secret that is not one.
func ReadToken(file string) (string, error) {
	fi, err := os.Stat(file)
	if err != nil {
		return "", field.Errorf("HTTPTokenFile", "{HTTPTokenFile} %s: %v", file, err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return "", field.Errorf("HTTPTokenFile", "{HTTPTokenFile} %s has mode %o: make it readable by its owner only (chmod 600)", file, fi.Mode().Perm())
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return "", field.Errorf("HTTPTokenFile", "{HTTPTokenFile} %s: %v", file, err)
	}
	token := strings.TrimSpace(string(data))
	if len(token) < 16 || strings.ContainsAny(token, " \t\r\n") {
		return "", field.Errorf("HTTPTokenFile", "{HTTPTokenFile} %s: the token must be one word of at least 16 characters (e.g. from openssl rand -hex 32)", file)
	}
	return token, nil
}

// tokenCheck compares a request's bearer token with the server's in
// constant time: both are hashed first, so neither the length nor any
// prefix of the token shows in how long a refusal takes.
type tokenCheck struct{ want [sha256.Size]byte }

func newTokenCheck(token string) *tokenCheck {
	if token == "" {
		return nil
	}
	return &tokenCheck{want: sha256.Sum256([]byte(token))}
}

func (c *tokenCheck) allows(header string) bool {
	got, ok := strings.CutPrefix(header, "Bearer ")
	sum := sha256.Sum256([]byte(got))
	return subtle.ConstantTimeCompare(sum[:], c.want[:]) == 1 && ok
}

// describe says where the API listens (the port chosen, for :0) and who
// may use it, for the server's log.
func describe(l net.Listener, c *tokenCheck) string {
	addr := l.Addr().String()
	switch {
	case l.Addr().Network() == "unix":
		return fmt.Sprintf("unix:%s (its owner only)", addr)
	case c != nil:
		return "http://" + addr + " (bearer token required)"
	}
	return "http://" + addr + " (loopback, no token: every local user may run code)"
}
