package nsjail

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/microbox/microbox/cgroup"
	"github.com/microbox/microbox/result"
)

// namespaces are the ones every jail gets (the spawner clones PID 1 into
// them; PID 1 makes the cgroup namespace itself). The kernel creates the
// user namespace first, so it owns the others.
const namespaces = unix.CLONE_NEWUSER | unix.CLONE_NEWPID | unix.CLONE_NEWNS | unix.CLONE_NEWNET |
	unix.CLONE_NEWIPC | unix.CLONE_NEWUTS | unix.CLONE_NEWCGROUP

// Run executes the spec in a fresh jail and returns its verdict. It never
// returns nil: when the jail cannot be set up, the Result says
// sandbox_error and why. Everything Run creates is gone when it returns.
// It starts a spawner of its own; a caller with many runs keeps one
// (Spawner.Run).
func Run(ctx context.Context, s *Spec) *result.Result {
	sp, err := NewSpawner()
	if err != nil {
		return result.SandboxError(err.Error())
	}
	sp.once = true
	defer sp.Close()
	return sp.Run(ctx, s)
}

// Run is Run with the spawner sp.
func (sp *Spawner) Run(ctx context.Context, s *Spec) *result.Result {
	return Settle(sp.RunEarly(ctx, s))
}

// RunEarly is Run for a caller that can answer before the jail is gone
// (`microbox serve`): it returns the verdict as soon as the program has
// ended and its output is closed, and a teardown that waits for the
// jail's end (the kernel tearing down its namespaces takes about a
// millisecond) and removes its cgroup. The caller must call teardown.
func (sp *Spawner) RunEarly(ctx context.Context, s *Spec) (res *result.Result, teardown func() error) {
	if err := s.Validate(); err != nil {
		return result.SandboxError(s.message(err)), func() error { return nil }
	}
	sv := &supervisor{began: monotonic(), trace: s.Trace}
	sv.markMoments(s.Before)
	sh, err := ShapeOf(s)
	if err == nil {
		err = sv.start(sp, sh)
	}
	return sv.finish(ctx, s, err)
}

// Settle calls a run's teardown and records its failure in the result:
// the verdict stands, but a leak must not pass in silence.
func Settle(res *result.Result, teardown func() error) *result.Result {
	if err := teardown(); err != nil && res.Status != result.StatusSandboxError {
		msg := "cleanup: " + err.Error()
		res.Error = &msg
	}
	return res
}

// Jail is a jail started before its run is known: its init waits in fresh
// namespaces, in a cgroup with the limits it was started for and with its
// mounts made, for the plan of exactly one run. `microbox serve` keeps a
// few ready, so that a run's set-up is only its files and the program's
// start. Nothing of a Jail is ever used for a second run.
type Jail struct {
	sv    *supervisor
	shape Shape
}

// A Shape is what a jail started ahead of its run shares with the runs it
// can take: the cgroup limits and the mounts. It also records which
// directory a prepared root was, so that a root replaced on disk is not
// served from jails that bound the old one.
type Shape struct {
	of     *Spec // the spec it was computed from
	cgroup *cgroup.Options
	mounts *plan
	root   [2]uint64 // device and inode of Spec.RootDir
}

// ShapeOf is the shape of the jail that s runs in. A spec whose paths
// are not absolute and clean has none: its mount plan cannot be computed
// (a relative working directory has no parent to stop at); Validate says
// the rest.
func ShapeOf(s *Spec) (Shape, error) {
	if err := checkSandboxPath("working directory", s.Workdir); err != nil {
		return Shape{}, err
	}
	mounts, err := mountPlan(s, hostIDs())
	if err != nil {
		return Shape{}, err
	}
	sh := Shape{of: s, mounts: mounts}
	if s.Cgroup != nil {
		opts := *s.Cgroup
		sh.cgroup = &opts
	}
	if s.RootDir != "" {
		var st unix.Stat_t
		if err := unix.Stat(s.RootDir, &st); err != nil {
			return Shape{}, fmt.Errorf("root filesystem %s: %w", s.RootDir, err)
		}
		sh.root = [2]uint64{uint64(st.Dev), st.Ino}
	}
	return sh, nil
}

// Equal reports whether jails of shapes a and b are interchangeable.
func (a Shape) Equal(b Shape) bool {
	return a.mounts != nil && b.mounts != nil && cgroup.SameOptions(a.cgroup, b.cgroup) &&
		bytes.Equal(a.mounts.buf.Bytes(), b.mounts.buf.Bytes()) && a.root == b.root
}

// Start starts a jail for runs of shape sh and waits until its PID 1 is
// ready for the run.
func (sp *Spawner) Start(sh Shape) (*Jail, error) {
	if sh.mounts == nil {
		return nil, errors.New("nsjail: start a jail: no shape (use ShapeOf)")
	}
	sv := &supervisor{began: monotonic()}
	err := sv.start(sp, sh)
	if err == nil {
		err = sv.awaitReady()
	}
	if err != nil {
		sv.discard()
		return nil, err
	}
	return &Jail{sv: sv, shape: sh}, nil
}

// Alive reports whether the jail still waits for its run: its init may
// have died since Start (under memory pressure the OOM killer picks jails
// first, see init.c). After "ready" the init reports nothing until it has
// its plan, so any status line, or the end of them, means it is gone.
func (j *Jail) Alive() bool {
	if j.sv == nil {
		return false
	}
	select {
	case ev, ok := <-j.sv.events:
		if ok {
			j.sv.record(ev)
		}
		return false
	default:
		return true
	}
}

// Run runs s, whose shape is sh (ShapeOf(s) after s's last change: the
// caller computes it once, to choose the jail), in the jail, which it uses
// up. A spec of another shape is refused. Like RunEarly, it never returns
// a nil result, and the caller must call teardown.
func (j *Jail) Run(ctx context.Context, s *Spec, sh Shape) (res *result.Result, teardown func() error) {
	sv := j.sv
	j.sv = nil
	noop := func() error { return nil }
	switch {
	case sv == nil:
		return result.SandboxError("nsjail: this jail has already run"), noop
	case sh.of != s || !sh.Equal(j.shape):
		sv.discard()
		return result.SandboxError("nsjail: the jail was started for other cgroup limits or mounts"), noop
	}
	if err := s.Validate(); err != nil {
		sv.discard()
		return result.SandboxError(s.message(err)), noop
	}
	sv.began, sv.trace = monotonic(), s.Trace
	sv.markMoments(s.Before)
	return sv.finish(ctx, s, nil)
}

// Close ends a jail that will run nothing, and removes its cgroup.
func (j *Jail) Close() {
	if j.sv != nil {
		j.sv.discard()
		j.sv = nil
	}
}

// supervisor is the parent side of one run.
type supervisor struct {
	spec   *Spec
	trace  bool
	cg     cgroup.Run
	pid    int // the jail's PID 1, our child; 0 until it is spawned
	sp     *Spawner
	pipes  *pipes
	events <-chan event
	began  int64 // monotonic ns when the run was asked for

	// What the init reported.
	setupErr  string
	started   int64 // monotonic ns of the program's execve; 0 until then
	exited    int64
	status    unix.WaitStatus
	gotExit   bool
	cpuUsec   int64
	maxRSSKiB int64
	phases    []result.Phase

	killedFor string // the limit the supervisor enforced, if any
	oomKilled bool

	reaped  bool // PID 1 has been waited for
	waitErr error
}

// event is one status line from the init, or the end of them.
type event struct {
	kind string
	args []string
}

// start creates the run's cgroup, has PID 1 cloned into its namespaces
// and the cgroup (on v1 it moves PID 1 in before PID 1 may go on), says go
// and sends the plan's first part.
func (sv *supervisor) start(sp *Spawner, sh Shape) error {
	if sh.cgroup != nil {
		cg, err := cgroup.New(*sh.cgroup)
		if err != nil {
			return fmt.Errorf("cgroup: %w", err)
		}
		sv.cg = cg
		sv.mark("cgroup-created")
	}
	p, err := newPipes()
	if err != nil {
		return err
	}
	sv.pipes = p
	sv.mark("pipes")
	if err := sv.spawn(sp); err != nil {
		return err
	}
	p.closeChildEnds()
	sv.mark("cloned")
	sv.events = readEvents(p.statusR)
	if sv.cg != nil && sv.cg.CloneFD() < 0 {
		if err := sv.cg.Enter(sv.pid); err != nil {
			return fmt.Errorf("start jail: %w", err)
		}
		sv.mark("cgroup-entered")
	}
	// Go first: PID 1 reads its plan only then, and a plan larger than
	// the pipe (root files, for instance) would otherwise never be read.
	if _, err := p.syncW.Write([]byte{'g'}); err != nil {
		return fmt.Errorf("start jail: %w", err)
	}
	return writeAll(p.planW, jailPlan(sv.trace, sh.mounts).framed())
}

// spawn has the spawner clone PID 1, with the pipes' jail ends as its
// descriptors 0 to 5, straight into the run's cgroup on v2.
func (sv *supervisor) spawn(sp *Spawner) error {
	sv.sp = sp
	p := sv.pipes
	ids := hostIDs()
	req := spawnRequest{flags: namespaces, setgroups: "allow"}
	req.uidMap, req.gidMap = ids.maps()
	if ids.rootless {
		req.setgroups = "deny" // required before an unprivileged gid_map
	}
	files := p.jail[:]
	cgroupFD := -1
	if sv.cg != nil {
		cgroupFD = sv.cg.CloneFD()
	}
	pid, err := sp.spawn(req, files, cgroupFD)
	sv.pid = pid
	return err
}

// awaitReady waits until PID 1 reports that it waits for its run.
func (sv *supervisor) awaitReady() error {
	timeout := time.NewTimer(SetupTimeout)
	defer timeout.Stop()
	for {
		select {
		case ev, ok := <-sv.events:
			if !ok {
				return fmt.Errorf("start jail: the init ended before it was ready: %s", sv.setupErr)
			}
			sv.record(ev)
			switch ev.kind {
			case "ready":
				return nil
			case "error":
				return fmt.Errorf("start jail: %s", sv.setupErr)
			}
		case <-timeout.C:
			return fmt.Errorf("start jail: not ready within %s", SetupTimeout)
		}
	}
}

// finish runs s in the started jail, unless starting it failed with
// startErr. It returns the verdict as soon as it is known, and the
// teardown that removes everything the run made.
func (sv *supervisor) finish(ctx context.Context, s *Spec, startErr error) (*result.Result, func() error) {
	sv.spec = s
	var res *result.Result
	err := startErr
	if err == nil {
		res, err = sv.run(ctx)
	}
	if err != nil {
		sv.abort()
		res = result.SandboxError(s.message(err))
	}
	if sv.cg != nil {
		res.Cgroup = string(sv.cg.Mode())
	}
	res.Trace = sv.timeline()
	res.Seccomp = s.SeccompMode
	return res, func() error {
		err := sv.teardown()
		res.Trace = sv.timeline()
		return err
	}
}

// timeline is the trace in time order: PID 1's phases come in through
// its status pipe, after the supervisor may have marked later ones.
func (sv *supervisor) timeline() []result.Phase {
	slices.SortStableFunc(sv.phases, func(a, b result.Phase) int { return cmp.Compare(a.AtMs, b.AtMs) })
	return sv.phases
}

// teardown waits for the jail's end and removes its cgroup.
func (sv *supervisor) teardown() error {
	sv.reap()
	sv.pipes.closeAll()
	if sv.cg == nil {
		return nil
	}
	err := sv.cg.Remove()
	sv.mark("cgroup-removed")
	return err
}

// reap waits for PID 1, once; it returns how PID 1 ended.
func (sv *supervisor) reap() error {
	if sv.pid == 0 || sv.reaped {
		return sv.waitErr
	}
	ws, err := waitExit(sv.pid)
	switch {
	case err != nil:
		sv.waitErr = fmt.Errorf("wait for the jail: %w", err)
	case ws.Signaled():
		sv.waitErr = fmt.Errorf("PID 1 killed by %v", ws.Signal())
	case ws.ExitStatus() != 0:
		sv.waitErr = fmt.Errorf("PID 1 exit status %d", ws.ExitStatus())
	}
	sv.reaped = true
	sv.mark("reaped")
	return sv.waitErr
}

// waitExit reaps pid, a child, waiting in Go's poller on a pidfd: PID 1
// takes milliseconds to exit (the kernel tears its namespaces down), and a
// thread blocked that long in wait4 keeps the runtime's monitor polling
// every 20 µs. Without pidfds (Linux < 5.10) it blocks in wait4.
func waitExit(pid int) (unix.WaitStatus, error) {
	var ws unix.WaitStatus
	var err error
	reap := func(flags int) bool {
		var got int
		got, err = unix.Wait4(pid, &ws, flags, nil)
		return err != unix.EINTR && (err != nil || got == pid)
	}
	fd, openErr := unix.PidfdOpen(pid, unix.PIDFD_NONBLOCK)
	if openErr != nil {
		for !reap(0) {
		}
		return ws, err
	}
	f := os.NewFile(uintptr(fd), "pidfd")
	defer f.Close()
	rc, rcErr := f.SyscallConn()
	if rcErr == nil {
		rcErr = rc.Read(func(uintptr) bool { return reap(unix.WNOHANG) })
	}
	if rcErr != nil { // not pollable after all
		for !reap(0) {
		}
	}
	return ws, err
}

// run sends the plan's second part and follows the run to its verdict.
func (sv *supervisor) run(ctx context.Context) (*result.Result, error) {
	s := sv.spec
	p := runPlan(s, hostIDs(), s.Seccomp)
	sv.mark("plan-built")
	stdout := newCapture(s.OutputLimit, s.Stdout, s.Capture)
	stderr := newCapture(s.OutputLimit, s.Stderr, s.Capture)
	go stdout.drain(sv.pipes.outR)
	go stderr.drain(sv.pipes.errR)
	if err := writeAll(sv.pipes.planW, p.framed()); err != nil {
		return nil, fmt.Errorf("start jail: %w", err)
	}
	sv.pipes.planW.Close()
	sv.feedStdin(s.Stdin)
	var waitErr error
	if ended := sv.supervise(ctx, stdout, stderr); ended {
		waitErr = sv.reap()
	}
	<-stdout.done
	<-stderr.done
	return sv.judge(waitErr, stdout, stderr), nil
}

// feedStdin copies the program's stdin into the jail. Without one the
// plan gave the program /dev/null and the pipe is closed at once.
func (sv *supervisor) feedStdin(in io.Reader) {
	w := sv.pipes.inW
	if in == nil {
		w.Close()
		return
	}
	go func() {
		io.Copy(w, in) // ends early, with EPIPE, if the program stops reading
		w.Close()
	}()
}

// abort kills a jail whose set-up failed and waits for it.
func (sv *supervisor) abort() {
	if sv.pid == 0 {
		return
	}
	sv.kill("")
	if sv.events != nil {
		sv.drainEvents(sv.events)
	}
	sv.reap()
}

// discard ends a jail that runs nothing and removes its cgroup.
func (sv *supervisor) discard() {
	sv.abort()
	sv.teardown()
}

// supervise follows the run, enforcing the set-up deadline, the wall and
// CPU limits and the output caps, until the verdict is known: the program
// has ended and its output is closed (whatever it left behind has let go
// of it), or else the init has ended, which it reports.
func (sv *supervisor) supervise(ctx context.Context, stdout, stderr *capture) (initEnded bool) {
	s := sv.spec
	events := sv.events
	outDone, errDone := stdout.done, stderr.done
	// Channels that stay ready once they fire are dropped from the select
	// after their first time, or it would spin until the jail has ended.
	outOver, errOver, interrupted := stdout.exceeded, stderr.exceeded, ctx.Done()
	deadline := time.NewTimer(SetupTimeout)
	defer deadline.Stop()
	var cpuCheck <-chan time.Time
	for {
		if sv.gotExit && outDone == nil && errDone == nil {
			sv.mark("output-closed")
			return false
		}
		select {
		case <-outDone:
			outDone = nil
		case <-errDone:
			errDone = nil
		case ev, ok := <-events:
			if !ok {
				if sv.started != 0 && sv.exited == 0 {
					sv.exited = monotonic() // ended unreported (e.g. a group OOM kill)
				}
				sv.mark("init-ended")
				return true
			}
			sv.record(ev)
			if ev.kind == "start" {
				sv.sp.done()
				deadline.Reset(time.Duration(sv.started + int64(s.Timeout) - monotonic()))
				if s.CPUTime > 0 {
					cpuCheck = time.After(sv.nextCPUCheck(0))
				}
			}
		case <-deadline.C:
			if sv.started == 0 {
				sv.setupErr = fmt.Sprintf("the jail did not start the program within %s", SetupTimeout)
				sv.kill("")
			} else {
				sv.kill(result.LimitWall)
			}
		case <-cpuCheck:
			used, err := sv.cg.CPUTime()
			switch {
			case err != nil:
				sv.setupErr = "read CPU usage: " + err.Error()
				sv.kill("")
			case used >= s.CPUTime:
				sv.kill(result.LimitCPU)
			default:
				cpuCheck = time.After(sv.nextCPUCheck(used))
			}
		case <-outOver:
			outOver = nil
			sv.kill(result.LimitStdout)
		case <-errOver:
			errOver = nil
			sv.kill(result.LimitStderr)
		case <-interrupted:
			interrupted = nil
			sv.setupErr = "interrupted: " + context.Cause(ctx).Error()
			sv.kill("")
		}
	}
}

// nextCPUCheck is when the CPU limit could first be reached: the run
// cannot use CPU time faster than the CPUs it may run on. They are counted
// now: runtime.NumCPU was counted once, as Go started, which for a one-shot
// exec is on one CPU (cmd/microbox/client.c). Too many only checks sooner.
func (sv *supervisor) nextCPUCheck(used time.Duration) time.Duration {
	n := runtime.NumCPU()
	var set unix.CPUSet
	if unix.SchedGetaffinity(0, &set) == nil {
		n = max(n, set.Count())
	}
	cpus := float64(n)
	if l := sv.spec.Cgroup.Limits.CPUs; l > 0 && l < cpus {
		cpus = l
	}
	wait := time.Duration(float64(sv.spec.CPUTime-used) / cpus)
	return max(wait, time.Millisecond)
}

// kill ends the whole jail once: SIGKILL to PID 1 takes every process of
// its pid namespace with it; the cgroup kill is a second net. PID 1 is
// our child and not yet reaped, so its pid is still its own.
func (sv *supervisor) kill(limit string) {
	if sv.killedFor != "" || sv.gotExit || sv.reaped {
		return
	}
	sv.killedFor = limit
	if limit == "" {
		sv.killedFor = "supervisor"
	}
	if limit != "" {
		sv.exited = monotonic()
	}
	unix.Kill(sv.pid, unix.SIGKILL)
	if sv.cg != nil {
		sv.cg.Kill()
	}
}

// markMoments records the caller's moments before the run (Spec.Before).
func (sv *supervisor) markMoments(moments []Moment) {
	for _, m := range moments {
		sv.markAt(m.Name, m.At)
	}
}

// mark records a phase of the supervisor's own (with --trace).
func (sv *supervisor) mark(name string) { sv.markAt(name, monotonic()) }

// markAt records a phase that happened at the monotonic time at.
func (sv *supervisor) markAt(name string, at int64) {
	if sv.trace {
		sv.phases = append(sv.phases, result.Phase{Name: name, AtMs: ms(at - sv.began)})
	}
}

// record applies one status line of the init.
func (sv *supervisor) record(ev event) {
	ns := func(i int) int64 {
		if i >= len(ev.args) {
			return 0
		}
		v, _ := strconv.ParseInt(ev.args[i], 10, 64)
		return v
	}
	switch ev.kind {
	case "error":
		if sv.setupErr == "" {
			sv.setupErr = strings.Join(ev.args, " ")
		}
	case "phase":
		if len(ev.args) == 2 {
			sv.markAt(ev.args[0], ns(1))
		}
	case "start":
		sv.started = ns(0)
		sv.markAt("started", sv.started)
	case "exit":
		sv.status = unix.WaitStatus(ns(0))
		sv.exited = ns(1)
		sv.cpuUsec = ns(2)
		sv.maxRSSKiB = ns(3)
		sv.gotExit = true
		sv.markAt("exited", sv.exited)
	}
}

// drainEvents consumes the init's status lines until it has ended.
func (sv *supervisor) drainEvents(events <-chan event) {
	for ev := range events {
		sv.record(ev)
	}
}

// judge decides the verdict: first what the supervisor did (time, output),
// then what the cgroup recorded (OOM), then the program's exit status.
func (sv *supervisor) judge(waitErr error, stdout, stderr *capture) *result.Result {
	r := &result.Result{Cgroup: string(cgroup.ModeNone)}
	stdout.fill(&r.Stdout, &r.StdoutTruncated)
	stderr.fill(&r.Stderr, &r.StderrTruncated)
	if sv.started != 0 {
		r.SetupTimeMs = ms(sv.started - sv.began)
		r.WallTimeMs = ms(sv.exited - sv.started)
	}
	sv.account(r)
	sv.mark("accounted")

	switch {
	case sv.setupErr != "":
		r.Status = result.StatusSandboxError
		r.Error = &sv.setupErr
	case sv.killedFor == result.LimitWall || sv.killedFor == result.LimitCPU:
		r.Status, r.Limit = result.StatusTimeout, sv.killedFor
	case sv.killedFor == result.LimitStdout || sv.killedFor == result.LimitStderr:
		r.Status, r.Limit = result.StatusOutputLimit, sv.killedFor
	case sv.oomKilled:
		// With memory.oom.group (v2) the kernel kills the init too, so
		// there may be no exit status: the cgroup's record decides.
		if sv.gotExit {
			r.SetExit(sv.status)
		} else {
			sig := "SIGKILL"
			r.Signal = &sig
		}
		r.Status, r.Limit = result.StatusMemory, result.LimitMemory
	case !sv.gotExit:
		msg := fmt.Sprintf("the jail's init ended without reporting the program's status (%v)", waitErr)
		r.Status, r.Error = result.StatusSandboxError, &msg
	default:
		r.SetExit(sv.status)
	}
	return r
}

// account fills the usage fields: from the cgroup, which counts every
// process of the run, or else from the program's own rusage.
func (sv *supervisor) account(r *result.Result) {
	if sv.cg == nil {
		if sv.gotExit {
			cpu := float64(sv.cpuUsec) / 1e3
			peak := sv.maxRSSKiB * 1024
			r.CPUTimeMs, r.PeakMemoryBytes = &cpu, &peak
		}
		return
	}
	u, err := sv.cg.Usage()
	if err != nil && sv.setupErr == "" {
		sv.setupErr = "read cgroup usage: " + err.Error()
		return
	}
	cpu := float64(u.CPU) / 1e6
	r.CPUTimeMs, r.PeakMemoryBytes = &cpu, &u.PeakMemory
	sv.oomKilled = u.OOMKills > 0
}

// pipes are the descriptors between supervisor and PID 1: ours, in Go's
// poller, and PID 1's, plain descriptors that only pass through to the
// spawner (an os.File would register each with the poller and take it out
// again, system calls for nothing).
type pipes struct {
	inW, outR, errR *os.File // the program's stdin, stdout and stderr
	planW           *os.File // the plan, to PID 1's fd 3
	statusR         *os.File // status lines, from PID 1's fd 4
	syncW           *os.File // go, to PID 1's fd 5; kept open until the teardown
	jail            [6]int   // PID 1's ends, its fds 0 to 5 in order; -1 once closed
}

func newPipes() (*pipes, error) {
	p := &pipes{jail: [6]int{-1, -1, -1, -1, -1, -1}}
	ours := [6]**os.File{&p.inW, &p.outR, &p.errR, &p.planW, &p.statusR, &p.syncW}
	jailReads := [6]bool{true, false, false, true, false, true}
	for i := range p.jail {
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
	for _, f := range []*os.File{p.inW, p.outR, p.errR, p.planW, p.statusR, p.syncW} {
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
			kind, rest, _ := strings.Cut(sc.Text(), " ")
			args := strings.Fields(rest)
			if kind == "error" {
				args = []string{rest}
			}
			ch <- event{kind: kind, args: args}
		}
	}()
	return ch
}

func writeAll(f *os.File, b []byte) error {
	_, err := f.Write(b)
	if err != nil {
		return fmt.Errorf("send plan to the jail: %w", err)
	}
	return nil
}

func monotonic() int64 {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return ts.Nano()
}

func ms(ns int64) float64 { return float64(ns) / 1e6 }
