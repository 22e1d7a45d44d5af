package deploy

import (
	"bufio"
	"compress/gzip"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// containerPid is the host pid of the container's first process.
func containerPid(t *testing.T, runtime, id string) int {
	t.Helper()
	out, err := exec.Command(runtime, "state", id).Output()
	var st struct{ Pid int }
	if err != nil || json.Unmarshal(out, &st) != nil {
		t.Fatalf("%s state %s: %v %s", runtime, id, err, out)
	}
	return st.Pid
}

// findProcess is the host pid of a process whose command line contains
// marker (0: none).
func findProcess(marker string) int {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if strings.Contains(string(cmdline), marker) && strings.Contains(string(cmdline), "python") {
			return pid
		}
	}
	return 0
}

// ancestors are pid's parent, grandparent, ... (nil for pid 0).
func ancestors(pid int) []int {
	var chain []int
	for pid > 1 {
		stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
		if err != nil {
			return chain
		}
		// pid (comm) state ppid ...: comm may hold spaces and parentheses.
		f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		if pid, err = strconv.Atoi(f[1]); err != nil {
			return chain
		}
		chain = append(chain, pid)
	}
	return chain
}

// writeCanonicalSamples writes HumanEval.jsonl.gz and, as samples.jsonl,
// each problem's canonical solution, into dir.
func writeCanonicalSamples(problems, dir string) error {
	data, err := os.ReadFile(problems)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "HumanEval.jsonl.gz"), data, 0o644); err != nil {
		return err
	}
	f, err := os.Open(problems)
	if err != nil {
		return err
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		return err
	}
	out, err := os.Create(filepath.Join(dir, "samples.jsonl"))
	if err != nil {
		return err
	}
	enc := json.NewEncoder(out)
	sc := bufio.NewScanner(gz)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var p struct {
			TaskID            string `json:"task_id"`
			CanonicalSolution string `json:"canonical_solution"`
		}
		if err := json.Unmarshal(sc.Bytes(), &p); err != nil {
			return err
		}
		enc.Encode(map[string]string{"task_id": p.TaskID, "completion": p.CanonicalSolution})
	}
	return out.Close()
}
