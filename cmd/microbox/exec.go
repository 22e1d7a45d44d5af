package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/docker/go-units"
	"github.com/spf13/cobra"

	"github.com/microbox/microbox/cgroup"
	"github.com/microbox/microbox/field"
	"github.com/microbox/microbox/internal/batch"
	"github.com/microbox/microbox/internal/policy"
	"github.com/microbox/microbox/nsjail"
	"github.com/microbox/microbox/result"
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
	nofile       uint64
	sigpending   uint64
	msgqueue     string
	zygote       bool
	zygoteFall   bool
	preload      []string
	lang         langFlags
	// layers are exec's policy layers (layers.go); eval stdio and mbpp
	// register them too, batch and eval humaneval do not.
	layers layerFlags
	// fetch are exec's --fetch and --out (fetch.go).
	fetch fetchFlags
	// inv is whom exec runs for; nil means microbox's own process.
	inv *invocation
	// streamed is where the program's output goes without --json.
	streamed streamed
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
	f.fetch.register(c)
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
	fl.Uint64Var(&f.nofile, "nofile", nsjail.DefaultRlimits.NoFile, "each process's limit on open descriptors (RLIMIT_NOFILE)")
	fl.Uint64Var(&f.sigpending, "sigpending", nsjail.DefaultRlimits.SigPending, "limit on the signals queued to the program's user (RLIMIT_SIGPENDING)")
	fl.StringVar(&f.msgqueue, "msgqueue", units.BytesSize(float64(nsjail.DefaultRlimits.MsgQueue)), "limit on POSIX message-queue bytes (RLIMIT_MSGQUEUE)")
	fl.BoolVar(&f.zygote, "zygote", false, "fork the run from a warm interpreter where one is kept (serve, batch, eval; docs/zygote.md), else start cold")
	fl.BoolVar(&f.zygoteFall, "zygote-fallback", false, "--zygote, and start cold where no warm interpreter can take the run (result: \"start\": \"cold\") instead of failing")
	fl.StringSliceVar(&f.preload, "preload", nil, "with --zygote: modules the warm interpreter imports first (e.g. numpy,json)")
	f.lang.register(c)
}

// runExec runs the program and sets the invocation's exit status to the
// verdict's.
func runExec(f *execFlags, c *cobra.Command, args []string) error {
	inv := f.caller()
	r, err := f.run(c, args)
	if err != nil {
		return err
	}
	ctx, stop := inv.context()
	defer stop()
	res := r.Execute(ctx, inv.host())
	inv.status = f.deliver(inv, res)
	return nil
}

// run assembles the run the command line asks for (batch.Assemble): the
// flags into Options (options), Options into the Spec with exec's policy
// layers around it; its errors name the flags.
func (f *execFlags) run(c *cobra.Command, args []string) (*batch.Run, error) {
	o, err := f.programOptions(c, args)
	if err != nil {
		return nil, err
	}
	r, err := batch.Assemble(context.Background(), o, func() (policy.Options, error) {
		return f.layers.options(c, f.caller()), nil
	})
	return r, flagError(err)
}

// deliver writes what the caller is owed besides the program's streamed
// output (the JSON result, or why the run ended) and returns the exit
// status: the verdict's, or 125 with a line on stderr when the result or
// the program's output could not be written, as the verdict's status
// would claim a result (a success, even) the caller never got.
func (f *execFlags) deliver(inv *invocation, res *policy.Result) int {
	lost := f.streamed.lost()
	if err := f.fetch.write(inv, res.Result); err != nil && lost == nil {
		lost = err
	}
	if f.json {
		lost = writeJSON(inv.stdout, res)
	} else {
		report(inv.stderr, res.Result, f.trace)
	}
	// A file's last write can fail only at its close (NFS, a FUSE
	// file system).
	if err := inv.stdout.Close(); err != nil && lost == nil {
		lost = fmt.Errorf("stdout could not be closed: %w", err)
	}
	if lost != nil {
		fmt.Fprintf(inv.stderr, "microbox: the run ended %s, but %v; exit status %d\n",
			res.Status, lost, result.ExitSandboxError)
		return result.ExitSandboxError
	}
	return res.ShellStatus()
}

// streamed are the program's stdout and stderr as exec streams them on
// (without --json), each remembering the first write that failed.
type streamed struct{ stdout, stderr lossWriter }

// lost is why some of the program's output could not be written; nil if
// all of it was.
func (s *streamed) lost() error {
	if s.stdout.err != nil {
		return s.stdout.err
	}
	return s.stderr.err
}

// lossWriter writes to w until a write fails, then drops the rest: the
// program's pipe is still drained (it must not block on a full pipe), and
// nothing after the gap is written, which would pass the output off as
// whole.
type lossWriter struct {
	w    io.Writer
	name string
	err  error
}

func (l *lossWriter) Write(b []byte) (int, error) {
	if l.err == nil {
		if _, err := l.w.Write(b); err != nil {
			l.err = fmt.Errorf("the program's %s could not be written: %w", l.name, err)
		}
	}
	return len(b), nil
}

// host is where the invocation's runs go: the server's session for its
// client, whose verdicts it counts and which collects stale groups at
// most once a minute per parent (server.Session); else nsjail.Run, with
// cgroup.GC beside every run, where reading the hierarchies costs about
// half a millisecond that need not come before the program starts.
func (inv *invocation) host() batch.Host {
	if inv.runs != nil {
		return batch.Host{Run: inv.runs.Run, CollectStaleGroups: inv.runs.CollectStaleGroups,
			Verdict: inv.runs.Verdict, Log: inv.stderr}
	}
	return batch.Host{Run: nsjail.Run, CollectStaleGroups: func(parent string) { cgroup.GC(parent) }, Log: inv.stderr}
}

// report tells, on stderr, why a run ended when its status is not the
// program's own (without --json).
func report(w io.Writer, r *result.Result, trace bool) {
	if trace {
		for _, p := range r.Trace {
			fmt.Fprintf(w, "microbox: trace %8.3f ms %s\n", p.AtMs, p.Name)
		}
	}
	if r.Status == result.StatusCompileError {
		io.WriteString(w, r.Compile.Stderr) // the compiler's messages
	}
	if why := r.Why(); why != "" {
		fmt.Fprintln(w, "microbox: "+why)
	}
}

// programOptions are the Options of the command line: the sandbox flags
// (options), the program and its arguments, and where its output goes.
func (f *execFlags) programOptions(c *cobra.Command, args []string) (nsjail.Options, error) {
	o, err := f.options(c)
	if err != nil {
		return o, err
	}
	inv := f.caller()
	if c.Flags().Changed("code") {
		o.Code = &f.code
		o.Args = args
	} else {
		if len(args) == 0 {
			return o, usagef("no program: give a Python file or -c CODE (see microbox exec --help)")
		}
		o.File, o.Args = args[0], args[1:]
	}
	if !f.json {
		f.streamed = streamed{stdout: lossWriter{w: inv.stdout, name: "stdout"}, stderr: lossWriter{w: inv.stderr, name: "stderr"}}
		o.Stdout, o.Stderr = &f.streamed.stdout, &f.streamed.stderr
	}
	if err := f.fetch.check(f.json); err != nil {
		return o, err
	}
	o.Fetch = f.fetch.paths
	o.Stdin = stdin(inv)
	o.Before = inv.moments // in the trace only with --trace
	return o, nil
}

// options turns the sandbox flags (those of exec that batch, eval and
// doctor share) into Options for the invocation's caller.
func (f *execFlags) options(c *cobra.Command) (nsjail.Options, error) {
	inv := f.caller()
	o := nsjail.Defaults()
	o.Dir, o.Getenv, o.FieldNames = inv.dir, inv.getenv, flagName
	o.Capture, o.Trace = f.json, f.trace
	o.Workdir, o.RootFS, o.Python, o.Hostname = f.workdir, f.rootfs, f.python, f.hostname
	o.Seccomp, o.SeccompProfile = f.seccompMode, f.seccompFile
	o.Env = f.env
	o.Zygote, o.ZygoteFallback, o.Preload = f.zygote, f.zygoteFall, f.preload
	if err := f.lang.apply(&o); err != nil {
		return o, err
	}
	if err := zygoteDefault(&o, c, inv.getenv(zygoteEnv)); err != nil {
		return o, err
	}
	for _, spec := range f.files {
		host, dst, _ := strings.Cut(spec, ":")
		o.HostFiles = append(o.HostFiles, nsjail.HostFile{Host: host, Path: dst})
	}
	var err error
	if o.Timeout, err = nsjail.ParseDuration("Timeout", f.timeout); err != nil {
		return o, flagError(err)
	}
	if o.CPUTime, err = nsjail.ParseDuration("CPUTime", f.cpuTime); err != nil {
		return o, flagError(err)
	}
	if o.OutputLimit, err = nsjail.ParseSize("OutputLimit", f.outputLimit); err != nil {
		return o, flagError(err)
	}
	if o.TmpfsSize, err = nsjail.ParseSize("TmpfsSize", f.tmpfsSize); err != nil {
		return o, flagError(err)
	}
	msgqueue, err := nsjail.ParseSize("MsgQueue", f.msgqueue)
	if err != nil {
		return o, flagError(err)
	}
	o.NoFile, o.SigPending, o.MsgQueue = f.nofile, f.sigpending, uint64(msgqueue)
	o.NoCgroup, o.CgroupParent, o.CPUs, o.Pids = f.noCgroup, f.cgroupParent, f.cpus, f.pids
	if f.noCgroup {
		// Without a cgroup, the limits' defaults do not apply; one given
		// on the command line is refused by Options.
		if !c.Flags().Changed("mem") {
			o.Memory = 0
		}
		if !c.Flags().Changed("cpus") {
			o.CPUs = 0
		}
		if !c.Flags().Changed("pids") {
			o.Pids = 0
		}
	}
	if !f.noCgroup || c.Flags().Changed("mem") {
		if o.Memory, err = nsjail.ParseSize("Memory", f.mem); err != nil {
			return o, flagError(err)
		}
	}
	return o, nil
}

// zygoteEnv, when neither --zygote nor --zygote-fallback is given, sets
// the one its value names ("zygote" or "fallback"; "" neither), so that a
// pipeline turns warm interpreters on without changing its commands.
const zygoteEnv = "MICROBOX_ZYGOTE"

func zygoteDefault(o *nsjail.Options, c *cobra.Command, value string) error {
	fl := c.Flags()
	if fl.Changed("zygote") || fl.Changed("zygote-fallback") {
		return nil
	}
	switch value {
	case "":
	case "zygote":
		o.Zygote = true
	case "fallback":
		o.ZygoteFallback = true
	default:
		return usagef("$%s=%q: give zygote (as --zygote), fallback (as --zygote-fallback) or nothing", zygoteEnv, value)
	}
	return nil
}

// flagNames are the fields of Options (nsjail's, policy's, batch's,
// serve's) as exec's flags (and rootfs's) call them.
var flagNames = map[string]string{
	"Memory": "--mem", "CPUs": "--cpus", "Pids": "--pids", "CPUTime": "--cpu-time",
	"Timeout": "--timeout", "OutputLimit": "--output-limit", "TmpfsSize": "--tmpfs-size",
	"Workdir": "--workdir", "HostFiles": "--file", "Env": "--env", "RootFS": "--rootfs",
	"Python": "--python", "Hostname": "--hostname", "NoCgroup": "--no-cgroup",
	"CgroupParent": "--cgroup-parent", "Seccomp": "--seccomp", "SeccompProfile": "--seccomp-profile",
	"NoFile": "--nofile", "SigPending": "--sigpending", "MsgQueue": "--msgqueue",
	"Zygote": "--zygote", "ZygoteFallback": "--zygote-fallback", "Preload": "--preload",
	"Fetch": "--fetch", "Language": "--lang", "CompileTimeout": "--compile-timeout", "CompileMemory": "--compile-mem", "CompileOutputLimit": "--compile-output-limit",
	"Code": "-c CODE", "File": "a Python file",
	// exec's policy layers
	"DenyModules": "--deny-modules", "AllowModules": "--allow-modules", "Guard": "--guard",
	"Redact": "--redact", "RedactPatterns": "--redact-pattern", "RedactBudget": "--redact-budget", "MaxRisk": "--max-risk",
	"AuditLog": "--audit-log", "AuditInclude": "--audit-include",
	// the options as a whole, in doctor's fix for a run they cannot build
	"Options": "the flags",
	// rootfs build and import
	"With": "--with", "Languages": "--lang", "Suite": "--suite", "Mirror": "--mirror", "Replace": "--replace",
	"MaxSize": "--max-size", "Ref": "--ref",
	// batch and eval
	"K": "-k", "Pin": "--pin", "Shard": "--shard", "Output": "--output", "AllowIncomplete": "--allow-incomplete", "MaxHeld": "--max-held",
	"Resume":  "--resume",
	"Compare": "--compare", "ChallengeTests": "--challenge-tests", "FloatTolerance": "--float-tolerance", "TotalTimeout": "--total-timeout",
	// serve
	"Socket": "--socket", "Warm": "--warm", "IdleExit": "--idle-exit", "HTTP": "--http", "HTTPTokenFile": "--http-token-file",
	"HTTPKeep": "--http-keep", "HTTPMaxBody": "--http-max-body",
	"HTTPKeepBytes": "--http-keep-bytes", "HTTPBodyBudget": "--http-body-budget", "MaxMessage": "--max-message",
}

func flagName(field string) string { return flagNames[field] }

// flagError is err as bad input from the command line: its fields named
// as the flags.
func flagError(err error) error {
	if err == nil {
		return nil
	}
	return usageError{field.Message(err, flagName)}
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
