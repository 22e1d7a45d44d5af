package nsjail

// A zygote's child: a fork of a template, ready for its run, and the run
// in it, through the same supervisor, limits and verdict as a cold run.

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/microbox/microbox/cgroup"
	"github.com/microbox/microbox/result"
)

// A ZygoteChild is a fork of a template, ready for its run: in namespaces
// and a cgroup of its own, its program sandboxed and waiting.
type ZygoteChild struct {
	t     *Template
	slot  int      // its uid slot in the template's map
	pid   int      // its PID 1's pid, here
	pidfd *os.File // its PID 1, watched (not our child: not waited for)
	cg    cgroup.Run
	ctl   *os.File // to PID 1: its plan in, its status lines out
	run   *os.File // the program's run channel
	used  bool
}

// Fork forks a child of the template for a run of cg's limits.
func (t *Template) Fork() (*ZygoteChild, error) {
	if err := t.Err(); err != nil {
		return nil, err
	}
	c := &ZygoteChild{t: t}
	if err := c.fork(); err != nil {
		c.discard()
		return nil, fmt.Errorf("fork a run: %w", err)
	}
	return c, nil
}

// childRequest is what a child's program needs before its run is known,
// beyond what every child of its template applies alike (templateConfig);
// its PID 1 has a plan (zygotePlan). Join is how many of the request's
// descriptors, after ctl and run, are the run's v1 cgroup tasks files.
type childRequest struct {
	UID  int `json:"uid"`
	GID  int `json:"gid"`
	Join int `json:"join"`
}

// fork has the template clone the child's PID 1 into new namespaces;
// PID 1 joins the run's cgroup (v1: it writes 0 to each hierarchy's tasks
// file, opened here; elsewhere it says hello and is moved there), forks
// the program and becomes microbox's init, which carries out its plan and
// lets the program go on, which sandboxes itself and says it is ready.
func (c *ZygoteChild) fork() error {
	t := c.t
	t.mu.Lock()
	if len(t.free) == 0 {
		t.mu.Unlock()
		return ErrBusy
	}
	c.slot, t.free = t.free[0], t.free[1:]
	t.forks++
	t.mu.Unlock()
	var tasks []int
	defer func() { // on an early return; closed once sent otherwise
		for _, fd := range tasks {
			unix.Close(fd)
		}
	}()
	if t.cgroups != nil {
		var err error
		if c.cg, err = t.cgroups.New(); err != nil {
			return fmt.Errorf("cgroup: %w", err)
		}
		if tasks, err = c.cg.JoinFDs(); err != nil {
			return fmt.Errorf("cgroup: %w", err)
		}
	}
	ctl, ctlTheirs, err := socketpair(unix.SOCK_STREAM)
	if err != nil {
		return err
	}
	c.ctl = ctl
	run, runTheirs, err := socketpair(unix.SOCK_STREAM)
	if err != nil {
		unix.Close(ctlTheirs)
		return err
	}
	c.run = run
	if err := control(ctl, func(fd int) error {
		return unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_PASSCRED, 1)
	}); err != nil {
		unix.Close(ctlTheirs)
		unix.Close(runTheirs)
		return err
	}
	uid := c.slot*slotSize + ProgramUID
	req, _ := json.Marshal(childRequest{UID: uid, GID: uid, Join: len(tasks)})
	err = sendmsg(t.ctl, req, unix.UnixRights(append([]int{ctlTheirs, runTheirs}, tasks...)...))
	// Ours no longer: EOF on each then means the child has let go of it
	// (or the template, dying, never took it).
	unix.Close(ctlTheirs)
	unix.Close(runTheirs)
	joined := len(tasks) > 0
	for _, fd := range tasks {
		unix.Close(fd)
	}
	tasks = nil
	if err != nil {
		return fmt.Errorf("ask the template: %w", err)
	}
	if err := c.hello(); err != nil {
		return err
	}
	if !joined { // PID 1 did not join (v2, or no cgroup): it waits to be moved
		if c.cg != nil {
			if err := c.cg.Adopt(c.pid); err != nil {
				return c.failedWith(err)
			}
		}
		if _, err := ctl.Write([]byte(zygoteGo)); err != nil {
			return c.failedWith(err)
		}
	}
	plan := zygotePlan(t.spec, idMapping{programUID: uid, programGID: uid})
	if err := writeAll(c.ctl, plan.framed()); err != nil {
		return c.failedWith(fmt.Errorf("send the run's init its plan: %w", err))
	}
	return c.ready()
}

// hello waits for the child's PID 1 to say hello, learns its pid here
// from the kernel's credentials on the message, and opens its pidfd. The
// buffer holds the hello and no more: what follows on the stream is PID
// 1's status.
func (c *ZygoteChild) hello() error {
	buf, oob := make([]byte, len(zygoteHello)), make([]byte, unix.CmsgSpace(unix.SizeofUcred))
	c.ctl.SetReadDeadline(time.Now().Add(SetupTimeout))
	n, oobn, err := recvmsg(c.ctl, buf, oob)
	c.ctl.SetReadDeadline(time.Time{})
	if err != nil {
		return fmt.Errorf("the template's child did not start: %w", err)
	}
	if string(buf[:n]) != zygoteHello {
		return c.failure(buf[:n])
	}
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil || len(msgs) != 1 {
		return errors.New("the template's child sent no credentials")
	}
	cred, err := unix.ParseUnixCredentials(&msgs[0])
	if err != nil {
		return err
	}
	c.pid = int(cred.Pid)
	pidfd, err := unix.PidfdOpen(c.pid, unix.PIDFD_NONBLOCK)
	if err != nil {
		return c.failedWith(fmt.Errorf("pidfd of the run's init: %w", err))
	}
	c.pidfd = os.NewFile(uintptr(pidfd), "pidfd")
	return nil
}

// failure is the child's own word on why it failed, which begins with
// said: an "error" status line.
func (c *ZygoteChild) failure(said []byte) error {
	line := c.word(said)
	if msg, ok := strings.CutPrefix(line, statusError+" "); ok {
		return errors.New(strings.TrimPrefix(msg, "zygote: ")) // the caller says it is the zygote's
	}
	if line == "" {
		return errors.New("the template's child ended before it was ready, without a word (its template, or the child itself, was killed or ran out of resources)")
	}
	return fmt.Errorf("the template's child failed (%q)", line)
}

// word is the first line of what the child's PID 1, or its template for
// it, says next on the control stream, which begins with said; it waits
// a second at most.
func (c *ZygoteChild) word(said []byte) string {
	c.ctl.SetReadDeadline(time.Now().Add(time.Second))
	defer c.ctl.SetReadDeadline(time.Time{})
	rest := make([]byte, 1024)
	n, _ := io.ReadFull(c.ctl, rest)
	line, _, _ := strings.Cut(string(said)+string(rest[:n]), "\n")
	return line
}

// failedWith is err, a step with the child's PID 1 that failed after its
// hello, unless the child said why: a PID 1 that died since (in its fork,
// whose handlers are the preloads') fails the next step, whichever it is,
// before its template's word on it is read.
func (c *ZygoteChild) failedWith(err error) error {
	if msg, ok := strings.CutPrefix(c.word(nil), statusError+" "); ok {
		return errors.New(strings.TrimPrefix(msg, "zygote: "))
	}
	return err
}

// ready waits for the child's program to be sandboxed and waiting, or
// says why it is not.
func (c *ZygoteChild) ready() error {
	c.run.SetReadDeadline(time.Now().Add(SetupTimeout))
	defer c.run.SetReadDeadline(time.Time{})
	buf := make([]byte, len(zygoteReady))
	if _, err := io.ReadFull(c.run, buf); err == nil && string(buf) == zygoteReady {
		return nil
	}
	return c.failure(nil)
}

// Alive reports whether the child still waits for its run: its program
// has said nothing more, and its PID 1 lives.
func (c *ZygoteChild) Alive() bool {
	return !c.used && c.t.Err() == nil && !readable(c.pidfd) && !readable(c.run)
}

// Run runs s, whose key is the template's, in the child, which it uses
// up; like RunEarly it never returns a nil result, and the caller must
// call teardown.
func (c *ZygoteChild) Run(ctx context.Context, s *Spec) (*result.Result, Teardown) {
	sv := &supervisor{began: monotonic(), trace: s.Trace, pid: c.pid, cg: c.cg, zygote: &zygoteRun{c: c}, owner: c.t.sv.owner}
	sv.markMoments(s.Before)
	var err error
	switch {
	case c.used:
		err = errors.New("nsjail: this zygote child has already run")
	default:
		c.used = true
		if sv.pipes, err = newRunPipes(); err == nil {
			sv.events = readEvents(c.ctl)
		}
	}
	res, teardown := sv.finish(ctx, s, err)
	if res.Status == result.StatusSandboxError && !sv.gotExit && c.t.endedUnder() {
		msg := fmt.Sprintf("the run's template ended while it ran, and every run forked from it with it (%v)", c.t.Err())
		res.Error = &msg
	}
	return res, func() error {
		err := teardown() // the supervisor's: PID 1 gone, the cgroup removed
		c.cg = nil
		c.release()
		return err
	}
}

// discard ends a child that will run nothing.
func (c *ZygoteChild) discard() {
	if c.pidfd != nil { // PID 1, and with it the run's namespace
		z := &zygoteRun{c: c}
		z.kill(c.t.sv.owner)
		z.awaitExit()
	}
	if c.cg != nil {
		c.cg.Kill() // the template's fork, and what it forked before PID 1 told its pid
	}
	c.release()
}

// Close ends the child if it never ran.
func (c *ZygoteChild) Close() {
	if !c.used {
		c.used = true
		c.discard()
	}
}

// release gives back what the child held, once its PID 1 is gone.
func (c *ZygoteChild) release() error {
	var err error
	if c.cg != nil {
		err = c.cg.Remove()
		c.cg = nil
	}
	for _, f := range []*os.File{c.ctl, c.run} {
		if f != nil {
			f.Close()
		}
	}
	if c.pidfd != nil {
		c.pidfd.Close()
		c.pidfd = nil
	}
	if c.slot > 0 {
		c.t.mu.Lock()
		c.t.free = append(c.t.free, c.slot)
		c.t.mu.Unlock()
		c.slot = 0
	}
	return err
}

// zygoteRun is the supervisor's side of a run in a zygote child.
type zygoteRun struct {
	c        *ZygoteChild
	children [3]int // the program's stdin, stdout and stderr ends
}

// runRequest is the run a child's program waits for (zygote.py).
type runRequest struct {
	Argv      []string `json:"argv"`
	OrigArgv  []string `json:"orig_argv"`
	Env       []string `json:"env"`
	Cwd       string   `json:"cwd"`
	Code      *string  `json:"code"` // nil: the program reads File
	File      string   `json:"file"`
	Files     [][3]any `json:"files"` // path, mode, size: the bytes follow the JSON
	TimeoutNs int64    `json:"timeout_ns"`
	NullStdin bool     `json:"stdin_null"`
}

// send writes the run to the program, with its descriptors.
func (z *zygoteRun) send(sv *supervisor) error {
	s := sv.spec
	a, err := parseZygoteArgv(s)
	if err != nil {
		return err
	}
	// A file program is read by the program from its file, as bytes:
	// compiling those honours a BOM and a coding declaration as python3
	// FILE does, where a JSON string would have decoded them already.
	req := runRequest{Argv: a.argv, OrigArgv: s.Argv, Env: s.Env, Cwd: s.Workdir, Code: a.code, File: a.file,
		TimeoutNs: s.Timeout.Nanoseconds(), NullStdin: s.Stdin == nil}
	for _, f := range s.Files {
		req.Files = append(req.Files, [3]any{f.Path, int(f.Mode.Perm()), len(f.Data)})
	}
	body, err := json.Marshal(req)
	if err != nil {
		return err
	}
	msg := binary.LittleEndian.AppendUint32(nil, uint32(len(body)))
	msg = append(msg, body...)
	p := sv.pipes
	if err := sendmsg(z.c.run, msg[:4], unix.UnixRights(p.jail[0], p.jail[1], p.jail[2])); err != nil {
		return fmt.Errorf("send the run: %w", err)
	}
	p.closeChildEnds()
	if _, err := z.c.run.Write(msg[4:]); err != nil {
		return fmt.Errorf("send the run: %w", err)
	}
	for _, f := range s.Files { // raw, after the JSON (zygote.py: take)
		if _, err := z.c.run.Write(f.Data); err != nil {
			return fmt.Errorf("send the run's file %s: %w", f.Path, err)
		}
	}
	return z.c.run.Close()
}

// kill ends the child's PID 1, which is in its template's user
// namespace, owned by owner.
func (z *zygoteRun) kill(owner int) {
	control(z.c.pidfd, func(fd int) error {
		return killAsOwner(owner, func() error { return unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0) })
	})
}

// awaitExit waits, in Go's poller, until the child's PID 1, and with it
// its namespace, is gone: its pidfd is then readable.
func (z *zygoteRun) awaitExit() {
	if rc, err := z.c.pidfd.SyscallConn(); err == nil {
		rc.Read(func(uintptr) bool { return readable(z.c.pidfd) })
	}
}
