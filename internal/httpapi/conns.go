package httpapi

import (
	"context"
	"net"
	"net/http"
	"sync"

	"golang.org/x/sys/unix"
)

// Each open connection costs the server a descriptor, and descriptors
// are what a run needs to start (about runFDs each, internal/server). So
// connections are capped (MaxConns: past it, new ones wait in the
// kernel's backlog until one closes), and those that have not shown the
// token are capped lower still (MaxUnauthConns): past that cap, the
// oldest of them is closed to make room. A caller who never had the token
// can then hold neither the descriptors nor the places of those who have
// it, and the token holder's new connection is answered as soon as its
// first request arrives.

// runDescriptors is about how many descriptors one run in flight holds in
// the server (internal/server's runFDs), and reservedDescriptors those of
// the server itself (its listeners, spawner, logs, cgroups) with a margin.
const (
	runDescriptors      = 32
	reservedDescriptors = 64
	maxDefaultConns     = 4096 // each connection also costs memory
)

// DefaultMaxConns is the cap on open connections for a server whose soft
// RLIMIT_NOFILE is nofile running concurrency runs at once: half of what
// the runs and the server leave, between 16 and 4096.
func DefaultMaxConns(nofile uint64, concurrency int) int {
	spare := int64(nofile) - reservedDescriptors - int64(runDescriptors*concurrency)
	return int(min(max(spare/2, 16), maxDefaultConns))
}

// DefaultMaxUnauthConns is the lower cap for connections that have not
// authenticated: a quarter of maxConns, at least 4 (and at most
// maxConns).
func DefaultMaxUnauthConns(maxConns int) int { return min(max(maxConns/4, 4), maxConns) }

// SoftNoFile is the process's soft RLIMIT_NOFILE (Go raises it to the
// hard limit at start), or 1024 if it cannot be read.
func SoftNoFile() uint64 {
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		return 1024
	}
	return lim.Cur
}

// connGuard caps the connections that have not authenticated, closing
// the oldest past its cap; limitListener caps them all.
type connGuard struct {
	maxUnauth int
	open      bool // the API needs no token: every connection is authenticated

	mu     sync.Mutex
	unauth map[net.Conn]uint64 // unauthenticated connections, by accept order
	seq    uint64
}

func newConnGuard(maxUnauth int, open bool) *connGuard {
	return &connGuard{maxUnauth: maxUnauth, open: open, unauth: map[net.Conn]uint64{}}
}

// connKey holds a request's connection in its context.
type connKey struct{}

// install hooks the guard into srv: each connection is noted when
// accepted and forgotten when closed, and requests can reach theirs.
func (g *connGuard) install(srv *http.Server) {
	srv.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
		return context.WithValue(ctx, connKey{}, c)
	}
	srv.ConnState = func(c net.Conn, state http.ConnState) {
		switch state {
		case http.StateNew:
			g.accepted(c)
		case http.StateClosed, http.StateHijacked:
			g.forget(c)
		}
	}
}

// accepted notes a new connection as unauthenticated (unless the API
// needs no token), closing the oldest such connection if there are too
// many.
func (g *connGuard) accepted(c net.Conn) {
	if g.open {
		return
	}
	g.mu.Lock()
	var oldest net.Conn
	if len(g.unauth) >= g.maxUnauth {
		oldest = g.oldestLocked()
		delete(g.unauth, oldest)
	}
	g.seq++
	g.unauth[c] = g.seq
	g.mu.Unlock()
	if oldest != nil {
		oldest.Close()
	}
}

// oldestLocked is the unauthenticated connection accepted first; mu is
// held and there is one. A scan: the cap is small, and it runs only
// when the cap is reached.
func (g *connGuard) oldestLocked() net.Conn {
	var oldest net.Conn
	var first uint64
	for c, seq := range g.unauth {
		if oldest == nil || seq < first {
			oldest, first = c, seq
		}
	}
	return oldest
}

// authenticated says a request on r's connection carried the token: the
// connection is no longer counted against the lower cap.
func (g *connGuard) authenticated(r *http.Request) {
	if c, ok := r.Context().Value(connKey{}).(net.Conn); ok && !g.open {
		g.forget(c)
	}
}

func (g *connGuard) forget(c net.Conn) {
	g.mu.Lock()
	delete(g.unauth, c)
	g.mu.Unlock()
}
