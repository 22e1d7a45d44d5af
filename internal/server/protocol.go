package server

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/microbox/microbox/nsjail"
)

// MBX1, the protocol between the client (cmd/microbox/client.c) and the
// server: cmd/microbox/mbx1.h declares it for C, with the request's and the
// answer's shapes; these constants for Go, and clientc_test.go holds the
// two sides equal.
const (
	// SocketEnv names the server's socket, for the server and for the
	// client; set to "" it turns the client off.
	SocketEnv = "MICROBOX_SOCKET"
	// DefaultSocket is where a host's server listens (a directory only
	// root may enter).
	DefaultSocket = "/run/microbox/exec.sock"
	// magic opens every request; its last byte is the version.
	magic = "MBX1"
	// headerLen is the request's header: the magic and the body's
	// length, sent with the client's descriptors 0, 1 and 2.
	headerLen = 8
	// fallback answers a client the server will not serve: it runs
	// in-process instead.
	fallback = 0xFFFFFFFF
)

// maxRequest bounds a request: the kernel's own limit on exec arguments is
// below it.
const maxRequest = 64 << 20

// clientVariables are the variables exec reads, the only ones taken from a
// client's environment; one that ends in "_" stands for every name it
// begins. The client sends the same.
var clientVariables = []string{"MICROBOX_", "HOME", "XDG_CACHE_HOME"}

func clientVariable(name string) bool {
	for _, v := range clientVariables {
		if name == v || strings.HasSuffix(v, "_") && strings.HasPrefix(name, v) {
			return true
		}
	}
	return false
}

// A Request is one client's `microbox exec`, as received: what to run and
// the client's world to run it in.
type Request struct {
	PID  int               // the client's process
	Dir  string            // its working directory, absolute
	Args []string          // its arguments, "exec" first
	Env  map[string]string // the variables exec reads, from its environment
	// Stdin, Stdout and Stderr are the client's descriptors 0, 1 and 2,
	// the server's to close once the handler returns.
	Stdin, Stdout, Stderr *os.File
	// StdinReader reads Stdin for the run: its reads end when the run
	// does, though the client's descriptor may stay open for ever.
	StdinReader io.Reader
	// Moments are the server's own before the run (accepted, request
	// read and admitted), for the run's trace (--trace).
	Moments []nsjail.Moment
}

// Getenv is the client's value of the variable key, if exec reads it.
func (r *Request) Getenv(key string) string { return r.Env[key] }

func (r *Request) close() {
	for _, f := range []*os.File{r.Stdin, r.Stdout, r.Stderr} {
		if f != nil {
			f.Close()
		}
	}
}

// readRequest receives a request and checks that the server can run it as
// the client would have: same user, same mount namespace and root (so that
// every name means the same file).
func readRequest(conn *net.UnixConn) (*Request, error) {
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
	req := &Request{PID: int(cred.Pid)}
	header := make([]byte, headerLen)
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
	mine, err := serverView()
	if err != nil {
		return err
	}
	for i, p := range viewFiles {
		var theirs unix.Stat_t
		if err := unix.Stat(fmt.Sprintf("/proc/%d/%s", pid, p), &theirs); err != nil {
			return fmt.Errorf("client pid %d: %w", pid, err)
		}
		if mine[i] != [2]uint64{theirs.Dev, theirs.Ino} {
			return fmt.Errorf("client pid %d has another %s than the server", pid, p)
		}
	}
	return nil
}

// viewFiles are what sameFilesystemView compares: the mount namespace and
// the root directory.
var viewFiles = [...]string{"ns/mnt", "root"}

// serverView is the server's own viewFiles (device and inode), read once:
// the server never changes its mount namespace or its root.
var serverView = sync.OnceValues(func() (view [len(viewFiles)][2]uint64, err error) {
	for i, p := range viewFiles {
		var st unix.Stat_t
		if err := unix.Stat("/proc/self/"+p, &st); err != nil {
			return view, fmt.Errorf("stat /proc/self/%s: %w", p, err)
		}
		view[i] = [2]uint64{st.Dev, st.Ino}
	}
	return view, nil
})

// takeFiles keeps the three descriptors the request carries; any other
// number is refused, and every received descriptor closed.
func (r *Request) takeFiles(oob []byte) error {
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
	r.Stdin = os.NewFile(uintptr(fds[0]), "client stdin")
	r.Stdout = os.NewFile(uintptr(fds[1]), "client stdout")
	r.Stderr = os.NewFile(uintptr(fds[2]), "client stderr")
	return nil
}

// decode reads the request's body after its header.
func (r *Request) decode(conn io.Reader, header []byte) error {
	if string(header[:4]) != magic {
		return fmt.Errorf("request starts with %q, want %q (a client of another microbox version?)", header[:4], magic)
	}
	size := binary.LittleEndian.Uint32(header[4:])
	if size > maxRequest {
		return fmt.Errorf("request of %d bytes is over the limit of %d", size, maxRequest)
	}
	d := &decoder{r: bufio.NewReader(io.LimitReader(conn, int64(size))), left: int64(size)}
	r.Dir = d.str()
	r.Args = d.list()
	r.Env = map[string]string{}
	for _, e := range d.list() {
		// A name twice: its first value, which getenv reads, and so
		// the same exec in-process.
		if k, v, ok := strings.Cut(e, "="); ok && clientVariable(k) {
			if _, twice := r.Env[k]; !twice {
				r.Env[k] = v
			}
		}
	}
	switch {
	case d.err != nil:
		return fmt.Errorf("decode request: %w", d.err)
	case d.left != 0:
		return fmt.Errorf("decode request: %d bytes left over", d.left)
	case !strings.HasPrefix(r.Dir, "/"):
		return fmt.Errorf("request's working directory %q is not absolute", r.Dir)
	case len(r.Args) == 0 || r.Args[0] != "exec":
		return errors.New("request is not an exec")
	}
	return nil
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

// sendStatus answers the client: the exit status, or fallback.
func sendStatus(conn *net.UnixConn, status uint32) {
	var b [4]byte
	binary.LittleEndian.PutUint32(b[:], status)
	conn.Write(b[:])
}
