package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/microbox/microbox/cgroup"
)

const (
	cgroupRoot = "/sys/fs/cgroup"
	microbox   = "/usr/bin/microbox"
	userUID    = 1000 // the unprivileged user of the rootless tests
)

// result is the part of microbox's JSON result the suite checks.
type result struct {
	Status   string   `json:"status"`
	ExitCode *int     `json:"exit_code"`
	Stdout   string   `json:"stdout"`
	Stderr   string   `json:"stderr"`
	Error    *string  `json:"error"`
	Limit    string   `json:"limit"`
	Cgroup   string   `json:"cgroup"`
	WallMs   float64  `json:"wall_time_ms"`
	CPUMs    *float64 `json:"cpu_time_ms"`
	Peak     *int64   `json:"peak_memory_bytes"`
}

func (r result) String() string {
	e := ""
	if r.Error != nil {
		e = *r.Error
	}
	return fmt.Sprintf("status=%s limit=%q cgroup=%s error=%q stdout=%q stderr=%q", r.Status, r.Limit, r.Cgroup, e, clip(r.Stdout), clip(r.Stderr))
}

func clip(s string) string {
	if len(s) > 300 {
		return s[:300] + "..."
	}
	return s
}

// as says where and as whom microbox is started: in cgroup (a path in the
// hierarchy; "" is the suite's own, the root) as uid (0 is root), and
// whether in a container's cgroup namespace rooted at that group.
type as struct {
	cgroup    string
	uid       int
	container bool
}

// command prepares microbox ARGS, cloned straight into the cgroup and
// running as the user that as names.
func (a as) command(args ...string) (*exec.Cmd, func(), error) {
	cmd := exec.Command(microbox, args...)
	if a.container {
		cmd = exec.Command("/init", append([]string{"contain", microbox}, args...)...)
	}
	cmd.Dir = "/"
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=/tmp"}
	attr := &syscall.SysProcAttr{}
	done := func() {}
	if a.cgroup != "" {
		fd, err := os.Open(filepath.Join(cgroupRoot, a.cgroup))
		if err != nil {
			return nil, nil, err
		}
		attr.UseCgroupFD, attr.CgroupFD = true, int(fd.Fd())
		done = func() { fd.Close() }
	}
	if a.uid != 0 {
		attr.Credential = &syscall.Credential{Uid: uint32(a.uid), Gid: uint32(a.uid)}
	}
	cmd.SysProcAttr = attr
	return cmd, done, nil
}

// run runs microbox to the end and returns its stdout, stderr and exit code.
func (a as) run(stdin string, args ...string) (string, string, int, error) {
	cmd, done, err := a.command(args...)
	if err != nil {
		return "", "", 0, err
	}
	defer done()
	var stdout, stderr bytes.Buffer
	cmd.Stdin = strings.NewReader(stdin)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return stdout.String(), stderr.String(), ee.ExitCode(), nil
	}
	if err != nil {
		return "", "", 0, fmt.Errorf("run microbox: %w", err)
	}
	return stdout.String(), stderr.String(), 0, nil
}

// exec runs `microbox exec --json ARGS` and decodes its result.
func (a as) exec(args ...string) (result, error) {
	out, stderr, _, err := a.run("", append([]string{"exec", "--json"}, args...)...)
	if err != nil {
		return result{}, err
	}
	var r result
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		return r, fmt.Errorf("microbox %v: not one JSON object (%v): %q stderr %q", args, err, out, stderr)
	}
	return r, nil
}

// py runs code as root from the root cgroup.
func py(code string, flags ...string) (result, error) {
	return as{}.exec(append(flags, "-c", code)...)
}

// want checks a result's status (and limit, when given).
func want(r result, status, limit string) error {
	if r.Status != status || (limit != "" && r.Limit != limit) {
		return fmt.Errorf("want status %s limit %q, got %s", status, limit, r)
	}
	return nil
}

// liveCode prints "ready" and then waits for its stdin to close, so a
// test can look at a run while it is going on.
const liveCode = "import sys\nprint('ready', flush=True)\nsys.stdin.read()\nprint('bye')"

// liveRun is a microbox run in progress (without --json, so stdout
// streams through).
type liveRun struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Reader
	done  func()
}

// start starts `microbox exec FLAGS -c liveCode` and waits for "ready".
func (a as) start(flags ...string) (*liveRun, error) {
	cmd, done, err := a.command(append(append([]string{"exec"}, flags...), "-c", liveCode)...)
	if err != nil {
		return nil, err
	}
	l := &liveRun{cmd: cmd, done: done}
	if l.stdin, err = cmd.StdinPipe(); err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	l.out = bufio.NewReader(stdout)
	if err := cmd.Start(); err != nil {
		done()
		return nil, err
	}
	line, err := l.out.ReadString('\n')
	if line != "ready\n" {
		l.kill()
		return nil, fmt.Errorf("the live run did not start: %q %v, stderr %q", line, err, stderr.String())
	}
	return l, nil
}

// finish closes the program's stdin and waits for microbox's exit code.
func (l *liveRun) finish() (int, error) {
	defer l.done()
	l.stdin.Close()
	rest, _ := io.ReadAll(l.out)
	err := l.cmd.Wait()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return ee.ExitCode(), fmt.Errorf("microbox exited %d, stdout %q", ee.ExitCode(), rest)
	case err != nil:
		return 0, err
	case string(rest) != "bye\n":
		return 0, fmt.Errorf("the program's last output was %q", rest)
	}
	return 0, nil
}

// kill ends microbox with SIGKILL, as a crash would.
func (l *liveRun) kill() {
	l.cmd.Process.Kill()
	l.cmd.Wait()
	l.done()
}

// runGroups lists every microbox run group, as paths in the hierarchy.
func runGroups() []string {
	var found []string
	filepath.WalkDir(cgroupRoot, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() && cgroup.IsRunGroup(d.Name()) {
			found = append(found, strings.TrimPrefix(p, cgroupRoot))
		}
		return nil
	})
	return found
}

// removeRunGroups kills and removes leftover run groups (deepest first).
func removeRunGroups() {
	groups := runGroups()
	sort.Sort(sort.Reverse(sort.StringSlice(groups)))
	for _, g := range groups {
		dir := filepath.Join(cgroupRoot, g)
		os.WriteFile(filepath.Join(dir, "cgroup.kill"), []byte("1"), 0)
		for i := 0; i < 100 && os.Remove(dir) != nil; i++ {
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// onlyRunGroup returns the one run group that exists now.
func onlyRunGroup() (string, error) {
	groups := runGroups()
	if len(groups) != 1 {
		return "", fmt.Errorf("want exactly one run group, found %v", groups)
	}
	return groups[0], nil
}

// makeGroup creates a cgroup (and its parents).
func makeGroup(group string) error {
	return os.MkdirAll(filepath.Join(cgroupRoot, group), 0o755)
}

// delegate gives uid a cgroup the way the kernel's delegation model (and
// systemd's Delegate=yes) does: the directory and its cgroup.procs,
// cgroup.threads and cgroup.subtree_control files, nothing else — its
// own limits stay the delegator's. Controllers are enabled for its
// children first.
func delegate(group string, uid int) error {
	if err := makeGroup(group); err != nil {
		return err
	}
	if err := enableAllControllers(group); err != nil {
		return err
	}
	dir := filepath.Join(cgroupRoot, group)
	for _, f := range []string{"", "cgroup.procs", "cgroup.threads", "cgroup.subtree_control"} {
		if err := os.Chown(filepath.Join(dir, f), uid, uid); err != nil {
			return err
		}
	}
	return nil
}

// giveSubtree makes a group as if uid had created it itself (inside a
// group delegated to it): every file of it belongs to uid.
func giveSubtree(group string, uid int) error {
	if err := makeGroup(group); err != nil {
		return err
	}
	return filepath.WalkDir(filepath.Join(cgroupRoot, group), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Chown(p, uid, uid)
	})
}

// readGroupFile reads a cgroup interface file, trimmed.
func readGroupFile(group, name string) (string, error) {
	b, err := os.ReadFile(filepath.Join(cgroupRoot, group, name))
	return strings.TrimSpace(string(b)), err
}

// procCgroup returns a process's cgroup v2 path.
func procCgroup(pid int) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	return strings.TrimPrefix(strings.TrimSpace(string(b)), "0::")
}

// hold starts a process that sits in group until stopped.
func hold(group string) (func(), error) {
	fd, err := os.Open(filepath.Join(cgroupRoot, group))
	if err != nil {
		return nil, err
	}
	defer fd.Close()
	cmd := exec.Command("/init", "hold")
	cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: int(fd.Fd())}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return func() { cmd.Process.Kill(); cmd.Wait() }, nil
}

// ppid returns a process's parent, or 0.
func ppid(pid int) int {
	stat, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0
	}
	fields := strings.Fields(string(stat[i+1:]))
	if len(fields) < 2 {
		return 0
	}
	p, _ := strconv.Atoi(fields[1])
	return p
}

// descends reports whether pid is a descendant of ancestor.
func descends(pid, ancestor int) bool {
	for p := ppid(pid); p > 1; p = ppid(p) {
		if p == ancestor {
			return true
		}
	}
	return false
}

// children lists the direct children of pid.
func children(pid int) []int {
	var out []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if p, err := strconv.Atoi(e.Name()); err == nil && ppid(p) == pid {
			out = append(out, p)
		}
	}
	return out
}

// aliveWith lists live processes whose command line contains marker.
func aliveWith(marker string) []int {
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		stat, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		zombie := bytes.Contains(stat, []byte(") Z "))
		if bytes.Contains(cmdline, []byte(marker)) && !zombie {
			pids = append(pids, pid)
		}
	}
	return pids
}

// mentions checks that text names every one of words.
func mentions(text string, words ...string) error {
	for _, w := range words {
		if !strings.Contains(text, w) {
			return fmt.Errorf("%q does not mention %q", clip(text), w)
		}
	}
	return nil
}
