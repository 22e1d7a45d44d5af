// Command redteam is microbox's own harness for the red-team corpus in
// ../shared/redteam. It follows that corpus's README.md to the letter: it
// sets up the host fixtures (canary files and directory, the canary
// environment variable, two leaked descriptors, TCP/UDP/unix listeners),
// runs every case one at a time in sorted file-name order, applies the eight
// pass criteria to each, and finally checks that the host holds no microbox
// cgroups, mounts, temporary directories or processes.
//
// Run it from the repository root after building microbox:
//
//	make build
//	go run ./scripts/redteam [-corpus ../shared/redteam] [-c-corpus scripts/redteam/c] [-microbox bin/microbox] [-run REGEXP] [-v] [-zygote | -serve]
//
// The C cases of -c-corpus (this repository's own, *.c with the same
// header in // comments) run after the Python ones, as `microbox exec
// --lang c --file probe.h case.c`: raw system calls, checked with the same
// criteria. With -zygote they run through the same server, cold
// (--zygote-fallback: a zygote forks Python only).
//
// With -zygote every case runs as `microbox exec --zygote` through a
// `microbox serve` the harness starts (and stops before the leftover
// checks): each forks from a warm interpreter (docs/zygote.md).
//
// With -serve every case runs through a `microbox serve` with jails
// started ahead, whose program is forked and sandboxed before its run
// comes (docs/server.md). Each Python case is preceded by a run of `pass`
// with the case's limits, so that the case finds a jail of its shape
// ready; the harness says how many cases did (from their --trace).
//
// It prints `PASS name` or `FAIL name: reason; reason` for every case, then
// the same for the pseudo-case `after-corpus` (the leftover checks), and ends
// with exactly `N passed, M failed`. The exit status is 0 when everything
// passed, 1 when something failed and 2 when the harness could not run.
//
// Each case runs as `microbox exec --json <limits> case.py`. The README's
// command has no --json; it is added because microbox's "status" field is
// the verdict the README's table names, exactly, whereas the exit code alone
// is ambiguous (a program may itself exit 122-125 or 128+N). The harness also
// checks that the exit code agrees with that status. The sandboxed program
// sees the same thing in both modes: microbox hands it pipes (and copies a
// terminal stdin through a pipe), never the caller's own descriptors.
package main

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"os/user"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/microbox/microbox/cgroup"
	"golang.org/x/sys/unix"
)

// Host paths and names the README fixes.
const (
	canaryFile     = "/tmp/microbox-redteam-canary.txt"
	canaryDir      = "/tmp/microbox-redteam-canary-dir"
	canarySock     = "/tmp/microbox-redteam-canary.sock"
	canaryAbstract = "@microbox-redteam-canary"
	canaryEnv      = "MICROBOX_REDTEAM_CANARY"
	tokenPrefix    = "MICROBOX-REDTEAM-CANARY-"
	markerGlob     = "microbox-redteam-marker-*"
	survivorPrefix = "mbxrt"
	cgroupPrefix   = "microbox-jail-"
)

// Output kept per stream. microbox caps each of the program's streams at
// 1 MiB by default; JSON escaping can at worst multiply that by six.
const (
	maxStdout = 8 << 20
	maxStderr = 1 << 20
)

// defaultTimeout is microbox's own --timeout default, for cases whose
// limits do not set one.
const defaultTimeout = 10 * time.Second

var verdicts = []string{"ok", "nonzero", "signaled", "timeout", "memory", "output_limit", "sandbox_error"}

var expectations = []string{"ok", "nonzero", "timeout", "memory", "signaled", "output_limit", "any_but_escape"}

type options struct {
	corpus   string
	cCorpus  string
	microbox string
	run      *regexp.Regexp
	verbose  bool
	zygote   bool   // every case through a server, forked from a zygote's template
	serve    bool   // every case through a server, in a jail started ahead
	session  bool   // every Python case as a session's second cell (session.go)
	server   string // the server build, for -session
}

func main() {
	opts, err := parseFlags()
	if err != nil {
		fmt.Fprintln(os.Stderr, "redteam:", err)
		os.Exit(2)
	}
	code, err := run(opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, "redteam:", err)
		os.Exit(2)
	}
	os.Exit(code)
}

func parseFlags() (*options, error) {
	corpus := flag.String("corpus", "../shared/redteam", "directory holding the red-team cases")
	cCorpus := flag.String("c-corpus", "scripts/redteam/c", "directory holding the C cases (\"\": none)")
	mb := flag.String("microbox", "bin/microbox", "the microbox binary to test")
	sel := flag.String("run", "", "only run cases whose name (without .py or .c) matches this regular expression")
	verbose := flag.Bool("v", false, "print microbox's output for every failed case")
	zygote := flag.Bool("zygote", false, "run every case as `microbox exec --zygote` through a `microbox serve` the harness starts, so each forks from a warm interpreter")
	serve := flag.Bool("serve", false, "run every case through a `microbox serve` the harness starts, in jails started ahead of their runs")
	session := flag.Bool("session", false, "run every Python case as the second cell of a session of a `microbox-server serve --http` the harness starts (C cases are skipped)")
	server := flag.String("server", "bin/microbox-server", "the server build, for -session")
	flag.Parse()
	if flag.NArg() != 0 {
		return nil, fmt.Errorf("unexpected arguments %q", flag.Args())
	}
	re, err := regexp.Compile(*sel)
	if err != nil {
		return nil, fmt.Errorf("-run: %w", err)
	}
	if n := btoi(*session) + btoi(*zygote) + btoi(*serve); n > 1 {
		return nil, errors.New("-session, -zygote and -serve: give one")
	}
	o := &options{run: re, verbose: *verbose, zygote: *zygote, serve: *serve, session: *session}
	if *session {
		if o.server, err = filepath.Abs(*server); err != nil {
			return nil, err
		}
		if _, err := os.Stat(o.server); err != nil {
			return nil, fmt.Errorf("-server: %w (build it with: make build)", err)
		}
	}
	if o.corpus, err = filepath.Abs(*corpus); err != nil {
		return nil, err
	}
	if *cCorpus != "" && !*session { // a cell is Python
		if o.cCorpus, err = filepath.Abs(*cCorpus); err != nil {
			return nil, err
		}
	}
	if o.microbox, err = filepath.Abs(*mb); err != nil {
		return nil, err
	}
	if _, err := os.Stat(o.microbox); err != nil {
		return nil, fmt.Errorf("-microbox: %w (build it with: make build)", err)
	}
	return o, nil
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// run executes the whole corpus and returns the exit status.
func run(opts *options) (int, error) {
	cases, err := loadCorpora(opts)
	if err != nil {
		return 0, err
	}
	h, err := newHarness(opts)
	if err != nil {
		return 0, err
	}
	defer h.fx.cleanup()
	h.handleSignals()
	before := snapshotHost()
	if opts.zygote || opts.serve || opts.session {
		start := h.startServer
		if opts.session {
			start = h.startHTTPServer
		}
		stop, err := start()
		if err != nil {
			return 0, err
		}
		defer stop()
		h.stopServer = stop
	}
	began := time.Now()
	passed, failed := 0, 0
	tally := func(ok bool) {
		if ok {
			passed++
		} else {
			failed++
		}
	}
	for _, c := range cases {
		tally(h.report(c.name, h.runCase(c)))
	}
	if h.stopServer != nil {
		h.stopServer() // its templates are microbox's too: none may be left
	}
	tally(h.report("after-corpus", &caseResult{reasons: h.afterCorpus(before)}))
	deleteMarkers(h.markerDirs(opts.corpus))
	if opts.serve {
		fmt.Printf("%d of %d runs in jails started ahead\n", h.ahead, h.served)
	}
	fmt.Printf("corpus took %.1f s\n", time.Since(began).Seconds())
	fmt.Printf("%d passed, %d failed\n", passed, failed)
	if failed > 0 {
		return 1, nil
	}
	return 0, nil
}

// ---------------------------------------------------------------------------
// The corpus and its headers.

// testCase is one corpus file and its parsed header.
type testCase struct {
	name    string // file name without .py or .c
	path    string
	expect  string
	limits  []string
	checks  string
	stdin   []byte
	tty     bool
	repeat  int
	settle  time.Duration
	timeout time.Duration // the --timeout in limits
}

// watchdog is the README's outer limit: 2 x timeout + 10 s.
func (c *testCase) watchdog() time.Duration { return 2*c.timeout + 10*time.Second }

// loadCorpora loads the Python corpus, then the C one; -run may select
// cases of either.
func loadCorpora(opts *options) ([]*testCase, error) {
	var cases []*testCase
	for _, c := range []struct{ dir, ext string }{{opts.corpus, ".py"}, {opts.cCorpus, ".c"}} {
		if c.dir == "" {
			continue
		}
		cs, err := loadCorpus(c.dir, c.ext, opts.run)
		if err != nil && !errors.Is(err, errNoCase) {
			return nil, err
		}
		cases = append(cases, cs...)
	}
	if len(cases) == 0 {
		return nil, fmt.Errorf("%w: none in %s or %s matches -run %q", errNoCase, opts.corpus, opts.cCorpus, opts.run)
	}
	return cases, nil
}

// errNoCase: no case of a corpus matches -run.
var errNoCase = errors.New("no case matches")

func loadCorpus(dir, ext string, sel *regexp.Regexp) ([]*testCase, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*"+ext))
	if err != nil {
		return nil, err
	}
	slices.Sort(paths)
	var cases []*testCase
	for _, p := range paths {
		name := strings.TrimSuffix(filepath.Base(p), ext)
		if !sel.MatchString(name) {
			continue
		}
		c, err := parseCase(p)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		cases = append(cases, c)
	}
	if len(cases) == 0 {
		return nil, fmt.Errorf("%w: none in %s matches -run %q", errNoCase, dir, sel)
	}
	return cases, nil
}

// parseCase reads the three fixed header lines and the optional ones that
// directly follow them.
func parseCase(path string) (*testCase, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	lines := strings.Split(string(data), "\n")
	if len(lines) < 3 {
		return nil, errors.New("fewer than three header lines")
	}
	comment := commentOf(path)
	var vals [3]string
	for i, key := range []string{"expect", "limits", "checks"} {
		v, ok := strings.CutPrefix(lines[i], comment+key+":")
		if !ok {
			return nil, fmt.Errorf("line %d is not `%s%s: ...`", i+1, comment, key)
		}
		vals[i] = strings.TrimSpace(v)
	}
	c := &testCase{
		name:   strings.TrimSuffix(filepath.Base(path), filepath.Ext(path)),
		path:   path,
		expect: vals[0],
		limits: strings.Fields(vals[1]),
		checks: vals[2],
		repeat: 1,
		settle: time.Second,
	}
	if !slices.Contains(expectations, c.expect) {
		return nil, fmt.Errorf("unknown expect %q", c.expect)
	}
	if c.timeout, err = limitTimeout(c.limits); err != nil {
		return nil, err
	}
	for _, line := range lines[3:] {
		key, val, ok := optionalHeader(comment, line)
		if !ok {
			break
		}
		if err := c.setOption(key, val); err != nil {
			return nil, fmt.Errorf("%q: %w", line, err)
		}
	}
	return c, nil
}

// commentOf is how a case's header lines start: "# " in Python, "// "
// in C.
func commentOf(path string) string {
	if filepath.Ext(path) == ".c" {
		return "// "
	}
	return "# "
}

// optionalHeader splits `# key: value` for the four optional header keys.
func optionalHeader(comment, line string) (key, val string, ok bool) {
	rest, ok := strings.CutPrefix(line, comment)
	if !ok {
		return "", "", false
	}
	key, val, ok = strings.Cut(rest, ":")
	if !ok || !slices.Contains([]string{"stdin", "tty", "repeat", "settle"}, key) {
		return "", "", false
	}
	return key, strings.TrimSpace(val), true
}

func (c *testCase) setOption(key, val string) error {
	switch key {
	case "stdin":
		s, err := strconv.Unquote(val)
		if err != nil || !strings.HasPrefix(val, `"`) {
			return fmt.Errorf("stdin must be a double-quoted string: %v", err)
		}
		c.stdin = []byte(s)
	case "tty":
		if val != "yes" && val != "no" {
			return fmt.Errorf("tty must be yes or no")
		}
		c.tty = val == "yes"
	case "repeat":
		n, err := strconv.Atoi(val)
		if err != nil || n < 1 {
			return fmt.Errorf("repeat must be a positive integer")
		}
		c.repeat = n
	case "settle":
		s, err := strconv.ParseFloat(val, 64)
		if err != nil || s < 0 {
			return fmt.Errorf("settle must be a number of seconds")
		}
		c.settle = time.Duration(s * float64(time.Second))
	}
	return nil
}

// limitTimeout finds --timeout among the limits.
func limitTimeout(limits []string) (time.Duration, error) {
	for i, a := range limits {
		v, ok := strings.CutPrefix(a, "--timeout=")
		if a == "--timeout" && i+1 < len(limits) {
			v, ok = limits[i+1], true
		}
		if ok {
			d, err := time.ParseDuration(v)
			if err != nil {
				return 0, fmt.Errorf("limits: --timeout %q: %w", v, err)
			}
			return d, nil
		}
	}
	return defaultTimeout, nil
}

// ---------------------------------------------------------------------------
// Host fixtures.

// fixtures are the host-side canaries and listeners of the README.
type fixtures struct {
	token   string
	files   map[string]string // canary path -> content it must keep
	extra   []*os.File        // fds 3 and 4 of microbox
	closers []io.Closer
	once    sync.Once

	mu     sync.Mutex
	events []string // everything the listeners received
}

func setupFixtures(home string) (*fixtures, error) {
	b := make([]byte, 16)
	rand.Read(b)
	fx := &fixtures{token: tokenPrefix + hex.EncodeToString(b), files: map[string]string{}}
	if err := fx.writeCanaries(home); err != nil {
		fx.cleanup()
		return nil, err
	}
	if err := fx.openExtraFiles(); err != nil {
		fx.cleanup()
		return nil, err
	}
	if err := fx.listen(); err != nil {
		fx.cleanup()
		return nil, err
	}
	return fx, nil
}

func (fx *fixtures) writeCanaries(home string) error {
	os.RemoveAll(canaryDir)
	if err := os.Mkdir(canaryDir, 0o755); err != nil {
		return err
	}
	content := fx.token + "\n"
	for _, p := range []string{canaryFile, filepath.Join(home, ".microbox-redteam-canary"), filepath.Join(canaryDir, "canary.txt")} {
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			return err
		}
		fx.files[p] = content
	}
	return nil
}

// openExtraFiles opens the two descriptors microbox must not pass on: the
// canary file read-only and the host's /tmp as a directory.
func (fx *fixtures) openExtraFiles() error {
	f, err := os.Open(canaryFile)
	if err != nil {
		return err
	}
	fx.extra = append(fx.extra, f)
	d, err := os.Open("/tmp")
	if err != nil {
		return err
	}
	fx.extra = append(fx.extra, d)
	return nil
}

func (fx *fixtures) listen() error {
	os.Remove(canarySock)
	for _, a := range [][2]string{{"tcp4", "127.0.0.1:47913"}, {"tcp6", "[::1]:47913"},
		{"unix", canaryAbstract}, {"unix", canarySock}} {
		l, err := net.Listen(a[0], a[1])
		if err != nil {
			return fmt.Errorf("listener: %w", err)
		}
		fx.closers = append(fx.closers, l)
		go fx.accept(a[0]+" "+a[1], l)
	}
	for _, a := range [][2]string{{"udp4", "127.0.0.1:47914"}, {"udp6", "[::1]:47914"}} {
		pc, err := net.ListenPacket(a[0], a[1])
		if err != nil {
			return fmt.Errorf("listener: %w", err)
		}
		fx.closers = append(fx.closers, pc)
		go fx.receive(a[0]+" "+a[1], pc)
	}
	return nil
}

func (fx *fixtures) accept(name string, l net.Listener) {
	for {
		conn, err := l.Accept()
		if err != nil {
			return
		}
		go func() {
			defer conn.Close()
			conn.SetReadDeadline(time.Now().Add(time.Second))
			buf := make([]byte, 256)
			n, _ := io.ReadFull(conn, buf)
			fx.record(fmt.Sprintf("%s: connection from %q, first bytes %q", name, conn.RemoteAddr().String(), buf[:n]))
		}()
	}
}

func (fx *fixtures) receive(name string, pc net.PacketConn) {
	buf := make([]byte, 64<<10)
	for {
		n, addr, err := pc.ReadFrom(buf)
		if err != nil {
			return
		}
		fx.record(fmt.Sprintf("%s: %d-byte datagram from %s, first bytes %q", name, n, addr, buf[:min(n, 64)]))
	}
}

func (fx *fixtures) record(event string) {
	fx.mu.Lock()
	defer fx.mu.Unlock()
	fx.events = append(fx.events, event)
}

// eventsSince returns what the listeners received after the first n events.
func (fx *fixtures) eventsSince(n int) []string {
	fx.mu.Lock()
	defer fx.mu.Unlock()
	return slices.Clone(fx.events[n:])
}

func (fx *fixtures) eventCount() int {
	fx.mu.Lock()
	defer fx.mu.Unlock()
	return len(fx.events)
}

// check reports canary files or the canary directory that changed.
func (fx *fixtures) check() []string {
	var reasons []string
	for p, want := range fx.files {
		got, err := os.ReadFile(p)
		if err != nil {
			reasons = append(reasons, fmt.Sprintf("canary %s: %v", p, err))
		} else if string(got) != want {
			reasons = append(reasons, fmt.Sprintf("canary %s changed", p))
		}
	}
	entries, err := os.ReadDir(canaryDir)
	if err != nil {
		reasons = append(reasons, fmt.Sprintf("canary directory: %v", err))
	} else if len(entries) != 1 || entries[0].Name() != "canary.txt" {
		reasons = append(reasons, fmt.Sprintf("canary directory %s holds %d entries, want only canary.txt", canaryDir, len(entries)))
	}
	return reasons
}

func (fx *fixtures) cleanup() {
	fx.once.Do(func() {
		for _, c := range fx.closers {
			c.Close()
		}
		for _, f := range fx.extra {
			f.Close()
		}
		for p := range fx.files {
			os.Remove(p)
		}
		os.RemoveAll(canaryDir)
		os.Remove(canarySock)
	})
}

// ---------------------------------------------------------------------------
// The harness and one case.

type harness struct {
	opts     *options
	fx       *fixtures
	cwd      string
	home     string
	hostname string
	login    string

	mu      sync.Mutex
	current *os.Process   // the microbox now running, for Ctrl-C
	exited  chan struct{} // closed when current has exited
	ourPids map[int]bool

	// With -zygote: the server's socket ("" without: every case runs
	// in-process) and how to stop it, once.
	socket     string
	stopServer func()
	// With -serve: the runs served, and those of them a jail started
	// ahead took.
	served, ahead int
	api           string // with -session: the HTTP API's URL
}

// startServer starts `microbox serve` on a socket of the harness's own,
// and returns once it listens; stop ends it and waits.
func (h *harness) startServer() (stop func(), err error) {
	dir, err := os.MkdirTemp("", "microbox-redteam-serve-")
	if err != nil {
		return nil, err
	}
	socket := filepath.Join(dir, "exec.sock")
	warm := "0" // -zygote: runs fork from templates
	if h.opts.serve {
		warm = "2"
	}
	cmd := exec.Command(h.opts.microbox, "serve", "--warm", warm)
	cmd.Env = append(os.Environ(), "MICROBOX_SOCKET="+socket)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	h.ourPids[cmd.Process.Pid] = true
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cmd.Process.Signal(syscall.SIGTERM)
			cmd.Wait()
			os.RemoveAll(dir)
		})
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(socket); err == nil {
			break
		}
		if time.Now().After(deadline) {
			stop()
			return nil, fmt.Errorf("microbox serve did not listen on %s within 10 s", socket)
		}
	}
	h.socket = socket
	return stop, nil
}

func newHarness(opts *options) (*harness, error) {
	h := &harness{opts: opts, ourPids: map[int]bool{}}
	var err error
	if h.cwd, err = os.Getwd(); err != nil {
		return nil, err
	}
	if h.home, err = os.UserHomeDir(); err != nil {
		return nil, err
	}
	if h.hostname, err = os.Hostname(); err != nil {
		return nil, err
	}
	// A host without a passwd entry for us (a container image with no
	// /etc/passwd) has no login name for a run to leak.
	if u, err := user.Current(); err == nil {
		h.login = u.Username
	}
	if h.fx, err = setupFixtures(h.home); err != nil {
		return nil, err
	}
	return h, nil
}

// handleSignals stops the running microbox and removes the fixtures on
// Ctrl-C or SIGTERM.
func (h *harness) handleSignals() {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	go func() {
		s := <-ch
		h.stopCurrent()
		h.fx.cleanup()
		fmt.Fprintln(os.Stderr, "redteam: interrupted by", s)
		os.Exit(130)
	}()
}

// stopCurrent asks the running microbox to end (SIGTERM lets it kill its
// jail and remove its cgroup) and kills it if it has not within 3 s.
func (h *harness) stopCurrent() {
	h.mu.Lock()
	p, exited := h.current, h.exited
	h.mu.Unlock()
	if p == nil {
		return
	}
	p.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(3 * time.Second):
		p.Kill()
	}
}

// caseResult is what one case produced.
type caseResult struct {
	reasons []string
	outputs []*runOutput
}

func (h *harness) runCase(c *testCase) *caseResult {
	dirs := h.markerDirs(filepath.Dir(c.path))
	deleteMarkers(dirs)
	coresBefore := listCores(dirs)
	survivorsBefore := h.survivors()
	eventsBefore := h.fx.eventCount()
	res := &caseResult{}
	if h.opts.serve && filepath.Ext(c.path) == ".py" {
		h.warmUp(c)
	}
	for i := 1; i <= c.repeat; i++ {
		if h.api != "" {
			res.reasons = append(res.reasons, h.sessionRun(c)...)
			continue
		}
		out := h.execute(c)
		res.outputs = append(res.outputs, out)
		if h.opts.serve {
			h.countAhead(out)
		}
		prefix := ""
		if c.repeat > 1 {
			prefix = fmt.Sprintf("run %d/%d: ", i, c.repeat)
		}
		for _, r := range h.judgeRun(c, out) {
			res.reasons = append(res.reasons, prefix+r)
		}
	}
	time.Sleep(c.settle)
	res.reasons = append(res.reasons, h.hostChecks(dirs, coresBefore, survivorsBefore, eventsBefore)...)
	return res
}

// warmUp runs `pass` with c's limits through the server, and leaves it a
// moment to start the next jail of that shape, for c to take.
func (h *harness) warmUp(c *testCase) {
	cmd := exec.Command(h.opts.microbox, append(append([]string{"exec"}, c.limits...), "-c", "pass")...)
	cmd.Env = append(os.Environ(), "MICROBOX_SOCKET="+h.socket)
	cmd.Run() // the case's own run says what is wrong, if anything
	time.Sleep(200 * time.Millisecond)
}

// countAhead counts a served run, and whether a jail started ahead took
// it: its trace then has no "cloned" phase, which is a jail's start.
func (h *harness) countAhead(out *runOutput) {
	var r struct {
		Trace []struct{ Name string } `json:"trace"`
	}
	if out.pty || json.Unmarshal(out.stdout.buf, &r) != nil || len(r.Trace) == 0 {
		return
	}
	h.served++
	if !slices.ContainsFunc(r.Trace, func(p struct{ Name string }) bool { return p.Name == "cloned" }) {
		h.ahead++
	}
}

// report prints PASS or FAIL for one case and says whether it passed.
func (h *harness) report(name string, res *caseResult) bool {
	if len(res.reasons) == 0 {
		fmt.Println("PASS", name)
		return true
	}
	fmt.Printf("FAIL %s: %s\n", name, strings.Join(res.reasons, "; "))
	if h.opts.verbose {
		for _, out := range res.outputs {
			printOutput(out)
		}
	}
	return false
}

// markerDirs are the host directories where markers must not appear.
func (h *harness) markerDirs(caseDir string) []string {
	var dirs []string
	for _, d := range []string{"/tmp", "/var/tmp", "/dev/shm", h.home, h.cwd, caseDir} {
		if !slices.Contains(dirs, d) {
			dirs = append(dirs, d)
		}
	}
	return dirs
}

// ---------------------------------------------------------------------------
// Running microbox.

// runOutput is what the harness saw of one microbox run.
type runOutput struct {
	startErr error
	exitCode int
	elapsed  time.Duration // from start until microbox exited
	hung     bool          // killed by the outer watchdog
	pty      bool          // ran on a pseudo-terminal
	heldOpen bool          // its output stayed open after it exited
	stdout   *capBuf       // microbox's stdout (on a pty: stdout and stderr)
	stderr   *capBuf
}

// capBuf keeps the first limit bytes written to it and counts the rest.
type capBuf struct {
	buf   []byte
	limit int
	total int64
}

func (b *capBuf) Write(p []byte) (int, error) {
	if room := b.limit - len(b.buf); room > 0 {
		b.buf = append(b.buf, p[:min(room, len(p))]...)
	}
	b.total += int64(len(p))
	return len(p), nil
}

func (b *capBuf) truncated() bool { return b.total > int64(len(b.buf)) }

// wiring connects microbox's stdio to the harness.
type wiring struct {
	childEnds []*os.File // closed in the harness once microbox has started
	outputs   []*os.File // drained into the capture buffers
	bufs      []*capBuf
	input     *os.File // receives the stdin bytes
	inputData []byte
	pty       bool
}

func (h *harness) execute(c *testCase) *runOutput {
	out := &runOutput{stdout: &capBuf{limit: maxStdout}, stderr: &capBuf{limit: maxStderr}, exitCode: -1}
	cmd, w, err := h.command(c, out)
	if err != nil {
		out.startErr = err
		return out
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		closeFiles(w.childEnds, w.outputs, []*os.File{w.input})
		out.startErr = err
		return out
	}
	exited := make(chan struct{})
	h.track(cmd.Process, exited)
	closeFiles(w.childEnds)
	drained := w.drain()
	go w.feed()
	out.hung = waitWithWatchdog(cmd, c.watchdog(), exited)
	out.elapsed = time.Since(start)
	h.track(nil, nil)
	out.exitCode = cmd.ProcessState.ExitCode()
	select {
	case <-drained:
	case <-time.After(3 * time.Second):
		out.heldOpen = true
		closeFiles(w.outputs)
		<-drained
	}
	closeFiles(w.outputs, []*os.File{w.input})
	return out
}

// command builds `microbox exec --json <limits> case.py` with the canary
// environment, the two leaked fds and stdio from a pipe or a pty.
func (h *harness) command(c *testCase, out *runOutput) (*exec.Cmd, *wiring, error) {
	args := append([]string{"exec", "--json"}, c.limits...)
	isC := filepath.Ext(c.path) == ".c"
	switch {
	case h.opts.serve:
		args = slices.Insert(args, 1, "--trace") // countAhead reads it
	case h.socket != "" && isC:
		args = slices.Insert(args, 1, "--zygote-fallback")
	case h.socket != "":
		args = slices.Insert(args, 1, "--zygote")
	}
	if isC { // its shared probes beside it, as the program's header file
		args = append(args, "--lang", "c", "--file", filepath.Join(filepath.Dir(c.path), "probe.h"))
	}
	cmd := exec.Command(h.opts.microbox, append(args, c.path)...)
	cmd.Env = append(os.Environ(), canaryEnv+"="+h.fx.token, "MICROBOX_SOCKET="+h.socket)
	cmd.ExtraFiles = h.fx.extra
	cmd.Dir = h.cwd
	if c.tty {
		out.pty = true
		w, err := ptyWiring(cmd, c.stdin)
		if err != nil {
			return nil, nil, err
		}
		w.bufs = []*capBuf{out.stdout}
		return cmd, w, nil
	}
	w, err := pipeWiring(cmd, c.stdin)
	if err != nil {
		return nil, nil, err
	}
	w.bufs = []*capBuf{out.stdout, out.stderr}
	return cmd, w, nil
}

func (h *harness) track(p *os.Process, exited chan struct{}) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.current, h.exited = p, exited
	if p != nil {
		h.ourPids[p.Pid] = true
	}
}

// pipeWiring gives microbox a stdin pipe that yields the header's bytes and
// then EOF, and separate pipes for stdout and stderr.
func pipeWiring(cmd *exec.Cmd, stdin []byte) (*wiring, error) {
	var fds [6]*os.File
	for i := 0; i < 6; i += 2 {
		r, w, err := os.Pipe()
		if err != nil {
			closeFiles(fds[:i])
			return nil, err
		}
		fds[i], fds[i+1] = r, w
	}
	inR, inW, outR, outW, errR, errW := fds[0], fds[1], fds[2], fds[3], fds[4], fds[5]
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	return &wiring{
		childEnds: []*os.File{inR, outW, errW},
		outputs:   []*os.File{outR, errR},
		input:     inW,
		inputData: stdin,
	}, nil
}

// ptyWiring puts microbox's stdin, stdout and stderr on a new pseudo-terminal
// that becomes its controlling terminal. Its input is the header's bytes and
// then an end-of-file (^D), so stdin is as empty as on a pipe.
func ptyWiring(cmd *exec.Cmd, stdin []byte) (*wiring, error) {
	master, slave, err := openPTY()
	if err != nil {
		return nil, fmt.Errorf("pty: %w", err)
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	data := slices.Clone(stdin)
	if len(data) > 0 && data[len(data)-1] != '\n' {
		data = append(data, 4) // ^D ends the pending line
	}
	data = append(data, 4) // ^D on an empty line: EOF
	return &wiring{
		childEnds: []*os.File{slave},
		outputs:   []*os.File{master},
		input:     master,
		inputData: data,
		pty:       true,
	}, nil
}

// openPTY opens a new pty pair with echo off, so that the master's output is
// only what microbox writes.
func openPTY() (master, slave *os.File, err error) {
	mfd, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, err
	}
	master = os.NewFile(uintptr(mfd), "/dev/ptmx")
	if err := unix.IoctlSetPointerInt(mfd, unix.TIOCSPTLCK, 0); err != nil {
		master.Close()
		return nil, nil, fmt.Errorf("unlockpt: %w", err)
	}
	n, err := unix.IoctlGetInt(mfd, unix.TIOCGPTN)
	if err != nil {
		master.Close()
		return nil, nil, fmt.Errorf("ptsname: %w", err)
	}
	name := fmt.Sprintf("/dev/pts/%d", n)
	sfd, err := unix.Open(name, unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		master.Close()
		return nil, nil, err
	}
	if t, err := unix.IoctlGetTermios(sfd, unix.TCGETS); err == nil {
		t.Lflag &^= unix.ECHO
		unix.IoctlSetTermios(sfd, unix.TCSETS, t)
	}
	return master, os.NewFile(uintptr(sfd), name), nil
}

// drain copies every output into its buffer; the channel closes when all
// of them reached EOF (on a pty: EIO once microbox let go of it).
func (w *wiring) drain() <-chan struct{} {
	var wg sync.WaitGroup
	for i, f := range w.outputs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			io.Copy(w.bufs[i], f)
		}()
	}
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	return done
}

// feed writes the stdin bytes; a pipe is then closed so that EOF follows.
func (w *wiring) feed() {
	w.input.Write(w.inputData)
	if !w.pty {
		w.input.Close()
	}
}

// waitWithWatchdog waits for microbox and kills it (by pid) if it has not
// returned within limit, closing done once it has exited. It reports
// whether the watchdog fired.
func waitWithWatchdog(cmd *exec.Cmd, limit time.Duration, done chan struct{}) bool {
	go func() {
		cmd.Wait()
		close(done)
	}()
	select {
	case <-done:
		return false
	case <-time.After(limit):
		cmd.Process.Kill()
		<-done
		return true
	}
}

func closeFiles(groups ...[]*os.File) {
	for _, g := range groups {
		for _, f := range g {
			if f != nil {
				f.Close()
			}
		}
	}
}

// ---------------------------------------------------------------------------
// Judging one run: criteria 1, 2, 3, 7 and 8 of the README.

// verdict is the part of microbox's JSON result the harness uses.
type verdict struct {
	Status          string  `json:"status"`
	ExitCode        *int    `json:"exit_code"`
	Signal          *string `json:"signal"`
	Stdout          string  `json:"stdout"`
	Stderr          string  `json:"stderr"`
	StdoutTruncated bool    `json:"stdout_truncated"`
	StderrTruncated bool    `json:"stderr_truncated"`
	WallTimeMs      float64 `json:"wall_time_ms"`
	Error           *string `json:"error"`
	Limit           string  `json:"limit"`
}

func (h *harness) judgeRun(c *testCase, out *runOutput) []string {
	if out.startErr != nil {
		return []string{"could not start microbox: " + out.startErr.Error()}
	}
	var reasons []string
	if out.hung {
		reasons = append(reasons, fmt.Sprintf("hang: microbox had not returned after %s and was killed", c.watchdog()))
	}
	v, err := parseVerdict(out)
	var text string // the program's stdout
	if err != nil {
		if !out.hung {
			reasons = append(reasons, "no verdict: "+err.Error())
		}
		text = string(out.stdout.buf)
	} else {
		reasons = append(reasons, checkVerdict(c, v, out.exitCode)...)
		text = v.Stdout
		if strings.Contains(v.Stdout+v.Stderr, h.fx.token) {
			reasons = append(reasons, "the canary token appeared in the program's output")
		}
	}
	if !out.hung {
		reasons = append(reasons, checkTiming(c, out)...)
	}
	reasons = append(reasons, checkEscapes(text)...)
	reasons = append(reasons, h.checkReports(text)...)
	if strings.HasPrefix(c.name, "benign_") {
		reasons = append(reasons, checkBenign(text)...)
	}
	if out.heldOpen {
		reasons = append(reasons, "microbox's stdout or stderr stayed open 3 s after it exited (held by a leftover process)")
	}
	return reasons
}

// parseVerdict decodes the one JSON object microbox printed. On a pty the
// object is searched for, since stderr shares the terminal.
func parseVerdict(out *runOutput) (*verdict, error) {
	raw := out.stdout.buf
	if out.stdout.truncated() {
		return nil, fmt.Errorf("microbox wrote %d bytes on stdout, more than the harness keeps", out.stdout.total)
	}
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, fmt.Errorf("microbox printed nothing on stdout (exit status %d)", out.exitCode)
	}
	if out.pty && !bytes.HasPrefix(raw, []byte("{")) {
		if i := bytes.Index(raw, []byte("\n{")); i >= 0 {
			raw = raw[i+1:]
		}
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	v := &verdict{}
	if err := dec.Decode(v); err != nil {
		return nil, fmt.Errorf("microbox's stdout is not a JSON result: %v (starts %q)", err, head(raw, 80))
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("microbox's stdout holds more than one JSON object")
	}
	return v, nil
}

func checkVerdict(c *testCase, v *verdict, exitCode int) []string {
	var reasons []string
	switch {
	case !slices.Contains(verdicts, v.Status):
		reasons = append(reasons, fmt.Sprintf("unknown verdict %q", v.Status))
	case v.Status == "sandbox_error":
		reasons = append(reasons, "verdict sandbox_error"+v.detail())
	case c.expect != "any_but_escape" && v.Status != c.expect:
		reasons = append(reasons, fmt.Sprintf("verdict %s%s, want %s", v.Status, v.detail(), c.expect))
	}
	if c.name == "verdict_exit_code" && (v.ExitCode == nil || *v.ExitCode != 42) {
		reasons = append(reasons, fmt.Sprintf("exit code %s, want 42", intOrNull(v.ExitCode)))
	}
	if want, ok := v.shellStatus(); ok && want != exitCode {
		reasons = append(reasons, fmt.Sprintf("microbox exited %d, but status %s means exit %d", exitCode, v.Status, want))
	}
	if v.Error != nil && v.Status != "sandbox_error" {
		reasons = append(reasons, "microbox reported an error: "+*v.Error)
	}
	return reasons
}

// shellStatus is the exit status microbox must have for this verdict.
func (v *verdict) shellStatus() (int, bool) {
	switch v.Status {
	case "ok", "nonzero":
		if v.ExitCode == nil {
			return 0, false
		}
		return *v.ExitCode, true
	case "signaled":
		if v.Signal == nil || unix.SignalNum(*v.Signal) == 0 {
			return 0, false
		}
		return 128 + int(unix.SignalNum(*v.Signal)), true
	case "output_limit":
		return 122, true
	case "memory":
		return 123, true
	case "timeout":
		return 124, true
	case "sandbox_error":
		return 125, true
	}
	return 0, false
}

// detail summarizes the verdict's other fields for a failure message.
func (v *verdict) detail() string {
	var parts []string
	if v.ExitCode != nil {
		parts = append(parts, fmt.Sprintf("exit code %d", *v.ExitCode))
	}
	if v.Signal != nil {
		parts = append(parts, *v.Signal)
	}
	if v.Limit != "" {
		parts = append(parts, "limit "+v.Limit)
	}
	if v.Error != nil {
		parts = append(parts, "error: "+*v.Error)
	}
	if len(parts) == 0 {
		return ""
	}
	return " (" + strings.Join(parts, ", ") + ")"
}

func checkTiming(c *testCase, out *runOutput) []string {
	if limit := c.timeout + 2*time.Second; out.elapsed > limit {
		return []string{fmt.Sprintf("microbox returned after %.2f s, later than the timeout %s + 2 s", out.elapsed.Seconds(), c.timeout)}
	}
	return nil
}

// checkEscapes finds lines that are exactly ESCAPED or start with escape:.
func checkEscapes(text string) []string {
	var escapes []string
	for _, line := range lines(text) {
		if line == "ESCAPED" || strings.HasPrefix(line, "escape:") {
			escapes = append(escapes, fmt.Sprintf("%q", head([]byte(line), 200)))
		}
	}
	if len(escapes) == 0 {
		return nil
	}
	return []string{"escape lines: " + strings.Join(escapes, ", ")}
}

func (h *harness) checkReports(text string) []string {
	var reasons []string
	for _, line := range lines(text) {
		if v, ok := strings.CutPrefix(line, "REPORT hostname="); ok && v == h.hostname {
			reasons = append(reasons, fmt.Sprintf("REPORT hostname=%s is the host's hostname", v))
		}
		if v, ok := strings.CutPrefix(line, "REPORT passwd_users="); ok && h.login != "root" && h.login != "" &&
			slices.Contains(strings.Split(v, ","), h.login) {
			reasons = append(reasons, fmt.Sprintf("REPORT passwd_users lists the harness's login %s", h.login))
		}
	}
	return reasons
}

func checkBenign(text string) []string {
	last := ""
	for _, line := range lines(text) {
		if strings.TrimSpace(line) != "" {
			last = line
		}
	}
	if last != "OK" {
		return []string{fmt.Sprintf("benign case: last stdout line is %q, want \"OK\"", head([]byte(last), 200))}
	}
	return nil
}

// lines splits text into lines without their CR or LF.
func lines(text string) []string {
	ls := strings.Split(text, "\n")
	for i, l := range ls {
		ls[i] = strings.TrimSuffix(l, "\r")
	}
	return ls
}

func intOrNull(p *int) string {
	if p == nil {
		return "null"
	}
	return strconv.Itoa(*p)
}

func head(b []byte, n int) string {
	if len(b) > n {
		return string(b[:n]) + "..."
	}
	return string(b)
}

// printOutput shows what microbox printed, for -v.
func printOutput(out *runOutput) {
	show := func(label, text string, truncated bool) {
		if text == "" {
			return
		}
		const max = 4096
		note := ""
		if len(text) > max || truncated {
			note = " (truncated)"
			text = text[:min(len(text), max)]
		}
		fmt.Printf("    --- %s%s ---\n", label, note)
		for _, l := range strings.Split(strings.TrimRight(text, "\n"), "\n") {
			fmt.Println("    | " + l)
		}
	}
	fmt.Printf("    microbox exit status %d after %.2f s\n", out.exitCode, out.elapsed.Seconds())
	if v, err := parseVerdict(out); err == nil {
		fmt.Printf("    status %s%s\n", v.Status, v.detail())
		show("program stdout", v.Stdout, v.StdoutTruncated)
		show("program stderr", v.Stderr, v.StderrTruncated)
	} else {
		show("microbox stdout", string(out.stdout.buf), out.stdout.truncated())
	}
	show("microbox stderr", string(out.stderr.buf), out.stderr.truncated())
}

// ---------------------------------------------------------------------------
// Host-side checks after a case: criteria 4, 5 and 6 of the README.

func (h *harness) hostChecks(dirs []string, coresBefore map[string]bool, survivorsBefore map[string]string, eventsBefore int) []string {
	var reasons []string
	for _, m := range findMarkers(dirs) {
		reasons = append(reasons, "host marker "+m)
	}
	for _, p := range slices.Sorted(maps.Keys(listCores(dirs))) {
		if !coresBefore[p] {
			reasons = append(reasons, "new core file "+p)
		}
	}
	reasons = append(reasons, h.fx.check()...)
	for _, e := range h.fx.eventsSince(eventsBefore) {
		reasons = append(reasons, "listener received traffic: "+e)
	}
	now := h.survivors()
	for _, id := range slices.Sorted(maps.Keys(now)) {
		if _, old := survivorsBefore[id]; !old {
			reasons = append(reasons, "survivor "+now[id])
		}
	}
	return reasons
}

func findMarkers(dirs []string) []string {
	var found []string
	for _, d := range dirs {
		m, _ := filepath.Glob(filepath.Join(d, markerGlob))
		found = append(found, m...)
	}
	return found
}

func deleteMarkers(dirs []string) {
	for _, m := range findMarkers(dirs) {
		os.RemoveAll(m)
	}
}

// listCores lists core* files in the directories.
func listCores(dirs []string) map[string]bool {
	cores := map[string]bool{}
	for _, d := range dirs {
		m, _ := filepath.Glob(filepath.Join(d, "core*"))
		for _, p := range m {
			cores[p] = true
		}
	}
	return cores
}

// survivors finds processes whose comm starts with mbxrt (pgrep '^mbxrt'),
// keyed by pid and start time so that a reused pid is a new process.
// Processes inside another live microbox's run (someone else's sandbox
// running at the same time) are not the harness's and are skipped.
func (h *harness) survivors() map[string]string {
	found := map[string]string{}
	for _, p := range processes() {
		if strings.HasPrefix(p.comm, survivorPrefix) && !h.inForeignRun(p.pid) {
			found[p.id()] = p.String()
		}
	}
	return found
}

// inForeignRun reports whether the process sits in the run cgroup of a
// microbox that is alive and was not started by the harness.
func (h *harness) inForeignRun(pid int) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(data), "\n") {
		for _, part := range strings.Split(line, "/") {
			if !strings.HasPrefix(part, cgroupPrefix) {
				continue
			}
			owner := cgroupOwner(part)
			h.mu.Lock()
			ours := h.ourPids[owner]
			h.mu.Unlock()
			return owner > 0 && !ours && processAlive(owner)
		}
	}
	return false
}

// proc is one host process.
type proc struct {
	pid, ppid int
	comm      string
	start     string // start time in clock ticks since boot
}

func (p proc) id() string { return fmt.Sprintf("%d@%s", p.pid, p.start) }

func (p proc) String() string {
	cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p.pid))
	args := strings.TrimSpace(strings.ReplaceAll(string(cmdline), "\x00", " "))
	return fmt.Sprintf("pid %d (%s) %q", p.pid, p.comm, head([]byte(args), 120))
}

// processes lists the host's processes from /proc/*/stat.
func processes() []proc {
	entries, _ := os.ReadDir("/proc")
	var ps []proc
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if p, ok := readProc(pid); ok {
			ps = append(ps, p)
		}
	}
	return ps
}

func readProc(pid int) (proc, bool) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return proc{}, false
	}
	// pid (comm) state ppid ... ; comm may hold spaces and parentheses.
	s := string(data)
	open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || end < open {
		return proc{}, false
	}
	f := strings.Fields(s[end+1:])
	if len(f) < 20 {
		return proc{}, false
	}
	ppid, _ := strconv.Atoi(f[1])
	return proc{pid: pid, ppid: ppid, comm: s[open+1 : end], start: f[19]}, true
}

// ---------------------------------------------------------------------------
// After the corpus: no microbox cgroups, mounts, temporary directories or
// processes may be left on the host.

// hostState is what the host held before the corpus ran.
type hostState struct {
	cgroups map[string]bool
	procs   map[string]bool
	mounts  map[string]bool
	temps   map[string]bool
}

func snapshotHost() *hostState {
	s := &hostState{cgroups: map[string]bool{}, procs: map[string]bool{}}
	for _, d := range runCgroups() {
		s.cgroups[d] = true
	}
	for _, p := range processes() {
		s.procs[p.id()] = true
	}
	s.mounts = mountPoints()
	s.temps = tempEntries()
	return s
}

func (h *harness) afterCorpus(before *hostState) []string {
	var reasons []string
	reasons = append(reasons, h.leftoverCgroups(before)...)
	reasons = append(reasons, h.leftoverProcesses(before)...)
	for m := range mountPoints() {
		if !before.mounts[m] {
			reasons = append(reasons, "new host mount "+m)
		}
	}
	for t := range tempEntries() {
		if !before.temps[t] {
			reasons = append(reasons, "new temporary directory "+t)
		}
	}
	slices.Sort(reasons)
	return reasons
}

// leftoverCgroups lists run cgroups made by the harness's microbox runs, or
// by any microbox that has died, that still exist. Groups of another live
// microbox (someone else's run in progress) are only noted.
func (h *harness) leftoverCgroups(before *hostState) []string {
	var reasons []string
	for _, d := range runCgroups() {
		pid := cgroupOwner(d)
		switch {
		case h.ourPids[pid]:
			reasons = append(reasons, fmt.Sprintf("cgroup left by our run (microbox pid %d): %s", pid, d))
		case before.cgroups[d]:
			fmt.Printf("note: cgroup %s existed before the corpus ran\n", d)
		case !cgroup.Orphaned(d):
			fmt.Printf("note: cgroup %s belongs to another live microbox (pid %d)\n", d, pid)
		default:
			reasons = append(reasons, "cgroup left by a dead microbox: "+d)
		}
	}
	return reasons
}

// runCgroups finds directories named microbox-jail-* anywhere under
// /sys/fs/cgroup: every v1 hierarchy and the unified (v2) one.
func runCgroups() []string {
	var found []string
	filepath.WalkDir("/sys/fs/cgroup", func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		if strings.HasPrefix(d.Name(), cgroupPrefix) {
			found = append(found, p)
		}
		return nil
	})
	return found
}

// cgroupOwner is the microbox pid in a run group's name
// (microbox-jail-PID-RANDOM), or 0.
func cgroupOwner(dir string) int {
	rest := strings.TrimPrefix(filepath.Base(dir), cgroupPrefix)
	pid, _, _ := strings.Cut(rest, "-")
	n, _ := strconv.Atoi(pid)
	return n
}

func processAlive(pid int) bool {
	_, err := os.Stat(fmt.Sprintf("/proc/%d", pid))
	return err == nil
}

// leftoverProcesses lists processes that appeared during the corpus and
// are survivors, children of the harness, or microbox processes (the
// supervisor or a jail's init) that are orphaned or ours.
func (h *harness) leftoverProcesses(before *hostState) []string {
	var reasons []string
	self := os.Getpid()
	for _, p := range processes() {
		if before.procs[p.id()] || p.pid == self {
			continue
		}
		switch {
		case strings.HasPrefix(p.comm, survivorPrefix) && !h.inForeignRun(p.pid):
			reasons = append(reasons, "survivor "+p.String())
		case p.ppid == self:
			reasons = append(reasons, "child of the harness still running: "+p.String())
		case h.isMicrobox(p.pid) && (p.ppid == 1 || h.ourPids[p.pid] || h.ourPids[p.ppid]):
			reasons = append(reasons, "microbox process left: "+p.String())
		}
	}
	return reasons
}

// isMicrobox reports whether the process runs the microbox binary under test.
func (h *harness) isMicrobox(pid int) bool {
	exe, err := os.Stat(fmt.Sprintf("/proc/%d/exe", pid))
	if err != nil {
		return false
	}
	bin, err := os.Stat(h.opts.microbox)
	return err == nil && os.SameFile(exe, bin)
}

// mountPoints lists the harness's mount points (from /proc/self/mountinfo).
func mountPoints() map[string]bool {
	m := map[string]bool{}
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return m
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if fields := strings.Fields(sc.Text()); len(fields) > 4 {
			m[fields[4]] = true
		}
	}
	return m
}

// tempEntries lists directories in the host's temporary directories whose
// names mention microbox (or the corpus's mbx prefix), other than the
// harness's canary directory.
func tempEntries() map[string]bool {
	m := map[string]bool{}
	for _, d := range []string{"/tmp", "/var/tmp", "/dev/shm"} {
		entries, _ := os.ReadDir(d)
		for _, e := range entries {
			p := filepath.Join(d, e.Name())
			name := strings.ToLower(e.Name())
			if e.IsDir() && p != canaryDir && (strings.Contains(name, "microbox") || strings.Contains(name, "mbx")) {
				m[p] = true
			}
		}
	}
	return m
}
