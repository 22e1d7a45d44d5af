package nsjail

import (
	"context"
	"errors"
	"fmt"
	"time"

	"golang.org/x/sys/unix"

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
		return unavailable(result.SandboxError(err.Error()), err)
	}
	sp.once = true
	defer sp.Close()
	return sp.Run(ctx, s)
}

// A Teardown finishes a run whose verdict came before its jail's end
// (RunEarly): it waits for that end and removes what the run held (its
// cgroup), saying what it could not. The caller calls it once the caller
// has the verdict, or passes it on.
type Teardown func() error

// NoTeardown is the Teardown of a run that holds nothing: one that never
// started, or one already settled.
func NoTeardown() error { return nil }

// Run is Run with the spawner sp.
func (sp *Spawner) Run(ctx context.Context, s *Spec) *result.Result {
	return Settle(sp.RunEarly(ctx, s))
}

// RunEarly is Run for a caller that can answer before the jail is gone
// (`microbox serve`): it returns the verdict as soon as the program has
// ended and its output is closed, and a teardown that waits for the
// jail's end (the kernel tearing down its namespaces takes about a
// millisecond) and removes its cgroup. The caller must call teardown.
func (sp *Spawner) RunEarly(ctx context.Context, s *Spec) (res *result.Result, teardown Teardown) {
	if err := s.Validate(); err != nil {
		return result.SandboxError(s.message(err)), NoTeardown
	}
	sv := &supervisor{began: monotonic(), trace: s.Trace}
	sv.markMoments(s.Before)
	sh, err := ShapeOf(s)
	if err == nil {
		err = sv.start(sp, sh)
	}
	res, teardown = sv.finish(ctx, s, err)
	return unavailable(res, err), teardown
}

// A run that could not start for want of descriptors is no verdict: the
// process is short of them while other runs hold theirs, and has more
// once those end. So what needs them is tried again (RetryWhile), with a
// wait doubling from retryFirst to retryMax, for up to RetryFor.
const (
	retryFirst = 10 * time.Millisecond
	retryMax   = 250 * time.Millisecond
	RetryFor   = 3 * time.Second
)

// RetryWhile calls try until it returns false, RetryFor has passed or
// ctx has ended, waiting between calls.
func RetryWhile(ctx context.Context, try func() (again bool)) {
	giveUp := time.Now().Add(RetryFor)
	for wait := retryFirst; try() && time.Now().Add(wait).Before(giveUp); wait = min(2*wait, retryMax) {
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// StartRetried calls run until its run starts (its result has no
// Unavailable), as RetryWhile does, doing the teardowns of the tries
// that failed at once; it returns the last try's. A run that still could not
// start keeps its Unavailable: the caller answers "busy" rather than a
// verdict.
func StartRetried(ctx context.Context, run func() (*result.Result, Teardown)) (res *result.Result, teardown Teardown) {
	RetryWhile(ctx, func() bool {
		res, teardown = run()
		if res.Unavailable == nil {
			return false
		}
		// Nothing of a run that did not start is kept, and what it
		// holds goes back at once, for the others.
		teardown()
		teardown = NoTeardown
		return true
	})
	return res, teardown
}

// ErrOutOfDescriptors is the cause (Result.Unavailable) of a run that
// could not start because microbox, or the whole system, had no file
// descriptor to spare for its jail (EMFILE, ENFILE): its pipes, its
// cgroup, its uid range's lock. Nothing of the run's caused it, and the
// same run may start once other runs have ended.
var ErrOutOfDescriptors = errors.New("out of file descriptors")

// unavailable marks res, the result of a run whose start failed with
// err, as Unavailable if the start failed for want of descriptors.
func unavailable(res *result.Result, err error) *result.Result {
	if NoDescriptors(err) {
		res.Unavailable = fmt.Errorf("%w: %v", ErrOutOfDescriptors, err)
		msg := fmt.Sprintf("not started: microbox is %v; run it again when fewer runs are under way, or raise RLIMIT_NOFILE", res.Unavailable)
		res.Error = &msg
	}
	return res
}

// Settle calls a run's teardown and records its failure in the result:
// the verdict stands, but a leak must not pass in silence.
func Settle(res *result.Result, teardown Teardown) *result.Result {
	if err := teardown(); err != nil && res.Status != result.StatusSandboxError {
		msg := "cleanup: " + err.Error()
		res.Error = &msg
	}
	return res
}

func monotonic() int64 {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return ts.Nano()
}

func ms(ns int64) float64 { return float64(ns) / 1e6 }

// NoDescriptors reports whether err is the process's or the system's
// lack of a file descriptor (EMFILE, ENFILE).
func NoDescriptors(err error) bool {
	return errors.Is(err, unix.EMFILE) || errors.Is(err, unix.ENFILE)
}
