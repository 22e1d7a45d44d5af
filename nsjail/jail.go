package nsjail

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/microbox/microbox/cgroup"
	"github.com/microbox/microbox/result"
	"golang.org/x/sys/unix"
)

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
// can take: the cgroup limits, the mounts and the program's sandbox. It also records which
// directory a prepared root was, so that a root replaced on disk is not
// served from jails that bound the old one.
type Shape struct {
	of     *Spec // the spec it was computed from
	cgroup *cgroup.Options
	mounts *plan
	// program is what a jail started ahead prepares its program's process
	// with (preparedPlan); nil when the spec's program cannot be prepared.
	program *plan
	root    [2]uint64 // device and inode of Spec.RootDir
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
	sh := Shape{of: s, mounts: mounts, program: preparedPlan(s, hostIDs())}
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
		bytes.Equal(a.mounts.buf.Bytes(), b.mounts.buf.Bytes()) && a.root == b.root &&
		(a.program == nil) == (b.program == nil) &&
		(a.program == nil || bytes.Equal(a.program.buf.Bytes(), b.program.buf.Bytes()))
}

// Start starts a jail for runs of shape sh and waits until its PID 1 is
// ready for the run.
func (sp *Spawner) Start(sh Shape) (*Jail, error) {
	if sh.mounts == nil {
		return nil, errors.New("nsjail: start a jail: no shape (use ShapeOf)")
	}
	// Its program's process is prepared too, where the spec allows it: a
	// run's path from request to execve is then the steps that depend on
	// the run.
	sv := &supervisor{began: monotonic(), prepared: sh.program != nil}
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
// first, see nsinit/spawner.c). After "ready" the init reports nothing until it has
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
func (j *Jail) Run(ctx context.Context, s *Spec, sh Shape) (res *result.Result, teardown Teardown) {
	sv := j.sv
	j.sv = nil
	switch {
	case sv == nil:
		return result.SandboxError("nsjail: this jail has already run"), NoTeardown
	case sh.of != s || !sh.Equal(j.shape):
		sv.discard()
		return result.SandboxError("nsjail: the jail was started for other cgroup limits or mounts"), NoTeardown
	}
	if err := s.Validate(); err != nil {
		sv.discard()
		return result.SandboxError(s.message(err)), NoTeardown
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
