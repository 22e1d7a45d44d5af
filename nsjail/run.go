package nsjail

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/microbox/microbox/cgroup"
)

// namespaces are the ones every jail gets (the outer init clones them).
// The kernel creates the user namespace first, so it owns the others.
const namespaces = unix.CLONE_NEWUSER | unix.CLONE_NEWPID | unix.CLONE_NEWNS | unix.CLONE_NEWNET |
	unix.CLONE_NEWIPC | unix.CLONE_NEWUTS | unix.CLONE_NEWCGROUP

// Run executes the spec in a fresh jail and returns its verdict. It never
// returns nil: when the jail cannot be set up, the Result says
// sandbox_error and why. Everything Run creates is gone when it returns.
func Run(ctx context.Context, s *Spec) *Result {
	if err := s.Validate(); err != nil {
		return sandboxError(err.Error())
	}
	sv := &supervisor{spec: s, began: monotonic()}
	res, err := sv.run(ctx)
	if err != nil {
		res = sandboxError(err.Error())
	}
	if sv.cg != nil {
		res.Cgroup = string(sv.cg.Mode())
		if err := sv.cg.Remove(); err != nil && res.Status != StatusSandboxError {
			// The verdict stands, but a leak must not pass in silence.
			msg := "cleanup: " + err.Error()
			res.Error = &msg
		}
		sv.mark("cgroup-removed")
	}
	res.Trace = sv.phases
	res.Seccomp = s.SeccompMode
	return res
}

// supervisor is the parent side of one run.
type supervisor struct {
	spec  *Spec
	cg    cgroup.Run
	cmd   *exec.Cmd
	began int64 // monotonic ns when Run was called

	// What the init reported.
	setupErr  string
	started   int64 // monotonic ns of the program's execve; 0 until then
	exited    int64
	status    unix.WaitStatus
	gotExit   bool
	cpuUsec   int64
	maxRSSKiB int64
	phases    []Phase

	killedFor string // the limit the supervisor enforced, if any
	oomKilled bool
}

// event is one status line from the init, or the end of them.
type event struct {
	kind string
	args []string
}

func (sv *supervisor) run(ctx context.Context) (*Result, error) {
	s := sv.spec
	ids := hostIDs()
	if s.Cgroup != nil {
		cg, err := cgroup.New(*s.Cgroup)
		if err != nil {
			return nil, fmt.Errorf("cgroup: %w", err)
		}
		sv.cg = cg
		sv.mark("cgroup-created")
	}
	p, err := buildPlan(s, ids, s.Seccomp)
	if err != nil {
		return nil, err
	}
	sv.mark("plan-built")
	stdout := newCapture(s.OutputLimit, s.Stdout, s.Capture)
	stderr := newCapture(s.OutputLimit, s.Stderr, s.Capture)
	pipes, err := newPipes()
	if err != nil {
		return nil, err
	}
	defer pipes.closeAll()
	sv.mark("pipes")
	if err := sv.start(pipes); err != nil {
		return nil, err
	}
	pipes.closeChildEnds()
	sv.mark("cloned")
	go stdout.drain(pipes.outR)
	go stderr.drain(pipes.errR)
	events := readEvents(pipes.statusR)

	// The init waits for its plan, so the program cannot start before it
	// is in its cgroup.
	var setupErr error
	if sv.cg != nil {
		setupErr = sv.cg.Enter(sv.cmd.Process.Pid)
	}
	if setupErr == nil {
		sv.mark("cgroup-entered")
		setupErr = writeAll(pipes.planW, p.buf.Bytes())
	}
	pipes.planW.Close()
	if setupErr != nil {
		sv.kill("")
		sv.drainEvents(events)
		sv.cmd.Wait()
		return nil, fmt.Errorf("start jail: %w", setupErr)
	}
	sv.supervise(ctx, events, stdout, stderr)
	waitErr := sv.cmd.Wait()
	<-stdout.done
	<-stderr.done
	return sv.judge(waitErr, stdout, stderr), nil
}

// start re-execs this binary as the jail's outer init (init.c), which
// creates the namespaces itself: with no namespace flags here, Go can start
// it with a cheap vfork.
func (sv *supervisor) start(p *pipes) error {
	attr := &syscall.SysProcAttr{
		// If microbox dies, so does the outer init, and with it the jail.
		Pdeathsig: syscall.SIGKILL,
	}
	if sv.cg != nil && sv.cg.CloneFD() >= 0 {
		attr.UseCgroupFD = true
		attr.CgroupFD = sv.cg.CloneFD()
	}
	sv.cmd = &exec.Cmd{
		Path:        "/proc/self/exe",
		Args:        []string{"microbox-init"},
		Env:         []string{initEnv + "=1"},
		Stdin:       sv.spec.Stdin,
		Stdout:      p.outW,
		Stderr:      p.errW,
		ExtraFiles:  []*os.File{p.planR, p.statusW}, // fds 3 and 4
		SysProcAttr: attr,
		// A stdin copied from a terminal must not hold Wait forever.
		WaitDelay: 100 * time.Millisecond,
	}
	if err := sv.cmd.Start(); err != nil {
		return fmt.Errorf("start jail: %w", err)
	}
	return nil
}

// supervise follows the run until the init has ended, enforcing the set-up
// deadline, the wall and CPU limits and the output caps.
func (sv *supervisor) supervise(ctx context.Context, events <-chan event, stdout, stderr *capture) {
	s := sv.spec
	deadline := time.NewTimer(SetupTimeout)
	defer deadline.Stop()
	var cpuCheck <-chan time.Time
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				if sv.started != 0 && sv.exited == 0 {
					sv.exited = monotonic() // ended unreported (e.g. a group OOM kill)
				}
				return // the init has ended
			}
			sv.record(ev)
			if ev.kind == "start" {
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
				sv.kill(LimitWall)
			}
		case <-cpuCheck:
			used, err := sv.cg.CPUTime()
			switch {
			case err != nil:
				sv.setupErr = "read CPU usage: " + err.Error()
				sv.kill("")
			case used >= s.CPUTime:
				sv.kill(LimitCPU)
			default:
				cpuCheck = time.After(sv.nextCPUCheck(used))
			}
		case <-stdout.exceeded:
			sv.kill(LimitStdout)
		case <-stderr.exceeded:
			sv.kill(LimitStderr)
		case <-ctx.Done():
			sv.setupErr = "interrupted: " + context.Cause(ctx).Error()
			sv.kill("")
		}
	}
}

// nextCPUCheck is when the CPU limit could first be reached: the run
// cannot use CPU time faster than the CPUs it may run on.
func (sv *supervisor) nextCPUCheck(used time.Duration) time.Duration {
	cpus := float64(runtime.NumCPU())
	if l := sv.spec.Cgroup.Limits.CPUs; l > 0 && l < cpus {
		cpus = l
	}
	wait := time.Duration(float64(sv.spec.CPUTime-used) / cpus)
	return max(wait, time.Millisecond)
}

// kill ends the whole jail once: SIGKILL to the init takes every process
// of its pid namespace with it; the cgroup kill is a second net.
func (sv *supervisor) kill(limit string) {
	if sv.killedFor != "" || sv.gotExit {
		return
	}
	sv.killedFor = limit
	if limit == "" {
		sv.killedFor = "supervisor"
	}
	if limit != "" {
		sv.exited = monotonic()
	}
	sv.cmd.Process.Kill()
	if sv.cg != nil {
		sv.cg.Kill()
	}
}

// mark records a set-up phase of the supervisor's own (with --trace).
func (sv *supervisor) mark(name string) {
	if sv.spec.Trace {
		sv.phases = append(sv.phases, Phase{Name: name, AtMs: ms(monotonic() - sv.began)})
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
			sv.phases = append(sv.phases, Phase{Name: ev.args[0], AtMs: ms(ns(1) - sv.began)})
		}
	case "start":
		sv.started = ns(0)
	case "exit":
		sv.status = unix.WaitStatus(ns(0))
		sv.exited = ns(1)
		sv.cpuUsec = ns(2)
		sv.maxRSSKiB = ns(3)
		sv.gotExit = true
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
func (sv *supervisor) judge(waitErr error, stdout, stderr *capture) *Result {
	r := &Result{Cgroup: string(cgroup.ModeNone)}
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
		r.Status = StatusSandboxError
		r.Error = &sv.setupErr
	case sv.killedFor == LimitWall || sv.killedFor == LimitCPU:
		r.Status, r.Limit = StatusTimeout, sv.killedFor
	case sv.killedFor == LimitStdout || sv.killedFor == LimitStderr:
		r.Status, r.Limit = StatusOutputLimit, sv.killedFor
	case sv.oomKilled:
		// With memory.oom.group (v2) the kernel kills the init too, so
		// there may be no exit status: the cgroup's record decides.
		if sv.gotExit {
			r.setExit(sv.status)
		} else {
			sig := "SIGKILL"
			r.Signal = &sig
		}
		r.Status, r.Limit = StatusMemory, LimitMemory
	case !sv.gotExit:
		msg := fmt.Sprintf("the jail's init ended without reporting the program's status (%v)", waitErr)
		r.Status, r.Error = StatusSandboxError, &msg
	default:
		r.setExit(sv.status)
	}
	return r
}

// account fills the usage fields: from the cgroup, which counts every
// process of the run, or else from the program's own rusage.
func (sv *supervisor) account(r *Result) {
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

// pipes are the descriptors between supervisor and init.
type pipes struct {
	planR, planW     *os.File // the plan, to the init's fd 3
	statusR, statusW *os.File // status lines, from the init's fd 4
	outR, outW       *os.File
	errR, errW       *os.File
}

func newPipes() (*pipes, error) {
	p := &pipes{}
	var err error
	if p.planR, p.planW, err = os.Pipe(); err != nil {
		return nil, fmt.Errorf("pipe: %w", err)
	}
	if p.statusR, p.statusW, err = os.Pipe(); err != nil {
		p.closeAll()
		return nil, fmt.Errorf("pipe: %w", err)
	}
	if p.outR, p.outW, err = os.Pipe(); err != nil {
		p.closeAll()
		return nil, fmt.Errorf("pipe: %w", err)
	}
	if p.errR, p.errW, err = os.Pipe(); err != nil {
		p.closeAll()
		return nil, fmt.Errorf("pipe: %w", err)
	}
	return p, nil
}

// closeChildEnds closes the parent's copies of the init's ends, so that
// EOF on each pipe means the jail has let go of it.
func (p *pipes) closeChildEnds() {
	for _, f := range []*os.File{p.planR, p.statusW, p.outW, p.errW} {
		f.Close()
	}
}

func (p *pipes) closeAll() {
	for _, f := range []*os.File{p.planR, p.planW, p.statusR, p.statusW, p.outR, p.outW, p.errR, p.errW} {
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
