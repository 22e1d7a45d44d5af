package session

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/microbox/microbox/cgroup"
	"github.com/microbox/microbox/nsjail"
	"github.com/microbox/microbox/result"
)

// Why a session ended (Info.Reason).
const (
	ReasonDeleted        = "deleted"         // DELETE /v1/sessions/{id}
	ReasonIdle           = "idle"            // no request for its idle_ttl
	ReasonLifetime       = "lifetime"        // it lived its max_lifetime
	ReasonTimeout        = "timeout"         // a cell did not stop within InterruptGrace of its interrupt
	ReasonMemory         = "memory"          // the cgroup's memory limit killed a process of it
	ReasonCPUTime        = "cpu_time"        // its processes used its cpu_time
	ReasonOutputLimit    = "output_limit"    // it wrote more than output_limit outside its cells
	ReasonExited         = "exited"          // the interpreter ended (os._exit, a signal)
	ReasonError          = "error"           // the sandbox failed, or the interpreter broke the wire
	ReasonServerStopping = "server_stopping" // the server stopped
)

// Reasons are every Reason, for the metrics.
var Reasons = []string{ReasonDeleted, ReasonIdle, ReasonLifetime, ReasonTimeout, ReasonMemory, ReasonCPUTime,
	ReasonOutputLimit, ReasonExited, ReasonError, ReasonServerStopping}

// InterruptGrace is how long a cell past its timeout has, after its
// KeyboardInterrupt, to come back before its session is ended.
const InterruptGrace = 2 * time.Second

// readyTimeout bounds the interpreter's start, preloads included.
const readyTimeout = 60 * time.Second

// A Session is one live session: its jail, its interpreter, its timers.
type Session struct {
	ID      string
	m       *Manager
	o       *options
	held    *nsjail.Held
	frames  chan []byte // the interpreter's replies; closed when its socket ends
	cancel  context.CancelCauseFunc
	gone    chan struct{} // closed once the jail and its cgroup are gone
	created time.Time
	python  string
	cgroup  *cgroup.Options // its limits; nil without a cgroup

	req sync.Mutex // one request at a time, in order on the wire
	seq uint64     // the last request's, under req

	mu       sync.Mutex
	reason   string // why it ends; "" while it lives
	detail   string
	lastUsed time.Time
	cells    int
	idle     *time.Timer
	info     Info // once gone
}

// Info describes a session, live or ended.
type Info struct {
	ID         string    `json:"id"`
	State      string    `json:"state"` // "alive" or "ended"
	Reason     string    `json:"reason,omitempty"`
	Error      string    `json:"error,omitempty"`
	Python     string    `json:"python,omitempty"`
	CreatedAt  time.Time `json:"created_at"`
	LastUsedAt time.Time `json:"last_used_at"`
	// IdleExpiresAt is when it ends unless a request comes first,
	// EndsBy when it ends at the latest.
	IdleExpiresAt *time.Time `json:"idle_expires_at,omitempty"`
	EndsBy        time.Time  `json:"ends_by"`
	Cells         int        `json:"cells"`
	Limits        Limits     `json:"limits"`
}

// Limits are a session's, as its create request's keys write them.
type Limits struct {
	Memory      int64   `json:"mem"`
	CPUs        float64 `json:"cpus"`
	Pids        int64   `json:"pids"`
	Timeout     string  `json:"timeout"` // its cells' default
	OutputLimit int64   `json:"output_limit"`
	TmpfsSize   int64   `json:"tmpfs_size"`
	FileBytes   int64   `json:"file_bytes"`
	IdleTTL     string  `json:"idle_ttl"`
	MaxLifetime string  `json:"max_lifetime"`
}

func newSession(m *Manager, o *options) *Session {
	id := make([]byte, 12)
	rand.Read(id)
	now := time.Now()
	return &Session{ID: "s-" + hex.EncodeToString(id), m: m, o: o, frames: make(chan []byte),
		gone: make(chan struct{}), created: now, lastUsed: now}
}

// maxFrame bounds a reply of the interpreter's: JSON escapes a byte in
// at most 6, and a cell's output, value and error are each bounded by
// its output limit (twice for stdout and stderr, error and traceback);
// a file, or the figures, by the file cap, base64'd.
func (s *Session) maxFrame() int64 {
	return 6*5*s.o.outputLimit + 2*s.o.fileCap + 1<<20
}

// start starts the jail and its interpreter, and waits for its ready.
func (s *Session) start(spec *nsjail.Spec, preload []string) error {
	spec.Control, spec.Stdin, spec.Stdout, spec.Stderr = true, nil, nil, nil
	spec.Capture = true // what the interpreter says before its cells (a failed start)
	spec.Timeout = s.o.life
	s.cgroup = spec.Cgroup
	ctx, cancel := context.WithCancelCause(context.Background())
	s.cancel = cancel
	h, err := s.m.sp.StartHeld(ctx, spec)
	if err != nil {
		cancel(nil)
		s.m.forget(s, s.endInfo(ReasonError, err.Error()))
		close(s.gone)
		s.m.wg.Done()
		return err
	}
	s.held = h
	go s.read(bufio.NewReader(h.Control))
	go s.watch()
	if err := writeFrame(h.Control, config{Preload: preload}); err != nil {
		return fmt.Errorf("start the session's interpreter: %w", err)
	}
	var r ready
	select {
	case b, ok := <-s.frames:
		if !ok || json.Unmarshal(b, &r) != nil {
			return s.startFailure()
		}
	case <-time.After(readyTimeout):
		return fmt.Errorf("start the session's interpreter: not ready within %s", readyTimeout)
	}
	if r.Error != "" {
		return badInput("%s", clip(r.Error, 1000))
	}
	s.python = clip(r.Ready, 40)
	if err := h.PinProgram(); err != nil {
		return err
	}
	s.mu.Lock()
	s.idle = time.AfterFunc(s.o.idle, func() { s.end(ReasonIdle, "") })
	s.mu.Unlock()
	return nil
}

// startFailure is why the interpreter ended before it was ready.
func (s *Session) startFailure() error {
	res := s.held.Wait()
	msg := "the session's interpreter ended before it was ready"
	if res.Error != nil {
		msg += ": " + *res.Error
	} else if line := result.LastLine(res.Stderr); line != "" {
		msg += ": " + clip(line, 1000)
	}
	return errors.New(msg)
}

// read passes the interpreter's replies on until its socket ends or it
// breaks the wire, which ends the session.
func (s *Session) read(r *bufio.Reader) {
	defer close(s.frames)
	for {
		b, err := readFrame(r, s.maxFrame())
		if err != nil {
			if errors.Is(err, errFrameTooLarge) {
				s.end(ReasonError, err.Error())
			}
			return
		}
		select {
		case s.frames <- b:
		case <-s.gone:
			return
		}
	}
}

// watch waits for the jail's end, then records why and lets the
// session go.
func (s *Session) watch() {
	res := s.held.Wait()
	s.mu.Lock()
	if s.idle != nil {
		s.idle.Stop()
	}
	reason, detail := s.reason, s.detail
	s.mu.Unlock()
	if reason == "" {
		reason, detail = reasonOf(res)
	}
	if res.Error != nil && strings.HasPrefix(*res.Error, "cleanup: ") { // a leak must not pass in silence
		detail = strings.TrimPrefix(detail+"; "+*res.Error, "; ")
	}
	info := s.endInfo(reason, detail)
	s.m.forget(s, info)
	close(s.gone)
	s.m.wg.Done()
}

// reasonOf is why a run that nobody ended ended.
func reasonOf(res *result.Result) (reason, detail string) {
	switch res.Status {
	case result.StatusMemory:
		return ReasonMemory, "the session's memory limit killed a process of it"
	case result.StatusTimeout:
		if res.Limit == result.LimitCPU {
			return ReasonCPUTime, "the session used its cpu_time"
		}
		return ReasonLifetime, "the session lived its max_lifetime"
	case result.StatusOutputLimit:
		return ReasonOutputLimit, "the session wrote more than output_limit outside its cells"
	case result.StatusSandboxError:
		if res.Error != nil {
			return ReasonError, *res.Error
		}
		return ReasonError, "sandbox error"
	}
	detail = "the interpreter ended"
	if res.ExitCode != nil {
		detail = fmt.Sprintf("the interpreter exited with status %d", *res.ExitCode)
	}
	if res.Signal != nil {
		detail = "the interpreter was killed by " + *res.Signal
	}
	return ReasonExited, detail
}

// end ends the session for reason, once: the first reason stands.
func (s *Session) end(reason, detail string) {
	s.mu.Lock()
	if s.reason == "" {
		s.reason, s.detail = reason, detail
	}
	s.mu.Unlock()
	if s.cancel != nil {
		s.cancel(errors.New("session ended: " + reason))
	}
}

// End ends the session (DELETE) and returns once everything it held is
// gone.
func (s *Session) End() Info {
	s.end(ReasonDeleted, "")
	<-s.gone
	return s.info
}

// Info describes the session now.
func (s *Session) Info() Info {
	select {
	case <-s.gone:
		return s.info
	default:
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	i := s.infoLocked()
	i.State = "alive"
	if s.idle != nil {
		t := s.lastUsed.Add(s.o.idle)
		i.IdleExpiresAt = &t
	}
	return i
}

func (s *Session) infoLocked() Info {
	spec := s.o
	lim := Limits{Timeout: spec.cellTimeout.String(), OutputLimit: spec.outputLimit, TmpfsSize: spec.tmpfsSize,
		FileBytes: spec.fileCap, IdleTTL: spec.idle.String(), MaxLifetime: spec.life.String()}
	if c := s.cgroup; c != nil {
		lim.Memory, lim.CPUs, lim.Pids = c.Limits.Memory, c.Limits.CPUs, c.Limits.Pids
	}
	return Info{ID: s.ID, Python: s.python, CreatedAt: s.created, LastUsedAt: s.lastUsed,
		EndsBy: s.created.Add(s.o.life), Cells: s.cells, Limits: lim}
}

// endInfo is the session's description once it has ended.
func (s *Session) endInfo(reason, detail string) Info {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := s.infoLocked()
	i.State, i.Reason, i.Error = "ended", reason, detail
	s.info = i
	return i
}

// EndedError is a request to a session that has ended, or that ended
// under it.
type EndedError struct{ Info Info }

func (e *EndedError) Error() string {
	msg := "session " + e.Info.ID + " has ended (" + e.Info.Reason
	if e.Info.Error != "" {
		msg += ": " + e.Info.Error
	}
	return msg + ")"
}

// ended waits for the session's end and says it has ended.
func (s *Session) ended() error {
	<-s.gone
	return &EndedError{Info: s.info}
}

// begin takes the session for one request, or says it has ended.
func (s *Session) begin() error {
	s.req.Lock()
	s.mu.Lock()
	ended := s.reason != ""
	if !ended && s.idle != nil {
		s.idle.Stop()
	}
	s.mu.Unlock()
	if ended {
		s.req.Unlock()
		return s.ended()
	}
	return nil
}

// used marks the session as used now.
func (s *Session) used() {
	s.mu.Lock()
	s.lastUsed = time.Now()
	s.mu.Unlock()
}

// done lets the session go after a request: its idle time starts again.
func (s *Session) done() {
	s.mu.Lock()
	s.lastUsed = time.Now()
	if s.reason == "" && s.idle != nil {
		s.idle.Reset(s.o.idle)
	}
	s.mu.Unlock()
	s.req.Unlock()
}

// exchange sends req and waits up to timeout for its reply. A cell past
// it is interrupted (interrupted true) and has InterruptGrace more; a
// request that still has no reply ends the session.
func (s *Session) exchange(req request, timeout time.Duration) (reply []byte, interrupted bool, err error) {
	s.seq++
	req.Seq = s.seq
	s.held.Control.SetWriteDeadline(time.Now().Add(timeout))
	if err := writeFrame(s.held.Control, req); err != nil {
		s.end(ReasonError, "the interpreter did not take a request: "+err.Error())
		return nil, false, s.ended()
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case b, ok := <-s.frames:
		return s.got(b, ok, false)
	case <-t.C:
	}
	if req.Op != opCell {
		s.end(ReasonError, fmt.Sprintf("the interpreter did not answer a %s within %s", req.Op, timeout))
		return nil, false, s.ended()
	}
	s.held.Interrupt()
	t.Reset(InterruptGrace)
	select {
	case b, ok := <-s.frames:
		return s.got(b, ok, true)
	case <-t.C:
		s.end(ReasonTimeout, fmt.Sprintf("a cell ran past its timeout of %s and did not stop within %s of its KeyboardInterrupt", timeout, InterruptGrace))
		return nil, true, s.ended()
	}
}

// got is a reply, or the session's end if the socket ended instead.
func (s *Session) got(b []byte, ok, interrupted bool) ([]byte, bool, error) {
	if !ok {
		return nil, interrupted, s.ended()
	}
	return b, interrupted, nil
}

// answers ends the session unless a reply echoes the last request's
// seq.
func (s *Session) answers(seq uint64) error {
	if seq != s.seq {
		s.end(ReasonError, errOtherReply.Error())
		return s.ended()
	}
	return nil
}

// clip is s cut to at most n bytes, valid UTF-8.
func clip(s string, n int64) string {
	if int64(len(s)) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "")
}
