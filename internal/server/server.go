// Package server is `microbox serve`: one long-lived microbox that runs
// `microbox exec` for one-shot callers, so that a run does not pay for
// starting and stopping a Go runtime (about 8 of the 21 ms a one-shot run
// cost beyond python; BENCHMARKS.md).
//
// The caller still starts `microbox exec ...` as before. Before Go starts,
// the client in cmd/microbox/client.c connects to the server's socket and
// hands it the arguments, the working directory, the variables exec reads
// (MICROBOX_*, HOME and XDG_CACHE_HOME) and its descriptors 0, 1 and 2;
// the server runs exactly what that exec would have run (the caller's
// Handler), writes the program's output and the verdict straight to the
// caller's descriptors and sends back the exit status, which the client
// exits with. Whenever the server cannot serve a client the same way the
// client would have run itself, it answers "run it yourself" before
// anything has happened, and the client starts Go and runs in-process.
//
// Wire format (integers little-endian uint32):
//
//	client → server  "MBX1" len, with SCM_RIGHTS fds 0, 1, 2; then len bytes:
//	                 str(cwd) n str(arg)×n m str(NAME=value)×m
//	                 where str := len byte[len]; args start with "exec"
//	server → client  the exit status, or fallback; then EOF
//
// The client sends nothing after its request: EOF on the connection (the
// client died, or shut its side on SIGINT, SIGTERM or SIGHUP) ends the run
// as those signals end an in-process one.
//
// The runs themselves, in jails started ahead and torn down after the
// answer, are a Runner's (runner.go, readyjails.go, stalegroups.go), which
// another front end may share; the rest of the package is the socket and
// its protocol.
package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime/debug"
	"sync"
	"time"

	"github.com/microbox/microbox/field"
	"github.com/microbox/microbox/internal/interrupt"
	"github.com/microbox/microbox/nsjail"
	"github.com/microbox/microbox/result"
)

// A Handler runs one client's request and returns the status the client
// exits with. ctx ends when the client goes away (killed, or interrupted:
// the run is to end as an in-process one would) or the server stops; the
// request's specs run through runs, in the server's jails.
type Handler func(ctx context.Context, req *Request, runs *Session) int

// Options are a server's.
type Options struct {
	// Socket is where to listen; "" means $MICROBOX_SOCKET, else
	// DefaultSocket.
	Socket string
	// Warm is how many jails to keep started ahead of their runs
	// (NewRunner), when Runner is nil.
	Warm int
	// Runner, if set, runs the server's specs (the caller closes it once
	// Serve has returned); nil: Serve makes one of Warm jails.
	Runner *Runner
	// Handler runs each request.
	Handler Handler
	// FrontEnds are other ways in (the HTTP API), served beside the
	// socket with the same runner; they stop with it.
	FrontEnds []FrontEnd
	// IdleExit, if positive, ends the server once no client has been
	// served for this long (a socket-activated server: the socket's next
	// client starts another). Not with FrontEnds, which would end too.
	IdleExit time.Duration
}

// A FrontEnd is another way in to a server's runner (the same Runner as
// Options.Runner): Serve serves until ctx ends, then returns once the
// runs it started have ended. An error before ctx ends stops the whole
// server.
type FrontEnd interface {
	Serve(ctx context.Context) error
}

// Serve listens on the socket, and serves the front ends, until SIGTERM
// or SIGINT (or a front end's failure), then ends the runs under way and
// the ready jails, and removes the socket.
func Serve(o Options) error {
	if o.IdleExit > 0 && len(o.FrontEnds) > 0 {
		return field.Errorf("IdleExit", "serve: {IdleExit} would stop the HTTP API too; drop {IdleExit}, or serve the API from a server of its own")
	}
	runner := o.Runner
	if runner == nil {
		var err error
		if runner, err = NewRunner(o.Warm); err != nil {
			return err
		}
		defer runner.Close() // after the runs: a spawner's failure is no one's to hear
	}
	l, path, err := o.listen()
	if err != nil {
		return err
	}
	signals, stop := interrupt.Context(context.Background())
	defer stop()
	ctx, cancel := context.WithCancelCause(signals)
	defer cancel(nil)
	var frontEnds sync.WaitGroup
	for _, fe := range o.FrontEnds {
		frontEnds.Go(func() {
			if err := fe.Serve(ctx); err != nil {
				cancel(err)
			}
		})
	}
	go func() {
		<-ctx.Done()
		l.Close() // ends Accept below
	}()
	fmt.Fprintf(os.Stderr, "microbox: serving exec on %s\n", path)
	s := &server{ctx: ctx, runner: runner, handle: o.Handler}
	if o.IdleExit > 0 {
		// Closing the listener ends the accepts below; the socket's
		// queue stays the service manager's, for the next server.
		s.idle = newIdleExit(o.IdleExit, func() { l.Close() })
	}
	s.acceptUntilDone(l)
	// A second SIGTERM or ^C ends the server at once from here on: the
	// wait below is for runs ending, and Close's for jails being started
	// or closed.
	stop()
	s.conns.Wait()
	frontEnds.Wait()
	if s.idle.exited() {
		fmt.Fprintf(os.Stderr, "microbox: no client for %s: exiting\n", o.IdleExit)
	} else if err := context.Cause(ctx); signals.Err() == nil {
		return err // a front end failed
	}
	return nil
}

// listen is the socket passed by socket activation (activation.go), else
// one made at the configured path.
func (o Options) listen() (*net.UnixListener, string, error) {
	l, path, err := activatedSocket()
	if err != nil || l == nil {
		if err == nil {
			path = o.socket()
			l, err = listen(path)
		}
		return l, path, err
	}
	if o.Socket != "" && filepath.Clean(o.Socket) != path {
		l.Close()
		return nil, "", field.Errorf("Socket", "serve: {Socket} %s, but socket activation passed %s; drop {Socket} or make them the same", o.Socket, path)
	}
	return l, path, nil
}

func (o Options) socket() string {
	if o.Socket != "" {
		return o.Socket
	}
	if env := os.Getenv(SocketEnv); env != "" {
		return env
	}
	return DefaultSocket
}

// server is one Serve's listener's state.
type server struct {
	ctx      context.Context // ends at SIGTERM or SIGINT
	runner   *Runner
	handle   Handler
	idle     *idleExit // nil: the server never ends for want of clients
	conns    sync.WaitGroup
	headroom fdHeadroom // descriptors to spare for one more run
}

// acceptUntilDone serves every connection, each on its goroutine, until
// the server's context ends.
func (s *server) acceptUntilDone(l *net.UnixListener) {
	guard := newAcceptGuard()
	for {
		conn, err := l.AcceptUnix()
		if err != nil {
			if s.ctx.Err() != nil || s.idle.exited() {
				return
			}
			guard.failed(l, err)
			continue
		}
		guard.accepted()
		// Counted even if the idle exit closed the listener meanwhile:
		// the server serves it before it exits.
		s.idle.begin()
		s.conns.Add(1)
		go func() {
			defer s.conns.Done()
			defer s.idle.end()
			s.serveConn(conn)
		}()
	}
}

// readRequest reads a client's request within requestDeadline, and no
// longer than the server runs: a stopping server does not wait for a
// client that sends nothing.
func (s *server) readRequest(conn *net.UnixConn) (*Request, error) {
	conn.SetReadDeadline(time.Now().Add(requestDeadline))
	stop := context.AfterFunc(s.ctx, func() { conn.SetReadDeadline(time.Now()) })
	defer stop()
	req, err := readRequest(conn)
	conn.SetReadDeadline(time.Time{})
	return req, err
}

// serveConn serves one client: one run.
func (s *server) serveConn(conn *net.UnixConn) {
	defer conn.Close()
	// A bug in one request must not end the server, and with it every
	// other run: the client gets a sandbox error and the log the trace.
	defer func() {
		if p := recover(); p != nil {
			fmt.Fprintf(os.Stderr, "microbox: serve: panic: %v\n%s", p, debug.Stack())
			sendStatus(conn, result.ExitSandboxError)
		}
	}()
	accepted := nsjail.MomentNow("accepted")
	req, err := s.readRequest(conn)
	if err != nil {
		// Nothing has run: the client may still run in-process.
		fmt.Fprintf(os.Stderr, "microbox: serve: %v; the client runs itself\n", err)
		sendStatus(conn, fallback)
		return
	}
	admitted, ok := s.headroom.admit()
	if !ok {
		req.close()
		sendStatus(conn, fallback) // out of descriptors: the client runs in-process
		return
	}
	defer admitted()
	req.Moments = []nsjail.Moment{accepted, nsjail.MomentNow("request-read")}
	ctx, cancel := context.WithCancelCause(s.ctx)
	defer cancel(nil)
	// The client sends nothing more: a read returns when it is gone.
	go func() {
		conn.Read(make([]byte, 1))
		cancel(errors.New("the caller ended the run (microbox exec was killed or got a signal)"))
	}()
	stdin := newCancellableFile(req.Stdin)
	req.StdinReader = stdin
	runs := s.runner.Session(fmt.Sprintf("pid %d", req.PID))
	defer runs.tearDown() // also after a panic
	status := s.handle(ctx, req, runs)
	// The caller may wait for EOF on its pipes: let go of them before the
	// client exits.
	stdin.cancel()
	req.close()
	sendStatus(conn, uint32(status))
	runs.End()
}
