package main

// Limits and accounting through the run's cgroup (v1 on the hybrid CI
// host; the v2 path is exercised by the cgroup v2 VM test).

import (
	"strings"
	"testing"
	"time"

	"github.com/microbox/microbox/result"
)

func TestMemoryLimit(t *testing.T) {
	r := py(t, "b = bytearray(1 << 30)", "--mem", "256M")
	wantStatus(t, r, result.StatusMemory)
	if r.Limit != result.LimitMemory {
		t.Fatalf("limit %q", r.Limit)
	}
	if r.PeakMemoryBytes == nil || *r.PeakMemoryBytes > 256<<20 || *r.PeakMemoryBytes < 200<<20 {
		t.Fatalf("peak %v, want just under 256 MiB", deref(r.PeakMemoryBytes))
	}
	assertNoRunCgroups(t)
}

// A child that allocates while its parent stays small still ends the run
// as "memory".
func TestMemoryLimitChildProcess(t *testing.T) {
	r := py(t, `
import subprocess, sys
subprocess.run([sys.executable, '-c', 'b = bytearray(768 << 20)'])
print('parent survived')`, "--mem", "256M")
	wantStatus(t, r, result.StatusMemory)
}

func TestPidsLimitStopsForkBomb(t *testing.T) {
	start := time.Now()
	r := py(t, `
import os
while True:
    try:
        os.fork()
    except OSError:
        pass`, "--pids", "32", "--timeout", "3s")
	if r.Status != result.StatusTimeout && r.Status != result.StatusNonzero {
		t.Fatalf("status %q error %v", r.Status, deref(r.Error))
	}
	if el := time.Since(start); el > 6*time.Second {
		t.Fatalf("fork bomb run took %v", el)
	}
	assertNoRunCgroups(t)
	r = py(t, `
import threading, time
n = 0
try:
    while True:
        threading.Thread(target=time.sleep, args=(5,), daemon=True).start()
        n += 1
except RuntimeError:
    print(n)`, "--pids", "32")
	wantStatus(t, r, result.StatusOK)
	if n := strings.TrimSpace(r.Stdout); n == "" || len(n) > 2 {
		t.Fatalf("threads started under --pids 32: %q", n)
	}
}

// --cpus 0.5: a busy loop gets about half a core. The ratio is checked
// loosely: it proves the quota is applied, not how fast anything is.
func TestCPUQuota(t *testing.T) {
	r := py(t, "import time\nend = time.time() + 1\nwhile time.time() < end: pass", "--cpus", "0.5", "--timeout", "5s")
	wantStatus(t, r, result.StatusOK)
	ratio := *r.CPUTimeMs / r.WallTimeMs
	if ratio < 0.3 || ratio > 0.7 {
		t.Fatalf("CPU/wall ratio %.2f under --cpus 0.5 (cpu %.0f ms, wall %.0f ms)", ratio, *r.CPUTimeMs, r.WallTimeMs)
	}
}

// --cpu-time counts every thread: two busy threads reach 1 s of CPU in
// about 0.5 s of wall time.
func TestCPUTimeLimit(t *testing.T) {
	r := py(t, `
import threading
def spin():
    while True: pass
for _ in range(2):
    threading.Thread(target=spin).start()`, "--cpu-time", "1s", "--cpus", "2", "--timeout", "10s")
	wantStatus(t, r, result.StatusTimeout)
	if r.Limit != result.LimitCPU {
		t.Fatalf("limit %q, want cpu", r.Limit)
	}
	if *r.CPUTimeMs < 1000 || r.WallTimeMs > 2500 {
		t.Fatalf("cpu %.0f ms wall %.0f ms", *r.CPUTimeMs, r.WallTimeMs)
	}
}

// The CPU-time limit is checked as often as the run's CPUs could reach
// it, counted when the run starts: a one-shot exec's Go counts one CPU
// (it starts confined to one), and two busy processes must not get twice
// their limit.
func TestCPUTimeLimitOnEveryCPU(t *testing.T) {
	r := py(t, `
import os
os.fork()
while True: pass`, "--cpu-time", "600ms", "--cpus", "2", "--timeout", "10s")
	wantStatus(t, r, result.StatusTimeout)
	if r.Limit != result.LimitCPU || *r.CPUTimeMs > 900 {
		t.Fatalf("limit %q after %.0f ms of CPU, want cpu by about 600 ms", r.Limit, *r.CPUTimeMs)
	}
}

// Filling /tmp under a small memory limit ends in ENOSPC from the tmpfs cap
// or in the memory verdict; either way the host is untouched.
func TestTmpfsFillIsContained(t *testing.T) {
	r := py(t, `
import errno
try:
    with open('/tmp/fill', 'wb') as f:
        for _ in range(100):
            f.write(b'x' * (1 << 20))
    print('wrote 100 MiB')
except OSError as e:
    print(errno.errorcode[e.errno])`, "--mem", "64M", "--tmpfs-size", "32M")
	if r.Status == result.StatusOK && strings.TrimSpace(r.Stdout) != "ENOSPC" {
		t.Fatalf("stdout %q", r.Stdout)
	}
	if r.Status != result.StatusOK && r.Status != result.StatusMemory {
		t.Fatalf("status %q", r.Status)
	}
	assertNoRunCgroups(t)
}

func TestNoCgroupRunsWithoutLimits(t *testing.T) {
	r := py(t, "print(1)", "--no-cgroup")
	wantStatus(t, r, result.StatusOK)
	if r.Cgroup != "none" {
		t.Fatalf("cgroup %q, want none", r.Cgroup)
	}
}

func TestCgroupsAreRemoved(t *testing.T) {
	py(t, "print(1)")
	py(t, "while 1: pass", "--timeout", "200ms")
	assertNoRunCgroups(t)
}
