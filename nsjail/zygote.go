package nsjail

// A zygote: a template interpreter, CPython started once in a jail of its
// own with the operator's preloads imported, from which each run of its
// shape is forked into a sandbox of the run's own. zygote.py is the other
// side, and says what each of its processes does. This file holds what
// asks for a zygote (Zygote, CheckZygote) and the sockets to a template
// and its children; zygote_key.go the template key, zygote_template.go
// starting and holding a template, zygote_child.go a child forked ahead
// of its run and the run in it, through the same supervisor, limits and
// verdict as a cold run.

import (
	_ "embed"
	"errors"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/microbox/microbox/field"
)

//go:embed zygote.py
var zygoteSource []byte

// The template's files, in its root: the bootstrap, and the empty file a
// child's masked /proc entries read as.
const (
	zygoteFile  = RootFilesDir + "/zygote.py"
	zygoteEmpty = RootFilesDir + "/empty"
)

// PreloadTimeout bounds how long a template may take to start and import
// its preloads.
const PreloadTimeout = time.Minute

// ZygoteChildren is how many children a template may have at once: each
// has a host uid range of its own, mapped into the template's user
// namespace when the template starts.
const ZygoteChildren = 32

// Zygote asks that a run fork from a zygote's template, where its runner
// keeps templates (a server, batch, eval): Preload are the modules the
// template imports first. Anywhere else the run starts cold.
type Zygote struct {
	Preload []string
	// Fallback starts the run cold where no template can take it (one
	// that failed to start or died, a run a fork cannot give what it
	// asks); without it, such a run fails, saying why.
	Fallback bool
	// Cold, set by CheckZygote, says why a Fallback run starts cold.
	Cold string
}

// ErrBusy is a template's answer when all of its children are in use.
var ErrBusy = fmt.Errorf("all %d of the template's children are in use", ZygoteChildren)

// CheckZygote checks that a fork of a template can run s as a cold run
// would, if s asks for a zygote: if not, a Fallback run is marked to
// start cold (Zygote.Cold), any other refused; a preload that is no
// module name is refused either way.
func (s *Spec) CheckZygote() error { return s.checkZygote(zygoteCheck) }

// checkZygote is CheckZygote with check, which validates s first
// (zygoteCheck) unless nothing changed it since it was (forkCheck).
func (s *Spec) checkZygote(check func(*Spec) error) error {
	if s.Zygote == nil {
		return nil
	}
	s.Zygote.Cold = ""
	err := check(s)
	var fe *field.Error
	switch {
	case err == nil:
		return nil
	case errors.As(err, &fe) && fe.Name == "Preload":
		return err
	case s.Zygote.Fallback:
		s.Zygote.Cold = err.Error()
		return nil
	}
	return field.Errorf("Zygote", "{Zygote}: %v ({ZygoteFallback} runs it cold instead)", err)
}

// socketpair makes a connected pair: ours non-blocking in Go's poller,
// theirs plain.
func socketpair(typ int) (*os.File, int, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, typ|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, -1, fmt.Errorf("socketpair: %w", err)
	}
	unix.SetNonblock(fds[0], true)
	return os.NewFile(uintptr(fds[0]), "zygote socket"), fds[1], nil
}

// control runs fn on f's descriptor without taking it out of Go's poller
// (f.Fd would make it blocking).
func control(f *os.File, fn func(fd int) error) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) { ferr = fn(int(fd)) }); err != nil {
		return err
	}
	return ferr
}

// readable reports, without waiting, whether f has something to read (a
// pidfd: its process has ended).
func readable(f *os.File) bool {
	ready := false
	control(f, func(fd int) error {
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, _ := unix.Poll(fds, 0)
		ready = n > 0
		return nil
	})
	return ready
}
