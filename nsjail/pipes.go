package nsjail

import (
	"bufio"
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// pipes are the descriptors between supervisor and PID 1: ours, in Go's
// poller, and PID 1's, plain descriptors that only pass through to the
// spawner (an os.File would register each with the poller and take it out
// again, system calls for nothing).
type pipes struct {
	inW, outR, errR *os.File      // the program's stdin, stdout and stderr
	planW           *os.File      // the plan, to PID 1's planFD
	statusR         *os.File      // status lines, from PID 1's statusFD
	syncW           *os.File      // go, to PID 1's syncFD (a socket: the go carries descriptors); kept open until the teardown
	control         *os.File      // a zygote template's or a held run's control socket, its fd 0 (instead of inW)
	jail            [spawnFDs]int // PID 1's ends, its fds 0 to 5 in order; -1 once closed
}

func newPipes() (*pipes, error) {
	p := &pipes{}
	ours := [spawnFDs]**os.File{0: &p.inW, 1: &p.outR, 2: &p.errR, planFD: &p.planW, statusFD: &p.statusR}
	jailReads := [spawnFDs]bool{0: true, planFD: true}
	for i := range p.jail {
		p.jail[i] = -1
	}
	var err error
	if p.syncW, p.jail[syncFD], err = socketpair(unix.SOCK_SEQPACKET); err != nil {
		return nil, err
	}
	for i := range p.jail {
		if i == syncFD {
			continue
		}
		var fds [2]int
		if err := unix.Pipe2(fds[:], unix.O_CLOEXEC); err != nil {
			p.closeAll()
			return nil, fmt.Errorf("pipe: %w", err)
		}
		mine, theirs := fds[0], fds[1]
		if jailReads[i] {
			mine, theirs = fds[1], fds[0]
		}
		p.jail[i] = theirs
		// Only our end is non-blocking: the flag belongs to the pipe's
		// end, and PID 1 reads and writes its own blocking.
		if _, err := unix.FcntlInt(uintptr(mine), unix.F_SETFL, unix.O_NONBLOCK); err != nil {
			unix.Close(mine)
			p.closeAll()
			return nil, fmt.Errorf("pipe: %w", err)
		}
		*ours[i] = os.NewFile(uintptr(mine), "pipe")
	}
	return p, nil
}

// closeChildEnds closes the parent's copies of PID 1's ends, so that
// EOF on each pipe means the jail has let go of it.
func (p *pipes) closeChildEnds() {
	for i, fd := range p.jail {
		if fd >= 0 {
			unix.Close(fd)
			p.jail[i] = -1
		}
	}
}

func (p *pipes) closeAll() {
	if p == nil {
		return
	}
	p.closeChildEnds()
	for _, f := range []*os.File{p.inW, p.outR, p.errR, p.planW, p.statusR, p.syncW, p.control} {
		if f != nil {
			f.Close()
		}
	}
}

// readEvents parses the init's status lines until the pipe closes.
func readEvents(r *os.File) <-chan event {
	ch := make(chan event, 16)
	go func() {
		defer close(ch)
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			ch <- parseEvent(sc.Text())
		}
	}()
	return ch
}

// parseEvent parses one status line of a jail's init.
func parseEvent(line string) event {
	kind, rest, _ := strings.Cut(line, " ")
	args := strings.Fields(rest)
	if kind == statusError {
		args = []string{rest}
	}
	return event{kind: kind, args: args}
}

// useControlSocket makes PID 1's descriptor 0, which becomes the
// program's, a socket to us of type typ instead of a pipe: a zygote's
// template takes its requests there, descriptors included
// (SOCK_SEQPACKET), a held run its caller's (SOCK_STREAM: no bound on a
// message's size).
func (p *pipes) useControlSocket(typ int) error {
	ours, theirs, err := socketpair(typ)
	if err != nil {
		return err
	}
	p.inW.Close()
	unix.Close(p.jail[0])
	p.inW, p.control, p.jail[0] = nil, ours, theirs
	return nil
}

// newRunPipes are the pipes of a run in a zygote's child: its program's
// stdin, stdout and stderr only (its status comes on a socket).
func newRunPipes() (*pipes, error) {
	p := &pipes{}
	for i := range p.jail {
		p.jail[i] = -1
	}
	ours := [3]**os.File{&p.inW, &p.outR, &p.errR}
	for i, mine := range ours {
		var fds [2]int
		if err := unix.Pipe2(fds[:], unix.O_CLOEXEC); err != nil {
			p.closeAll()
			return nil, fmt.Errorf("pipe: %w", err)
		}
		m, theirs := fds[0], fds[1]
		if i == 0 {
			m, theirs = fds[1], fds[0]
		}
		unix.SetNonblock(m, true)
		p.jail[i], *mine = theirs, os.NewFile(uintptr(m), "pipe")
	}
	return p, nil
}

func writeAll(f *os.File, b []byte) error {
	_, err := f.Write(b)
	if err != nil {
		return fmt.Errorf("send plan to the jail: %w", err)
	}
	return nil
}
