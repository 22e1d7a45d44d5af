package nsjail

// A held run: a run like any other (the same jail, cgroup, user, filter
// and limits) whose program talks with its caller while it runs, over a
// stream socket that is its fd 0. A session's interpreter is one
// (internal/session).

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/microbox/microbox/result"
)

// Held is a held run under way.
type Held struct {
	// Control is the caller's end of the program's fd 0. Everything that
	// comes on it is the program's: untrusted.
	Control *os.File
	sv      *supervisor
	mu      sync.Mutex
	program *os.File // a pidfd of the program (PinProgram); nil once the run has ended
	ended   bool
	done    chan struct{}
	res     *result.Result
}

// StartHeld starts s (s.Control set, no Stdin) and returns as soon as its
// jail is set up; the run goes on until its program ends, a limit of s's
// ends it (s.Timeout is its whole life) or ctx ends. Wait has its verdict.
func (sp *Spawner) StartHeld(ctx context.Context, s *Spec) (*Held, error) {
	if !s.Control || s.Stdin != nil || s.Zygote != nil {
		return nil, errors.New("a held run needs Control, and neither Stdin nor Zygote")
	}
	if err := s.Validate(); err != nil {
		return nil, errors.New(s.message(err))
	}
	sv := &supervisor{began: monotonic(), spec: s, control: unix.SOCK_STREAM}
	sh, err := ShapeOf(s)
	if err == nil {
		err = sv.start(sp, sh)
	}
	if err != nil {
		sv.discard()
		return nil, errors.New(s.message(err))
	}
	h := &Held{Control: sv.pipes.control, sv: sv, done: make(chan struct{})}
	go func() {
		h.res = Settle(sv.finish(ctx, s, nil))
		h.mu.Lock()
		h.ended = true
		if h.program != nil {
			h.program.Close()
			h.program = nil
		}
		h.mu.Unlock()
		close(h.done)
	}()
	return h, nil
}

// Done is closed once the run has ended and everything it held is gone.
func (h *Held) Done() <-chan struct{} { return h.done }

// Wait returns the run's verdict once it has ended and its jail and
// cgroup are gone.
func (h *Held) Wait() *result.Result {
	<-h.done
	return h.res
}

// PinProgram takes hold of the program's process, for Interrupt. Call it
// once the program has said it runs and before it can have started a
// process of its own: the program is then the only child of the jail's
// PID 1.
func (h *Held) PinProgram() error {
	pid1 := h.sv.pid
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid1, pid1))
	if err != nil {
		return fmt.Errorf("find the program: %w", err)
	}
	kids := strings.Fields(string(b))
	if len(kids) != 1 {
		return fmt.Errorf("find the program: the jail's PID 1 has %d children, want 1", len(kids))
	}
	pid, err := strconv.Atoi(kids[0])
	if err != nil {
		return fmt.Errorf("find the program: %w", err)
	}
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return fmt.Errorf("find the program: %w", err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ended {
		unix.Close(fd)
		return errors.New("find the program: it has ended")
	}
	h.program = os.NewFile(uintptr(fd), "pidfd")
	return nil
}

// Interrupt sends the program SIGINT (Python's KeyboardInterrupt).
func (h *Held) Interrupt() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.program == nil {
		return errors.New("interrupt: the program is not pinned, or has ended")
	}
	return control(h.program, func(fd int) error { return unix.PidfdSendSignal(fd, unix.SIGINT, nil, 0) })
}

// CPUTime is the CPU time the run's processes have used so far; 0 without
// a cgroup.
func (h *Held) CPUTime() time.Duration {
	if h.sv.cg == nil {
		return 0
	}
	d, _ := h.sv.cg.CPUTime()
	return d
}
