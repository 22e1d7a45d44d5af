package nsjail

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	units "github.com/docker/go-units"

	"github.com/microbox/microbox/cgroup"
	"github.com/microbox/microbox/field"
	"github.com/microbox/microbox/rootfs"
	"github.com/microbox/microbox/seccomp"
)

// Options are a run as a caller states it, with Defaults for what it
// leaves alone. Every way microbox runs a program (exec, batch, eval,
// serve, check, doctor, the checks of rootfs) builds its Spec from Options,
// so that the defaults, the environment, the root's choice and the checks
// exist once. Errors name the field at fault (package field), for each
// front end to spell as its own flag or key.
type Options struct {
	// The program: Code, run with `python -c`, or File, a host file
	// copied into the working directory and run; Args follow it.
	Code *string
	File string
	Args []string
	// CodePath, with Code, runs it as a file: Code is written there (a
	// relative path: in Workdir) and run as `python CodePath`, so that
	// __file__ and sys.argv[0] are the path, as runners that write the
	// program to a file have them.
	CodePath string
	// PythonFlags are the interpreter's own options, before the program
	// (-I -S for microbox's helpers).
	PythonFlags []string
	// Language is the program's language (package internal/lang; ""
	// is Python). A compiled one is compiled first in a jail of its own
	// under the Compile limits (Spec.Compile).
	Language                          string
	CompileTimeout                    time.Duration
	CompileMemory, CompileOutputLimit int64

	// Stdin feeds the program (nil: /dev/null). Stdout and Stderr, when
	// set, receive its output as it comes; Capture keeps a copy in the
	// result.
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	Capture        bool

	// HostFiles are host files copied into the sandbox; Files are written
	// from memory after them.
	HostFiles []HostFile
	Files     []File
	// Fetch names files to read from the scratch area once the program
	// has ended (Spec.Fetch): a relative name is in the working
	// directory. FetchMaxFile and FetchMaxTotal bound the bytes read (0:
	// DefaultFetchMaxFile, DefaultFetchMaxTotal).
	Fetch                       []string
	FetchMaxFile, FetchMaxTotal int64
	// Env adds KEY=VALUE entries to the program's fixed base environment
	// (BaseEnv); a later entry for a key wins.
	Env []string
	// Dir is where relative host paths (File, HostFiles, RootFS,
	// SeccompProfile) start; "" is this process's working directory.
	Dir string
	// Getenv reads the caller's environment ($MICROBOX_ROOTFS); nil is
	// os.Getenv.
	Getenv func(string) string

	// Limits. With NoCgroup the run has no cgroup, and Memory, CPUs,
	// Pids, CPUTime and CgroupParent must be zero.
	Memory       int64   // bytes, swap off
	CPUs         float64 // cores
	Pids         int64   // processes and threads
	CPUTime      time.Duration
	NoCgroup     bool
	CgroupParent string
	Timeout      time.Duration // wall clock, from the program's start
	OutputLimit  int64         // bytes, each of stdout and stderr
	TmpfsSize    int64         // bytes, each scratch tmpfs
	// OutputMode is what writing past OutputLimit does: OutputKill (or
	// "") ends the run (output_limit); OutputTruncate drops the rest and
	// the run goes on (Spec.OutputTruncate).
	OutputMode string
	// MemoryRlimit caps each process's data segment a little under
	// Memory (DataRlimit): an allocation past it fails in the program
	// (Python raises MemoryError, exit 1) rather than the cgroup killing
	// the run. The cgroup's limit stays as it is, and still ends a run
	// that exceeds it another way (several processes, tmpfs files).
	MemoryRlimit bool
	// The program's rlimits (Spec.Rlimits; zero fields: DefaultRlimits).
	NoFile, SigPending, MsgQueue uint64

	// The sandbox.
	Workdir  string
	RootFS   string // "": $MICROBOX_ROOTFS, else the system root if it exists, else the host's /usr
	Python   string
	Hostname string
	// Seccomp is default, log, off or profile (with SeccompProfile, an
	// OCI/Docker JSON file; naming the file alone implies profile).
	Seccomp        string
	SeccompProfile string

	// Zygote asks that the run fork from a zygote's template with the
	// Preload modules imported, where the runner keeps templates
	// (Spec.Zygote); ZygoteFallback asks for it too, and for a cold start
	// where no template can take the run.
	Zygote, ZygoteFallback bool
	Preload                []string

	Trace  bool
	Before []Moment // the caller's moments before the run, for the trace

	// FieldNames spells these fields in run-time messages as the caller
	// calls them (Spec.FieldNames).
	FieldNames func(field string) string

	prepared *prepared
}

// HostFile is a host file to copy into the sandbox: Host, read with the
// caller's rights, to Path ("" : its base name in the working directory).
type HostFile struct {
	Host, Path string
}

// Defaults are exec's defaults, documented in docs/exec.md.
func Defaults() Options {
	return Options{
		Memory:      256 << 20,
		CPUs:        1,
		Pids:        128,
		Timeout:     10 * time.Second,
		OutputLimit: 1 << 20,
		TmpfsSize:   64 << 20,
		Workdir:     "/tmp",
		Python:      "/usr/bin/python3",
		Hostname:    "microbox",
		Seccomp:     string(seccomp.ModeDefault),
		NoFile:      DefaultRlimits.NoFile,
		SigPending:  DefaultRlimits.SigPending,
		MsgQueue:    DefaultRlimits.MsgQueue,

		CompileTimeout:     DefaultCompileTimeout,
		CompileMemory:      DefaultCompileMemory,
		CompileOutputLimit: DefaultCompileOutputLimit,
	}
}

// prepared is what runs of one set of options share, each part computed
// once (Prepare) and again only when the fields it depends on change.
type prepared struct {
	root   preparedPart[string]
	filter preparedPart[compiled]
	files  preparedPart[[]File] // HostFiles, read
}

// preparedPart is a value and the fields it was computed from.
type preparedPart[T any] struct {
	key   string
	value T
	ok    bool
}

// get returns the part for key, computing it when the key has changed.
func (p *preparedPart[T]) get(key string, compute func() (T, error)) (T, error) {
	if p.ok && p.key == key {
		return p.value, nil
	}
	v, err := compute()
	if err != nil {
		return v, err
	}
	p.key, p.value, p.ok = key, v, true
	return v, nil
}

// compiled is a seccomp filter and its mode.
type compiled struct {
	mode   seccomp.Mode
	filter []byte
}

// Prepare does what every run of these options shares: it chooses and
// checks the root, compiles the filter and reads the host files. Spec
// calls it; a caller that builds many runs from one base (batch) calls it
// on the base, whose copies share the work unless they change the fields
// it depends on.
func (o *Options) Prepare() error {
	// Copies of Options share what was prepared: a part is recomputed
	// in a copy of its own, never in place.
	var p prepared
	if o.prepared != nil {
		p = *o.prepared
	}
	defer func() { o.prepared = &p }()
	key := func(parts ...string) string { return strings.Join(parts, "\x00") }
	if _, err := p.root.get(key(o.RootFS, o.Python, o.Language, o.Dir, o.CallerEnv(rootfs.EnvRootfs)), o.rootDir); err != nil {
		return err
	}
	if _, err := p.filter.get(key(o.Seccomp, o.SeccompProfile, o.Dir), o.filter); err != nil {
		return err
	}
	files := []string{o.Workdir, o.Dir}
	for _, hf := range o.HostFiles {
		files = append(files, hf.Host, hf.Path)
	}
	_, err := p.files.get(key(files...), func() ([]File, error) {
		var read []File
		for _, hf := range o.HostFiles {
			f, err := o.hostFile(hf)
			if err != nil {
				return nil, err
			}
			read = append(read, f)
		}
		return read, nil
	})
	return err
}

// SeccompMode is the filter mode of these options' runs, once prepared.
func (o *Options) SeccompMode() string {
	if o.prepared == nil {
		return ""
	}
	return string(o.prepared.filter.value.mode)
}

// Spec checks the options and turns them into the Spec of one run.
func (o *Options) Spec() (*Spec, error) {
	s, err := o.Build()
	if err != nil {
		return nil, err
	}
	if err := s.checkZygote(forkCheck); err != nil { // Build validated s
		return nil, err
	}
	return s, nil
}

// Build is Spec without its last check, whether a zygote can run it
// (Spec.CheckZygote): for a caller that shapes the Spec further first
// (the policy layers add files and variables a fork cannot take), and
// checks it once, after.
func (o *Options) Build() (*Spec, error) {
	s := &Spec{
		Workdir:     o.Workdir,
		Hostname:    o.Hostname,
		TmpfsSize:   o.TmpfsSize,
		Timeout:     o.Timeout,
		CPUTime:     o.CPUTime,
		OutputLimit: o.OutputLimit,
		Rlimits:     Rlimits{NoFile: o.NoFile, SigPending: o.SigPending, MsgQueue: o.MsgQueue},
		Stdin:       o.Stdin,
		Stdout:      o.Stdout,
		Stderr:      o.Stderr,
		Capture:     o.Capture,
		Trace:       o.Trace,
		Before:      o.Before,
		FieldNames:  o.FieldNames,
	}
	if err := o.CheckRanges(); err != nil {
		return nil, err
	}
	var err error
	if s.Cgroup, err = o.Cgroup(); err != nil {
		return nil, err
	}
	if err := o.overflow(s); err != nil {
		return nil, err
	}
	if err := o.Prepare(); err != nil {
		return nil, err
	}
	s.RootDir = o.prepared.root.value
	if err := o.program(s); err != nil {
		return nil, err
	}
	s.Files = append(s.Files, o.prepared.files.value...)
	s.Files = append(s.Files, o.Files...)
	if err := o.fetch(s); err != nil {
		return nil, err
	}
	if s.Env, err = BaseEnv(o.Env); err != nil {
		return nil, err
	}
	s.SeccompMode, s.Seccomp = string(o.prepared.filter.value.mode), o.prepared.filter.value.filter
	if err := s.Validate(); err != nil {
		return nil, err
	}
	if err := o.compileStep(s); err != nil {
		return nil, err
	}
	if err := o.zygote(s); err != nil {
		return nil, err
	}
	return s, nil
}

// Output modes (Options.OutputMode).
const (
	OutputKill     = "kill"
	OutputTruncate = "truncate"
)

// overflow sets what exceeding a limit does in the program: OutputMode,
// and MemoryRlimit's data limit.
func (o *Options) overflow(s *Spec) error {
	switch o.OutputMode {
	case "", OutputKill:
	case OutputTruncate:
		s.OutputTruncate = true
	default:
		return field.Errorf("OutputMode", "{OutputMode} %q: give %s (end the run) or %s (keep the first {OutputLimit} bytes and go on)", o.OutputMode, OutputKill, OutputTruncate)
	}
	if o.MemoryRlimit {
		if s.Cgroup == nil {
			return field.Errorf("MemoryRlimit", "{MemoryRlimit} needs a memory limit ({Memory}), which needs a cgroup")
		}
		s.Rlimits.Data = DataRlimit(o.Memory)
	}
	return nil
}

// fetch places the files to fetch: a relative name in the working
// directory (Spec.Validate checks where they land).
func (o *Options) fetch(s *Spec) error {
	s.FetchMaxFile, s.FetchMaxTotal = cmp.Or(o.FetchMaxFile, DefaultFetchMaxFile), cmp.Or(o.FetchMaxTotal, DefaultFetchMaxTotal)
	for _, name := range o.Fetch {
		if name == "" || strings.IndexByte(name, 0) >= 0 {
			return field.Errorf("Fetch", "{Fetch} %q: give the path of a file in the sandbox, e.g. out.png or /tmp/out.png", name)
		}
		p := path.Clean(name)
		if !path.IsAbs(name) {
			p = path.Join(o.Workdir, name)
		}
		s.Fetch = append(s.Fetch, FetchFile{Name: name, Path: p})
	}
	return nil
}

// DataRlimit is the data-segment limit MemoryRlimit gives a run of memory
// bytes: under it by what the cgroup also counts and the data segment
// does not (the interpreter's and libraries' pages, page tables, kernel
// memory): an eighth, at least 16 MiB and at most 64 MiB, and never more
// than half.
func DataRlimit(memory int64) uint64 {
	margin := min(max(memory/8, 16<<20), 64<<20, memory/2)
	return uint64(memory - margin)
}

// zygote asks for a zygote's template, if o does; whether one can run s
// is Spec.CheckZygote's to say.
func (o *Options) zygote(s *Spec) error {
	if !o.Zygote && !o.ZygoteFallback {
		if len(o.Preload) > 0 {
			return field.Errorf("Preload", "{Preload} needs {Zygote}: modules are preloaded into a zygote's template")
		}
		return nil
	}
	if ok, err := o.zygoteLanguage(); !ok {
		return err
	}
	s.Zygote = &Zygote{Preload: o.Preload, Fallback: o.ZygoteFallback}
	return nil
}

// RootDir is the root these options' runs get once prepared: a prepared
// root's absolute path, or "" for the host-derived one.
func (o *Options) RootDir() string {
	if o.prepared == nil {
		return ""
	}
	return o.prepared.root.value
}

// WithoutCgroup is o with no cgroup: NoCgroup set, and the limits that
// need one cleared.
func (o Options) WithoutCgroup() Options {
	o.NoCgroup = true
	o.Memory, o.CPUs, o.Pids, o.CPUTime, o.CgroupParent = 0, 0, 0, 0, ""
	return o
}

// Cgroup checks the limits and says which cgroup the run gets (nil:
// none); with NoCgroup, a limit that was asked for is refused rather than
// dropped.
func (o *Options) Cgroup() (*cgroup.Options, error) {
	if o.NoCgroup {
		for _, f := range []struct {
			name string
			set  bool
		}{{"Memory", o.Memory != 0}, {"CPUs", o.CPUs != 0}, {"Pids", o.Pids != 0},
			{"CPUTime", o.CPUTime != 0}, {"CgroupParent", o.CgroupParent != ""}} {
			if f.set {
				return nil, field.Errorf(f.name, "{"+f.name+"} needs a cgroup and cannot be used with {NoCgroup}")
			}
		}
		return nil, nil
	}
	if o.Memory <= 0 {
		return nil, field.Errorf("Memory", "{Memory} %d: give a positive size such as 256M", o.Memory)
	}
	if o.CPUs <= 0 {
		return nil, field.Errorf("CPUs", "{CPUs} %v: give a positive number of cores, e.g. 1 or 0.5", o.CPUs)
	}
	if !cgroup.CPUsInRange(o.CPUs) {
		return nil, field.Errorf("CPUs", "{CPUs} %v is outside the kernel's range: give %v to %.0f cores (a CPU quota of at least 1 ms per 100 ms), e.g. 1 or 0.5", o.CPUs, cgroup.MinCPUs, math.Floor(cgroup.MaxCPUs))
	}
	if o.Pids < MinPids {
		return nil, field.Errorf("Pids", "{Pids} %d: give a process limit of at least %d (the jail's init and the program), e.g. 128", o.Pids, MinPids)
	}
	return &cgroup.Options{
		Limits: cgroup.Limits{Memory: o.Memory, CPUs: o.CPUs, Pids: o.Pids},
		Parent: o.CgroupParent,
	}, nil
}

// MinPids is the smallest process limit a run can start with: the jail's
// init and the program.
const MinPids = 2

// The largest limits any run may have, whoever asks: past them a limit
// is out of the kernel's range (a pids.max over cgroup.MaxPids is refused
// by cgroupfs) or so large that it would mean no limit (a memory.max of
// exabytes), and a time that would not be a run's. CPUs has the kernel's
// range (cgroup.CPUsInRange).
const (
	MaxSize     = 1 << 50 // bytes: Memory, TmpfsSize, OutputLimit (1 PiB)
	MaxDuration = 30 * 24 * time.Hour
)

// CheckRanges refuses a limit outside the range a run can have (the
// kernel's, or MaxSize and MaxDuration) before it reaches a cgroup file,
// as an error naming the field.
func (o *Options) CheckRanges() error {
	for _, f := range []struct {
		name string
		n    int64
	}{{"Memory", o.Memory}, {"TmpfsSize", o.TmpfsSize}, {"OutputLimit", o.OutputLimit},
		{"CompileMemory", o.CompileMemory}, {"CompileOutputLimit", o.CompileOutputLimit}} {
		if f.n > MaxSize {
			return field.Errorf(f.name, "{"+f.name+"} %d bytes is more than any run may have: give at most %s", f.n, units.BytesSize(MaxSize))
		}
	}
	for _, f := range []struct {
		name string
		d    time.Duration
	}{{"Timeout", o.Timeout}, {"CPUTime", o.CPUTime}, {"CompileTimeout", o.CompileTimeout}} {
		if f.d > MaxDuration {
			return field.Errorf(f.name, "{"+f.name+"} %s is longer than any run may last: give at most %s", f.d, MaxDuration)
		}
	}
	if o.Pids > cgroup.MaxPids {
		return field.Errorf("Pids", "{Pids} %d is outside the kernel's range: give at most %d", o.Pids, cgroup.MaxPids)
	}
	return nil
}

// program sets argv, and for a file copies it into the working directory.
func (o *Options) program(s *Spec) error {
	l, err := o.language()
	if err != nil {
		return err
	}
	if !l.IsPython() {
		return o.languageProgram(s, l)
	}
	switch {
	case o.Code != nil && o.File != "":
		return field.Errorf("Code", "give either {Code} or {File}, not both")
	case o.CodePath != "" && o.Code == nil:
		return field.Errorf("CodePath", "{CodePath} names where {Code} is written: give {Code} too")
	case o.CodePath != "":
		return o.codeFile(s)
	case o.Code != nil:
		code, err := o.longCode(s, *o.Code)
		if err != nil {
			return err
		}
		s.Argv = append(o.argv0(), "-c", code)
		s.Argv = append(s.Argv, o.Args...)
		return nil
	case o.File == "":
		return field.Errorf("Code", "no program: give {Code} or {File}")
	}
	f, err := o.hostFile(HostFile{Host: o.File})
	if err != nil {
		return err
	}
	s.Files = append(s.Files, f)
	s.Argv = append(append(o.argv0(), f.Path), o.Args...)
	return nil
}

// Code longer than an argument may be (the kernel takes none over 128
// KiB) goes into a file of the root, CodeFile, which a one-line program
// given to -c compiles and runs as -c would have: as __main__, named
// "<string>" in tracebacks (which show the one line first), with
// sys.argv[0] "-c". MaxCode bounds it: the file lives in the run's memory.
const (
	maxArgCode = 96 << 10
	MaxCode    = 16 << 20
	CodeFile   = RootFilesDir + "/program.py"
)

// longCode is code as -c takes it: itself, or for long code the line
// that runs CodeFile, which it adds to the spec's root files.
func (o *Options) longCode(s *Spec, code string) (string, error) {
	if len(code) <= maxArgCode {
		return code, nil
	}
	if len(code) > MaxCode {
		return "", field.Errorf("Code", "{Code} is %d bytes; at most %d fit in a run", len(code), MaxCode)
	}
	s.RootFiles = append(s.RootFiles, File{Path: CodeFile, Data: []byte(code), Mode: 0o444})
	return fmt.Sprintf("exec(compile(open(%q, 'rb').read(), '<string>', 'exec'))", CodeFile), nil
}

// codeFile writes Code to CodePath and runs that file (python PATH).
func (o *Options) codeFile(s *Spec) error {
	if len(*o.Code) > MaxCode {
		return field.Errorf("Code", "{Code} is %d bytes; at most %d fit in a run", len(*o.Code), MaxCode)
	}
	dst := o.CodePath
	if !path.IsAbs(dst) {
		dst = path.Join(o.Workdir, dst)
	}
	s.Files = append(s.Files, File{Path: dst, Data: []byte(*o.Code), Mode: 0o644})
	s.Argv = append(append(o.argv0(), dst), o.Args...)
	return nil
}

// argv0 is the interpreter and its options.
func (o *Options) argv0() []string {
	return append([]string{o.Python}, o.PythonFlags...)
}

// hostFile reads a host file for the sandbox.
func (o *Options) hostFile(hf HostFile) (File, error) {
	dst := hf.Path
	if dst == "" {
		dst = path.Join(o.Workdir, sandboxName(hf.Host))
	}
	data, err := ReadHostFile(o.HostPath(hf.Host), hf.Host)
	return File{Path: dst, Data: data, Mode: 0o644}, err
}

// ReadHostFile reads the host file at path, which the caller calls name,
// with an error that says what to do about it.
func ReadHostFile(path, name string) ([]byte, error) {
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, field.Errorf("HostFiles", "%s: no such file; give the path of an existing file", name)
	case errors.Is(err, fs.ErrPermission):
		return nil, field.Errorf("HostFiles", "%s: permission denied; make it readable by the user running microbox", name)
	case err != nil:
		return nil, field.Errorf("HostFiles", "%s: %v", name, err)
	}
	return data, nil
}

// sandboxName is the name a host file gets inside the sandbox.
func sandboxName(host string) string {
	name := filepath.Base(host)
	if name == "." || name == "/" || name == ".." {
		return "main.py"
	}
	return name
}

// HostPath is name as the caller means it: relative names start in Dir.
// It is not cleaned, so that ".." after a symbolic link resolves as the
// caller's own open would.
func (o *Options) HostPath(name string) string {
	if o.Dir == "" || name == "" || strings.HasPrefix(name, "/") {
		return name
	}
	return o.Dir + "/" + name
}

// CallerEnv is the caller's environment variable key, read with Getenv.
func (o *Options) CallerEnv(key string) string {
	if o.Getenv == nil {
		return os.Getenv(key)
	}
	return o.Getenv(key)
}

// systemRoot is rootfs.SystemDir; tests move it.
var systemRoot = rootfs.SystemDir

// rootDir picks the root: RootFS, else $MICROBOX_ROOTFS, else the system
// root if it exists, else "" (the host-derived root). A root that is
// named is checked cheaply (the interpreter and the mount points exist,
// the jail can reach it) and refused with the place it was named.
func (o *Options) rootDir() (string, error) {
	dir, origin := o.RootFS, "{RootFS}"
	if dir == "" {
		dir, origin = o.CallerEnv(rootfs.EnvRootfs), "$"+rootfs.EnvRootfs
	}
	if dir == "" {
		fi, err := os.Stat(systemRoot)
		if err != nil || !fi.IsDir() {
			return "", o.checkRoot("")
		}
		dir, origin = systemRoot, "the system root "+systemRoot
	}
	abs, err := filepath.Abs(o.HostPath(dir))
	if err != nil {
		return "", field.Errorf("RootFS", origin+" %s: %v", dir, err)
	}
	err = o.checkRoot(abs)
	if err == nil {
		err = rootfs.CheckReachable(abs)
	}
	switch {
	case err == nil:
		return abs, nil
	case origin == "{RootFS}":
		return "", err
	}
	return "", field.Errorf("RootFS", "%v (root chosen by %s; fix it, or pass {RootFS})", err, origin)
}

// filter checks the seccomp settings and compiles the filter (the
// default one is precompiled).
func (o *Options) filter() (compiled, error) {
	mode := o.Seccomp
	if o.SeccompProfile != "" {
		if mode != string(seccomp.ModeDefault) && mode != string(seccomp.ModeProfile) {
			return compiled{}, field.Errorf("SeccompProfile", "{SeccompProfile} cannot be combined with {Seccomp} %s", mode)
		}
		mode = string(seccomp.ModeProfile)
	}
	m, err := seccomp.ParseMode(mode)
	if err != nil {
		return compiled{}, field.Errorf("Seccomp", "{Seccomp}: %v", err)
	}
	if m == seccomp.ModeProfile && o.SeccompProfile == "" {
		return compiled{}, field.Errorf("SeccompProfile", "{Seccomp} profile needs {SeccompProfile} FILE.json")
	}
	prog, err := seccomp.Program(m, o.HostPath(o.SeccompProfile))
	var profileErr *seccomp.ProfileError
	switch {
	case errors.As(err, &profileErr):
		return compiled{}, field.Errorf("SeccompProfile", "seccomp: %v", err)
	case err != nil:
		return compiled{}, fmt.Errorf("seccomp: %w", err)
	}
	return compiled{m, prog}, nil
}

// BaseEnv is a program's whole environment: a fixed minimal base
// (nothing from microbox's own) with the KEY=VALUE entries of extra over
// it.
func BaseEnv(extra []string) ([]string, error) {
	env := []string{
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
		if !ok || k == "" || strings.IndexByte(e, 0) >= 0 {
			return nil, field.Errorf("Env", "{Env} %q: write KEY=VALUE", e)
		}
		env = SetEnv(env, k, e)
	}
	return env, nil
}

// SetEnv sets entry (KEY=VALUE) for key in env, replacing an earlier one.
func SetEnv(env []string, key, entry string) []string {
	for i, e := range env {
		if strings.HasPrefix(e, key+"=") {
			env[i] = entry
			return env
		}
	}
	return append(env, entry)
}

// ParseSize reads a size in Docker's forms (256M, 1g, 512MiB, bytes) for
// the named field.
func ParseSize(name, v string) (int64, error) {
	n, err := units.RAMInBytes(v)
	if err != nil || n <= 0 {
		return 0, field.Errorf(name, "{"+name+"} %q: give a positive size such as 256M, 1g, 512MiB or a number of bytes", v)
	}
	return n, nil
}

// ParseDuration reads a duration in Go's forms (500ms, 5s, 2m; 0 is
// none) for the named field.
func ParseDuration(name, v string) (time.Duration, error) {
	if n, err := strconv.ParseFloat(v, 64); err == nil && n == 0 {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, field.Errorf(name, "{"+name+"} %q: give a duration such as 500ms, 5s or 2m", v)
	}
	if d < 0 {
		return 0, field.Errorf(name, "{"+name+"} %q: a duration cannot be negative", v)
	}
	return d, nil
}
