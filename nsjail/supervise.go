package nsjail

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/microbox/microbox/cgroup"
	"github.com/microbox/microbox/result"
	"golang.org/x/sys/unix"
)

// supervisor is the parent side of one run.
type supervisor struct {
	spec  *Spec
	trace bool
	cg    cgroup.Run
	pid   int // the jail's PID 1, our child; 0 until it is spawned
	// clonedIn: PID 1 was cloned into cg (CLONE_INTO_CGROUP, v2).
	clonedIn bool
	// slots are the jail's host uid ranges (root-run jails): its own,
	// then, for a zygote's template, childSlots more for its children.
	slots      []uidSlot
	childSlots int
	// owner is the host uid that owns the jail's user namespace when it
	// is not microbox's own (root-run jails: their first slot's), for
	// killAsOwner; 0 otherwise.
	owner int
	// zygote is set for a run forked from a zygote's template: its PID 1
	// is not our child, and its run is not a plan (zygote_child.go); control,
	// for a template's own jail (SOCK_SEQPACKET) and a held run (SOCK_STREAM):
	// the type of the socket to us that is its program's fd 0 (0: a pipe).
	zygote  *zygoteRun
	control int
	// prepared: the jail, started ahead of its run, prepares its
	// program's process (Shape.program) and takes the program's own part
	// of the plan after the run's.
	prepared bool
	sp       *Spawner
	pipes    *pipes
	events   <-chan event
	began    int64 // monotonic ns when the run was asked for

	// What the init reported.
	ready     bool // PID 1 has made the jail and waits for its run
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

// start has PID 1 cloned into its namespaces and the run's cgroup, says
// go and sends the plan's first part. On v2 the cgroup is made first, for
// PID 1 to be cloned into it; on v1 PID 1 joins its groups itself, at its
// go and before anything else, so they are made while the spawner clones
// it (each takes about a millisecond; the two run on two CPUs at once).
// A PID 1 asked for early (SpawnEarly) is adopted if it fits.
func (sv *supervisor) start(sp *Spawner, sh Shape) error {
	joinsAtGo := sh.cgroup != nil && cgroup.HostMode() == cgroup.ModeV1
	early := sp.takeEarly()
	if early != nil && (sv.control != 0 || sv.childSlots != 0 || (sh.cgroup != nil && !joinsAtGo)) {
		sp.endEarly(early)
		early = nil
	}
	if sh.cgroup != nil && !joinsAtGo {
		if err := sv.makeGroup(*sh.cgroup); err != nil {
			return err
		}
	}
	var tasks []int
	defer func() { closeFDs(tasks) }()
	var meanwhile func() error
	if joinsAtGo {
		meanwhile = func() (err error) {
			if err = sv.makeGroup(*sh.cgroup); err == nil {
				tasks, err = sv.cg.JoinFDs()
			}
			return err
		}
	}
	var err error
	if early != nil {
		err = sv.adopt(sp, early, meanwhile)
	} else {
		err = sv.spawnNew(sp, meanwhile)
	}
	if err != nil {
		return err
	}
	p := sv.pipes
	p.closeChildEnds()
	sv.mark("cloned")
	sv.events = readEvents(p.statusR)
	if sv.cg != nil && !sv.clonedIn && len(tasks) == 0 {
		// Neither cloned into the group nor joining it: moved.
		if err := sv.cg.Enter(sv.pid); err != nil {
			return fmt.Errorf("start jail: %w", err)
		}
		sv.mark("cgroup-entered")
	}
	// Go first: PID 1 reads its plan only then, and a plan larger than
	// the pipe (root files, for instance) would otherwise never be read.
	var oob []byte
	if len(tasks) > 0 {
		oob = unix.UnixRights(tasks...)
	}
	if err := sendmsg(p.syncW, []byte{goByte, byte(len(tasks))}, oob); err != nil {
		return sv.initGone(err)
	}
	jail := jailPlan(sv.trace, sh.mounts)
	if sv.prepared {
		jail.buf.Write(sh.program.buf.Bytes())
	}
	if err := writeAll(p.planW, jail.framed()); err != nil {
		return sv.initGone(err)
	}
	return nil
}

// spawnNew makes PID 1's descriptors and has the spawner clone it,
// running meanwhile (if not nil) while it clones.
func (sv *supervisor) spawnNew(sp *Spawner, meanwhile func() error) error {
	p, err := newPipes()
	if err != nil {
		return err
	}
	if sv.control != 0 {
		if err := p.useControlSocket(sv.control); err != nil {
			p.closeAll()
			return err
		}
	}
	sv.pipes = p
	sv.mark("pipes")
	return sv.spawn(sp, meanwhile)
}

// adopt makes the PID 1 asked for early this run's, running meanwhile (if
// not nil) before it reads the spawner's reply.
func (sv *supervisor) adopt(sp *Spawner, e *earlyJail, meanwhile func() error) error {
	sv.sp, sv.pipes, sv.slots, sv.owner = sp, e.pipes, e.slots, e.owner
	sv.markAt("spawn-asked", e.asked)
	var meanwhileErr error
	if meanwhile != nil {
		meanwhileErr = meanwhile()
	}
	pid, err := sp.adoptReply()
	sv.pid = pid
	if err == nil {
		err = meanwhileErr
	}
	return err
}

// makeGroup creates the run's cgroup.
func (sv *supervisor) makeGroup(opts cgroup.Options) error {
	cg, err := cgroup.New(opts)
	if err != nil {
		return fmt.Errorf("cgroup: %w", err)
	}
	sv.cg = cg
	sv.mark("cgroup-created")
	return nil
}

func closeFDs(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}

// initGone is the error of a start that found PID 1 gone (err, a broken
// pipe): PID 1's own word on why, from its status lines, if it said one.
func (sv *supervisor) initGone(err error) error {
	timeout := time.After(time.Second)
	for sv.setupErr == "" {
		select {
		case ev, ok := <-sv.events:
			if !ok {
				return fmt.Errorf("start jail: the init ended (%w)", err)
			}
			sv.record(ev)
		case <-timeout:
			return fmt.Errorf("start jail: %w", err)
		}
	}
	return fmt.Errorf("start jail: %s", sv.setupErr)
}

// spawn has the spawner clone PID 1, with the pipes' jail ends as its
// descriptors 0 to 5, straight into the run's cgroup on v2, running
// meanwhile (if not nil) while it clones.
func (sv *supervisor) spawn(sp *Spawner, meanwhile func() error) error {
	sv.sp = sp
	req, slots, owner, err := newSpawnRequest(sv.childSlots)
	if err != nil {
		return fmt.Errorf("start jail: %w", err)
	}
	sv.slots, sv.owner = slots, owner
	if sv.cg != nil {
		req.cgroupFD = sv.cg.CloneFD()
	}
	sv.clonedIn = req.cgroupFD >= 0
	pid, err := sp.spawn(req, sv.pipes.jail[:], meanwhile)
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
			case statusReady:
				sv.ready = true
				return nil
			case statusError:
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
func (sv *supervisor) finish(ctx context.Context, s *Spec, startErr error) (*result.Result, Teardown) {
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
	if s.Zygote != nil && res.Status != result.StatusSandboxError { // it started
		res.Start = "cold"
		if sv.zygote != nil {
			res.Start = "zygote"
		}
	}
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
	for i := range sv.slots {
		sv.slots[i].release()
	}
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
	if sv.zygote != nil { // not our child: watched, not waited for
		sv.zygote.awaitExit()
		sv.reaped = true
		sv.mark("reaped")
		return nil
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
	stdout := newCapture(s.OutputLimit, s.Stdout, s.Capture)
	stderr := newCapture(s.OutputLimit, s.Stderr, s.Capture)
	stdout.truncate, stderr.truncate = s.OutputTruncate, s.OutputTruncate
	go stdout.drain(sv.pipes.outR)
	go stderr.drain(sv.pipes.errR)
	scratch, err := sv.openScratch()
	if err != nil {
		return nil, err
	}
	if err := sv.sendRun(); err != nil {
		// The jail's own word on why it stopped reading, if it said one.
		scratch.close()
		return nil, sv.initGone(err)
	}
	sv.feedStdin(s.Stdin)
	var waitErr error
	if ended := sv.supervise(ctx, stdout, stderr); ended {
		waitErr = sv.reap()
	}
	<-stdout.done
	<-stderr.done
	res := sv.judge(waitErr, stdout, stderr)
	sv.fetch(scratch, res)
	return res, nil
}

// openScratch opens the scratch mounts of a run that fetches files
// (fetch.go), once PID 1 has made them and before it has the run; nil
// for a run that fetches none.
func (sv *supervisor) openScratch() (*scratchDirs, error) {
	if len(sv.spec.Fetch) == 0 {
		return nil, nil
	}
	if sv.zygote == nil && !sv.ready {
		if err := sv.awaitReady(); err != nil {
			return nil, err
		}
	}
	sc, err := openScratch(sv.pid, sv.spec)
	if err != nil {
		return nil, fmt.Errorf("fetch: %w", err)
	}
	return sc, nil
}

// fetch reads the files the run asked for into res, once every process
// of the jail has ended (PID 1 reaped), if the program started.
func (sv *supervisor) fetch(scratch *scratchDirs, res *result.Result) {
	if scratch == nil {
		return
	}
	defer scratch.close()
	if sv.started == 0 {
		return
	}
	sv.reap() // its error is the teardown's to report
	res.Fetched = scratch.fetch(sv.spec)
	sv.mark("fetched")
}

// sendRun hands the jail its run: the plan's second part to PID 1, or to
// a zygote's program its run (zygote_child.go).
func (sv *supervisor) sendRun() error {
	if sv.zygote != nil {
		return sv.zygote.send(sv)
	}
	run, launch := runPlan(sv.spec, hostIDs(), sv.spec.Seccomp, sv.prepared)
	sv.mark("plan-built")
	out := run.framed()
	if launch != nil {
		out = append(out, launch.framed()...)
	}
	if err := writeAll(sv.pipes.planW, out); err != nil {
		return err
	}
	return sv.pipes.planW.Close()
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
			if ev.kind == statusStart && sv.sp != nil {
				sv.sp.done()
			}
			if ev.kind == statusStart {
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
	switch {
	case sv.zygote != nil:
		sv.zygote.kill(sv.owner)
	case sv.pid > 0: // 0 or less would name a process group, or every process
		killAsOwner(sv.owner, func() error { return unix.Kill(sv.pid, unix.SIGKILL) })
	}
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
	case statusError:
		if sv.setupErr == "" {
			sv.setupErr = strings.Join(ev.args, " ")
		}
	case statusPhase:
		if len(ev.args) == 2 {
			sv.markAt(ev.args[0], ns(1))
		}
	case statusStart:
		sv.started = ns(0)
		sv.markAt("started", sv.started)
	case statusExit:
		sv.status = unix.WaitStatus(ns(0))
		sv.exited = ns(1)
		sv.cpuUsec = ns(2)
		sv.maxRSSKiB = ns(3)
		sv.gotExit = true
		pid1Wall := len(ev.args) > 4 && ev.args[4] == result.LimitWall
		switch {
		case pid1Wall && sv.killedFor == "":
			// PID 1 held the wall-clock limit itself (the supervisor
			// was not scheduled in time).
			sv.killedFor = result.LimitWall
		case !pid1Wall && sv.killedFor == result.LimitWall && sv.exited < sv.started+int64(sv.spec.Timeout):
			// PID 1 saw the program end before its deadline: the
			// supervisor's kill came late (it was stopped, starved or
			// paused, and woke to its deadline before this line) and
			// ended nothing. The jail's account is the verdict.
			sv.killedFor = ""
		}
		sv.markAt("exited", sv.exited)
	}
}

// drainEvents consumes the init's status lines until it has ended.
func (sv *supervisor) drainEvents(events <-chan event) {
	for ev := range events {
		sv.record(ev)
	}
}
