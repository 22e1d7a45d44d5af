// Command benchapi measures microbox's network front end against its
// other ways in: runs per second and p50/p99 latency of the same program
// (`print(1)`, 256M, 5s) at 1, 8 and 32 concurrent clients, three ways:
//
//   - http: POST /v1/runs to a `microbox serve --http` (net/http's client,
//     connections kept alive);
//   - socket: `microbox exec` through that server's exec socket (a client
//     process per run, client.c);
//   - in-process: `MICROBOX_SOCKET= microbox exec` (Go starts per run);
//   - http again, to a server admitting 64 runs at once (its
//     --http-concurrency; the default is the CPUs).
//
// The variants take turns in rounds, so that load from outside hits them
// alike; each round runs a variant's share with c workers. The server
// keeps its defaults but a queue big enough for 32 clients (its
// concurrency is the CPUs: HTTP runs past it wait in its queue, as they
// would in service). Then python/benchmarks/client_direct.py times the
// Python client's direct path against bare python3.
//
// Run from the repository root after make:
//
//	go run ./scripts/benchapi -n 40
//
// It prints Markdown for BENCHMARKS.md, and only reports: a run that fails
// is counted (and its first error printed on stderr), and left out of the
// latencies.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

var (
	microbox = flag.String("microbox", "bin/microbox", "the default build (bin/microbox-server beside it)")
	perRound = flag.Int("n", 40, "runs of each variant per round, per concurrency")
	rounds   = flag.Int("rounds", 3, "rounds, the variants taking turns")
	levels   = flag.String("c", "1,8,32", "concurrent clients")
	pyRuns   = flag.Int("py", 200, "runs of each Python variant (0: skip)")
)

const program = "print(1)"

func main() {
	flag.Parse()
	bin, err := filepath.Abs(*microbox)
	check(err)
	if *stress {
		runStress(bin)
		return
	}
	dir, err := os.MkdirTemp("", "microbox-benchapi-")
	check(err)
	defer os.RemoveAll(dir)
	socket := filepath.Join(dir, "s", "exec.sock")
	srv, url := startServer(bin, socket)
	defer stopServer(srv)
	cleanups = append(cleanups, func() { stopServer(srv) })
	// The same API admitting every client at once, as the socket does:
	// what the default admission (runs at once = the CPUs) costs or saves.
	wide, wideURL := startServer(bin, filepath.Join(dir, "w", "exec.sock"), "--http-concurrency", "64")
	defer stopServer(wide)
	cleanups = append(cleanups, func() { stopServer(wide) }, func() { os.RemoveAll(dir) })
	variants := []variant{
		{"http", httpRun(url)},
		{"http, --http-concurrency 64", httpRun(wideURL)},
		{"socket", execRun(bin, socket)},
		{"in-process", execRun(bin, "")},
	}
	fmt.Printf("## The HTTP API against the exec socket and in-process exec\n\n")
	fmt.Printf("Produced by `go run ./scripts/benchapi %s` on %s.\n\n", strings.Join(os.Args[1:], " "), time.Now().UTC().Format("2006-01-02 15:04 UTC"))
	fmt.Printf("- %d CPUs, %s; load average before: %s\n", runtime.NumCPU(), runtime.Version(), loadavg())
	fmt.Printf("- program `%s` with `--mem 256M --timeout 5s` (the task's `mem` and `timeout` over HTTP); server: `microbox serve --http 127.0.0.1:0 --http-queue 64` (concurrency: the CPUs, warm jails: the CPUs)\n\n", program)
	for _, f := range strings.Split(*levels, ",") {
		c, err := strconv.Atoi(f)
		check(err)
		measure(variants, c)
	}
	fmt.Printf("- load average after: %s\n\n", loadavg())
	if *pyRuns > 0 {
		pythonClient(bin, strings.TrimPrefix(url, "http://"))
	}
}

type variant struct {
	name string
	run  func() error
}

// measure runs every variant at c clients, round by round, and prints
// the table.
func measure(variants []variant, c int) {
	lat := make([][]time.Duration, len(variants))
	busy := make([]time.Duration, len(variants))
	failed := make([]int, len(variants))
	n := *perRound * max(1, c/4)
	for range *rounds {
		for i, v := range variants {
			d, l, f := load(v.run, c, n)
			busy[i] += d
			lat[i] = append(lat[i], l...)
			failed[i] += f
		}
	}
	clients := fmt.Sprintf("%d concurrent clients", c)
	if c == 1 {
		clients = "1 client"
	}
	fmt.Printf("### %s (%d runs per variant)\n\n", clients, n**rounds)
	fmt.Println("| variant | failed | runs/s | p50 ms | p99 ms | × in-process runs/s |")
	fmt.Println("|---|--:|--:|--:|--:|--:|")
	base := float64(len(lat[len(lat)-1])) / busy[len(busy)-1].Seconds()
	for i, v := range variants {
		rate := float64(len(lat[i])) / busy[i].Seconds()
		fmt.Printf("| %s | %d | %.1f | %.1f | %.1f | %.2f |\n", v.name, failed[i], rate, pct(lat[i], 50), pct(lat[i], 99), rate/base)
	}
	fmt.Println()
}

// load runs n runs on c workers and returns the elapsed time, each
// successful run's latency and the failures.
func load(run func() error, c, n int) (time.Duration, []time.Duration, int) {
	var mu sync.Mutex
	var lat []time.Duration
	failed := 0
	todo := make(chan struct{}, n)
	for range n {
		todo <- struct{}{}
	}
	close(todo)
	start := time.Now()
	var wg sync.WaitGroup
	for range c {
		wg.Go(func() {
			for range todo {
				t := time.Now()
				err := run()
				d := time.Since(t)
				mu.Lock()
				if err != nil {
					if failed == 0 {
						fmt.Fprintln(os.Stderr, "benchapi:", err)
					}
					failed++
				} else {
					lat = append(lat, d)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return time.Since(start), lat, failed
}

func pct(ds []time.Duration, p int) float64 {
	s := slices.Clone(ds)
	slices.Sort(s)
	i := min(len(s)-1, len(s)*p/100)
	return float64(s[i].Microseconds()) / 1000
}

var client = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}

// decodeJSON reads one JSON value from r into v.
func decodeJSON(r io.Reader, v any) error { return json.NewDecoder(r).Decode(v) }

func httpRun(url string) func() error {
	body := `{"code": "` + program + `", "mem": "256M", "timeout": "5s"}`
	return func() error {
		resp, err := client.Post(url+"/v1/runs", "application/json", strings.NewReader(body))
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		var r struct{ Status, Stdout string }
		if resp.StatusCode != 200 || json.Unmarshal(data, &r) != nil || r.Status != "ok" || r.Stdout != "1\n" {
			return fmt.Errorf("http: %d %s", resp.StatusCode, data)
		}
		return nil
	}
}

func execRun(bin, socket string) func() error {
	return func() error {
		cmd := exec.Command(bin, "exec", "--mem", "256M", "--timeout", "5s", "-c", program)
		cmd.Env = append(os.Environ(), "MICROBOX_SOCKET="+socket)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil || string(out) != "1\n" {
			return fmt.Errorf("exec (socket %q): %v %q %s", socket, err, out, stderr.Bytes())
		}
		return nil
	}
}

var listening = regexp.MustCompile(`serving the HTTP API on (http://\S+)`)

func stopServer(cmd *exec.Cmd) {
	cmd.Process.Signal(syscall.SIGTERM)
	cmd.Wait()
}

// startServer starts a server and returns it with the API's URL.
func startServer(bin, socket string, args ...string) (*exec.Cmd, string) {
	check(os.MkdirAll(filepath.Dir(socket), 0o700))
	cmd := exec.Command(bin, append([]string{"serve", "--socket", socket, "--http", "127.0.0.1:0", "--http-queue", "64"}, args...)...)
	stderr, err := cmd.StderrPipe()
	check(err)
	check(cmd.Start())
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		if m := listening.FindStringSubmatch(sc.Text()); m != nil {
			go io.Copy(io.Discard, stderr)
			return cmd, m[1]
		}
	}
	check(fmt.Errorf("the server did not start"))
	return nil, ""
}

// pythonClient runs python/benchmarks/client_direct.py against the same
// server and prints its table.
func pythonClient(bin, addr string) {
	cmd := exec.Command("/usr/bin/python3", "python/benchmarks/client_direct.py", "-n", strconv.Itoa(*pyRuns))
	cmd.Env = append(os.Environ(), "MICROBOX="+bin, "MICROBOX_URL=http://"+addr, "MICROBOX_SOCKET=")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, os.Stderr
	check(cmd.Run())
	fmt.Print(out.String())
}

func loadavg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// cleanups stop the servers and remove the directory when check ends the
// program early.
var cleanups []func()

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchapi:", err)
		for _, c := range cleanups {
			c()
		}
		os.Exit(1)
	}
}
