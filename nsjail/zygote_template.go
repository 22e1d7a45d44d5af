package nsjail

// A zygote's template: starting one in a jail of its own, holding it, and
// ending it.

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/microbox/microbox/cgroup"
	"github.com/microbox/microbox/field"
	"github.com/microbox/microbox/nsjail/nsinit"
	"github.com/microbox/microbox/result"
)

// A Template is a started zygote. Its children run specs of the shape it
// was started for (ZygoteKeyOf).
type Template struct {
	key     ZygoteKey
	spec    *Spec // the template's own jail
	sv      *supervisor
	ctl     *os.File // the control socket, the template's fd 0
	Version string   // the template's Python, e.g. 3.11.2
	Born    time.Time
	// NotImage says why the children's PID 1 execs microbox's own binary
	// though the build has the init image (zygoteInit); nil otherwise.
	NotImage error
	log      *capture      // the template's stderr, the start of it
	cgroups  *cgroup.Maker // its children's run groups; nil: none

	mu    sync.Mutex
	free  []int // uid slots of the template's map no child holds
	forks int
	err   error         // why the template is gone; nil while it lives
	gone  chan struct{} // closed when the template's jail has ended
}

// StartTemplate starts a template for runs of key, with sp's spawner, and
// waits until it has imported its preloads. A preload that fails is the
// error, naming the module.
func (sp *Spawner) StartTemplate(key ZygoteKey, runs *Spec) (*Template, error) {
	if !RangesPerJail() {
		return nil, errors.New("a template's children each need a host uid range of their own: run microbox as root with the uid ranges mapped (microbox doctor: userns.ranges)")
	}
	t := &Template{key: key, Born: time.Now(), gone: make(chan struct{})}
	t.spec = templateSpec(runs, strings.Split(key.argv0, "\x00"))
	sh, err := ShapeOf(t.spec)
	if err == nil {
		err = t.start(sp, sh)
	}
	if err == nil && key.shape.cgroup != nil {
		if t.cgroups, err = cgroup.NewMaker(*key.shape.cgroup); err != nil {
			err = fmt.Errorf("cgroup: %w", err)
		}
	}
	var fe *field.Error
	if err != nil && !(errors.As(err, &fe) && fe.Name == "Preload") { // a preload's failure speaks for itself
		err = fmt.Errorf("start a template: %w", err)
	}
	if err != nil {
		t.end()
		return nil, err
	}
	for i := 1; i <= ZygoteChildren; i++ {
		t.free = append(t.free, i)
	}
	return t, nil
}

// templatePids is a template's jail's pids budget: its PID 1, the
// template, the pid it skips (nsinit/pid1.c: skip_program_pid) and each child's
// PID 1 until it moves to its run's cgroup.
const templatePids = 3 + ZygoteChildren

// templateSpec is the template's own jail: the runs' root, scratch and
// limits, with the bootstrap among its root files, started as the jail's
// root, with no filter (the children load it) and no time limit.
func templateSpec(runs *Spec, argv0 []string) *Spec {
	env, _ := BaseEnv(nil)
	t := *runs
	t.Argv = append(slices.Clone(argv0), zygoteFile)
	// The loader binds every symbol at the template's start, not at a
	// child's first call, which would write the template's shared
	// pages in each child (docs/zygote.md).
	t.Env = append(env, "LD_BIND_NOW=1")
	t.Files = nil
	t.RootFiles = []File{
		{Path: zygoteFile, Data: zygoteSource, Mode: 0o444},
		{Path: zygoteEmpty, Mode: 0o444},
	}
	t.Stdin, t.Stdout, t.Stderr, t.Capture = nil, nil, nil, false
	t.Seccomp, t.Trace, t.Before, t.Zygote = nil, false, nil, nil
	t.Timeout = time.Hour // unused: the template's plan has no deadline
	if runs.Cgroup != nil {
		// The runs' memory and CPU limits, but not their pids budget: each
		// run's PID 1 is cloned here before it moves to the run's cgroup,
		// where it and its program count as a cold run's PID 1 and program.
		cg := *runs.Cgroup
		cg.Limits.Pids = templatePids
		t.Cgroup = &cg
	}
	t.template = true
	return &t
}

// start runs the template's jail and program, and waits for its ready.
func (t *Template) start(sp *Spawner, sh Shape) error {
	sv := &supervisor{began: monotonic(), childSlots: ZygoteChildren, spec: t.spec, control: unix.SOCK_SEQPACKET}
	t.sv = sv
	if err := sv.start(sp, sh); err != nil {
		return err
	}
	if err := sv.awaitReady(); err != nil {
		return err
	}
	t.ctl = sv.pipes.control
	t.log = newCapture(4<<10, nil, true)
	go drainLog(sv.pipes.outR)
	go t.log.drain(sv.pipes.errR)
	if err := sv.sendRun(); err != nil {
		return err
	}
	go t.watch()
	// The template's configuration, with the init its children exec as
	// their PID 1 (zygoteInit): the template's root need not have it.
	exe, notImage, err := zygoteInit()
	t.NotImage = notImage
	if err != nil {
		return fmt.Errorf("open the runs' init: %w", err)
	}
	defer exe.Close()
	cfg, _ := json.Marshal(t.config())
	if err := sendmsg(t.ctl, cfg, unix.UnixRights(int(exe.Fd()))); err != nil {
		return fmt.Errorf("configure the template: %w", err)
	}
	var ready templateReady
	if err := t.receive(&ready, PreloadTimeout); err != nil {
		return err
	}
	if ready.Error != "" { // the preloads' fault, as the template says
		return field.Errorf("Preload", "{Preload} %s", ready.Error)
	}
	t.Version = ready.Ready
	return nil
}

// config is the template's configuration: its preloads, and what each of
// its children applies to itself, the same for every run of its key.
func (t *Template) config() templateConfig {
	sp := nsinit.ZygoteSpawn()
	cfg := templateConfig{Preload: t.key.Preload(), SandboxUID: ProgramUID, Seccomp: hex.EncodeToString([]byte(t.key.seccomp)),
		Spawn: hex.EncodeToString(sp.Code), SpawnEntry: sp.Entry, SpawnSize: sp.Size, SpawnResume: sp.Resume}
	for _, r := range t.key.rlimits.settings() { // as a cold run's plan sets them
		cfg.Rlimits = append(cfg.Rlimits, [3]int64{int64(r[0]), int64(r[1]), int64(r[1])})
	}
	return cfg
}

// receive reads one JSON message of the template's, or says why the
// template is gone.
func (t *Template) receive(v any, timeout time.Duration) error {
	buf := make([]byte, 64<<10)
	t.ctl.SetReadDeadline(time.Now().Add(timeout))
	defer t.ctl.SetReadDeadline(time.Time{})
	n, err := t.ctl.Read(buf)
	if err != nil || n == 0 {
		if e := t.Err(); e != nil {
			return e
		}
		<-t.log.done
		return fmt.Errorf("the template ended before it was ready (%v): %s", err, result.LastLine(string(t.log.buf)))
	}
	return json.Unmarshal(buf[:n], v)
}

// watch follows the template's PID 1 until it ends.
func (t *Template) watch() {
	for ev := range t.sv.events {
		t.sv.record(ev)
	}
	t.mu.Lock()
	t.err = errors.New("the template's interpreter ended")
	if t.sv.setupErr != "" {
		t.err = errors.New(t.sv.setupErr)
	}
	t.mu.Unlock()
	close(t.gone)
}

// Err is why the template is gone, nil while it lives.
func (t *Template) Err() error {
	select {
	case <-t.gone:
		t.mu.Lock()
		defer t.mu.Unlock()
		return t.err
	default:
		return nil
	}
}

// endedUnder reports whether the template has ended, for a run that ended
// without its status: a template's jail takes its runs with it as it
// ends, and is seen gone a moment after them.
func (t *Template) endedUnder() bool { return t.EndedWithin(time.Second) }

// EndedWithin reports whether the template has ended, or does within d:
// a fork that failed as its template died (a broken connection) comes a
// moment before the template's end is seen.
func (t *Template) EndedWithin(d time.Duration) bool {
	select {
	case <-t.gone:
		return true
	case <-time.After(d):
		return false
	}
}

// Pid is the pid of the template's jail's PID 1, whose end ends the
// template and its children.
func (t *Template) Pid() int { return t.sv.pid }

// Forks is how many children the template has forked.
func (t *Template) Forks() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.forks
}

// Close ends the template and its jail. Children it forked are in its
// namespaces and end with it: close it when they are done.
func (t *Template) Close() error { return t.end() }

func (t *Template) end() error {
	if t.sv == nil {
		return nil
	}
	if t.ctl != nil {
		t.ctl.Close() // the template leaves at EOF
	}
	t.sv.kill("")
	return t.sv.teardown()
}

// drainLog discards what the template writes: it writes nothing unless a
// preload does (errors come on the control socket).
func drainLog(f *os.File) {
	buf := make([]byte, 4096)
	for {
		if _, err := f.Read(buf); err != nil {
			return
		}
	}
}
