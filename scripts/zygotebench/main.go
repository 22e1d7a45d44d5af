// Command zygotebench measures what a zygote buys (docs/zygote.md): runs
// forked from a warm interpreter against bare python3 and cold runs, in
// the same rounds, so that load on the machine hits every variant alike.
//
//	make
//	go run ./scripts/zygotebench                       # latency and memory, then eval throughput
//	go run ./scripts/zygotebench -n 40 -eval-samples 0 # latency only
//
// Latency: each round runs, one after the other and in a rotating order,
// `python3 -c CODE`, `microbox exec -c CODE` in-process, through a
// `microbox serve` the bench starts, and with --zygote (plus --preload
// where the program imports a module) through that server. The medians
// and their ratios to bare python3 are printed, for print(1) and for a
// program that imports numpy.
//
// Memory: the zygote template's resident and proportional size
// (/proc/PID/smaps_rollup of the template interpreter), and the peak
// memory a run's cgroup records, cold and forked.
//
// Batch throughput: `microbox batch` of -batch-tasks programs that import
// numpy, cold and with --zygote --preload numpy.
//
// Eval throughput: `microbox eval humaneval` over the first -eval-samples
// samples of ../shared/datasets/humaneval_codegen16B_samples.jsonl, cold
// and with --zygote, alternately -eval-rounds times; samples per second
// and their ratio.
//
// It only reports (Markdown on stdout): it never fails because something
// is slow, only when a run fails.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

type config struct {
	microbox, python, datasets string
	n, warmup                  int
	evalSamples, evalRounds    int
	batchTasks                 int
	jobs                       int
}

func main() {
	cfg := config{}
	flag.StringVar(&cfg.microbox, "microbox", "bin/microbox", "the microbox binary (bin/microbox-server beside it for serve)")
	flag.StringVar(&cfg.python, "python", "/usr/bin/python3", "bare python3, the interpreter of the default root")
	flag.StringVar(&cfg.datasets, "datasets", "../shared/datasets", "directory of HumanEval.jsonl.gz and the CodeGen samples")
	flag.IntVar(&cfg.n, "n", 30, "latency rounds")
	flag.IntVar(&cfg.warmup, "warmup", 3, "rounds run first and not counted")
	flag.IntVar(&cfg.evalSamples, "eval-samples", 1640, "CodeGen samples per eval (0: no throughput run)")
	flag.IntVar(&cfg.evalRounds, "eval-rounds", 2, "eval and batch runs of each kind, alternately")
	flag.IntVar(&cfg.batchTasks, "batch-tasks", 200, "numpy programs per batch (0: no batch throughput run)")
	flag.IntVar(&cfg.jobs, "jobs", 0, "eval --jobs (0: eval's default, the CPUs)")
	flag.Parse()
	if err := run(cfg); err != nil {
		fmt.Fprintln(os.Stderr, "zygotebench:", err)
		os.Exit(1)
	}
}

func run(cfg config) error {
	mb, err := filepath.Abs(cfg.microbox)
	if err != nil {
		return err
	}
	cfg.microbox = mb
	dir, err := os.MkdirTemp("", "microbox-zygotebench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	os.Chmod(dir, 0o700)
	socket := filepath.Join(dir, "exec.sock")
	server, err := startServer(mb, socket)
	if err != nil {
		return err
	}
	defer stop(server)

	fmt.Printf("Command: `go run ./scripts/zygotebench %s`; %s, load average %s.\n\n",
		strings.Join(os.Args[1:], " "), cpuModel(), loadAverage())
	fmt.Println("| program | variant | median ms | ratio to bare python3 |")
	fmt.Println("| --- | --- | ---: | ---: |")
	for _, p := range []struct{ name, code, preload string }{
		{"print(1)", "print(1)", ""},
		{"import numpy", "import numpy; print(1)", "numpy"},
	} {
		if err := latency(cfg, socket, p.name, p.code, p.preload); err != nil {
			return err
		}
	}
	fmt.Println()
	if err := memory(cfg, socket, server); err != nil {
		return err
	}
	if cfg.batchTasks > 0 {
		if err := batchThroughput(cfg, dir); err != nil {
			return err
		}
	}
	if cfg.evalSamples > 0 {
		return throughput(cfg, dir)
	}
	return nil
}

// batchThroughput runs -batch-tasks numpy programs through `microbox
// batch`, cold and with --zygote --preload numpy, alternately.
func batchThroughput(cfg config, dir string) error {
	tasks := filepath.Join(dir, "tasks.jsonl")
	var b strings.Builder
	for i := range cfg.batchTasks {
		fmt.Fprintf(&b, `{"id": %d, "code": "import numpy as np\nprint(int(np.arange(%d).sum()))"}`+"\n", i, i+10)
	}
	if err := os.WriteFile(tasks, []byte(b.String()), 0o644); err != nil {
		return err
	}
	fmt.Printf("`microbox batch` of %d numpy programs (in-process, --jobs %s):\n\n", cfg.batchTasks, jobsText(cfg.jobs))
	fmt.Println("| round | cold tasks/s | --zygote --preload numpy tasks/s | ratio |")
	fmt.Println("| --- | ---: | ---: | ---: |")
	for round := range cfg.evalRounds {
		var rate [2]float64
		for _, zygote := range []bool{round%2 == 1, round%2 == 0} {
			args := []string{"batch", "--progress", "never"}
			if cfg.jobs > 0 {
				args = append(args, "--jobs", strconv.Itoa(cfg.jobs))
			}
			if zygote {
				args = append(args, "--zygote", "--preload", "numpy")
			}
			cmd := exec.Command(cfg.microbox, append(args, tasks)...)
			cmd.Env = append(os.Environ(), "MICROBOX_SOCKET=")
			start := time.Now()
			out, err := cmd.Output()
			took := time.Since(start).Seconds()
			if err != nil || strings.Count(string(out), `"status":"ok"`) != cfg.batchTasks {
				return fmt.Errorf("batch (zygote %v): %v: %.300s", zygote, err, out)
			}
			rate[map[bool]int{false: 0, true: 1}[zygote]] = float64(cfg.batchTasks) / took
		}
		fmt.Printf("| %d | %.1f | %.1f | %.2f× |\n", round+1, rate[0], rate[1], rate[1]/rate[0])
	}
	fmt.Println()
	return nil
}

// variant is one way of running a program.
type variant struct {
	name string
	argv []string
	env  []string
}

func latency(cfg config, socket, name, code, preload string) error {
	exec := []string{cfg.microbox, "exec", "--mem", "256M", "--timeout", "5s"}
	zygote := append(slices.Clone(exec), "--zygote")
	if preload != "" {
		zygote = append(zygote, "--preload", preload)
	}
	vs := []variant{
		{"bare python3", []string{cfg.python, "-c", code}, nil},
		{"microbox exec (in-process)", append(slices.Clone(exec), "-c", code), []string{"MICROBOX_SOCKET="}},
		{"microbox exec via serve", append(slices.Clone(exec), "-c", code), []string{"MICROBOX_SOCKET=" + socket}},
		{"microbox exec --zygote via serve", append(zygote, "-c", code), []string{"MICROBOX_SOCKET=" + socket}},
	}
	ms := make([][]float64, len(vs))
	for round := range cfg.warmup + cfg.n {
		for i := range vs {
			k := (i + round) % len(vs)
			d, err := timeRun(vs[k])
			if err != nil {
				return fmt.Errorf("%s, %s: %w", name, vs[k].name, err)
			}
			if round >= cfg.warmup {
				ms[k] = append(ms[k], d)
			}
		}
	}
	bare := median(ms[0])
	for i, v := range vs {
		m := median(ms[i])
		fmt.Printf("| %s | %s | %.1f | %.2f× |\n", name, v.name, m, m/bare)
	}
	return nil
}

func timeRun(v variant) (float64, error) {
	cmd := exec.Command(v.argv[0], v.argv[1:]...)
	cmd.Env = append(os.Environ(), v.env...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	start := time.Now()
	err := cmd.Run()
	took := float64(time.Since(start).Microseconds()) / 1000
	if err != nil || out.String() != "1\n" {
		return 0, fmt.Errorf("%v: stdout %q stderr %q", err, out.String(), errOut.String())
	}
	return took, nil
}

// memory reports the templates' size and runs' peak memory, cold and
// forked, for both programs.
func memory(cfg config, socket string, server *exec.Cmd) error {
	fmt.Println("| program | template RSS MiB | template PSS MiB | run peak cold MiB | run peak forked MiB |")
	fmt.Println("| --- | ---: | ---: | ---: | ---: |")
	for _, p := range []struct{ name, code, preload string }{
		{"print(1)", "print(1)", ""},
		{"import numpy", "import numpy; print(1)", "numpy"},
	} {
		args := []string{"exec", "--json", "-c", p.code}
		cold, err := peak(cfg, socket, args)
		if err != nil {
			return err
		}
		zargs := []string{"exec", "--json", "--zygote"}
		if p.preload != "" {
			zargs = append(zargs, "--preload", p.preload)
		}
		forked, err := peak(cfg, socket, append(zargs, "-c", p.code))
		if err != nil {
			return err
		}
		rss, pss := templateSize(server.Process.Pid, p.preload)
		fmt.Printf("| %s | %.1f | %.1f | %.1f | %.1f |\n", p.name, rss, pss, cold, forked)
	}
	fmt.Println()
	return nil
}

func peak(cfg config, socket string, args []string) (float64, error) {
	cmd := exec.Command(cfg.microbox, args...)
	cmd.Env = append(os.Environ(), "MICROBOX_SOCKET="+socket)
	out, err := cmd.Output()
	var r struct {
		Status string
		Start  string
		Peak   *int64 `json:"peak_memory_bytes"`
	}
	if jerr := json.Unmarshal(out, &r); jerr != nil || r.Status != "ok" || r.Peak == nil {
		return 0, fmt.Errorf("%v: %v %v: %s", args, err, jerr, out)
	}
	return float64(*r.Peak) / (1 << 20), nil
}

// templateSize is the resident and proportional size, in MiB, of the
// server's template interpreter whose preloads are preload ("" none).
func templateSize(server int, preload string) (rss, pss float64) {
	for _, pid := range descendants(server) {
		cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if !bytes.Contains(cmdline, []byte("zygote.py")) {
			continue
		}
		maps, _ := os.ReadFile(fmt.Sprintf("/proc/%d/maps", pid))
		if (preload == "numpy") != bytes.Contains(maps, []byte("numpy")) {
			continue
		}
		return procKiB(pid, "Rss:") / 1024, procKiB(pid, "Pss:") / 1024
	}
	return 0, 0
}

func descendants(pid int) []int {
	var all []int
	todo := []int{pid}
	for len(todo) > 0 {
		p := todo[0]
		todo = todo[1:]
		tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", p))
		for _, t := range tasks {
			data, _ := os.ReadFile(t)
			for _, f := range strings.Fields(string(data)) {
				if c, err := strconv.Atoi(f); err == nil {
					all = append(all, c)
					todo = append(todo, c)
				}
			}
		}
	}
	return all
}

func procKiB(pid int, key string) float64 {
	data, _ := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == key {
			v, _ := strconv.ParseFloat(f[1], 64)
			return v
		}
	}
	return 0
}

// throughput runs eval humaneval over the first samples, cold and with
// --zygote, alternately.
func throughput(cfg config, dir string) error {
	samples := filepath.Join(dir, "samples.jsonl")
	if err := head(filepath.Join(cfg.datasets, "humaneval_codegen16B_samples.jsonl"), samples, cfg.evalSamples); err != nil {
		return err
	}
	fmt.Printf("`microbox eval humaneval` over the first %d CodeGen-16B samples (in-process, --jobs %s):\n\n", cfg.evalSamples, jobsText(cfg.jobs))
	fmt.Println("| round | cold samples/s | --zygote samples/s | ratio |")
	fmt.Println("| --- | ---: | ---: | ---: |")
	var ratios []float64
	for round := range cfg.evalRounds {
		var rate [2]float64 // cold, zygote; each round starts with the other
		for _, zygote := range []bool{round%2 == 1, round%2 == 0} {
			r, err := evalRate(cfg, samples, zygote)
			if err != nil {
				return err
			}
			rate[map[bool]int{false: 0, true: 1}[zygote]] = r
		}
		ratios = append(ratios, rate[1]/rate[0])
		fmt.Printf("| %d | %.1f | %.1f | %.2f× |\n", round+1, rate[0], rate[1], rate[1]/rate[0])
	}
	fmt.Printf("\nMedian ratio: %.2f×.\n", median(ratios))
	return nil
}

var rateLine = regexp.MustCompile(`\(([0-9.]+) samples/s`)

func evalRate(cfg config, samples string, zygote bool) (float64, error) {
	args := []string{"eval", "humaneval", "--problems", filepath.Join(cfg.datasets, "HumanEval.jsonl.gz"),
		"--allow-incomplete", "--progress", "never", "-k", "1", "-o", samples + ".results"}
	if cfg.jobs > 0 {
		args = append(args, "--jobs", strconv.Itoa(cfg.jobs))
	}
	if zygote {
		args = append(args, "--zygote")
	}
	cmd := exec.Command(cfg.microbox, append(args, samples)...)
	cmd.Env = append(os.Environ(), "MICROBOX_SOCKET=")
	var errOut bytes.Buffer
	cmd.Stderr = &errOut
	if err := cmd.Run(); err != nil {
		return 0, fmt.Errorf("eval (zygote %v): %v: %s", zygote, err, errOut.String())
	}
	m := rateLine.FindStringSubmatch(errOut.String())
	if m == nil {
		return 0, fmt.Errorf("eval printed no rate: %s", errOut.String())
	}
	return strconv.ParseFloat(m[1], 64)
}

func head(src, dst string, n int) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	defer out.Close()
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for i := 0; i < n && sc.Scan(); i++ {
		out.Write(append(sc.Bytes(), '\n'))
	}
	return sc.Err()
}

func jobsText(jobs int) string {
	if jobs == 0 {
		return "default"
	}
	return strconv.Itoa(jobs)
}

func startServer(mb, socket string) (*exec.Cmd, error) {
	cmd := exec.Command(mb, "serve", "--warm", "0")
	cmd.Env = append(os.Environ(), "MICROBOX_SOCKET="+socket)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	var errOut bytes.Buffer
	cmd.Stderr = &errOut
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(socket); err == nil {
			return cmd, nil
		}
	}
	stop(cmd)
	return nil, fmt.Errorf("microbox serve did not listen: %s", errOut.String())
}

func stop(cmd *exec.Cmd) {
	cmd.Process.Signal(syscall.SIGTERM)
	cmd.Wait()
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
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
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return fmt.Sprintf("%d× %s", strings.Count(string(data), "processor\t:"), strings.TrimSpace(v))
		}
	}
	return "unknown CPU"
}

func loadAverage() string {
	data, _ := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(data)); len(f) > 0 {
		return f[0]
	}
	return "?"
}
