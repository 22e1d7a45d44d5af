package nsjail

import (
	"context"
	"fmt"

	"github.com/microbox/microbox/cgroup"
	"github.com/microbox/microbox/result"
)

// judge decides the verdict: first the limits enforced (time, by the
// jail's account: PID 1's times, the cgroup's CPU count; output), then
// what the cgroup recorded (OOM), then the program's exit status.
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
	// A program that wrote past the limit and ended before the kill came
	// (its exit reported first) gets the same verdict.
	case stdout.over():
		r.Status, r.Limit = result.StatusOutputLimit, result.LimitStdout
	case stderr.over():
		r.Status, r.Limit = result.StatusOutputLimit, result.LimitStderr
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
	u, err := sv.usage()
	if err != nil && sv.setupErr == "" {
		sv.setupErr = "read cgroup usage: " + err.Error()
		return
	}
	cpu := float64(u.CPU) / 1e6
	r.CPUTimeMs, r.PeakMemoryBytes = &cpu, &u.PeakMemory
	sv.oomKilled = u.OOMKills > 0
	if l := sv.spec.CPUTime; l > 0 && u.CPU >= l && (sv.killedFor == "" || sv.killedFor == result.LimitWall) {
		// The run used up its CPU time, so it would have been ended for
		// it, before its own end or its wall deadline, by a supervisor
		// that looked in time: the verdict does not depend on whether
		// the CPU check or the program's end came first.
		sv.killedFor = result.LimitCPU
	}
}

// usage reads the run's cgroup usage. The run has ended, and its verdict
// (an OOM kill's, say) is in the cgroup: a process short of descriptors
// for the read, while other runs hold theirs, tries again for a while
// rather than lose it.
func (sv *supervisor) usage() (u cgroup.Usage, err error) {
	RetryWhile(context.Background(), func() bool {
		u, err = sv.cg.Usage()
		return NoDescriptors(err)
	})
	return u, err
}
