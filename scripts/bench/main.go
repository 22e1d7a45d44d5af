// Command bench measures what one `microbox exec` costs on top of starting
// bare Python, and how it compares with other ways of sandboxing a process.
//
// It times `microbox exec --mem 256M --timeout 5s -c 'print(1)'` (every
// layer on) against `/usr/bin/python3 -c 'print(1)'` and against peers with
// comparable isolation (bubblewrap, `unshare` alone, firejail when it is
// installed), interleaving the variants, in a shuffled order each round,
// so that load on the machine and each other's background work hit them
// alike. It reports latency serially and under concurrency, the peak
// memory of microbox's supervisor, jail spawner and PID 1 (resident and
// anonymous), and the median time of each set-up phase from `microbox exec
// --json --trace`. With -baseline it also times an earlier microbox binary
// in the same rounds, in-process and through a server of its own, for a
// before/after; -baseline-rev REV builds that binary from a git revision
// (main, HEAD~1) in a temporary worktree first. A goals table states issue
// 34's goals as same-run ratios: the in-process overhead against bwrap's,
// the served overhead's median and p99. Two floors, programs that only
// print 1, are timed beside them (-floors): a static C one and a static
// cgo Go one linked as microbox is; their gap is what Go's runtime costs
// a one-shot exec before its main runs, which bwrap, in C, does not pay.
//
// microbox is timed three ways: in-process (MICROBOX_SOCKET= , the Go
// supervisor starts with every run), through a `microbox serve --warm 0`
// started for the bench (no Go start per run), and through a `microbox
// serve` with its default pool of jails started ahead. Since a server's
// background work would also slow the other variants of an interleaved
// round, throughput is measured a second time with each variant alone on
// the machine.
//
// The Markdown report replaces the section between the bench markers of
// BENCHMARKS.md. Run it from the repository root after building microbox
// (make: bin/microbox, and bin/microbox-server, which serve starts):
//
//	make
//	go run ./scripts/bench -n 200
//	go run ./scripts/bench -quick            # a smoke run for CI
//
// It only reports: it never fails because something is slow. It exits 1
// only when bare Python or microbox cannot be run at all, or a measured
// run fails; a peer that is missing or does not work is reported as
// skipped.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

const (
	startMarker = "<!-- bench:start -->"
	endMarker   = "<!-- bench:end -->"
	program     = "print(1)"
	wantStdout  = "1\n"
	sleeper     = "import time; time.sleep(0.5)"
)

// config is the command line.
type config struct {
	n, parallelN, warmup, traceN, memN int
	parallel                           []int
	microbox, python, out, jsonOut     string
	baseline, baselineRev              string
	timeout, gap                       time.Duration
	quick, serve, floors               bool
}

func main() { os.Exit(bench()) }

// bench runs the whole bench and returns the exit status (a function of
// its own, so that the baseline's worktree is removed before the exit).
func bench() int {
	// Every microbox this bench starts runs in-process unless its variant
	// names a server.
	os.Setenv("MICROBOX_SOCKET", "")
	cfg, err := parseFlags(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 2
	}
	if cfg.baselineRev != "" {
		if cfg.baseline != "" {
			fmt.Fprintln(os.Stderr, "bench: give -baseline or -baseline-rev, not both")
			return 2
		}
		bin, remove, err := buildBaseline(cfg.baselineRev)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			return 1
		}
		defer remove()
		cfg.baseline = bin
	}
	rep, err := run(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 1
	}
	if len(rep.Failures) > 0 {
		fmt.Fprintf(os.Stderr, "bench: %d measured runs failed (see the report)\n", len(rep.Failures))
		return 1
	}
	return 0
}

func parseFlags(args []string) (*config, error) {
	cfg := &config{}
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.IntVar(&cfg.n, "n", 200, "serial runs per variant")
	parallel := fs.String("parallel", "1,2,8", "concurrent workers to measure, comma-separated (empty: none); 1 gives the CPU time per run without contention")
	fs.IntVar(&cfg.parallelN, "parallel-n", 50, "runs per variant per worker in parallel mode")
	fs.IntVar(&cfg.warmup, "warmup", 10, "warm-up rounds before measuring (not recorded)")
	fs.IntVar(&cfg.traceN, "trace-n", 30, "traced microbox runs for the phase breakdown")
	fs.IntVar(&cfg.memN, "mem-n", 5, "sampled runs for the memory measurement")
	fs.StringVar(&cfg.microbox, "microbox", "bin/microbox", "microbox binary")
	fs.StringVar(&cfg.baseline, "baseline", "", "an earlier microbox binary to measure in the same rounds, for a before/after (variants microbox-baseline, microbox-baseline-serve-warm)")
	fs.StringVar(&cfg.baselineRev, "baseline-rev", "", "a git revision to build (make build, in a temporary worktree) and measure as -baseline, e.g. HEAD~1 or main")
	fs.StringVar(&cfg.python, "python", "/usr/bin/python3", "bare Python interpreter (not a pyenv shim)")
	fs.StringVar(&cfg.out, "out", "BENCHMARKS.md", "Markdown file whose bench section is replaced (empty: none)")
	fs.StringVar(&cfg.jsonOut, "json", "", "also write the results as JSON to this file")
	fs.DurationVar(&cfg.timeout, "timeout", 30*time.Second, "limit on any one command")
	fs.DurationVar(&cfg.gap, "gap", 0, "idle time before each serial run (0: back to back), as a caller that does other work between runs")
	fs.BoolVar(&cfg.quick, "quick", false, "small counts for a smoke run (explicit flags still win)")
	fs.BoolVar(&cfg.serve, "serve", true, "also time microbox exec through microbox serve (servers started for the bench)")
	fs.BoolVar(&cfg.floors, "floors", true, "also time two programs that only print 1, a static C one and a static cgo Go one linked as microbox is (c-floor, go-floor): Go's runtime start is their gap")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	if cfg.quick {
		applyQuick(cfg, fs)
	}
	var err error
	if cfg.parallel, err = parseInts(*parallel); err != nil {
		return nil, fmt.Errorf("-parallel: %w", err)
	}
	if cfg.n < 1 || cfg.parallelN < 1 || cfg.warmup < 0 || cfg.traceN < 0 || cfg.memN < 0 {
		return nil, errors.New("-n and -parallel-n must be at least 1; the other counts not negative")
	}
	return cfg, nil
}

// applyQuick lowers every count the command line did not set.
func applyQuick(cfg *config, fs *flag.FlagSet) {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	quick := map[string]*int{"n": &cfg.n, "parallel-n": &cfg.parallelN, "warmup": &cfg.warmup, "trace-n": &cfg.traceN, "mem-n": &cfg.memN}
	small := map[string]int{"n": 10, "parallel-n": 5, "warmup": 2, "trace-n": 5, "mem-n": 1}
	for name, p := range quick {
		if !set[name] {
			*p = small[name]
		}
	}
}

func parseInts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		v, err := strconv.Atoi(f)
		if err != nil || v < 1 {
			return nil, fmt.Errorf("%q is not a positive number", f)
		}
		out = append(out, v)
	}
	return out, nil
}

// report is everything one benchmark run found; it is also the -json output.
type report struct {
	Date     string          `json:"date"`
	Command  string          `json:"command"`
	Machine  machine         `json:"machine"`
	Config   map[string]any  `json:"config"`
	Variants []*variant      `json:"variants"`
	Serial   []row           `json:"serial"`
	Parallel []parallelBlock `json:"parallel"`
	Alone    []aloneBlock    `json:"alone"`
	Memory   *memReport      `json:"memory,omitempty"`
	Trace    *traceReport    `json:"trace,omitempty"`
	Failures []string        `json:"failures,omitempty"`
}

func run(cfg *config) (*report, error) {
	rep := &report{
		Date:    time.Now().UTC().Format("2006-01-02 15:04 UTC"),
		Command: commandLine(),
		Machine: describeMachine(cfg.python),
		Config: map[string]any{"n": cfg.n, "parallel": cfg.parallel, "parallel_n": cfg.parallelN,
			"warmup": cfg.warmup, "trace_n": cfg.traceN, "mem_n": cfg.memN, "gap": cfg.gap.String()},
	}
	sockets := map[string]string{}
	var serverPids []int
	if cfg.serve {
		dir, err := os.MkdirTemp("", "microbox-bench-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(dir)
		servers := []struct{ name, microbox, warm string }{
			{"microbox-serve", cfg.microbox, "0"},
			{"microbox-serve-warm", cfg.microbox, ""},
		}
		if cfg.baseline != "" {
			servers = append(servers, struct{ name, microbox, warm string }{"microbox-baseline-serve-warm", cfg.baseline, ""})
		}
		for _, sv := range servers {
			sockets[sv.name] = filepath.Join(dir, sv.name+".sock")
			pid, stop, err := startServer(sv.microbox, sockets[sv.name], sv.warm)
			if err != nil {
				return nil, err
			}
			defer stop()
			serverPids = append(serverPids, pid)
		}
	}
	vs, err := variants(cfg, sockets)
	if err != nil {
		return nil, err
	}
	if cfg.floors {
		floors, remove := buildFloors()
		defer remove()
		vs = append(vs, floors...)
	}
	rep.Variants = vs
	live := probe(vs, cfg.timeout)
	if len(live) < 2 || live[0].Name != "python" || live[1].Name != "microbox" {
		for _, v := range vs {
			if v.Skipped != "" {
				fmt.Fprintf(os.Stderr, "bench: %s: %s\n", v.Name, v.Skipped)
			}
		}
		return nil, errors.New("bare python and microbox must both work")
	}
	rep.Serial = measureSerial(cfg, live, rep)
	// The floors are for the serial rows' comparison only.
	sandboxes := slices.DeleteFunc(slices.Clone(live), isFloor)
	for _, w := range cfg.parallel {
		rep.Parallel = append(rep.Parallel, measureParallel(cfg, sandboxes, w, rep))
	}
	for _, w := range cfg.parallel {
		rep.Alone = append(rep.Alone, measureAlone(cfg, sandboxes, w, rep, serverPids))
	}
	rep.Memory = measureMemory(cfg, rep)
	rep.Trace = measureTrace(cfg, rep)
	rep.Machine.LoadAfter = loadAverage()
	return rep, publish(cfg, rep)
}

// publish prints the report and writes it where the flags say.
func publish(cfg *config, rep *report) error {
	md := render(rep)
	fmt.Print(md)
	if cfg.out != "" {
		if err := writeSection(cfg.out, md); err != nil {
			return err
		}
		fmt.Fprintln(os.Stderr, "bench: wrote", cfg.out)
	}
	if cfg.jsonOut != "" {
		b, err := json.MarshalIndent(rep, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(cfg.jsonOut, append(b, '\n'), 0o644); err != nil {
			return err
		}
		fmt.Fprintln(os.Stderr, "bench: wrote", cfg.jsonOut)
	}
	return nil
}

// commandLine is how this run was started, for the report.
func commandLine() string {
	parts := []string{"go run ./scripts/bench"}
	for _, a := range os.Args[1:] {
		parts = append(parts, shellQuote(a))
	}
	return strings.Join(parts, " ")
}

func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_=.,/:") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// ---------------------------------------------------------------------------
// Variants

// variant is one way of running the program.
type variant struct {
	Name    string   `json:"name"`
	Argv    []string `json:"argv"`
	Env     []string `json:"env,omitempty"`     // added to the bench's environment
	Skipped string   `json:"skipped,omitempty"` // why it was not measured
}

// startServer starts `microbox serve` on socket (warm "": the default
// pool) and returns its pid and how to stop it.
func startServer(microbox, socket, warm string) (int, func(), error) {
	args := []string{"serve", "--socket", socket}
	if warm != "" {
		args = append(args, "--warm", warm)
	}
	cmd := exec.Command(microbox, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	// A bench that is killed takes its servers with it (SIGTERM: they
	// end their jails and remove their cgroups themselves).
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		return 0, nil, fmt.Errorf("start microbox serve: %w", err)
	}
	stop := func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
	}
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if fi, err := os.Stat(socket); err == nil && fi.Mode()&os.ModeSocket != 0 {
			return cmd.Process.Pid, stop, nil
		}
	}
	stop()
	return 0, nil, fmt.Errorf("microbox serve did not listen on %s: %s", socket, lastLine(stderr.String()))
}

// variants lists bare Python first and microbox (in-process) second; the
// servers' and the peers follow.
func variants(cfg *config, sockets map[string]string) ([]*variant, error) {
	mb, err := filepath.Abs(cfg.microbox)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(mb); err != nil {
		return nil, fmt.Errorf("%v (build it first: make build)", err)
	}
	py := cfg.python
	vs := []*variant{
		{Name: "python", Argv: []string{py, "-c", program}},
		{Name: "microbox", Argv: []string{mb, "exec", "--mem", "256M", "--timeout", "5s", "-c", program},
			Env: []string{"MICROBOX_SOCKET="}},
	}
	for _, name := range []string{"microbox-serve", "microbox-serve-warm"} {
		if sock, ok := sockets[name]; ok {
			vs = append(vs, &variant{Name: name, Argv: vs[1].Argv, Env: []string{"MICROBOX_SOCKET=" + sock}})
		}
	}
	if cfg.baseline != "" {
		base, err := filepath.Abs(cfg.baseline)
		if err != nil {
			return nil, err
		}
		vs = append(vs, &variant{Name: "microbox-baseline", Argv: []string{base, "exec", "--mem", "256M", "--timeout", "5s", "-c", program},
			Env: []string{"MICROBOX_SOCKET="}})
		if sock, ok := sockets["microbox-baseline-serve-warm"]; ok {
			vs = append(vs, &variant{Name: "microbox-baseline-serve-warm", Argv: vs[len(vs)-1].Argv, Env: []string{"MICROBOX_SOCKET=" + sock}})
		}
	}
	vs = append(vs,
		peer("bwrap", []string{"--unshare-all", "--die-with-parent", "--new-session",
			"--ro-bind", "/usr", "/usr", "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64",
			"--symlink", "usr/bin", "/bin", "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp",
			py, "-c", program}),
		peer("unshare", []string{"-Urnmpiuf", "--mount-proc", py, "-c", program}),
		peer("firejail", []string{"--quiet", "--noprofile", "--net=none", "--private", "--private-dev",
			"--private-tmp", "--nogroups", "--nonewprivs", "--seccomp", py, "-c", program}),
	)
	return vs, nil
}

// peer resolves a peer's binary up front, so the PATH look-up is not timed.
func peer(tool string, args []string) *variant {
	v := &variant{Name: tool}
	path, err := exec.LookPath(tool)
	if err != nil {
		v.Skipped = "not installed"
		v.Argv = append([]string{tool}, args...)
		return v
	}
	v.Argv = append([]string{path}, args...)
	return v
}

// probe runs every installed variant once and returns those that work.
func probe(vs []*variant, timeout time.Duration) []*variant {
	var live []*variant
	for _, v := range vs {
		if v.Skipped == "" {
			if _, err := runOnce(v, timeout); err != nil {
				v.Skipped = "does not run here: " + err.Error()
			}
		}
		if v.Skipped != "" {
			fmt.Fprintf(os.Stderr, "bench: skipping %s: %s\n", v.Name, v.Skipped)
			continue
		}
		live = append(live, v)
	}
	return live
}

// runOnce runs a variant with its stdout on a pipe read to the end and
// returns the wall-clock time from start to exit; the program must print
// "1".
func runOnce(v *variant, timeout time.Duration) (time.Duration, error) {
	return timeRun(v.Argv, v.Env, timeout, wantStdout)
}

// timeRun runs argv with env added; want "" accepts every output.
func timeRun(argv, env []string, timeout time.Duration, want string) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	took := time.Since(start)
	if err != nil {
		return took, fmt.Errorf("%v: %s", err, lastLine(stderr.String()))
	}
	if want != "" && stdout.String() != want {
		return took, fmt.Errorf("stdout %q, want %q", stdout.String(), want)
	}
	return took, nil
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// ---------------------------------------------------------------------------
// Latency and throughput

// samples collects the wall times of each variant, safe for concurrent use.
type samples struct {
	mu       sync.Mutex
	ms       map[string][]float64
	failures []string
}

func newSamples() *samples { return &samples{ms: map[string][]float64{}} }

func (s *samples) add(name string, d time.Duration, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.failures = append(s.failures, name+": "+err.Error())
		return
	}
	s.ms[name] = append(s.ms[name], msOf(d))
}

// rounds runs every variant once per round, each run gap after the last;
// rec nil means warm-up. Each round has an order of its own, shuffled
// (seeded by offset, so reproducible): a variant's run follows another's
// background work (a server's teardown, the jails it starts ahead, a
// network namespace's removal), and in a fixed order the same variant
// would always follow the same one. Measured: one build's served
// overhead was +1.3 ms in the slot after the cold server and +3.1 in the
// slot after the in-process baseline.
func rounds(vs []*variant, n, offset int, timeout, gap time.Duration, rec *samples) {
	rng := rand.New(rand.NewPCG(uint64(offset), 34))
	order := slices.Clone(vs)
	for range n {
		rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		for _, v := range order {
			time.Sleep(gap)
			d, err := runOnce(v, timeout)
			if rec != nil {
				rec.add(v.Name, d, err)
			}
		}
	}
}

// row is one variant's latency, compared with bare Python's.
type row struct {
	Variant    string  `json:"variant"`
	Stats      stats   `json:"stats"`
	Failed     int     `json:"failed"`
	OverMedian float64 `json:"overhead_median_ms"`
	OverP99    float64 `json:"overhead_p99_ms"`
	Ratio      float64 `json:"ratio_median"`
	Throughput float64 `json:"throughput_per_s,omitempty"`
	TputRatio  float64 `json:"throughput_ratio,omitempty"`
}

func measureSerial(cfg *config, vs []*variant, rep *report) []row {
	fmt.Fprintf(os.Stderr, "bench: serial: %d warm-up + %d rounds of %d variants\n", cfg.warmup, cfg.n, len(vs))
	rounds(vs, cfg.warmup, 0, cfg.timeout, cfg.gap, nil)
	rec := newSamples()
	rounds(vs, cfg.n, 0, cfg.timeout, cfg.gap, rec)
	rep.Failures = append(rep.Failures, rec.failures...)
	return compare(vs, rec, 1)
}

// compare turns samples into rows; with workers > 0 it adds throughput.
func compare(vs []*variant, rec *samples, workers int) []row {
	base := summarize(rec.ms["python"])
	var rows []row
	for _, v := range vs {
		st := summarize(rec.ms[v.Name])
		r := row{Variant: v.Name, Stats: st, Failed: countPrefix(rec.failures, v.Name+": "),
			OverMedian: st.Median - base.Median, OverP99: st.P99 - base.P99, Ratio: st.Median / base.Median}
		// Each worker runs the variants back to back, so a variant alone
		// would complete workers runs per mean wall time.
		r.Throughput = float64(workers) / (st.Mean / 1000)
		r.TputRatio = base.Mean / st.Mean
		rows = append(rows, r)
	}
	return rows
}

func countPrefix(list []string, prefix string) int {
	n := 0
	for _, s := range list {
		if strings.HasPrefix(s, prefix) {
			n++
		}
	}
	return n
}

// parallelBlock is one concurrency level.
type parallelBlock struct {
	Workers   int     `json:"workers"`
	ElapsedS  float64 `json:"elapsed_s"`
	TotalRate float64 `json:"all_variants_per_s"`
	Rows      []row   `json:"rows"`
}

func measureParallel(cfg *config, vs []*variant, workers int, rep *report) parallelBlock {
	fmt.Fprintf(os.Stderr, "bench: parallel: %d workers × (%d warm-up + %d rounds)\n",
		workers, min(cfg.warmup, 2), cfg.parallelN)
	rec := newSamples()
	var warm, done sync.WaitGroup
	warm.Add(workers)
	gate := make(chan struct{})
	var start time.Time
	for w := range workers {
		done.Add(1)
		go func() {
			defer done.Done()
			rounds(vs, min(cfg.warmup, 2), w, cfg.timeout, 0, nil)
			warm.Done()
			<-gate // every worker is warm before the clock starts
			rounds(vs, cfg.parallelN, w, cfg.timeout, 0, rec)
		}()
	}
	warm.Wait()
	start = time.Now()
	close(gate)
	done.Wait()
	elapsed := time.Since(start).Seconds()
	rep.Failures = append(rep.Failures, rec.failures...)
	total := workers * cfg.parallelN * len(vs)
	return parallelBlock{Workers: workers, ElapsedS: elapsed, TotalRate: float64(total) / elapsed,
		Rows: compare(vs, rec, workers)}
}

// aloneBlock is the throughput of each variant with the machine to itself.
type aloneBlock struct {
	Workers int        `json:"workers"`
	Rows    []aloneRow `json:"rows"`
}

type aloneRow struct {
	Variant string  `json:"variant"`
	Runs    int     `json:"runs"`
	Failed  int     `json:"failed"`
	Rate    float64 `json:"runs_per_s"`
	Ratio   float64 `json:"ratio"` // to bare python's rate
	// CPU is the CPU time (user + system) of everything a run costs: the
	// processes the bench started and what they reaped, plus the servers'
	// own and their reaped jails'.
	CPU     float64 `json:"cpu_ms_per_run"`
	OverCPU float64 `json:"cpu_over_python_ms"`
	// Where CPU went, ms per run: Caller is the processes the bench
	// started and what they reaped (for in-process microbox, all of it);
	// Server, a server's own threads; Alive, its living children (the
	// jail spawner, jails started ahead); Reaped, the jails it reaped.
	// Machine is every CPU's busy time (/proc/stat), kernel threads
	// included (a network namespace's teardown runs in one), and anything
	// else the machine ran meanwhile.
	Caller  float64 `json:"caller_cpu_ms_per_run"`
	Server  float64 `json:"server_cpu_ms_per_run"`
	Alive   float64 `json:"server_children_cpu_ms_per_run"`
	Reaped  float64 `json:"server_reaped_cpu_ms_per_run"`
	Machine float64 `json:"machine_busy_ms_per_run"`
}

// measureAlone runs each of python and microbox's variants on its own,
// workers at a time, and reports runs per second and CPU time per run: a
// server's background work (the jails it starts ahead) is then charged to
// it alone.
func measureAlone(cfg *config, vs []*variant, workers int, rep *report, servers []int) aloneBlock {
	fmt.Fprintf(os.Stderr, "bench: alone: %d workers × %d runs per variant\n", workers, cfg.parallelN)
	b := aloneBlock{Workers: workers}
	for _, v := range vs {
		if v.Name != "python" && !strings.HasPrefix(v.Name, "microbox") {
			continue
		}
		rec := newSamples()
		var done sync.WaitGroup
		rounds([]*variant{v}, min(cfg.warmup, 2), 0, cfg.timeout, 0, nil)
		time.Sleep(200 * time.Millisecond) // the warm-up's jails started ahead are ready
		cpu0 := cpuTime(servers)
		busy0 := machineBusy()
		start := time.Now()
		for range workers {
			done.Add(1)
			go func() {
				defer done.Done()
				rounds([]*variant{v}, cfg.parallelN, 0, cfg.timeout, 0, rec)
			}()
		}
		done.Wait()
		elapsed := time.Since(start).Seconds()
		busy := machineBusy() - busy0
		cpu := cpuTime(servers).minus(cpu0)
		rep.Failures = append(rep.Failures, rec.failures...)
		r := aloneRow{Variant: v.Name, Runs: len(rec.ms[v.Name]), Failed: len(rec.failures)}
		r.Rate = float64(r.Runs) / elapsed
		if n := float64(r.Runs + r.Failed); n > 0 {
			r.CPU = msOf(cpu.total()) / n
			r.Caller, r.Server = msOf(cpu.caller)/n, msOf(cpu.server)/n
			r.Alive, r.Reaped = msOf(cpu.alive)/n, msOf(cpu.reaped)/n
			r.Machine = msOf(busy) / n
		}
		b.Rows = append(b.Rows, r)
	}
	for i := range b.Rows {
		b.Rows[i].Ratio = b.Rows[i].Rate / b.Rows[0].Rate
		b.Rows[i].OverCPU = b.Rows[i].CPU - b.Rows[0].CPU
	}
	return b
}

// cpuParts is the CPU time used so far by the bench's reaped children
// (with what they reaped), by the servers, by the servers' living children
// (their jail spawner, whose clones of the jails are its own CPU time
// until the server exits, and the jails started ahead) and by what the
// servers reaped. A child counted alive and later reaped is not counted
// twice: the difference of two readings adds only what it used in between.
type cpuParts struct{ caller, server, alive, reaped time.Duration }

func (a cpuParts) minus(b cpuParts) cpuParts {
	return cpuParts{a.caller - b.caller, a.server - b.server, a.alive - b.alive, a.reaped - b.reaped}
}

func (a cpuParts) total() time.Duration { return a.caller + a.server + a.alive + a.reaped }

func cpuTime(servers []int) cpuParts {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru)
	p := cpuParts{caller: time.Duration(ru.Utime.Nano() + ru.Stime.Nano())}
	for _, pid := range servers {
		own, reaped := procCPU(pid)
		p.server += own
		p.reaped += reaped
		for _, child := range childrenOf(pid) {
			c, _ := procCPU(child)
			p.alive += c
		}
	}
	return p
}

// machineBusy is the time all CPUs spent busy so far (/proc/stat: user,
// nice, system, irq and softirq; idle, iowait and steal left out).
func machineBusy() time.Duration {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	var ticks int64
	for _, i := range []int{1, 2, 3, 6, 7} {
		if i < len(f) {
			v, _ := strconv.ParseInt(f[i], 10, 64)
			ticks += v
		}
	}
	return time.Duration(ticks) * time.Second / clockTicks
}

// procCPU reads a process's own user and system time and its reaped
// children's from /proc/PID/stat (fields 14-17: utime, stime, cutime,
// cstime).
func procCPU(pid int) (own, reaped time.Duration) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0
	}
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	var t [4]time.Duration
	for i, f := range fields[11:15] {
		ticks, _ := strconv.ParseInt(f, 10, 64)
		t[i] = time.Duration(ticks) * time.Second / clockTicks
	}
	return t[0] + t[1], t[2] + t[3]
}

// clockTicks is USER_HZ, the unit of /proc/PID/stat times: 100 on every
// Linux architecture Go supports.
const clockTicks = 100

// stats summarizes wall times in milliseconds.
type stats struct {
	N      int     `json:"n"`
	Median float64 `json:"median_ms"`
	P90    float64 `json:"p90_ms"`
	P99    float64 `json:"p99_ms"`
	Mean   float64 `json:"mean_ms"`
	Min    float64 `json:"min_ms"`
	Max    float64 `json:"max_ms"`
}

func summarize(ms []float64) stats {
	if len(ms) == 0 {
		nan := math.NaN()
		return stats{Median: nan, P90: nan, P99: nan, Mean: nan, Min: nan, Max: nan}
	}
	s := slices.Clone(ms)
	sort.Float64s(s)
	sum := 0.0
	for _, v := range s {
		sum += v
	}
	return stats{N: len(s), Median: percentile(s, 0.5), P90: percentile(s, 0.9), P99: percentile(s, 0.99),
		Mean: sum / float64(len(s)), Min: s[0], Max: s[len(s)-1]}
}

// percentile is the nearest-rank percentile of sorted values.
func percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return math.NaN()
	}
	i := int(math.Ceil(p*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

func median(v []float64) float64 { return summarize(v).Median }

// ---------------------------------------------------------------------------
// Memory

// memReport is the peak memory of each process of a microbox run, the
// median over the sampled runs: VmHWM (all resident pages, the binary's
// file pages included) and the anonymous pages (Anonymous of
// smaps_rollup), which are what one more concurrent run adds: the
// binary's pages are in the page cache once, whatever the number of runs.
type memReport struct {
	Runs          int     `json:"runs"`
	Supervisor    float64 `json:"supervisor_hwm_kib"`
	Init          float64 `json:"init_hwm_kib"`
	PID1          float64 `json:"pid1_hwm_kib"`
	InnerPython   float64 `json:"sandboxed_python_hwm_kib"`
	SupAnon       float64 `json:"supervisor_anon_kib"`
	InitAnon      float64 `json:"init_anon_kib"`
	PID1Anon      float64 `json:"pid1_anon_kib"`
	BarePrint     float64 `json:"bare_python_print_hwm_kib"`
	BareSleep     float64 `json:"bare_python_sleep_hwm_kib"`
	InitName      string  `json:"init_comm"`
	SamplingError string  `json:"error,omitempty"`
}

// procMem is one process's peak memory over the samples, in KiB.
type procMem struct{ hwm, anon float64 }

func (m *procMem) sample(pid int) {
	m.hwm = max(m.hwm, hwm(pid))
	m.anon = max(m.anon, anon(pid))
}

// procPeak is what one sampled microbox run showed: the supervisor, its
// jail spawner and the jail's PID 1 (both its children) and the program
// (PID 1's child).
type procPeak struct {
	sup, init, pid1, prog procMem
	initComm              string
}

func measureMemory(cfg *config, rep *report) *memReport {
	if cfg.memN == 0 {
		return nil
	}
	fmt.Fprintf(os.Stderr, "bench: memory: %d sampled runs\n", cfg.memN)
	m := &memReport{}
	var sup, ini, pid1, inner, supA, iniA, pid1A, bp, bs []float64
	for range cfg.memN {
		p, err := sampleMicrobox(cfg)
		if errors.Is(err, errUnseen) {
			m.SamplingError = err.Error() // a miss of the sampler, not of microbox
			continue
		}
		if err != nil {
			rep.Failures = append(rep.Failures, "memory: "+err.Error())
			continue
		}
		sup, ini, pid1, inner = append(sup, p.sup.hwm), append(ini, p.init.hwm), append(pid1, p.pid1.hwm), append(inner, p.prog.hwm)
		supA, iniA, pid1A = append(supA, p.sup.anon), append(iniA, p.init.anon), append(pid1A, p.pid1.anon)
		m.InitName = p.initComm
		bp = append(bp, rusageKiB(cfg, program))
		bs = append(bs, rusageKiB(cfg, sleeper))
	}
	m.Runs = len(sup)
	m.Supervisor, m.Init, m.PID1, m.InnerPython = median(sup), median(ini), median(pid1), median(inner)
	m.SupAnon, m.InitAnon, m.PID1Anon = median(supA), median(iniA), median(pid1A)
	m.BarePrint, m.BareSleep = median(bp), median(bs)
	return m
}

var errUnseen = errors.New("the sampler never saw the spawner, PID 1 and the program in /proc")

// sampleMicrobox runs the sleeper under microbox and polls /proc for the
// supervisor, the spawner, PID 1 and the program.
func sampleMicrobox(cfg *config) (procPeak, error) {
	mb, _ := filepath.Abs(cfg.microbox)
	cmd := exec.Command(mb, "exec", "--mem", "256M", "--timeout", "5s", "-c", sleeper)
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
	if err := cmd.Start(); err != nil {
		return procPeak{}, err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	var p procPeak
	for {
		select {
		case err := <-done:
			if err == nil && (p.init.hwm == 0 || p.pid1.hwm == 0 || p.prog.hwm == 0) {
				err = errUnseen
			}
			return p, err
		case <-tick.C:
			observe(cmd.Process.Pid, &p)
		}
	}
}

// observe samples the supervisor, the spawner, PID 1 and the program once.
// The supervisor's children are the spawner, in the supervisor's pid
// namespace (a one-shot exec forks it before Go starts, so it has
// microbox's name), and PID 1, in a new one; PID 1's child is the program
// once it has a name of its own (it has exec'd).
func observe(sup int, p *procPeak) {
	p.sup.sample(sup)
	for _, k := range childrenOf(sup) {
		c := comm(k)
		if c == "" {
			continue
		}
		if samePidNS(sup, k) {
			p.init.sample(k)
			p.initComm = c
			continue
		}
		p.pid1.sample(k)
		for _, prog := range childrenOf(k) {
			if comm(prog) != c { // not before its execve
				p.prog.sample(prog)
			}
		}
	}
}

// samePidNS reports whether processes a and b are in one pid namespace.
func samePidNS(a, b int) bool {
	na, errA := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", a))
	nb, errB := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", b))
	return errA == nil && errB == nil && na == nb
}

// anon is a process's resident anonymous memory in KiB, 0 when it cannot
// be read.
func anon(pid int) float64 { return procKiB(pid, "smaps_rollup", "Anonymous:") }

// hwm is a process's VmHWM in KiB, 0 when it cannot be read.
func hwm(pid int) float64 { return procKiB(pid, "status", "VmHWM:") }

// procKiB reads the "key N kB" line of /proc/PID/file.
func procKiB(pid int, file, key string) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/%s", pid, file))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == key {
			v, _ := strconv.ParseFloat(f[1], 64)
			return v
		}
	}
	return 0
}

func comm(pid int) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	return strings.TrimSpace(string(b))
}

// childrenOf scans /proc for processes whose parent is pid.
func childrenOf(pid int) []int {
	ents, _ := os.ReadDir("/proc")
	var kids []int
	for _, e := range ents {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// The command name is in parentheses and may hold spaces.
		rest := string(b[bytes.LastIndexByte(b, ')')+1:])
		if f := strings.Fields(rest); len(f) > 1 && f[1] == strconv.Itoa(pid) {
			kids = append(kids, child)
		}
	}
	return kids
}

// rusageKiB is bare Python's own peak RSS for code, from wait4's rusage:
// Python has no children, so it is exactly its VmHWM.
func rusageKiB(cfg *config, code string) float64 {
	cmd := exec.Command(cfg.python, "-c", code)
	if err := cmd.Run(); err != nil {
		return math.NaN()
	}
	return float64(cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss)
}

// ---------------------------------------------------------------------------
// Trace

// traceReport is the median timeline of a microbox run.
type traceReport struct {
	Runs     int        `json:"runs"`
	Phases   []phaseRow `json:"phases"`
	Full     parts      `json:"full"`
	NoCgroup parts      `json:"no_cgroup"`
	Start    float64    `json:"binary_start_ms"`
	Bare     float64    `json:"bare_python_ms"`
}

// parts splits the median wall time of one traced command.
type parts struct {
	Total   float64 `json:"total_wall_ms"`
	Setup   float64 `json:"setup_time_ms"`
	Program float64 `json:"wall_time_ms"`
	Outside float64 `json:"outside_ms"`
	// CPUOutside is the CPU time (user + system) of everything the
	// command cost but the run's cgroup: microbox's process and its
	// spawner. With --no-cgroup the result's CPU time is the program's
	// own, so PID 1 counts here too.
	CPUOutside float64 `json:"cpu_outside_ms"`
	// BeforeRun is from the process's start (its exec constructor, in the
	// trace as process-start) to the run's; ToMain the part of it up to
	// Go's main (go-main). Zero for a binary whose trace lacks them.
	BeforeRun float64 `json:"before_run_ms"`
	ToMain    float64 `json:"to_go_main_ms"`
}

type phaseRow struct {
	Name  string  `json:"name"`
	At    float64 `json:"at_ms"`
	Delta float64 `json:"delta_ms"`
}

// traced is the part of microbox's JSON result the trace needs.
type traced struct {
	Status  string  `json:"status"`
	Error   *string `json:"error"`
	Stdout  string  `json:"stdout"`
	Setup   float64 `json:"setup_time_ms"`
	Program float64 `json:"wall_time_ms"`
	CPU     float64 `json:"cpu_time_ms"`
	Trace   []struct {
		Name string  `json:"name"`
		At   float64 `json:"at_ms"`
	} `json:"trace"`
}

func measureTrace(cfg *config, rep *report) *traceReport {
	if cfg.traceN == 0 {
		return nil
	}
	fmt.Fprintf(os.Stderr, "bench: trace: %d traced runs (with and without cgroup)\n", cfg.traceN)
	mb, _ := filepath.Abs(cfg.microbox)
	traceArgs := []string{mb, "exec", "--json", "--trace", "--timeout", "5s"}
	full := &series{argv: append(slices.Clone(traceArgs), "--mem", "256M", "-c", program)}
	noCg := &series{argv: append(slices.Clone(traceArgs), "--no-cgroup", "-c", program)}
	bare := []string{cfg.python, "-c", program}
	help := []string{mb, "exec", "--help"} // the binary's start alone
	var bares, starts []float64
	for range cfg.traceN {
		full.run(cfg.timeout, rep)
		noCg.run(cfg.timeout, rep)
		if d, err := timeRun(bare, nil, cfg.timeout, wantStdout); err == nil {
			bares = append(bares, msOf(d))
		}
		if d, err := timeRun(help, nil, cfg.timeout, ""); err == nil {
			starts = append(starts, msOf(d))
		}
	}
	if len(full.runs) == 0 {
		return nil
	}
	return &traceReport{Runs: len(full.runs), Phases: timeline(full.runs), Full: full.parts(),
		NoCgroup: noCg.parts(), Bare: median(bares), Start: median(starts)}
}

// series collects the traced runs of one command line.
type series struct {
	argv   []string
	runs   []traced
	totals []float64 // wall ms measured from outside
	cpus   []float64 // CPU ms of the command and all it reaped
}

func (s *series) run(timeout time.Duration, rep *report) {
	t, took, cpu, err := runTraced(s.argv, timeout)
	if err != nil {
		rep.Failures = append(rep.Failures, "trace: "+err.Error())
		return
	}
	s.runs, s.totals, s.cpus = append(s.runs, t), append(s.totals, took), append(s.cpus, cpu)
}

// parts is the median split of the series' wall time: what microbox
// reports (set-up, program) and the rest, spent outside nsjail.Run.
func (s *series) parts() parts {
	var setups, programs, outside, cpuOutside, beforeRun, toMain []float64
	for i, r := range s.runs {
		setups, programs = append(setups, r.Setup), append(programs, r.Program)
		outside = append(outside, s.totals[i]-r.Setup-r.Program)
		cpuOutside = append(cpuOutside, s.cpus[i]-r.CPU)
		at := map[string]float64{}
		for _, p := range r.Trace {
			at[p.Name] = p.At
		}
		if start, ok := at["process-start"]; ok {
			beforeRun = append(beforeRun, -start)
			toMain = append(toMain, at["go-main"]-start)
		}
	}
	p := parts{Total: median(s.totals), Setup: median(setups), Program: median(programs), Outside: median(outside),
		CPUOutside: median(cpuOutside)}
	if len(beforeRun) > 0 {
		p.BeforeRun, p.ToMain = median(beforeRun), median(toMain)
	}
	return p
}

func msOf(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// runTraced runs one traced microbox and returns its result, wall ms and
// CPU ms (its own and all it reaped: the spawner, the jail).
func runTraced(argv []string, timeout time.Duration) (traced, float64, float64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	var out bytes.Buffer
	cmd.Stdout = &out
	start := time.Now()
	err := cmd.Run()
	took := float64(time.Since(start)) / float64(time.Millisecond)
	var cpu float64
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		cpu = float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e6
	}
	var t traced
	if jerr := json.Unmarshal(out.Bytes(), &t); jerr != nil {
		return t, took, cpu, fmt.Errorf("%v, bad JSON result: %w", err, jerr)
	}
	if err != nil || t.Status != "ok" || t.Stdout != wantStdout {
		why := ""
		if t.Error != nil {
			why = ": " + *t.Error
		}
		return t, took, cpu, fmt.Errorf("status %q, stdout %q%s", t.Status, t.Stdout, why)
	}
	return t, took, cpu, nil
}

// timeline takes the median of each phase's time and of the gap since the
// phase before it, in the order of the first run. (The trace has the
// program's start and exit as "started" and "exited".)
func timeline(runs []traced) []phaseRow {
	var names []string
	for _, p := range runs[0].Trace {
		names = append(names, p.Name)
	}
	at := map[string][]float64{}
	delta := map[string][]float64{}
	for _, r := range runs {
		times := map[string]float64{}
		for _, p := range r.Trace {
			times[p.Name] = p.At
		}
		prev := 0.0
		if len(r.Trace) > 0 && r.Trace[0].At < 0 {
			prev = r.Trace[0].At // the process's own phases, before the run
		}
		for _, n := range names {
			if v, ok := times[n]; ok {
				at[n] = append(at[n], v)
				delta[n] = append(delta[n], v-prev)
				prev = v
			}
		}
	}
	var rows []phaseRow
	for _, n := range names {
		rows = append(rows, phaseRow{Name: n, At: median(at[n]), Delta: median(delta[n])})
	}
	return rows
}

// ---------------------------------------------------------------------------
// Machine

type machine struct {
	CPU        string `json:"cpu"`
	NProc      int    `json:"nproc"`
	Kernel     string `json:"kernel"`
	Cgroup     string `json:"cgroup"`
	Go         string `json:"go"`
	Python     string `json:"python"`
	LoadBefore string `json:"load_before"`
	LoadAfter  string `json:"load_after"`
}

func describeMachine(python string) machine {
	m := machine{CPU: cpuModel(), NProc: runtime.NumCPU(), Kernel: readTrim("/proc/sys/kernel/osrelease"),
		Cgroup: cgroupMode(), Go: runtime.Version(), LoadBefore: loadAverage()}
	if out, err := exec.Command(python, "--version").CombinedOutput(); err == nil {
		m.Python = python + " (" + strings.TrimSpace(string(out)) + ")"
	}
	return m
}

func readTrim(path string) string {
	b, _ := os.ReadFile(path)
	return strings.TrimSpace(string(b))
}

func cpuModel() string {
	for _, line := range strings.Split(readTrim("/proc/cpuinfo"), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}

func loadAverage() string {
	f := strings.Fields(readTrim("/proc/loadavg"))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// cgroupMode tells unified v2 from v1, and v1 with a v2 hierarchy (hybrid).
func cgroupMode() string {
	const cgroup2Magic = 0x63677270
	var st syscall.Statfs_t
	if syscall.Statfs("/sys/fs/cgroup", &st) != nil {
		return "unknown"
	}
	if st.Type == cgroup2Magic {
		return "v2 (unified)"
	}
	if syscall.Statfs("/sys/fs/cgroup/unified", &st) == nil && st.Type == cgroup2Magic {
		return "v1 (hybrid)"
	}
	return "v1 (legacy)"
}

// ---------------------------------------------------------------------------
// Markdown

func render(rep *report) string {
	var b strings.Builder
	renderHeader(&b, rep)
	renderSerial(&b, rep)
	renderGoals(&b, rep)
	for _, p := range rep.Parallel {
		renderParallel(&b, p)
	}
	renderAlone(&b, rep.Alone)
	renderMemory(&b, rep.Memory)
	renderTrace(&b, rep.Trace)
	renderFailures(&b, rep.Failures)
	return b.String()
}

func renderHeader(b *strings.Builder, rep *report) {
	m := rep.Machine
	fmt.Fprintf(b, "## Start-up overhead (%s)\n\n", rep.Date)
	fmt.Fprintf(b, "Produced by `%s`.\n\n", rep.Command)
	fmt.Fprintf(b, "- CPU: %s, %d CPUs; kernel %s; cgroup %s\n", m.CPU, m.NProc, m.Kernel, m.Cgroup)
	fmt.Fprintf(b, "- %s; bench built with %s\n", m.Python, m.Go)
	fmt.Fprintf(b, "- load average before/after: %s / %s\n", m.LoadBefore, m.LoadAfter)
	b.WriteString("- program: `print(1)`; wall clock from fork to exit, stdout read to the end; " +
		"variants interleaved round by round, in a shuffled order each round, after warm-up\n\n")
	b.WriteString("| variant | command |\n|---|---|\n")
	for _, v := range rep.Variants {
		cmd := "`" + strings.Join(quoteAll(append(slices.Clone(v.Env), v.Argv...)), " ") + "`"
		if v.Skipped != "" {
			cmd += " — **skipped**: " + v.Skipped
		}
		fmt.Fprintf(b, "| %s | %s |\n", v.Name, cmd)
	}
	b.WriteString("\n")
}

func quoteAll(argv []string) []string {
	out := make([]string, len(argv))
	for i, a := range argv {
		out[i] = shellQuote(a)
	}
	return out
}

func renderSerial(b *strings.Builder, rep *report) {
	n := 0
	if len(rep.Serial) > 0 {
		n = rep.Serial[0].Stats.N
	}
	gap := ""
	if g, _ := rep.Config["gap"].(string); g != "0s" && g != "" {
		gap = ", each after " + g + " idle"
	}
	fmt.Fprintf(b, "### Serial (%d runs per variant%s)\n\n", n, gap)
	b.WriteString("Goal: microbox ≤ +3 ms median and ≤ +10 ms p99 over bare python.\n\n")
	b.WriteString("| variant | n | failed | median ms | p90 ms | p99 ms | mean ms | Δ median ms | Δ p99 ms | × median |\n")
	b.WriteString("|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, r := range rep.Serial {
		s := r.Stats
		fmt.Fprintf(b, "| %s | %d | %d | %.2f | %.2f | %.2f | %.2f | %+.2f | %+.2f | %.2f |\n",
			r.Variant, s.N, r.Failed, s.Median, s.P90, s.P99, s.Mean, r.OverMedian, r.OverP99, r.Ratio)
	}
	b.WriteString("\n")
}

func renderAlone(b *strings.Builder, blocks []aloneBlock) {
	if len(blocks) == 0 {
		return
	}
	b.WriteString("### Throughput alone\n\n")
	b.WriteString("Each variant on its own, the workers running it back to back: runs/s over the elapsed time. " +
		"Work a server does in the background (the jails it starts ahead) slows only its own variant here.\n\n")
	b.WriteString("CPU ms per run is the user + system time of everything the run cost: the processes started and what they reaped, " +
		"and for a server its own time and its jails' (including the jails it started ahead); Δ is over bare python's.\n\n")
	b.WriteString("| workers | variant | runs | failed | runs/s | × python | CPU ms per run | Δ CPU ms |\n|--:|---|--:|--:|--:|--:|--:|--:|\n")
	for _, bl := range blocks {
		for _, r := range bl.Rows {
			fmt.Fprintf(b, "| %d | %s | %d | %d | %.1f | %.2f | %.1f | %+.1f |\n", bl.Workers, r.Variant, r.Runs, r.Failed, r.Rate, r.Ratio, r.CPU, r.OverCPU)
		}
	}
	b.WriteString("\n")
	bl := blocks[0]
	fmt.Fprintf(b, "Where the CPU time went, ms per run (%d worker%s): the processes the bench started "+
		"(the caller: python, or microbox in-process with its spawner and jail, or the client of a server), "+
		"a server's own threads, its living children (the spawner, the jails ahead) and the jails it reaped "+
		"(PID 1 and the program). The machine's busy time also counts kernel threads (the teardown of a "+
		"network namespace runs in one) and whatever else ran on this shared machine meanwhile.\n\n",
		bl.Workers, map[bool]string{true: "", false: "s"}[bl.Workers == 1])
	b.WriteString("| variant | caller | server | spawner, jails ahead | jails reaped | total | machine busy |\n|---|--:|--:|--:|--:|--:|--:|\n")
	for _, r := range bl.Rows {
		fmt.Fprintf(b, "| %s | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f |\n", r.Variant, r.Caller, r.Server, r.Alive, r.Reaped, r.CPU, r.Machine)
	}
	b.WriteString("\n")
}

func renderParallel(b *strings.Builder, p parallelBlock) {
	fmt.Fprintf(b, "### Parallel, %d workers (%d runs per variant, %.1f s, %.1f runs/s of all variants)\n\n",
		p.Workers, p.Rows[0].Stats.N, p.ElapsedS, p.TotalRate)
	b.WriteString("Throughput is per variant as if run alone: workers ÷ mean wall time.\n\n")
	b.WriteString("| variant | failed | median ms | p99 ms | mean ms | runs/s | × python runs/s |\n")
	b.WriteString("|---|--:|--:|--:|--:|--:|--:|\n")
	for _, r := range p.Rows {
		s := r.Stats
		fmt.Fprintf(b, "| %s | %d | %.2f | %.2f | %.2f | %.1f | %.2f |\n",
			r.Variant, r.Failed, s.Median, s.P99, s.Mean, r.Throughput, r.TputRatio)
	}
	b.WriteString("\n")
}

func renderMemory(b *strings.Builder, m *memReport) {
	if m == nil {
		return
	}
	fmt.Fprintf(b, "### Memory (peak, median of %d runs)\n\n", m.Runs)
	fmt.Fprintf(b, "microbox runs `%s`; /proc is sampled every 5 ms. VmHWM counts every resident page, "+
		"the binary's file pages included, which the page cache holds once for all runs; anonymous "+
		"(smaps_rollup) is what one more concurrent run adds (kernel memory for its namespaces, "+
		"mounts and page tables aside). Bare python's figures are wait4's ru_maxrss.\n\n", sleeper)
	b.WriteString("| process | VmHWM KiB | anonymous KiB |\n|---|--:|--:|\n")
	fmt.Fprintf(b, "| microbox supervisor | %.0f | %.0f |\n", m.Supervisor, m.SupAnon)
	fmt.Fprintf(b, "| jail spawner (comm `%s`) | %.0f | %.0f |\n", m.InitName, m.Init, m.InitAnon)
	fmt.Fprintf(b, "| the jail's PID 1 | %.0f | %.0f |\n", m.PID1, m.PID1Anon)
	fmt.Fprintf(b, "| python inside microbox (sleep) | %.0f | |\n", m.InnerPython)
	fmt.Fprintf(b, "| bare python `print(1)` | %.0f | |\n", m.BarePrint)
	fmt.Fprintf(b, "| bare python (sleep) | %.0f | |\n", m.BareSleep)
	hwmSum, anonSum := m.Supervisor+m.Init+m.PID1, m.SupAnon+m.InitAnon+m.PID1Anon
	fmt.Fprintf(b, "| **supervisor, spawner and PID 1 beyond python** | **%.0f** (%.1f MiB) | **%.0f** (%.1f MiB) |\n\n",
		hwmSum, hwmSum/1024, anonSum, anonSum/1024)
	b.WriteString("Goal: ≤ 3 MiB per run beyond python's own.\n\n")
	if m.SamplingError != "" {
		fmt.Fprintf(b, "Sampling failed at least once: %s\n\n", m.SamplingError)
	}
}

func renderTrace(b *strings.Builder, t *traceReport) {
	if t == nil {
		return
	}
	fmt.Fprintf(b, "### Where microbox's time goes (`--json --trace`, median of %d runs)\n\n", t.Runs)
	b.WriteString("Times are from the supervisor's start of the run (nsjail.Run); the negative ones are the " +
		"process's own, before it (`process-start`: microbox's exec constructor, after the kernel's execve and libc's start-up; " +
		"`go-main`). Δ is the median gap since the previous phase.\n\n")
	b.WriteString("| phase | at ms | Δ ms |\n|---|--:|--:|\n")
	for i, p := range t.Phases {
		if i == 0 && p.At < 0 {
			fmt.Fprintf(b, "| %s | %.2f | — |\n", p.Name, p.At)
			continue
		}
		fmt.Fprintf(b, "| %s | %.2f | %.2f |\n", p.Name, p.At, p.Delta)
	}
	f, nc := t.Full, t.NoCgroup
	b.WriteString("\n| part (median ms) | every layer | `--no-cgroup` |\n|---|--:|--:|\n")
	fmt.Fprintf(b, "| `microbox exec --json --trace` total wall | %.2f | %.2f |\n", f.Total, nc.Total)
	fmt.Fprintf(b, "| setup_time_ms (run start → program's execve) | %.2f | %.2f |\n", f.Setup, nc.Setup)
	fmt.Fprintf(b, "| wall_time_ms (program's execve → exit) | %.2f | %.2f |\n", f.Program, nc.Program)
	fmt.Fprintf(b, "| outside = total − setup − wall (process start, Go runtime, flags; "+
		"after the exit: cgroup removal, JSON, process exit) | %.2f | %.2f |\n", f.Outside, nc.Outside)
	if f.BeforeRun > 0 {
		fmt.Fprintf(b, "| … of which from the process's start (its exec constructor: `process-start`) to the run's: "+
			"Go's runtime, package inits, flags and spec | %.2f | %.2f |\n", f.BeforeRun, nc.BeforeRun)
		fmt.Fprintf(b, "| … … of which up to Go's main (`go-main`): Go's runtime and package inits | %.2f | %.2f |\n",
			f.ToMain, nc.ToMain)
	}
	fmt.Fprintf(b, "| … the binary's start alone, for comparison (`microbox exec --help` wall: exec, Go runtime, "+
		"package inits, exit) | %.2f | |\n", t.Start)
	if f.BeforeRun > 0 {
		fmt.Fprintf(b, "| … the rest (outside − process start to run start, a difference of medians): the kernel's exec of "+
			"microbox and libc's start-up before its constructor; after the exit, cgroup removal, JSON and process exit | %.2f | %.2f |\n",
			f.Outside-f.BeforeRun, nc.Outside-nc.BeforeRun)
	} else {
		fmt.Fprintf(b, "| … the rest (flags and spec before the run; cgroup removal, JSON and exit after it; the cgroup GC runs beside the run) | %.2f | %.2f |\n",
			f.Outside-t.Start, nc.Outside-t.Start)
	}
	fmt.Fprintf(b, "| bare python wall, interleaved with the traced runs | %.2f | |\n", t.Bare)
	fmt.Fprintf(b, "| CPU outside the run's cgroup (wait4's user + system − the result's cpu_time_ms): "+
		"microbox's process and its spawner; without a cgroup, PID 1 too | %.2f | %.2f |\n\n", f.CPUOutside, nc.CPUOutside)
}

func renderFailures(b *strings.Builder, fails []string) {
	if len(fails) == 0 {
		return
	}
	fmt.Fprintf(b, "### Failed runs (%d)\n\n", len(fails))
	for i, f := range fails {
		if i == 10 {
			fmt.Fprintf(b, "- … and %d more\n", len(fails)-10)
			break
		}
		fmt.Fprintf(b, "- %s\n", f)
	}
	b.WriteString("\n")
}

// writeSection replaces the bench section of path, creating the file with a
// short header when it is missing and appending the section when the file
// has no markers.
func writeSection(path, md string) error {
	old, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		old = []byte("# Benchmarks\n\nmicrobox's start-up cost against bare Python and other sandboxes. " +
			"The section below is generated by `go run ./scripts/bench` (see its doc comment); " +
			"edit outside the markers.\n\n")
	} else if err != nil {
		return err
	}
	s := string(old)
	section := startMarker + "\n" + md + endMarker
	i, j := strings.Index(s, startMarker), strings.Index(s, endMarker)
	if i >= 0 && j > i {
		s = s[:i] + section + s[j+len(endMarker):]
	} else {
		s = strings.TrimRight(s, "\n") + "\n\n" + section + "\n"
	}
	return os.WriteFile(path, []byte(s), 0o644)
}
