package main

// `microbox doctor` on this host (cgroup v1 in CI; its v2 report is
// tested in the VM, scripts/vmtest).

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/microbox/microbox/cgroup"
	"github.com/microbox/microbox/internal/doctor"
	"github.com/microbox/microbox/result"
)

// doctorJSON runs `microbox doctor --json ARGS` as uid (0: as the test
// runs) and returns the report, each check by name, and the exit code.
func doctorJSON(t *testing.T, uid int, args ...string) (doctor.Report, map[string]doctor.Check, int) {
	t.Helper()
	cmd := exec.Command(microbox, append([]string{"doctor", "--json"}, args...)...)
	cmd.Dir = "/"
	if uid != 0 {
		os.Chmod(filepath.Dir(microbox), 0o755)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid)}}
	}
	stdout, stderr, code := runCmd(t, cmd)
	var rep doctor.Report
	if err := json.Unmarshal(stdout, &rep); err != nil {
		t.Fatalf("doctor --json %v: %v\n%s\nstderr: %s", args, err, stdout, stderr)
	}
	byName := map[string]doctor.Check{}
	for _, c := range rep.Checks {
		byName[c.Name] = c
		if c.Status != doctor.OK && c.Status != doctor.Warn && c.Status != doctor.Fail {
			t.Errorf("check %s has status %q", c.Name, c.Status)
		}
		if c.Status != doctor.OK && c.Fix == "" {
			t.Errorf("check %s is %s without a fix: %s", c.Name, c.Status, c.Detail)
		}
	}
	return rep, byName, code
}

// As root here every check passes, the cgroup mode is the host's, and
// the final run really ran.
func TestDoctorRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the host report as root needs root")
	}
	rep, checks, code := doctorJSON(t, 0)
	if code != 0 || !rep.OK {
		t.Fatalf("doctor exit %d ok=%v: %+v", code, rep.OK, rep.Checks)
	}
	for _, name := range []string{"host", "userns.max", "userns.unprivileged", "userns.apparmor", "userns.create",
		"cgroup.mode", "cgroup.controllers", "cgroup.memory_peak", "cgroup.kill", "cgroup.clone_into",
		"cgroup.delegation", "seccomp", "fs.tmpfs", "fs.overlay", "python", "run"} {
		if c, ok := checks[name]; !ok || c.Status != doctor.OK {
			t.Errorf("check %s: %+v, want ok", name, c)
		}
	}
	if mode := string(cgroup.HostMode()); !strings.HasPrefix(checks["cgroup.mode"].Detail, mode) {
		t.Errorf("cgroup.mode says %q on a %s host", checks["cgroup.mode"].Detail, mode)
	}
	if d := checks["run"].Detail; !strings.Contains(d, "Python 3.") || !strings.Contains(d, "cgroup "+string(cgroup.HostMode())) {
		t.Errorf("run: %q", d)
	}
}

// The text report is one line per check, then a verdict line.
func TestDoctorText(t *testing.T) {
	out, code := runMicrobox(t, "", "doctor")
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	line := regexp.MustCompile(`^(ok|warn|fail) +[a-z.\-_]+ +\S`)
	for _, l := range lines[:len(lines)-1] {
		if !line.MatchString(l) {
			t.Errorf("line %q is not STATUS NAME DETAIL", l)
		}
	}
	last := lines[len(lines)-1]
	if (code == 0) != (last == "doctor: runs work on this host") {
		t.Fatalf("exit %d with verdict line %q", code, last)
	}
}

// An unprivileged user on v1 has no cgroup: doctor fails (a default run
// would), says why and how, and finds that --no-cgroup works; asked
// about --no-cgroup runs, it passes.
func TestDoctorRootless(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to switch to an unprivileged user")
	}
	if cgroup.HostMode() != cgroup.ModeV1 {
		t.Skip("the unprivileged v2 report is tested in the VM (scripts/vmtest)")
	}
	rep, checks, code := doctorJSON(t, 65534)
	if code != 1 || rep.OK {
		t.Fatalf("exit %d ok=%v, want 1 and false", code, rep.OK)
	}
	if c := checks["cgroup.delegation"]; c.Status != doctor.Fail || !strings.Contains(c.Fix, "--no-cgroup") {
		t.Errorf("cgroup.delegation: %+v", c)
	}
	if checks["run"].Status != doctor.Fail || checks["run.no-cgroup"].Status != doctor.OK {
		t.Errorf("run %+v, run.no-cgroup %+v", checks["run"], checks["run.no-cgroup"])
	}
	rep, checks, code = doctorJSON(t, 65534, "--no-cgroup")
	if code != 0 || !rep.OK || !strings.Contains(checks["run"].Detail, "cgroup none") {
		t.Fatalf("doctor --no-cgroup as nobody: exit %d %+v", code, rep.Checks)
	}
}

// Bad flags are a usage error, as for exec.
func TestDoctorBadFlags(t *testing.T) {
	if _, code := runMicrobox(t, "", "doctor", "--mem", "12Q"); code != result.ExitSandboxError {
		t.Fatalf("exit %d, want %d", code, result.ExitSandboxError)
	}
}

// Doctor warns that runs share the host's own /usr, and checks that the
// host's scientific packages (numpy, which scripts/deps installs) import in
// runs as they do on the host.
func TestDoctorSharedRootAndPackages(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the run doctor makes needs a cgroup here")
	}
	_, checks, _ := doctorJSON(t, 0, "--rootfs", "")
	if c := checks["root.shared"]; c.Status != doctor.Warn || !strings.Contains(c.Fix, "--rootfs") {
		t.Errorf("root.shared: %+v", c)
	}
	if c := checks["python.packages"]; c.Status != doctor.OK || !strings.Contains(c.Detail, "numpy") {
		t.Errorf("python.packages: %+v (scripts/deps installs python3-numpy)", c)
	}
}

// exec.path says whether an exec with this environment is served or runs
// in-process, and why: a listening server, the variable empty, no
// socket, a socket nobody listens on.
func TestDoctorExecPath(t *testing.T) {
	socket, _ := testServer(t, "--warm", "0")
	dir := t.TempDir()
	stale := filepath.Join(dir, "stale.sock")
	l, err := netListenUnix(stale)
	if err != nil {
		t.Fatal(err)
	}
	l.SetUnlinkOnClose(false)
	l.Close()
	for _, c := range []struct {
		socket string
		status doctor.Status
		want   string
	}{
		{socket, doctor.OK, "served: a server listens on " + socket},
		{"", doctor.OK, "in-process: $MICROBOX_SOCKET is empty"},
		{filepath.Join(dir, "none.sock"), doctor.Warn, "in-process: no server socket at"},
		{stale, doctor.Warn, "in-process: nobody listens on " + stale},
	} {
		cmd := exec.Command(microbox, "doctor", "--json", "--no-cgroup")
		cmd.Env = append(os.Environ(), socketEnv+"="+c.socket)
		stdout, stderr, _ := runCmd(t, cmd)
		var rep doctor.Report
		if err := json.Unmarshal(stdout, &rep); err != nil {
			t.Fatalf("doctor --json: %v\n%s\nstderr: %s", err, stdout, stderr)
		}
		i := slices.IndexFunc(rep.Checks, func(ch doctor.Check) bool { return ch.Name == "exec.path" })
		if i < 0 {
			t.Fatalf("socket %q: no exec.path check in %+v", c.socket, rep.Checks)
		}
		if ch := rep.Checks[i]; ch.Status != c.status || !strings.HasPrefix(ch.Detail, c.want) {
			t.Errorf("socket %q: %s %q, want %s %q", c.socket, ch.Status, ch.Detail, c.status, c.want)
		}
	}
}
