package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	units "github.com/docker/go-units"
	"github.com/spf13/cobra"

	"github.com/microbox/microbox/cgroup"
	"github.com/microbox/microbox/nsjail"
	"github.com/microbox/microbox/result"
	"github.com/microbox/microbox/seccomp"
)

// execFlags are `microbox exec`'s options as typed; parse turns them into
// an nsjail.Spec.
type execFlags struct {
	json         bool
	code         string
	mem          string
	cpus         float64
	pids         int64
	cpuTime      string
	timeout      string
	outputLimit  string
	tmpfsSize    string
	workdir      string
	files        []string
	env          []string
	rootfs       string
	python       string
	hostname     string
	noCgroup     bool
	cgroupParent string
	seccompMode  string
	seccompFile  string
	trace        bool
	// layers are exec's policy layers (layers.go); batch and eval, which
	// embed execFlags, do not register them.
	layers layerFlags
	// inv is whom exec runs for; nil means microbox's own process.
	inv *invocation
}

// caller is the invocation the flags were given in.
func (f *execFlags) caller() *invocation {
	if f.inv == nil {
		f.inv = processInvocation()
	}
	return f.inv
}

func execCommand(inv *invocation) *cobra.Command {
	f := &execFlags{inv: inv}
	c := &cobra.Command{
		Use:   "exec [flags] (FILE.py | -c CODE) [ARG...]",
		Short: "Run one Python program in a fresh sandbox",
		Long: `Run one Python program in a fresh sandbox and report how it ended.

Without --json the program's stdout and stderr stream through (capped) and
microbox exits with the program's status: its exit code, 128+N for signal N,
122 output limit, 123 memory limit, 124 timeout, 125 sandbox error.`,
		RunE: func(c *cobra.Command, args []string) error {
			return runExec(f, c, args)
		},
	}
	// Everything after the program's file belongs to the program.
	c.Flags().SetInterspersed(false)
	fl := c.Flags()
	fl.BoolVar(&f.json, "json", false, "print exactly one JSON result object on stdout")
	fl.StringVarP(&f.code, "code", "c", "", "run this code instead of a file")
	f.sandboxFlags(c)
	f.layers.register(c)
	return c
}

// sandboxFlags registers the options that shape the sandbox: exec's own,
// and the defaults every task of `microbox batch` and `microbox eval` starts
// from, so the three commands cannot drift apart.
func (f *execFlags) sandboxFlags(c *cobra.Command) {
	fl := c.Flags()
	fl.StringVar(&f.mem, "mem", "256M", "memory limit, swap off (e.g. 256M, 1g, 512MiB)")
	fl.Float64Var(&f.cpus, "cpus", 1, "CPU bandwidth in cores (fractions allowed)")
	fl.Int64Var(&f.pids, "pids", 128, "limit on processes and threads")
	fl.StringVar(&f.cpuTime, "cpu-time", "0", "CPU-time limit of all the run's processes together (0: none)")
	fl.StringVar(&f.timeout, "timeout", "10s", "wall-clock limit from the program's start")
	fl.StringVar(&f.outputLimit, "output-limit", "1M", "cap on each of stdout and stderr")
	fl.StringVar(&f.tmpfsSize, "tmpfs-size", "64M", "size of each scratch tmpfs (/tmp, the working directory, /dev/shm)")
	fl.StringVar(&f.workdir, "workdir", "/tmp", "working directory inside the sandbox (a scratch tmpfs)")
	fl.StringArrayVar(&f.files, "file", nil, "copy a host file in: HOST[:SANDBOX_PATH] (repeatable)")
	fl.StringArrayVar(&f.env, "env", nil, "add KEY=VALUE to the program's environment (repeatable)")
	fl.StringVar(&f.rootfs, "rootfs", "", "prepared root filesystem (default: $MICROBOX_ROOTFS, else /var/lib/microbox/rootfs if it exists, else the host's /usr, read-only)")
	fl.StringVar(&f.python, "python", "/usr/bin/python3", "interpreter path inside the root")
	fl.StringVar(&f.hostname, "hostname", "microbox", "hostname inside the sandbox")
	fl.BoolVar(&f.noCgroup, "no-cgroup", false, "run without a cgroup: no memory, CPU or pids limits")
	fl.StringVar(&f.cgroupParent, "cgroup-parent", "", "cgroup under which run cgroups are made (default: microbox's own)")
	fl.StringVar(&f.seccompMode, "seccomp", "default", "system-call filter: default, log, off (or profile with --seccomp-profile)")
	fl.StringVar(&f.seccompFile, "seccomp-profile", "", "OCI/Docker JSON seccomp profile to use instead of the default")
	fl.BoolVar(&f.trace, "trace", false, "report the set-up phases with timestamps (in the JSON result, or on stderr)")
}

// runExec runs the program and sets the invocation's exit status to the
// verdict's.
func runExec(f *execFlags, c *cobra.Command, args []string) error {
	inv := f.caller()
	spec, err := f.spec(c, args)
	if err != nil {
		return err
	}
	layers, err := f.layers.prepare(c, spec, args, inv)
	if err != nil {
		return err
	}
	ctx, stop := inv.context()
	defer stop()
	gcDone := inv.gcInBackground(spec)
	res := layers.run(ctx, spec)
	<-gcDone
	if f.json {
		writeJSON(inv.stdout, res)
	} else {
		report(inv.stderr, res.Result, f.trace)
	}
	inv.status = res.ShellStatus()
	return nil
}

// gcInBackground removes the groups of runs whose supervisor was killed
// (cgroup.GC) while this run goes on: it only touches groups whose owner is
// dead, never this run's, and reading the hierarchies costs about half a
// millisecond that need not come before the program starts. A server does
// it at most once a minute per parent (staleGroups), not with every run.
func (inv *invocation) gcInBackground(spec *nsjail.Spec) <-chan struct{} {
	done := make(chan struct{})
	c := spec.Cgroup
	if c == nil || !inv.staleGroups.due(c.Parent) {
		close(done)
		return done
	}
	go func() {
		defer close(done)
		cgroup.GC(c.Parent)
	}()
	return done
}

// staleGroupsGC paces a server's collection of stale run groups. The nil
// pacer (microbox's own process) is always due.
type staleGroupsGC struct {
	mu   sync.Mutex
	last map[string]time.Time // by cgroup parent
}

func (g *staleGroupsGC) due(parent string) bool {
	if g == nil {
		return true
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if t, ok := g.last[parent]; ok && time.Since(t) < time.Minute {
		return false
	}
	if g.last == nil {
		g.last = map[string]time.Time{}
	}
	g.last[parent] = time.Now()
	return true
}

// report tells, on stderr, why a run ended when its status is not the
// program's own (without --json).
func report(w io.Writer, r *result.Result, trace bool) {
	if trace {
		for _, p := range r.Trace {
			fmt.Fprintf(w, "microbox: trace %8.3f ms %s\n", p.AtMs, p.Name)
		}
	}
	var why string
	switch r.Status {
	case result.StatusTimeout:
		why = fmt.Sprintf("timeout: the %s time limit was reached after %.0f ms", r.Limit, r.WallTimeMs)
	case result.StatusMemory:
		why = "memory: the program exceeded the memory limit"
	case result.StatusOutputLimit:
		why = fmt.Sprintf("output_limit: the program wrote more than the output limit on %s", r.Limit)
	case result.StatusSignaled:
		why = "signaled: the program was killed by " + *r.Signal
	case result.StatusSandboxError:
		why = "sandbox_error: " + *r.Error
	case result.StatusRejected:
		why = "rejected: " + *r.Error
	}
	if why != "" {
		fmt.Fprintln(w, "microbox: "+why)
	}
}

// spec checks every flag and turns the command line into an nsjail.Spec.
func (f *execFlags) spec(c *cobra.Command, args []string) (*nsjail.Spec, error) {
	s, err := f.base(c)
	if err != nil {
		return nil, err
	}
	if err := f.program(c, args, s); err != nil {
		return nil, err
	}
	if err := f.finish(s); err != nil {
		return nil, err
	}
	inv := f.caller()
	if !f.json {
		s.Stdout, s.Stderr = inv.stdout, inv.stderr
	}
	s.Stdin = stdin(inv)
	s.Before = inv.moments // in the trace only with --trace
	return s, nil
}

// base turns the flags that come before the program (limits, sizes, root)
// into a spec without a program.
func (f *execFlags) base(c *cobra.Command) (*nsjail.Spec, error) {
	s := &nsjail.Spec{
		Workdir:     f.workdir,
		RootDir:     f.rootfs,
		Hostname:    f.hostname,
		Capture:     f.json,
		Trace:       f.trace,
		SeccompMode: f.seccompMode,
	}
	var err error
	if s.Timeout, err = parseDuration("--timeout", f.timeout); err != nil {
		return nil, err
	}
	if s.CPUTime, err = parseDuration("--cpu-time", f.cpuTime); err != nil {
		return nil, err
	}
	if s.OutputLimit, err = parseSize("--output-limit", f.outputLimit); err != nil {
		return nil, err
	}
	if s.TmpfsSize, err = parseSize("--tmpfs-size", f.tmpfsSize); err != nil {
		return nil, err
	}
	if err := f.limits(c, s); err != nil {
		return nil, err
	}
	if s.RootDir, err = resolveRootfs(f.caller(), f.rootfs, f.python); err != nil {
		return nil, err
	}
	return s, nil
}

// finish adds what comes after the program: the environment and the
// compiled seccomp filter.
func (f *execFlags) finish(s *nsjail.Spec) error {
	var err error
	if s.Env, err = environment(s.Workdir, f.env); err != nil {
		return err
	}
	return f.seccomp(s)
}

// limits sets the cgroup options; with --no-cgroup, an explicitly
// requested limit is refused rather than silently dropped.
func (f *execFlags) limits(c *cobra.Command, s *nsjail.Spec) error {
	if f.noCgroup {
		for _, name := range []string{"mem", "cpus", "pids", "cpu-time", "cgroup-parent"} {
			if c.Flags().Changed(name) {
				return usagef("--%s needs a cgroup and cannot be used with --no-cgroup", name)
			}
		}
		return nil
	}
	mem, err := parseSize("--mem", f.mem)
	if err != nil {
		return err
	}
	if f.cpus <= 0 {
		return usagef("--cpus %v: give a positive number of cores, e.g. 1 or 0.5", f.cpus)
	}
	if f.pids <= 0 {
		return usagef("--pids %d: give a positive process limit, e.g. 128", f.pids)
	}
	s.Cgroup = &cgroup.Options{
		Limits: cgroup.Limits{Memory: mem, CPUs: f.cpus, Pids: f.pids},
		Parent: f.cgroupParent,
	}
	return nil
}

// program reads the program and its files from the host and sets argv.
func (f *execFlags) program(c *cobra.Command, args []string, s *nsjail.Spec) error {
	if c.Flags().Changed("code") {
		setCode(s, f.python, f.code, args)
	} else {
		if len(args) == 0 {
			return usagef("no program: give a Python file or -c CODE (see microbox exec --help)")
		}
		if err := setFile(f.caller(), s, f.python, args[0], args[1:]); err != nil {
			return err
		}
	}
	return f.copyFiles(s)
}

// setCode makes the spec run code with `python -c`.
func setCode(s *nsjail.Spec, python, code string, args []string) {
	s.Argv = append([]string{python, "-c", code}, args...)
}

// setFile makes the spec run the host file name, copied into the working
// directory.
func setFile(inv *invocation, s *nsjail.Spec, python, name string, args []string) error {
	data, err := readHostFile(inv, name)
	if err != nil {
		return err
	}
	dst := path.Join(s.Workdir, sandboxName(name))
	s.Files = append(s.Files, nsjail.File{Path: dst, Data: data, Mode: 0o644})
	s.Argv = append([]string{python, dst}, args...)
	return nil
}

// copyFiles adds the --file host files to the spec.
func (f *execFlags) copyFiles(s *nsjail.Spec) error {
	for _, spec := range f.files {
		host, dst, ok := strings.Cut(spec, ":")
		if !ok {
			dst = path.Join(s.Workdir, sandboxName(host))
		}
		data, err := readHostFile(f.caller(), host)
		if err != nil {
			return err
		}
		s.Files = append(s.Files, nsjail.File{Path: dst, Data: data, Mode: 0o644})
	}
	return nil
}

// sandboxName is the name a host file gets inside the sandbox.
func sandboxName(host string) string {
	name := filepath.Base(host)
	if name == "." || name == "/" || name == ".." {
		return "main.py"
	}
	return name
}

// readHostFile reads a file the caller names, with an error that says what
// to do about it.
func readHostFile(inv *invocation, name string) ([]byte, error) {
	data, err := os.ReadFile(inv.path(name))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, usagef("%s: no such file; give the path of an existing file", name)
	case errors.Is(err, fs.ErrPermission):
		return nil, usagef("%s: permission denied; make it readable by the user running microbox", name)
	case err != nil:
		return nil, usagef("%s: %v", name, err)
	}
	return data, nil
}

// environment is the program's whole environment: a fixed minimal base
// (nothing from microbox's own) plus the caller's --env entries.
func environment(workdir string, extra []string) ([]string, error) {
	base := []string{
		"PATH=/usr/local/bin:/usr/bin:/bin",
		"HOME=/tmp",
		"TMPDIR=/tmp",
		"LANG=C.UTF-8",
		"PYTHONDONTWRITEBYTECODE=1",
		// Numeric libraries must not start a thread per host CPU.
		"OMP_NUM_THREADS=1",
		"OPENBLAS_NUM_THREADS=1",
		"MKL_NUM_THREADS=1",
	}
	for _, e := range extra {
		k, _, ok := strings.Cut(e, "=")
		if !ok || k == "" {
			return nil, usagef("--env %q: write KEY=VALUE", e)
		}
		base = setEnv(base, k, e)
	}
	return base, nil
}

func setEnv(env []string, key, entry string) []string {
	for i, e := range env {
		if strings.HasPrefix(e, key+"=") {
			env[i] = entry
			return env
		}
	}
	return append(env, entry)
}

func (f *execFlags) seccomp(s *nsjail.Spec) error {
	mode := f.seccompMode
	if f.seccompFile != "" {
		if mode != "default" && mode != string(seccomp.ModeProfile) {
			return usagef("--seccomp-profile cannot be combined with --seccomp %s", mode)
		}
		mode = string(seccomp.ModeProfile)
	}
	m, err := seccomp.ParseMode(mode)
	if err != nil {
		return usagef("--seccomp: %v", err)
	}
	if m == seccomp.ModeProfile && f.seccompFile == "" {
		return usagef("--seccomp profile needs --seccomp-profile FILE.json")
	}
	s.SeccompMode = string(m)
	// The default filter is precompiled; log and profile modes compile here.
	prog, err := seccomp.Program(m, f.caller().path(f.seccompFile))
	var profileErr *seccomp.ProfileError
	switch {
	case errors.As(err, &profileErr):
		return usagef("seccomp: %v", err)
	case err != nil:
		return fmt.Errorf("seccomp: %w", err)
	}
	s.Seccomp = prog
	return nil
}

// stdin is what feeds the program: the caller's stdin, which nsjail copies
// through a pipe of its own, never passing the host's descriptor itself
// (through /proc/self/fd/0 a program could reopen a file for writing, a
// socket in the host's network namespace, or a terminal: TIOCSTI). A
// closed fd 0 or /dev/null gives the jail's /dev/null: no pipe, no copying.
func stdin(inv *invocation) io.Reader {
	fi, err := inv.stdin.Stat()
	if err != nil || isDevNull(fi) {
		return nil
	}
	if inv.stdinReader != nil {
		return inv.stdinReader
	}
	return inv.stdin
}

// isDevNull reports whether fi is the null device, the usual stdin of
// services that call microbox.
func isDevNull(fi os.FileInfo) bool {
	null, err := os.Stat(os.DevNull)
	return err == nil && fi.Mode()&os.ModeCharDevice != 0 && os.SameFile(fi, null)
}

func parseDuration(flag, v string) (time.Duration, error) {
	if n, err := strconv.ParseFloat(v, 64); err == nil && n == 0 {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, usagef("%s %q: give a duration such as 500ms, 5s or 2m", flag, v)
	}
	if d < 0 {
		return 0, usagef("%s %q: a duration cannot be negative", flag, v)
	}
	return d, nil
}

func parseSize(flag, v string) (int64, error) {
	n, err := units.RAMInBytes(v)
	if err != nil || n <= 0 {
		return 0, usagef("%s %q: give a positive size such as 256M, 1g, 512MiB or a number of bytes", flag, v)
	}
	return n, nil
}
