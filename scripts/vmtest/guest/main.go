// Command guest is the init of the cgroup v2 test VM (see ../main.go) and
// its test suite. As PID 1 it sets the VM up, runs every test against
// /usr/bin/microbox, prints "PASS name" or "FAIL name: reason" for each and
// "N passed, M failed" at the end on the serial console, and powers off.
//
// Run with an argument, it is a helper the suite starts: `hold` sleeps
// until killed (a process that makes a cgroup busy); `contain CMD...`
// execs CMD as a container runtime would leave it (see contain).
package main

import (
	"fmt"
	"os"
	"strings"
	"time"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "hold" {
		time.Sleep(time.Hour)
		return
	}
	if len(os.Args) > 2 && os.Args[1] == "contain" {
		err := contain(os.Args[2:])
		fmt.Fprintln(os.Stderr, "guest contain:", err)
		os.Exit(126)
	}
	if os.Getpid() != 1 {
		fmt.Fprintln(os.Stderr, "guest: this is the test VM's init; run it with go run ./scripts/vmtest")
		os.Exit(2)
	}
	if err := setUpVM(); err != nil {
		fmt.Printf("FAIL vm_setup: %v\n0 passed, 1 failed\n", err)
		powerOff()
	}
	runSuite(filter())
	powerOff()
}

// filter is the vmtest.run= kernel parameter: run only tests whose names
// contain it.
func filter() string {
	cmdline, _ := os.ReadFile("/proc/cmdline")
	for _, f := range strings.Fields(string(cmdline)) {
		if v, ok := strings.CutPrefix(f, "vmtest.run="); ok {
			return v
		}
	}
	return ""
}

// test is one case of the suite; it returns why it failed, or nil.
type test struct {
	name string
	fn   func() error
}

// runSuite runs the tests in order. After each, no run cgroup may be left
// anywhere; leftovers fail the test and are removed so the next one
// starts clean.
func runSuite(only string) {
	passed, failed := 0, 0
	for _, t := range suite {
		if only != "" && !strings.Contains(t.name, only) && t.name != "kernel" {
			continue
		}
		start := time.Now()
		err := t.fn()
		if leaks := runGroups(); len(leaks) > 0 && err == nil {
			err = fmt.Errorf("left run cgroups behind: %v", leaks)
		}
		removeRunGroups()
		if err != nil {
			failed++
			fmt.Printf("FAIL %s: %s\n", t.name, strings.ReplaceAll(err.Error(), "\n", " | "))
			continue
		}
		passed++
		fmt.Printf("PASS %s (%.1fs)\n", t.name, time.Since(start).Seconds())
	}
	fmt.Printf("%d passed, %d failed\n", passed, failed)
}
