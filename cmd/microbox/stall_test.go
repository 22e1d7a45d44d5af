package main

// A stalled supervisor (stopped, starved, its VM paused) must not change a
// run's verdict: the jail's PID 1 saw the program start and end, on the
// same clock, and its account is the verdict however late the supervisor
// looks. These tests stop the supervisor, with SIGSTOP, from the moment
// the program runs until well past its deadline.

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/microbox/microbox/result"
)

const (
	// stallTimeout is the runs' wall-clock limit; stall, how long their
	// supervisor is stopped once the program runs: past the deadline.
	stallTimeout = 1500 * time.Millisecond
	stall        = stallTimeout + 500*time.Millisecond
)

// stallCases are programs that say ready and then end in time, or never
// (one of them using CPU, for the CPU-time limit); each is run a few
// times, since which of its deadlines and PID 1's report a woken
// supervisor sees first is a race. want says what is wrong with a
// verdict, if anything.
var stallCases = []struct {
	name    string
	flags   []string
	program string
	runs    int
	want    func(v stallVerdict, code int) string
}{
	{"ends in time", nil, "import time; print('ready', flush=True); time.sleep(0.3)", 3,
		func(v stallVerdict, code int) string {
			if v.Status != result.StatusOK || code != 0 || v.ExitCode == nil || *v.ExitCode != 0 {
				return "want ok, exit 0"
			}
			if v.WallTimeMs >= float64(stallTimeout.Milliseconds()) {
				return fmt.Sprintf("want the jail's wall time, under %v", stallTimeout)
			}
			return ""
		}},
	{"never ends", nil, "import time; print('ready', flush=True); time.sleep(60)", 1,
		func(v stallVerdict, code int) string {
			if v.Status != result.StatusTimeout || v.Limit != result.LimitWall || code != result.ExitTimeout {
				return "want timeout, limit wall, exit 124"
			}
			if v.WallTimeMs < float64(stallTimeout.Milliseconds()) {
				return fmt.Sprintf("want a wall time of at least %v", stallTimeout)
			}
			return ""
		}},
	{"never ends, using CPU", []string{"--cpu-time", "300ms"}, "print('ready', flush=True)\nwhile True: pass", 3,
		func(v stallVerdict, code int) string {
			// The limit the run reached first, by its cgroup's count: on
			// a busy host it may get less than 300 ms of CPU before its
			// wall deadline.
			limit := result.LimitWall
			if v.CPUTimeMs >= 300 {
				limit = result.LimitCPU
			}
			if v.Status != result.StatusTimeout || v.Limit != limit || code != result.ExitTimeout {
				return fmt.Sprintf("want timeout, limit %s, exit 124", limit)
			}
			return ""
		}},
}

// stallVerdict is what an audit line says of a run.
type stallVerdict struct {
	Status     result.Status `json:"status"`
	ExitCode   *int          `json:"exit_code"`
	Limit      string        `json:"limit"`
	WallTimeMs float64       `json:"wall_time_ms"`
	CPUTimeMs  float64       `json:"cpu_time_ms"` // 0 without a cgroup
}

// runStalled runs program, which prints ready, with `microbox exec FLAGS`
// as newExec makes it; once the program has said ready, it stops
// the run's supervisor (the pid supervisor names) for stall. It returns
// the run's verdict from its audit log, and exec's exit status.
func runStalled(t *testing.T, newExec func(args ...string) *exec.Cmd, supervisor func(*exec.Cmd) int, flags []string, program string) (stallVerdict, int) {
	t.Helper()
	log := filepath.Join(t.TempDir(), "audit.jsonl")
	cmd := newExec(slices.Concat(flags, []string{"--timeout", stallTimeout.String(), "--audit-log", log, "-c", program})...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(out).ReadString('\n')
	if line == "ready\n" {
		pid := supervisor(cmd)
		syscall.Kill(pid, syscall.SIGSTOP)
		time.Sleep(stall)
		syscall.Kill(pid, syscall.SIGCONT)
	}
	err = cmd.Wait()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	if line != "ready\n" {
		t.Fatalf("%v: exit %d, first line %q, want ready", cmd.Args, code, line)
	}
	data, err := os.ReadFile(log)
	if err != nil {
		t.Fatalf("%v: exit %d, no audit line: %v", cmd.Args, code, err)
	}
	var v stallVerdict
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatalf("audit line %q: %v", data, err)
	}
	return v, code
}

// checkStalled runs each of stallCases through newExec, stopping the
// run's supervisor each time, and checks the verdicts.
func checkStalled(t *testing.T, newExec func(args ...string) *exec.Cmd, supervisor func(*exec.Cmd) int) {
	for _, c := range stallCases {
		for i := range c.runs {
			v, code := runStalled(t, newExec, supervisor, c.flags, c.program)
			if wrong := c.want(v, code); wrong != "" {
				t.Fatalf("%s (run %d), supervisor stopped past the deadline: exit %d, verdict %+v (exit_code %v): %s",
					c.name, i+1, code, v, deref(v.ExitCode), wrong)
			}
		}
	}
}

// skipInLaterPasses skips a test of make unit's second and third passes
// (MICROBOX_TEST_SERVE, MICROBOX_ZYGOTE): these tests start their own
// server and zygotes, and would only run again as in the first.
func skipInLaterPasses(t *testing.T) {
	t.Helper()
	if os.Getenv(serveTestEnv) == "1" {
		t.Skip("the first pass ran it: it makes its own server and zygotes")
	}
}

// An in-process exec: its supervisor is microbox itself (not the spawner
// it forked before Go, nor the jail).
func TestStalledExecKeepsTheJailsVerdict(t *testing.T) {
	skipInLaterPasses(t)
	t.Parallel()
	inProcess := func(args ...string) *exec.Cmd {
		cmd := exec.Command(microbox, append([]string{"exec"}, args...)...)
		cmd.Env = append(os.Environ(), socketEnv+"=")
		return cmd
	}
	checkStalled(t, inProcess, func(cmd *exec.Cmd) int { return cmd.Process.Pid })
}

// Through a server, stopped as a whole: its runs, cold and forked from a
// warm interpreter (whose status comes on another channel), keep the
// verdicts their jails saw.
func TestStalledServerKeepsTheJailsVerdict(t *testing.T) {
	skipInLaterPasses(t)
	t.Parallel()
	socket, server := testServer(t)
	for _, start := range []string{"cold", "zygote"} {
		t.Run(start, func(t *testing.T) {
			flags := []string{}
			if start == "zygote" {
				flags = []string{"--zygote"}
				// The template starts with the first run, not under the stall.
				if out, errOut, code := runCmd(t, client(socket, "--zygote", "-c", "pass")); code != 0 {
					t.Fatalf("warm-up run: exit %d: %s%s", code, out, errOut)
				}
			}
			viaServer := func(args ...string) *exec.Cmd {
				return client(socket, append(flags, args...)...)
			}
			checkStalled(t, viaServer, func(*exec.Cmd) int { return server })
		})
	}
}
