package nsjail

// A zygote: a template interpreter, CPython started once in a jail of its
// own with the operator's preloads imported, from which each run of its
// shape is forked into a sandbox of the run's own. zygote.py is the other
// side, and says what each of its processes does; this file starts
// templates, has them fork children ahead of their runs, and runs a run in
// a child, through the same supervisor, limits and verdict as a cold run.

import (
	"context"
	_ "embed"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/microbox/microbox/cgroup"
	"github.com/microbox/microbox/field"
	"github.com/microbox/microbox/result"
)

//go:embed zygote.py
var zygoteSource []byte

// The template's files, in its root: the bootstrap, and the empty file a
// child's masked /proc entries read as.
const (
	zygoteFile  = RootFilesDir + "/zygote.py"
	zygoteEmpty = RootFilesDir + "/empty"
)

// PreloadTimeout bounds how long a template may take to start and import
// its preloads.
const PreloadTimeout = time.Minute

// ZygoteChildren is how many children a template may have at once: each
// has a host uid range of its own, mapped into the template's user
// namespace when the template starts.
const ZygoteChildren = 32

// A Template is a started zygote. Its children run specs of the shape it
// was started for (ZygoteKeyOf).
type Template struct {
	key     ZygoteKey
	spec    *Spec // the template's own jail
	sv      *supervisor
	ctl     *os.File // the control socket, the template's fd 0
	Version string   // the template's Python, e.g. 3.11.2
	Born    time.Time
	log     *capture // the template's stderr, the start of it

	mu    sync.Mutex
	free  []int // uid slots of the template's map no child holds
	forks int
	err   error         // why the template is gone; nil while it lives
	gone  chan struct{} // closed when the template's jail has ended
}

// Zygote asks that a run fork from a zygote's template, where its runner
// keeps templates (a server, batch, eval): Preload are the modules the
// template imports first. Anywhere else the run starts cold.
type Zygote struct {
	Preload []string
	// Fallback starts the run cold where no template can take it (one
	// that failed to start or died, a run a fork cannot give what it
	// asks); without it, such a run fails, saying why.
	Fallback bool
	// Cold, set by CheckZygote, says why a Fallback run starts cold.
	Cold string
}

// ErrBusy is a template's answer when all of its children are in use.
var ErrBusy = fmt.Errorf("all %d of the template's children are in use", ZygoteChildren)

// CheckZygote checks that a fork of a template can run s as a cold run
// would, if s asks for a zygote: if not, a Fallback run is marked to
// start cold (Zygote.Cold), any other refused; a preload that is no
// module name is refused either way.
func (s *Spec) CheckZygote() error {
	if s.Zygote == nil {
		return nil
	}
	s.Zygote.Cold = ""
	err := zygoteCheck(s)
	var fe *field.Error
	switch {
	case err == nil:
		return nil
	case errors.As(err, &fe) && fe.Name == "Preload":
		return err
	case s.Zygote.Fallback:
		s.Zygote.Cold = err.Error()
		return nil
	}
	return field.Errorf("Zygote", "{Zygote}: %v ({ZygoteFallback} runs it cold instead)", err)
}

// A ZygoteKey is what runs forked from one template share: the jail's
// shape (mounts, cgroup limits, root), the preloads, the interpreter and
// its options, and everything a child applies before its run is known
// (filter, rlimits).
type ZygoteKey struct {
	shape   Shape
	preload string
	argv0   string // the interpreter and its options, NUL-separated
	seccomp string
	rlimits Rlimits
	mode    string
}

// ZygoteKeyOf is the key of the template that runs s, whose program is
// python -c CODE or python FILE, with the preloads s.Zygote names; it
// refuses what a fork cannot give (zygoteCheck).
func ZygoteKeyOf(s *Spec) (ZygoteKey, error) {
	if err := zygoteCheck(s); err != nil {
		return ZygoteKey{}, err
	}
	sh, err := ShapeOf(withoutCodeFile(s))
	if err != nil {
		return ZygoteKey{}, err
	}
	a, _ := parseZygoteArgv(s)
	var preload []string
	if s.Zygote != nil {
		preload = s.Zygote.Preload
	}
	return ZygoteKey{shape: sh, preload: strings.Join(preload, ","), argv0: strings.Join(a.argv0, "\x00"),
		seccomp: string(s.Seccomp), rlimits: s.Rlimits.withDefaults(), mode: s.SeccompMode}, nil
}

// withoutCodeFile is s without the root file long code travels in
// (Options.longCode): the code is the run's, however long, and not the
// template's shape.
func withoutCodeFile(s *Spec) *Spec {
	c := *s
	c.RootFiles = slices.DeleteFunc(slices.Clone(s.RootFiles), func(f File) bool { return f.Path == CodeFile })
	return &c
}

// Equal reports whether runs of keys a and b fork from the same template.
func (a ZygoteKey) Equal(b ZygoteKey) bool {
	return a.shape.Equal(b.shape) && a.preload == b.preload && a.argv0 == b.argv0 &&
		a.seccomp == b.seccomp && a.rlimits == b.rlimits && a.mode == b.mode
}

// Preload is the key's preloaded modules.
func (a ZygoteKey) Preload() []string {
	if a.preload == "" {
		return nil
	}
	return strings.Split(a.preload, ",")
}

// zygoteFlags are the interpreter's options a template can start with
// for its runs: each only chooses how the interpreter sets itself up.
var zygoteFlags = map[string]bool{"-I": true, "-S": true, "-s": true, "-E": true, "-B": true, "-P": true, "-u": true}

// zygoteArgv is a run's command line as a zygote takes it.
type zygoteArgv struct {
	argv0 []string // the interpreter and its options: the template's
	code  *string  // -c CODE
	file  string   // or FILE
	argv  []string // sys.argv
}

// parseZygoteArgv splits s's command line: the interpreter and its
// options, then -c CODE or FILE, then the program's arguments. Code too
// long for the command line (Options.longCode) is the file's own.
func parseZygoteArgv(s *Spec) (zygoteArgv, error) {
	i := 1
	for i < len(s.Argv) && zygoteFlags[s.Argv[i]] {
		i++
	}
	a := zygoteArgv{argv0: s.Argv[:i]}
	switch {
	case i == len(s.Argv):
		return a, errors.New("a zygote run needs python -c CODE or python FILE")
	case s.Argv[i] == "-c" && i+1 < len(s.Argv):
		code := s.Argv[i+1]
		for _, f := range s.RootFiles {
			if f.Path == CodeFile {
				code = string(f.Data)
			}
		}
		a.code, a.argv = &code, append([]string{"-c"}, s.Argv[i+2:]...)
	case strings.HasPrefix(s.Argv[i], "-"):
		return a, fmt.Errorf("a zygote's template cannot start with the interpreter's option %s; it takes %s", s.Argv[i], strings.Join(slices.Sorted(maps.Keys(zygoteFlags)), " "))
	default:
		a.file, a.argv = s.Argv[i], s.Argv[i:]
	}
	return a, nil
}

// zygoteCheck refuses a spec a fork of a template cannot run as a cold run
// would: the interpreter's options and the variables it reads at its
// start were the template's, and the policy layers' files are read at
// that start too.
func zygoteCheck(s *Spec) error {
	if err := s.Validate(); err != nil {
		return err
	}
	if _, err := parseZygoteArgv(s); err != nil {
		return err
	}
	for _, f := range s.RootFiles {
		if f.Path != CodeFile {
			return errors.New("a zygote run cannot have the policy layers' files: its interpreter started before them")
		}
	}
	if err := startEnvCheck(s); err != nil {
		return err
	}
	if s.Zygote != nil {
		for _, m := range s.Zygote.Preload {
			if !moduleName.MatchString(m) {
				return field.Errorf("Preload", "{Preload}: %q is not a module name", m)
			}
		}
	}
	return nil
}

// startEnvCheck refuses a variable of s's environment, other than the
// base environment's (the template's), that is read only at the
// interpreter's start: by the dynamic loader and libc (LD_*, GLIBC_*,
// MALLOC_*), by Python for itself (PYTHON*), its locale (LANG, LC_ALL,
// LC_CTYPE: the encodings), and its user site (HOME, unless -s or -I
// turn it off). A fork's interpreter has started with the template's.
// (TZ and TMPDIR are read later, and zygote.py renews what they set.)
func startEnvCheck(s *Spec) error {
	base, _ := BaseEnv(nil)
	a, _ := parseZygoteArgv(s)
	userSite := !slices.Contains(a.argv0, "-s") && !slices.Contains(a.argv0, "-I")
	for _, e := range s.Env {
		k, _, _ := strings.Cut(e, "=")
		if contains(base, e) {
			continue
		}
		fix := "leave it out"
		switch {
		case k == "HOME" && userSite:
			fix += ", or pass the interpreter's -s"
		case strings.HasPrefix(k, "PYTHON"), strings.HasPrefix(k, "LD_"), strings.HasPrefix(k, "GLIBC_"), strings.HasPrefix(k, "MALLOC_"),
			k == "LANG", k == "LC_ALL", k == "LC_CTYPE":
		default:
			continue
		}
		return fmt.Errorf("environment variable %s cannot take effect in a zygote run: it is read at the interpreter's start, and a fork's interpreter started before it (%s)", k, fix)
	}
	return nil
}

// moduleName is a dotted Python module name.
var moduleName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$`)

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
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
	t.Env = env
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
	sv := &supervisor{began: monotonic(), childSlots: ZygoteChildren, spec: t.spec, control: true}
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
	// The template's configuration, with this binary, which its children
	// exec as their PID 1 (nsinit/zygote.c): the template's root need
	// not have it.
	exe, err := os.Open("/proc/self/exe")
	if err != nil {
		return fmt.Errorf("open microbox's own binary: %w", err)
	}
	defer exe.Close()
	cfg, _ := json.Marshal(templateConfig{Preload: t.key.Preload()})
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
func (t *Template) endedUnder() bool {
	select {
	case <-t.gone:
		return true
	case <-time.After(time.Second):
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

// childRequest is what a child's program needs before its run is known
// (zygote.py: sandbox); its PID 1 has a plan (zygotePlan).
type childRequest struct {
	UID        int        `json:"uid"`
	GID        int        `json:"gid"`
	SandboxUID int        `json:"sandbox_uid"`
	Rlimits    [][3]int64 `json:"rlimits"`
	Seccomp    string     `json:"seccomp"`
}

// fork has the template clone the child's PID 1 into new namespaces;
// PID 1 says hello, is moved into the run's cgroup, forks the program and
// becomes microbox's init, which carries out its plan and lets the
// program go on, which sandboxes itself and says it is ready.
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
	req, _ := json.Marshal(t.childRequest(uid))
	err = sendmsg(t.ctl, req, unix.UnixRights(ctlTheirs, runTheirs))
	// Ours no longer: EOF on each then means the child has let go of it
	// (or the template, dying, never took it).
	unix.Close(ctlTheirs)
	unix.Close(runTheirs)
	if err != nil {
		return fmt.Errorf("ask the template: %w", err)
	}
	// The run's cgroup is made while the template clones.
	if sh := t.key.shape; sh.cgroup != nil {
		if c.cg, err = cgroup.New(*sh.cgroup); err != nil {
			return fmt.Errorf("cgroup: %w", err)
		}
	}
	if err := c.hello(); err != nil {
		return err
	}
	if c.cg != nil {
		if err := c.cg.Adopt(c.pid); err != nil {
			return err
		}
	}
	if _, err := ctl.Write([]byte(zygoteGo)); err != nil {
		return err
	}
	plan := zygotePlan(t.spec, idMapping{programUID: uid, programGID: uid})
	if err := writeAll(c.ctl, plan.framed()); err != nil {
		return fmt.Errorf("send the run's init its plan: %w", err)
	}
	return c.ready()
}

// childRequest is the request for a child whose program's host uid is
// uid, in the template's terms.
func (t *Template) childRequest(uid int) childRequest {
	req := childRequest{UID: uid, GID: uid, SandboxUID: ProgramUID, Seccomp: hex.EncodeToString([]byte(t.key.seccomp))}
	rl := t.key.rlimits
	for _, r := range [][3]int64{{unix.RLIMIT_CORE, 0, 0}, {unix.RLIMIT_NOFILE, int64(rl.NoFile), int64(rl.NoFile)},
		{unix.RLIMIT_SIGPENDING, int64(rl.SigPending), int64(rl.SigPending)}, {unix.RLIMIT_MSGQUEUE, int64(rl.MsgQueue), int64(rl.MsgQueue)}} {
		req.Rlimits = append(req.Rlimits, r)
	}
	return req
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
		return fmt.Errorf("pidfd of the run's init: %w", err)
	}
	c.pidfd = os.NewFile(uintptr(pidfd), "pidfd")
	return nil
}

// failure is the child's own word on why it failed, which begins with
// said: an "error" status line.
func (c *ZygoteChild) failure(said []byte) error {
	c.ctl.SetReadDeadline(time.Now().Add(time.Second))
	defer c.ctl.SetReadDeadline(time.Time{})
	rest := make([]byte, 1024)
	n, _ := io.ReadFull(c.ctl, rest)
	line, _, _ := strings.Cut(string(said)+string(rest[:n]), "\n")
	if msg, ok := strings.CutPrefix(line, statusError+" "); ok {
		return errors.New(strings.TrimPrefix(msg, "zygote: ")) // the caller says it is the zygote's
	}
	return fmt.Errorf("the template's child failed (%q)", line)
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
func (c *ZygoteChild) Run(ctx context.Context, s *Spec) (*result.Result, func() error) {
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
	req := runRequest{Argv: a.argv, OrigArgv: s.Argv, Env: s.Env, Cwd: s.Workdir, Code: a.code, File: a.file,
		TimeoutNs: s.Timeout.Nanoseconds(), NullStdin: s.Stdin == nil}
	for _, f := range s.Files {
		if a.code == nil && f.Path == a.file {
			code := string(f.Data)
			req.Code = &code
		}
	}
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

// socketpair makes a connected pair: ours non-blocking in Go's poller,
// theirs plain.
func socketpair(typ int) (*os.File, int, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, typ|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, -1, fmt.Errorf("socketpair: %w", err)
	}
	unix.SetNonblock(fds[0], true)
	return os.NewFile(uintptr(fds[0]), "zygote socket"), fds[1], nil
}

// control runs fn on f's descriptor without taking it out of Go's poller
// (f.Fd would make it blocking).
func control(f *os.File, fn func(fd int) error) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) { ferr = fn(int(fd)) }); err != nil {
		return err
	}
	return ferr
}

// readable reports, without waiting, whether f has something to read (a
// pidfd: its process has ended).
func readable(f *os.File) bool {
	ready := false
	control(f, func(fd int) error {
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, _ := unix.Poll(fds, 0)
		ready = n > 0
		return nil
	})
	return ready
}
