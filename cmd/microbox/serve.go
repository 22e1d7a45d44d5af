package main

// `microbox serve`: one long-lived microbox that runs `microbox exec` for
// one-shot callers, so that a run does not pay for starting and stopping a
// Go runtime (about 8 of the 21 ms a one-shot run cost beyond python;
// BENCHMARKS.md).
//
// The caller still starts `microbox exec ...` as before. Before Go starts,
// the client in client.c connects to the server's socket and hands it the
// arguments, the working directory, the variables exec reads (MICROBOX_*,
// HOME and XDG_CACHE_HOME) and its descriptors 0, 1 and 2; the server runs exactly what that exec would have
// run, writes the program's output and the verdict straight to the
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
//	server → client  the exit status, or serveFallback; then EOF
//
// The client sends nothing after its request: EOF on the connection (the
// client died, or shut its side on SIGINT, SIGTERM or SIGHUP) ends the run
// as those signals end an in-process one.

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/microbox/microbox/internal/interrupt"
	"github.com/microbox/microbox/nsjail"
	"github.com/microbox/microbox/result"
)

const (
	// socketEnv names the server's socket, for `microbox serve` and for
	// the client; set to "" it turns the client off.
	socketEnv = "MICROBOX_SOCKET"
	// defaultSocket is where a host's server listens (a directory only
	// root may enter).
	defaultSocket = "/run/microbox/exec.sock"
	// serveMagic opens every request; its last byte is the version.
	serveMagic = "MBX1"
	// serveFallback answers a client the server will not serve: it runs
	// in-process instead. client.c has the same value.
	serveFallback = 0xFFFFFFFF
	// maxRequest bounds a request: the kernel's own limit on exec
	// arguments is below it.
	maxRequest = 64 << 20
)

func serveCommand(*invocation) *cobra.Command {
	var socket string
	var warm int
	c := &cobra.Command{
		Use:   "serve [--socket PATH]",
		Short: "Run exec for one-shot callers without a Go start per run",
		Long: `Listen on a Unix socket and run ` + "`microbox exec`" + ` for callers of the same
user, who keep calling ` + "`microbox exec`" + ` as before: when the socket exists, exec
hands its run to this server instead of starting Go (about 9 ms less per run
in BENCHMARKS.md). The server also keeps --warm jails started ahead in the
shape of the last run (its cgroup limits and mounts; fresh namespaces, cgroup
and mounts, each used for one run only), which takes about 3 ms more off a
run, and it answers before the jail's teardown. Runs, limits and results are
exactly those of an in-process exec; run cgroups are made under the server's
cgroup. SIGTERM or SIGINT stop the server and the runs it has under way, and
it waits for the jails it is starting to end too; a second signal ends it at
once.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if socket == "" {
				socket = os.Getenv(socketEnv)
			}
			if socket == "" {
				socket = defaultSocket
			}
			if warm < 0 {
				return usagef("--warm %d: give 0 or more jails", warm)
			}
			// The server's own work is a small part of a run's CPU time
			// (BENCHMARKS.md): a quarter of the CPUs is ample, and fewer
			// of Go's processors mean fewer threads woken and less of the
			// runtime's polling per run (measured on 2 CPUs: 12% less of
			// the server's CPU time per run with one). $GOMAXPROCS wins.
			if os.Getenv("GOMAXPROCS") == "" {
				runtime.GOMAXPROCS(max(1, runtime.GOMAXPROCS(0)/4))
			}
			// Started here, on a goroutine no one locks to its thread:
			// the jails' parent-death signal follows that thread.
			sp, err := nsjail.NewSpawner()
			if err != nil {
				return err
			}
			defer sp.Close()
			return serve(socket, newWarmPool(warm, sp))
		},
	}
	c.Flags().StringVar(&socket, "socket", "", "socket to listen on (default: $"+socketEnv+", else "+defaultSocket+")")
	c.Flags().IntVar(&warm, "warm", runtime.NumCPU(), "jails to keep started ahead of their runs (0: start each run's jail when it comes)")
	return c
}

// serve listens on path until SIGTERM or SIGINT, then ends the runs under
// way and the ready jails, and removes the socket.
func serve(path string, jails *warmPool) error {
	l, err := listen(path)
	if err != nil {
		return err
	}
	ctx, stop := interrupt.Context(context.Background())
	defer stop()
	go func() {
		<-ctx.Done()
		l.Close() // ends Accept below
	}()
	fmt.Fprintf(os.Stderr, "microbox: serving exec on %s\n", path)
	var runs sync.WaitGroup
	staleGroups := &staleGroupsGC{}
	for {
		conn, err := l.AcceptUnix()
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			// Out of descriptors, say: a client falls back while this lasts.
			fmt.Fprintf(os.Stderr, "microbox: accept: %v\n", err)
			continue
		}
		runs.Add(1)
		go func() {
			defer runs.Done()
			serveConn(ctx, conn, jails, staleGroups)
		}()
	}
	// A second SIGTERM or ^C ends the server at once from here on: the
	// wait below is for runs ending and jails being started or closed.
	stop()
	runs.Wait()
	jails.close()
	return nil
}

// listen makes the socket, readable and writable by its owner only, in a
// directory nobody else can write: otherwise another user could put a
// socket of theirs in its place and read every caller's programs.
func listen(path string) (*net.UnixListener, error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, usagef("serve: make %s: %v", dir, err)
	}
	if err := privateDirectory(dir); err != nil {
		return nil, err
	}
	if err := removeStaleSocket(path); err != nil {
		return nil, err
	}
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, usagef("serve: listen on %s: %v", path, err)
	}
	l.SetUnlinkOnClose(true)
	if err := os.Chmod(path, 0o600); err != nil {
		l.Close()
		return nil, fmt.Errorf("serve: chmod %s: %w", path, err)
	}
	return l, nil
}

// privateDirectory refuses a socket directory that another user owns or
// may write.
func privateDirectory(dir string) error {
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		return fmt.Errorf("serve: stat %s: %w", dir, err)
	}
	if int(st.Uid) != os.Geteuid() || st.Mode&0o022 != 0 {
		return usagef("serve: %s is owned by uid %d with mode %o; put the socket in a directory only you (uid %d) can write",
			dir, st.Uid, st.Mode&0o7777, os.Geteuid())
	}
	return nil
}

// removeStaleSocket removes a socket left by a server that was killed, and
// refuses to take over a live one or anything that is not a socket.
func removeStaleSocket(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	if fi.Mode()&os.ModeSocket == 0 {
		return usagef("serve: %s exists and is not a socket; remove it or choose another --socket", path)
	}
	if c, err := net.Dial("unix", path); err == nil {
		c.Close()
		return usagef("serve: a server already listens on %s; stop it or choose another --socket", path)
	}
	return os.Remove(path)
}

// serveConn serves one client: one run.
func serveConn(server context.Context, conn *net.UnixConn, jails *warmPool, staleGroups *staleGroupsGC) {
	defer conn.Close()
	// A bug in one request must not end the server, and with it every
	// other run: the client gets a sandbox error and the log the trace.
	defer func() {
		if p := recover(); p != nil {
			fmt.Fprintf(os.Stderr, "microbox: serve: panic: %v\n%s", p, debug.Stack())
			sendStatus(conn, result.ExitSandboxError)
		}
	}()
	req, err := readRequest(conn)
	if err != nil {
		// Nothing has run: the client may still run in-process.
		fmt.Fprintf(os.Stderr, "microbox: serve: %v; the client runs itself\n", err)
		sendStatus(conn, serveFallback)
		return
	}
	ctx, cancel := context.WithCancelCause(server)
	defer cancel(nil)
	// The client sends nothing more: a read returns when it is gone.
	go func() {
		conn.Read(make([]byte, 1))
		cancel(errors.New("the caller ended the run (microbox exec was killed or got a signal)"))
	}()
	stdin := newCancellableFile(req.stdin)
	inv := &invocation{
		stdin: req.stdin, stdinReader: stdin, stdout: req.stdout, stderr: req.stderr,
		dir: req.cwd, clientPID: req.pid, getenv: req.getenv, ctx: ctx, jails: jails,
		staleGroups: staleGroups,
	}
	defer inv.tearDown() // also after a panic
	status := inv.run(req.args, []*cobra.Command{execCommand(inv)})
	// The caller may wait for EOF on its pipes: let go of them before the
	// client exits.
	stdin.cancel()
	req.close()
	sendStatus(conn, uint32(status))
	inv.tearDown()
	jails.refill()
}

// request is one client's exec, as received.
type request struct {
	pid                   int
	cwd                   string
	args                  []string
	env                   map[string]string
	stdin, stdout, stderr *os.File
}

func (r *request) getenv(key string) string { return r.env[key] }

func (r *request) close() {
	for _, f := range []*os.File{r.stdin, r.stdout, r.stderr} {
		if f != nil {
			f.Close()
		}
	}
}

// readRequest receives a request and checks that the server can run it as
// the client would have: same user, same mount namespace and root (so that
// every name means the same file).
func readRequest(conn *net.UnixConn) (*request, error) {
	cred, err := peerCred(conn)
	if err != nil {
		return nil, err
	}
	if int(cred.Uid) != os.Geteuid() {
		return nil, fmt.Errorf("client pid %d is uid %d, the server uid %d", cred.Pid, cred.Uid, os.Geteuid())
	}
	if err := sameFilesystemView(int(cred.Pid)); err != nil {
		return nil, err
	}
	req := &request{pid: int(cred.Pid)}
	header := make([]byte, 8)
	oob := make([]byte, unix.CmsgSpace(4*4)) // room to see a fourth fd
	n, oobn, _, _, err := conn.ReadMsgUnix(header, oob)
	if err != nil {
		return nil, fmt.Errorf("read request: %w", err)
	}
	if err := req.takeFiles(oob[:oobn]); err != nil {
		return nil, err
	}
	if _, err := io.ReadFull(conn, header[n:]); err != nil {
		req.close()
		return nil, fmt.Errorf("read request: %w", err)
	}
	if err := req.decode(conn, header); err != nil {
		req.close()
		return nil, err
	}
	return req, nil
}

func peerCred(conn *net.UnixConn) (*unix.Ucred, error) {
	raw, err := conn.SyscallConn()
	if err != nil {
		return nil, err
	}
	var cred *unix.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return nil, err
	}
	if credErr != nil {
		return nil, fmt.Errorf("peer credentials: %w", credErr)
	}
	return cred, nil
}

// sameFilesystemView checks that pid sees the server's mount namespace and
// root: a client in a container or chroot names other files.
func sameFilesystemView(pid int) error {
	for _, p := range []string{"ns/mnt", "root"} {
		var mine, theirs unix.Stat_t
		if err := unix.Stat("/proc/self/"+p, &mine); err != nil {
			return fmt.Errorf("stat /proc/self/%s: %w", p, err)
		}
		if err := unix.Stat(fmt.Sprintf("/proc/%d/%s", pid, p), &theirs); err != nil {
			return fmt.Errorf("client pid %d: %w", pid, err)
		}
		if mine.Dev != theirs.Dev || mine.Ino != theirs.Ino {
			return fmt.Errorf("client pid %d has another %s than the server", pid, p)
		}
	}
	return nil
}

// takeFiles keeps the three descriptors the request carries; any other
// number is refused, and every received descriptor closed.
func (r *request) takeFiles(oob []byte) error {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return fmt.Errorf("read request's descriptors: %w", err)
	}
	var fds []int
	for _, m := range msgs {
		got, err := unix.ParseUnixRights(&m)
		if err == nil {
			fds = append(fds, got...)
		}
	}
	if len(fds) != 3 {
		for _, fd := range fds {
			unix.Close(fd)
		}
		return fmt.Errorf("request carries %d descriptors, want 3", len(fds))
	}
	for _, fd := range fds {
		unix.CloseOnExec(fd)
	}
	r.stdin = os.NewFile(uintptr(fds[0]), "client stdin")
	r.stdout = os.NewFile(uintptr(fds[1]), "client stdout")
	r.stderr = os.NewFile(uintptr(fds[2]), "client stderr")
	return nil
}

// decode reads the request's body after its header.
func (r *request) decode(conn io.Reader, header []byte) error {
	if string(header[:4]) != serveMagic {
		return fmt.Errorf("request starts with %q, want %q (a client of another microbox version?)", header[:4], serveMagic)
	}
	size := binary.LittleEndian.Uint32(header[4:])
	if size > maxRequest {
		return fmt.Errorf("request of %d bytes is over the limit of %d", size, maxRequest)
	}
	d := &decoder{r: bufio.NewReader(io.LimitReader(conn, int64(size))), left: int64(size)}
	r.cwd = d.str()
	r.args = d.list()
	r.env = map[string]string{}
	for _, e := range d.list() {
		if k, v, ok := strings.Cut(e, "="); ok && clientVariable(k) {
			r.env[k] = v
		}
	}
	switch {
	case d.err != nil:
		return fmt.Errorf("decode request: %w", d.err)
	case d.left != 0:
		return fmt.Errorf("decode request: %d bytes left over", d.left)
	case !strings.HasPrefix(r.cwd, "/"):
		return fmt.Errorf("request's working directory %q is not absolute", r.cwd)
	case len(r.args) == 0 || r.args[0] != "exec":
		return errors.New("request is not an exec")
	}
	return nil
}

// clientVariable reports whether exec reads the variable name: only those
// are taken from a client's environment. client.c sends the same.
func clientVariable(name string) bool {
	return strings.HasPrefix(name, "MICROBOX_") || name == "HOME" || name == "XDG_CACHE_HOME"
}

// decoder reads the request body's integers and strings, remembering the
// first error.
type decoder struct {
	r    *bufio.Reader
	left int64
	err  error
}

func (d *decoder) u32() uint32 {
	var b [4]byte
	if d.err == nil {
		_, d.err = io.ReadFull(d.r, b[:])
		d.left -= 4
	}
	return binary.LittleEndian.Uint32(b[:])
}

func (d *decoder) str() string {
	n := int64(d.u32())
	if d.err != nil || n > d.left {
		if d.err == nil {
			d.err = io.ErrUnexpectedEOF
		}
		return ""
	}
	b := make([]byte, n)
	_, d.err = io.ReadFull(d.r, b)
	d.left -= n
	return string(b)
}

func (d *decoder) list() []string {
	n := int64(d.u32())
	if n > d.left/4 { // each string takes at least its length
		if d.err == nil {
			d.err = io.ErrUnexpectedEOF
		}
		return nil
	}
	out := make([]string, 0, n)
	for i := int64(0); i < n && d.err == nil; i++ {
		out = append(out, d.str())
	}
	return out
}

func sendStatus(conn *net.UnixConn, status uint32) {
	var b [4]byte
	binary.LittleEndian.PutUint32(b[:], status)
	conn.Write(b[:])
}

// cancellableFile reads a client's stdin for the run: the descriptor is
// the caller's and may stay open, unread, long after the run (a terminal,
// a pipe the caller never closes), so a read must be ended by the server
// rather than block a thread for ever. The file is left in blocking mode:
// its flags are shared with the caller.
type cancellableFile struct {
	f    *os.File
	stop *os.File // closed (write end) by cancel
	r    *os.File
}

func newCancellableFile(f *os.File) *cancellableFile {
	r, w, err := os.Pipe()
	if err != nil {
		return &cancellableFile{f: f}
	}
	return &cancellableFile{f: f, stop: w, r: r}
}

func (c *cancellableFile) Read(p []byte) (int, error) {
	if c.r == nil {
		return c.f.Read(p)
	}
	fds := []unix.PollFd{{Fd: int32(c.f.Fd()), Events: unix.POLLIN}, {Fd: int32(c.r.Fd()), Events: unix.POLLIN}}
	for {
		_, err := unix.Poll(fds, -1)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return 0, err
		}
		if fds[1].Revents != 0 {
			return 0, io.EOF // the run is over
		}
		return c.f.Read(p)
	}
}

// cancel ends every read, present and future. The pipe's read end is
// left to its finalizer: a copying goroutine of os/exec may still be
// about to poll it.
func (c *cancellableFile) cancel() {
	if c.stop != nil {
		c.stop.Close()
	}
}
