package main

// -stress: the server's own memory and descriptors under callers that send
// the largest answers they may, and its throughput, each against a baseline
// build in the same run (docs/server.md states the memory bound this
// checks in the field).
//
//	go run ./scripts/benchapi -stress -baseline /tmp/microbox-base/bin/microbox

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

var (
	stress     = flag.Bool("stress", false, "measure the server's RSS and descriptors at -clients clients with maximal outputs, and print(1) throughput, instead of the latency tables")
	baseline   = flag.String("baseline", "", "with -stress: a second build (its bin/microbox) measured in the same run")
	clients    = flag.Int("clients", 64, "with -stress: concurrent clients")
	stressRuns = flag.Int("runs", 256, "with -stress: runs of the maximal-output program per build and round")
)

// maxOutput fills stdout and stderr to the default output limit (1 MiB
// each) with NUL bytes, the costliest byte to encode in JSON (\u0000).
const maxOutput = `import os
b = bytes(1 << 20)
os.write(1, b); os.write(2, b)`

// stressResult is one build's figures.
type stressResult struct {
	peakRSS, afterRSS, startRSS int64 // KiB
	peakFDs, afterFDs, startFDs int
	failed, done                int
	elapsed                     time.Duration
	rate                        float64 // print(1) runs/s
}

func runStress(bin string) {
	builds := []string{bin}
	if *baseline != "" {
		b, err := filepath.Abs(*baseline)
		check(err)
		builds = append(builds, b)
	}
	fmt.Printf("## The server's memory and descriptors at %d clients with maximal outputs\n\n", *clients)
	fmt.Printf("Produced by `go run ./scripts/benchapi %s` on %s.\n\n", strings.Join(os.Args[1:], " "), time.Now().UTC().Format("2006-01-02 15:04 UTC"))
	fmt.Printf("- server: `microbox serve --http 127.0.0.1:0 --http-concurrency %d --http-queue %d`; each run prints 1 MiB of NUL bytes on stdout and on stderr (the default --output-limit)\n", *clients, *clients)
	fmt.Printf("- RSS and descriptors of the server process, sampled every 20 ms; print(1) throughput at 8 clients with the server's default admission\n\n")
	res := make([][]stressResult, len(builds))
	for range *rounds {
		for i, b := range builds {
			res[i] = append(res[i], stressOne(b))
		}
	}
	fmt.Println("| build | runs (failed) | start RSS MiB | peak RSS MiB | after RSS MiB | start fds | peak fds | after fds | print(1) runs/s |")
	fmt.Println("|---|--:|--:|--:|--:|--:|--:|--:|--:|")
	for i, b := range builds {
		for _, r := range res[i] {
			fmt.Printf("| %s | %d (%d) | %.0f | %.0f | %.0f | %d | %d | %d | %.1f |\n", b, r.done, r.failed,
				float64(r.startRSS)/1024, float64(r.peakRSS)/1024, float64(r.afterRSS)/1024, r.startFDs, r.peakFDs, r.afterFDs, r.rate)
		}
	}
	fmt.Println()
}

// stressOne measures one build: a fresh server, the maximal-output load,
// then print(1) throughput on another fresh server.
func stressOne(bin string) stressResult {
	dir, err := os.MkdirTemp("", "microbox-stress-")
	check(err)
	defer os.RemoveAll(dir)
	n := strconv.Itoa(*clients)
	srv, url := startServer(bin, filepath.Join(dir, "s", "exec.sock"), "--http-concurrency", n, "--http-queue", n)
	pid := srv.Process.Pid
	time.Sleep(500 * time.Millisecond) // jails ahead started
	var r stressResult
	r.startRSS, r.startFDs = rss(pid), fds(pid)
	stop := make(chan struct{})
	var sampled sync.WaitGroup
	sampled.Go(func() {
		for {
			r.peakRSS, r.peakFDs = max(r.peakRSS, rss(pid)), max(r.peakFDs, fds(pid))
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	})
	run := bigRun(url)
	elapsed, lat, failed := load(run, *clients, *stressRuns)
	close(stop)
	sampled.Wait()
	time.Sleep(time.Second) // teardown after the answers
	r.afterRSS, r.afterFDs = rss(pid), fds(pid)
	r.done, r.failed, r.elapsed = len(lat)+failed, failed, elapsed
	stopServer(srv)
	thr, thrURL := startServer(bin, filepath.Join(dir, "t", "exec.sock"))
	d, l, _ := load(httpRun(thrURL), 8, 8**perRound)
	r.rate = float64(len(l)) / d.Seconds()
	stopServer(thr)
	return r
}

// bigRun posts the maximal-output program and checks the answer is whole.
func bigRun(url string) func() error {
	body := `{"code": ` + strconv.Quote(maxOutput) + `}`
	return func() error {
		resp, err := client.Post(url+"/v1/runs", "application/json", strings.NewReader(body))
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		var r struct{ Status, Stdout, Stderr string }
		if err := decodeJSON(resp.Body, &r); err != nil || resp.StatusCode != 200 || r.Status != "ok" || len(r.Stdout) != 1<<20 || len(r.Stderr) != 1<<20 {
			return fmt.Errorf("maximal output: %d %s (%d, %d bytes) %v", resp.StatusCode, r.Status, len(r.Stdout), len(r.Stderr), err)
		}
		return nil
	}
}

// rss is a process's resident set in KiB (0 once it is gone).
func rss(pid int) int64 {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n
		}
	}
	return 0
}

// fds counts a process's open descriptors.
func fds(pid int) int {
	e, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	return len(e)
}
