package server

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/microbox/microbox/field"
)

// Listen makes a socket at path as the server's own (listen): the HTTP
// API's, when it is served on a Unix socket.
func Listen(path string) (*net.UnixListener, error) { return listen(path) }

// listen makes the socket, readable and writable by its owner only, in a
// directory nobody else can write: otherwise another user could put a
// socket of theirs in its place and read every caller's programs.
func listen(path string) (*net.UnixListener, error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("serve: make %s: %w", dir, err)
	}
	if err := privateDirectory(dir); err != nil {
		return nil, err
	}
	if err := removeStaleSocket(path); err != nil {
		return nil, err
	}
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("serve: listen on %s: %w", path, err)
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
		return fmt.Errorf("serve: %s is owned by uid %d with mode %o; put the socket in a directory only you (uid %d) can write",
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
		return field.Errorf("Socket", "serve: %s exists and is not a socket; remove it or choose another {Socket}", path)
	}
	if c, err := net.Dial("unix", path); err == nil {
		c.Close()
		return field.Errorf("Socket", "serve: a server already listens on %s; stop it or choose another {Socket}", path)
	}
	return os.Remove(path)
}
