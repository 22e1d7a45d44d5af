package server

import (
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// encode is a request as client.c sends it: its header and its body.
func encode(magic, cwd string, args, env []string) (header, body []byte) {
	str := func(s string) {
		body = binary.LittleEndian.AppendUint32(body, uint32(len(s)))
		body = append(body, s...)
	}
	str(cwd)
	for _, list := range [][]string{args, env} {
		body = binary.LittleEndian.AppendUint32(body, uint32(len(list)))
		for _, s := range list {
			str(s)
		}
	}
	header = binary.LittleEndian.AppendUint32([]byte(magic), uint32(len(body)))
	return header, body
}

func TestDecodeRequest(t *testing.T) {
	header, body := encode(magic, "/home/u", []string{"exec", "-c", "print(1)"},
		[]string{"MICROBOX_AUDIT_LOG=a.jsonl", "HOME=/home/u", "PATH=/bin", "HOMEDIR=/x", "MICROBOX_", "XDG_CACHE_HOME=/c", "HOME=/second"})
	var r Request
	if err := r.decode(bytes.NewReader(body), header); err != nil {
		t.Fatal(err)
	}
	if r.Dir != "/home/u" || strings.Join(r.Args, " ") != "exec -c print(1)" {
		t.Errorf("dir %q args %q", r.Dir, r.Args)
	}
	// HOME twice: the first, as getenv in an in-process exec.
	want := map[string]string{"MICROBOX_AUDIT_LOG": "a.jsonl", "HOME": "/home/u", "XDG_CACHE_HOME": "/c"}
	if len(r.Env) != len(want) {
		t.Errorf("env %q, want only exec's variables %q", r.Env, want)
	}
	for k, v := range want {
		if r.Getenv(k) != v {
			t.Errorf("%s=%q, want %q", k, r.Getenv(k), v)
		}
	}
}

// Anything but a well-formed exec request is refused before it runs: the
// client then runs itself.
func TestDecodeRefuses(t *testing.T) {
	exec := []string{"exec", "-c", "1"}
	valid := func() ([]byte, []byte) { return encode(magic, "/", exec, nil) }
	for _, c := range []struct {
		name   string
		header func() ([]byte, []byte)
		want   string
	}{
		{"another version", func() ([]byte, []byte) { return encode("MBX2", "/", exec, nil) }, `starts with "MBX2"`},
		{"too large", func() ([]byte, []byte) {
			h, b := valid()
			binary.LittleEndian.PutUint32(h[4:], maxRequest+1)
			return h, b
		}, "over the limit"},
		{"cut short", func() ([]byte, []byte) { h, b := valid(); return h, b[:len(b)-1] }, "unexpected EOF"},
		{"left over", func() ([]byte, []byte) {
			h, b := encode(magic, "/", exec, nil)
			b = append(b, 0)
			binary.LittleEndian.PutUint32(h[4:], uint32(len(b)))
			return h, b
		}, "1 bytes left over"},
		{"a list longer than the body", func() ([]byte, []byte) {
			h, b := valid()
			binary.LittleEndian.PutUint32(b[4+1:], 1<<30) // the args' count, after str("/")
			return h, b
		}, "unexpected EOF"},
		{"relative directory", func() ([]byte, []byte) { return encode(magic, "home", exec, nil) }, "not absolute"},
		{"no arguments", func() ([]byte, []byte) { return encode(magic, "/", nil, nil) }, "not an exec"},
		{"another command", func() ([]byte, []byte) { return encode(magic, "/", []string{"serve"}, nil) }, "not an exec"},
	} {
		h, b := c.header()
		var r Request
		if err := r.decode(bytes.NewReader(b), h); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error with %q", c.name, err, c.want)
		}
	}
}

// socketPair is a connected server end and the client's raw descriptor.
func socketPair(t *testing.T) (*net.UnixConn, int) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	f := os.NewFile(uintptr(fds[0]), "server end")
	defer f.Close()
	conn, err := net.FileConn(f)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(); unix.Close(fds[1]) })
	return conn.(*net.UnixConn), fds[1]
}

// send sends a request as client.c does: the header with descriptors, then
// the body.
func send(t *testing.T, client int, fds []int, header, body []byte) {
	t.Helper()
	if err := unix.Sendmsg(client, header, unix.UnixRights(fds...), nil, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := unix.Write(client, body); err != nil {
		t.Fatal(err)
	}
}

// A request from this process (same user, same mount namespace and root)
// is received with its three descriptors.
func TestReadRequest(t *testing.T) {
	conn, client := socketPair(t)
	h, b := encode(magic, "/tmp", []string{"exec", "x.py"}, []string{"HOME=/root"})
	send(t, client, []int{0, 1, 2}, h, b)
	req, err := readRequest(conn)
	if err != nil {
		t.Fatal(err)
	}
	defer req.close()
	if req.PID != os.Getpid() || req.Dir != "/tmp" || req.Getenv("HOME") != "/root" {
		t.Errorf("request %+v", req)
	}
	for i, f := range []*os.File{req.Stdin, req.Stdout, req.Stderr} {
		var mine, theirs unix.Stat_t
		if err := unix.Fstat(i, &mine); err != nil || unix.Fstat(int(f.Fd()), &theirs) != nil || mine.Ino != theirs.Ino || mine.Dev != theirs.Dev {
			t.Errorf("descriptor %d is not the client's", i)
		}
	}
}

// A request carries exactly three descriptors; the ones of a refused
// request are closed.
func TestReadRequestDescriptors(t *testing.T) {
	conn, client := socketPair(t)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	r.SetReadDeadline(time.Now().Add(10 * time.Second))
	h, b := encode(magic, "/", []string{"exec"}, nil)
	send(t, client, []int{0, int(w.Fd())}, h, b)
	w.Close()
	if _, err := readRequest(conn); err == nil || !strings.Contains(err.Error(), "2 descriptors, want 3") {
		t.Fatalf("%v, want a refusal of 2 descriptors", err)
	}
	// The server's copy of the write end is closed: the pipe has no writer.
	if _, err := r.Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("read: %v, want EOF: a received descriptor stayed open", err)
	}
}
