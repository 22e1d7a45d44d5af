package server

import (
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// requestDeadline bounds how long a client may take to send its request:
// the client sends it at once, and one that connects and sends nothing
// must not hold a goroutine and a descriptor, nor a stopping server, for
// ever.
const requestDeadline = 10 * time.Second

// runFDs is about how many descriptors one run holds in the server: its
// pipes (six, each two ends until the clone), the client's three and the
// connection, a pidfd, the run's cgroup and uid-range locks.
const runFDs = 32

// fdHeadroom counts the runs the server has taken on, to tell whether it
// has descriptors to spare for one more. Short of them, a run would fail
// in its set-up (pipe: too many open files) as a sandbox_error; the client
// is answered "run it yourself" instead, as the server's contract
// promises, before anything happens.
type fdHeadroom struct {
	mu   sync.Mutex
	runs int
	// open is the descriptors /proc/self/fd listed at counted. Listing it
	// cost as much server CPU as the rest of a served run's path to its
	// jail (about 0.15 ms with a few dozen open), and far from the limit
	// its answer cannot change the decision: see admit.
	open    int
	counted time.Time
}

// recount bounds how long a count of open descriptors stands in for a new
// one while the server is far from its limit.
const recount = time.Second

// admit takes a run on if there is room for it, counting runFDs for it and
// for each run taken on (whose descriptors may not be open yet); done
// ends it. It lists /proc/self/fd again when the last count is older than
// recount, or when that count and the runs' share come to half the limit:
// below half, what may have opened since the count (the HTTP API's
// connections and bodies, each bounded by its own ceiling) would have to
// double the count within the second to make a refusal the right answer.
func (a *fdHeadroom) admit() (done func(), ok bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	var lim unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_NOFILE, &lim) == nil {
		need := uint64(runFDs * (a.runs + 1))
		if a.counted.IsZero() || time.Since(a.counted) > recount || uint64(a.open)+need > lim.Cur/2 {
			if open, err := countOpenFDs(); err == nil {
				a.open, a.counted = open, time.Now()
			}
		}
		if uint64(a.open)+need > lim.Cur {
			return nil, false
		}
	}
	a.runs++
	return func() {
		a.mu.Lock()
		a.runs--
		a.mu.Unlock()
	}, true
}

// countOpenFDs counts this process's open descriptors.
func countOpenFDs() (int, error) {
	f, err := os.Open("/proc/self/fd")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	names, err := f.Readdirnames(-1)
	return len(names) - 1, err // less the directory's own descriptor
}

// acceptGuard keeps the accept loop from spinning, and from leaving
// clients waiting, when it cannot accept: it backs off, doubling the wait
// up to a second, logs one line per spell of errors, and when the process
// is out of descriptors uses one it keeps in reserve to take the next
// client and answer it "run it yourself" (it then runs in-process).
type acceptGuard struct {
	mu      sync.Mutex
	reserve *os.File
	wait    time.Duration
	logged  bool
}

func newAcceptGuard() *acceptGuard {
	g := &acceptGuard{}
	g.reserve, _ = os.Open(os.DevNull)
	return g
}

// failed handles an accept error: answers a waiting client if it can,
// then waits before the next accept.
func (g *acceptGuard) failed(l *net.UnixListener, err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.logged {
		fmt.Fprintf(os.Stderr, "microbox: serve: accept: %v; backing off, clients run in-process meanwhile (logged once until an accept succeeds)\n", err)
		g.logged = true
	}
	if (errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE)) && g.reserve != nil {
		g.reserve.Close()
		g.reserve = nil
		if conn, err := l.AcceptUnix(); err == nil {
			sendStatus(conn, fallback)
			conn.Close()
		}
		g.reserve, _ = os.Open(os.DevNull)
	}
	g.wait = min(max(2*g.wait, 5*time.Millisecond), time.Second)
	time.Sleep(g.wait)
}

// accepted says an accept succeeded: the spell is over.
func (g *acceptGuard) accepted() {
	g.mu.Lock()
	g.wait, g.logged = 0, false
	g.mu.Unlock()
}
