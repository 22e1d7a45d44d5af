// Command langbench measures a C++ stdin/stdout task's compile and run in
// the sandbox against the same steps outside it, in the same rounds (the
// order alternating), so that load on the machine hits both alike.
//
//	make
//	go run ./scripts/langbench [-n 15] [-numbers 200000] [-microbox bin/microbox]
//
// The task is a contest solution (bits/stdc++.h, read n numbers, sort,
// print their sum and median) fed -numbers numbers on stdin. Outside: the
// compiler and flags of microbox's cpp (internal/lang) in a temporary
// directory, then the binary, each timed from fork to exit. Inside: one
// `microbox exec --json --lang cpp` (a one-shot exec compiles every time:
// its compile cache lives in a process), timed whole, with the result's
// compile.wall_time_ms and wall_time_ms (from each step's execve) beside.
// CPU time is reported too (outside: the process's rusage with its
// children's; inside: each step's cgroup), which contention for the
// machine's CPUs changes far less than wall time: on a shared machine the
// wall-clock ratio says as much about whose cgroup got the CPU as about
// the sandbox.
//
// It only reports (Markdown on stdout): it never fails because something
// is slow, only when a run fails or gives a wrong answer.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/microbox/microbox/internal/lang"
)

const solution = `#include <bits/stdc++.h>
using namespace std;
int main() {
    ios::sync_with_stdio(false);
    cin.tie(nullptr);
    int n;
    cin >> n;
    vector<long long> a(n);
    for (auto &x : a) cin >> x;
    sort(a.begin(), a.end());
    cout << accumulate(a.begin(), a.end(), 0LL) << " " << a[n / 2] << "\n";
}
`

func main() {
	n := flag.Int("n", 15, "rounds")
	numbers := flag.Int("numbers", 200000, "numbers on the task's stdin")
	mb := flag.String("microbox", "bin/microbox", "the microbox binary")
	flag.Parse()
	if err := run(*n, *numbers, *mb); err != nil {
		fmt.Fprintln(os.Stderr, "langbench:", err)
		os.Exit(1)
	}
}

// sample is one round's times, in ms.
type sample struct {
	outCompile, outRun, outTotal float64
	inCompile, inRun, inTotal    float64 // the steps' own (from execve), and the whole exec
	inCompileSetup, inRunSetup   float64
	// CPU time, ms.
	outCompileCPU, outRunCPU, inCompileCPU, inRunCPU float64
}

func run(n, numbers int, mb string) error {
	dir, err := os.MkdirTemp("", "langbench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	src := filepath.Join(dir, "main.cpp")
	if err := os.WriteFile(src, []byte(solution), 0o644); err != nil {
		return err
	}
	input, want := task(numbers)
	cpp, err := lang.Lookup("cpp")
	if err != nil {
		return err
	}
	var samples []sample
	for i := 0; i < n; i++ {
		var s sample
		steps := []func() error{
			func() error { return outside(cpp, dir, src, input, want, &s) },
			func() error { return inside(mb, src, input, want, &s) },
		}
		if i%2 == 1 {
			slices.Reverse(steps)
		}
		for _, step := range steps {
			if err := step(); err != nil {
				return err
			}
		}
		samples = append(samples, s)
	}
	report(samples, n, numbers, mb)
	return nil
}

// task is the input of numbers random numbers and the answer to it.
func task(numbers int) ([]byte, string) {
	r := rand.New(rand.NewPCG(1, 2))
	a := make([]int64, numbers)
	var b strings.Builder
	fmt.Fprintf(&b, "%d\n", numbers)
	var sum int64
	for i := range a {
		a[i] = r.Int64N(2_000_000_000) - 1_000_000_000
		sum += a[i]
		b.WriteString(strconv.FormatInt(a[i], 10))
		b.WriteByte(' ')
	}
	slices.Sort(a)
	return []byte(b.String()), fmt.Sprintf("%d %d\n", sum, a[numbers/2])
}

// outside compiles with microbox's own compile command in dir and runs
// the binary, timing each.
func outside(cpp *lang.Language, dir, src string, input []byte, want string, s *sample) error {
	bin := filepath.Join(dir, lang.Binary)
	os.Remove(bin)
	argv := cpp.CompileArgv(src)
	c := exec.Command(argv[0], argv[1:]...)
	c.Dir = dir
	began := time.Now()
	if out, err := c.CombinedOutput(); err != nil {
		return fmt.Errorf("%v: %v %s", argv, err, out)
	}
	s.outCompile = ms(time.Since(began))
	s.outCompileCPU = cpu(c.ProcessState)
	r := exec.Command(bin)
	r.Stdin = bytes.NewReader(input)
	began = time.Now()
	out, err := r.Output()
	s.outRun = ms(time.Since(began))
	s.outRunCPU = cpu(r.ProcessState)
	s.outTotal = s.outCompile + s.outRun
	if err != nil || string(out) != want {
		return fmt.Errorf("outside: %v, %q, want %q", err, out, want)
	}
	return nil
}

// inside runs the task with microbox exec --lang cpp, one-shot.
func inside(mb, src string, input []byte, want string, s *sample) error {
	c := exec.Command(mb, "exec", "--json", "--lang", "cpp", "--timeout", "10s", src)
	c.Env = append(os.Environ(), "MICROBOX_SOCKET=")
	c.Stdin = bytes.NewReader(input)
	began := time.Now()
	out, err := c.Output()
	s.inTotal = ms(time.Since(began))
	var res struct {
		Status      string
		Stdout      string
		WallTimeMs  float64  `json:"wall_time_ms"`
		CPUTimeMs   *float64 `json:"cpu_time_ms"`
		SetupTimeMs float64  `json:"setup_time_ms"`
		Compile     *struct {
			Status      string
			WallTimeMs  float64  `json:"wall_time_ms"`
			CPUTimeMs   *float64 `json:"cpu_time_ms"`
			SetupTimeMs float64  `json:"setup_time_ms"`
		}
	}
	if jerr := json.Unmarshal(out, &res); jerr != nil || res.Status != "ok" || res.Stdout != want || res.Compile == nil ||
		res.CPUTimeMs == nil || res.Compile.CPUTimeMs == nil {
		return fmt.Errorf("inside: %v %v: %s", err, jerr, out)
	}
	s.inCompile, s.inRun = res.Compile.WallTimeMs, res.WallTimeMs
	s.inCompileSetup, s.inRunSetup = res.Compile.SetupTimeMs, res.SetupTimeMs
	s.inCompileCPU, s.inRunCPU = *res.Compile.CPUTimeMs, *res.CPUTimeMs
	return nil
}

// cpu is a finished process's CPU time with its waited-for children's
// (g++'s cc1plus, as, collect2, ld), ms.
func cpu(p *os.ProcessState) float64 { return ms(p.UserTime() + p.SystemTime()) }

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func median(samples []sample, f func(sample) float64) float64 {
	v := make([]float64, len(samples))
	for i, s := range samples {
		v[i] = f(s)
	}
	slices.Sort(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

func report(samples []sample, n, numbers int, mb string) {
	load, _ := os.ReadFile("/proc/loadavg")
	gxx, _ := exec.Command("g++", "--version").Output()
	first, _, _ := strings.Cut(string(gxx), "\n")
	fmt.Printf("Produced by `go run ./scripts/langbench -n %d -numbers %d` on this VM (%d CPUs, shared with other work; load average after: %s), %s, %s.\n\n",
		n, numbers, runtime.NumCPU(), strings.Join(strings.Fields(string(load))[:3], " "), first, mb)
	fmt.Printf("Medians of %d rounds, inside and outside alternating in order; ms.\n\n", n)
	fmt.Println("| step | outside | inside | inside / outside |")
	fmt.Println("|---|--:|--:|--:|")
	row := func(name string, out, in func(sample) float64) {
		o, i := median(samples, out), median(samples, in)
		fmt.Printf("| %s | %.1f | %.1f | %.2f |\n", name, o, i, i/o)
	}
	row("compile (g++ from its start; inside: from its execve in the jail)", func(s sample) float64 { return s.outCompile }, func(s sample) float64 { return s.inCompile })
	row("run (the binary, stdin to exit)", func(s sample) float64 { return s.outRun }, func(s sample) float64 { return s.inRun })
	row("compile + run, whole (inside: the `microbox exec` process, both jails' set-up included)", func(s sample) float64 { return s.outTotal }, func(s sample) float64 { return s.inTotal })
	row("compile, CPU time", func(s sample) float64 { return s.outCompileCPU }, func(s sample) float64 { return s.inCompileCPU })
	row("run, CPU time", func(s sample) float64 { return s.outRunCPU }, func(s sample) float64 { return s.inRunCPU })
	fmt.Printf("\nInside, the jails' set-up (not in the steps' times): compile %.1f ms, run %.1f ms (medians).\n",
		median(samples, func(s sample) float64 { return s.inCompileSetup }), median(samples, func(s sample) float64 { return s.inRunSetup }))
}
