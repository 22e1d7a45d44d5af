package main

// Tests of /healthz's self-check (internal/health) over a real listener:
// a server whose host stops letting runs make cgroups (the DaemonSet on
// containerd: a read-only cgroup mount) answers 503 naming the check and
// the fix, while ?live stays 200; with --no-cgroup, the variant for such
// hosts, it answers 200; a report is cached and made once for callers
// that come together; and the server's log, and a batch's, name flags,
// not Go fields.

import (
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/microbox/microbox/internal/doctor"
	"github.com/microbox/microbox/nsjail"
	"github.com/microbox/microbox/result"
)

// healthReport is a /healthz answer.
type healthReport struct {
	Status    string         `json:"status"`
	Error     string         `json:"error"`
	Checks    []doctor.Check `json:"checks"`
	CheckedAt time.Time      `json:"checked_at"`
}

func (h healthReport) check(name string) *doctor.Check {
	if i := slices.IndexFunc(h.Checks, func(c doctor.Check) bool { return c.Name == name }); i >= 0 {
		return &h.Checks[i]
	}
	return nil
}

// getHealth asks path (/healthz, with a query or not).
func getHealth(t *testing.T, s *apiServer, path string) (int, healthReport, string) {
	t.Helper()
	code, body := s.do(t, http.MethodGet, path, "", nil)
	var h healthReport
	if err := json.Unmarshal(body, &h); err != nil {
		t.Fatalf("GET %s: %d %s: %v", path, code, body, err)
	}
	return code, h, string(body)
}

// readOnlyCgroups remounts every cgroup mount of the mount namespace it
// runs in read-only, as a container runtime that does not delegate the
// cgroup mounts it (containerd), then executes its arguments.
const readOnlyCgroups = `set -e
for m in $(awk '{for (i = 7; i <= NF; i++) if ($i == "-") { if ($(i+1) == "cgroup" || $(i+1) == "cgroup2") print $5; break }}' /proc/self/mountinfo); do
	mount -o remount,bind,ro "$m"
done
exec "$@"`

// privateMounts starts a server in a mount namespace of its own, which
// readOnlyCgroups can change without touching the host's.
func privateMounts(t *testing.T) []string {
	t.Helper()
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Fatalf("unshare (util-linux) is needed: %v", err)
	}
	return []string{unshare, "-m", "--propagation", "private"}
}

// goFieldNames matches the Go names of nsjail.Options' fields of two
// words or more (NoCgroup, CgroupParent, ...), which no message for a
// person may carry: front ends spell them as flags or keys.
var goFieldNames = func() *regexp.Regexp {
	var names []string
	typ := reflect.TypeOf(nsjail.Options{})
	for i := range typ.NumField() {
		if f := typ.Field(i); f.IsExported() && regexp.MustCompile(`^[A-Z][a-z]+[A-Z]`).MatchString(f.Name) {
			names = append(names, f.Name)
		}
	}
	return regexp.MustCompile(`\b(` + strings.Join(names, "|") + `)\b`)
}()

// A server whose cgroup mounts turn read-only under it (so every run
// fails): /healthz goes from 200 to 503 naming the failed check and the
// fix (--no-cgroup), ?live stays 200, and neither the answer nor the
// server's log names a Go field.
func TestHealthzFailsWhenRunsCannotWork(t *testing.T) {
	s := startAPIVia(t, privateMounts(t), "--http-health-interval", "100ms")
	code, h, body := getHealth(t, s, "/healthz")
	if code != http.StatusOK || h.Status != "ok" {
		t.Fatalf("a healthy server's /healthz: %d %s", code, body)
	}
	for _, name := range []string{"userns.create", "cgroup.probe", "python", "run"} {
		if c := h.check(name); c == nil || c.Status != doctor.OK {
			t.Errorf("a healthy server's check %s: %+v", name, c)
		}
	}

	nsenter := exec.Command("nsenter", "-t", strconv.Itoa(s.cmd.Process.Pid), "-m", "sh", "-c", readOnlyCgroups, "sh", "true")
	if out, err := nsenter.CombinedOutput(); err != nil {
		t.Fatalf("make the server's cgroup mounts read-only: %v\n%s", err, out)
	}
	deadline := time.Now().Add(20 * time.Second)
	for code == http.StatusOK && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
		code, h, body = getHealth(t, s, "/healthz")
	}
	if code != http.StatusServiceUnavailable || h.Status != "fail" {
		t.Fatalf("/healthz with read-only cgroups: %d %s", code, body)
	}
	failed := regexp.MustCompile(`^runs cannot work here: (cgroup\.\S+) failed: .* — fix: .*--no-cgroup`).FindStringSubmatch(h.Error)
	if failed == nil {
		t.Fatalf("the error does not name a cgroup check and --no-cgroup: %q", h.Error)
	}
	if c := h.check(failed[1]); c == nil || c.Status != doctor.Fail {
		t.Errorf("the error names %s, which the checks do not fail: %s", failed[1], body)
	}
	if c := h.check("cgroup.probe"); c == nil || c.Status != doctor.Fail {
		t.Errorf("the probe's run group was made: %+v", c)
	}
	if m := goFieldNames.FindString(body); m != "" {
		t.Errorf("/healthz names the Go field %s: %s", m, body)
	}
	if code, _, body := getHealth(t, s, "/healthz?live"); code != http.StatusOK {
		t.Errorf("/healthz?live while runs cannot work: %d %s (liveness must not restart the server for its host)", code, body)
	}

	// A cold run, after which the jails started ahead fail too, and a
	// run forked from a zygote, whose template fails: each says so in
	// the log.
	for _, task := range []string{`{"code": "print(1)"}`, `{"code": "print(1)", "zygote": true}`} {
		if r := s.runTask(t, task); r.Status != result.StatusSandboxError {
			t.Errorf("%s with read-only cgroups: %s", task, r.Status)
		}
	}
	waitLog(t, s, "start a jail ahead of its run")
	logged := waitLog(t, s, "start a template")
	for _, line := range strings.Split(logged, "\n") {
		if m := goFieldNames.FindString(line); m != "" {
			t.Errorf("the server's log names the Go field %s: %s", m, line)
		}
	}
	if !strings.Contains(logged, "health: runs cannot work here: cgroup.") || !strings.Contains(logged, "--no-cgroup") {
		t.Errorf("the log does not say that runs cannot work, with the flag that fixes it:\n%s", logged)
	}
}

// waitLog waits until the server's log says want, and returns it.
func waitLog(t *testing.T, s *apiServer, want string) string {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if log := s.log.String(); strings.Contains(log, want) {
			return log
		}
	}
	t.Fatalf("the server's log never said %q:\n%s", want, s.log)
	return ""
}

// With --no-cgroup, the documented variant for hosts without a writable
// cgroup, the same host is healthy: no cgroup check is required, and the
// run check's run works.
func TestHealthzNoCgroupVariant(t *testing.T) {
	s := startAPIVia(t, append(privateMounts(t), "sh", "-c", readOnlyCgroups, "sh"), "--no-cgroup")
	code, h, body := getHealth(t, s, "/healthz")
	if code != http.StatusOK || h.Status != "ok" {
		t.Fatalf("/healthz of a --no-cgroup server with read-only cgroups: %d %s", code, body)
	}
	if c := h.check("run"); c == nil || c.Status != doctor.OK || !strings.Contains(c.Detail, "cgroup none") {
		t.Errorf("the run check: %+v", c)
	}
	if c := h.check("cgroup.probe"); c != nil {
		t.Errorf("a server without cgroups probed one: %+v", c)
	}
	if r := s.runTask(t, `{"code": "print(1)"}`); r.Status != result.StatusOK {
		t.Errorf("a run: %s %v", r.Status, deref(r.Error))
	}
}

// A report stands for --http-health-interval: callers that come
// together share one check, and a later caller gets the same report.
func TestHealthzCached(t *testing.T) {
	s := startAPI(t)
	var wg sync.WaitGroup
	reports := make([]healthReport, 16)
	for i := range reports {
		wg.Go(func() {
			resp, err := http.Get(s.url + "/healthz")
			if err != nil {
				t.Error(err)
				return
			}
			defer resp.Body.Close()
			if err := json.NewDecoder(resp.Body).Decode(&reports[i]); err != nil || resp.StatusCode != http.StatusOK {
				t.Errorf("/healthz: %d %v", resp.StatusCode, err)
			}
		})
	}
	wg.Wait()
	_, later, _ := getHealth(t, s, "/healthz")
	for _, h := range append(reports, later) {
		if h.CheckedAt.IsZero() || !h.CheckedAt.Equal(reports[0].CheckedAt) {
			t.Fatalf("reports of different checks: %v and %v (one check per interval, shared)", h.CheckedAt, reports[0].CheckedAt)
		}
	}
}

// A server with a token tells callers without it each check's name,
// status and fix, not the details, which name the host's paths and
// kernel; the token's holder gets them.
func TestHealthzDetailsNeedTheToken(t *testing.T) {
	tokenFile := filepath.Join(t.TempDir(), "token")
	token := "0123456789abcdef0123456789abcdef"
	os.WriteFile(tokenFile, []byte(token+"\n"), 0o600)
	s := startAPI(t, "--http-token-file", tokenFile)
	for _, withToken := range []bool{false, true} {
		var header http.Header
		if withToken {
			header = http.Header{"Authorization": {"Bearer " + token}}
		}
		code, body := s.do(t, http.MethodGet, "/healthz", "", header)
		var h healthReport
		if err := json.Unmarshal(body, &h); err != nil || code != http.StatusOK || len(h.Checks) == 0 {
			t.Fatalf("/healthz (token %v): %d %s", withToken, code, body)
		}
		for _, c := range h.Checks {
			if (c.Detail != "") != withToken {
				t.Errorf("/healthz (token %v): check %s has detail %q", withToken, c.Name, c.Detail)
			}
		}
	}
}

// Outside a server too: a batch forking from zygotes on a host whose
// cgroup mounts are read-only logs its templates' failure with the flag
// that fixes it, not the Go field.
func TestBatchZygoteLogNamesFlags(t *testing.T) {
	argv := append(privateMounts(t), "sh", "-c", readOnlyCgroups, "sh", microbox, "batch", "--zygote")
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), "MICROBOX_ROOTFS=")
	cmd.Stdin = strings.NewReader(`{"code": "print(1)"}` + "\n")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, _ := cmd.Output()
	if !strings.Contains(string(out), `"status":"sandbox_error"`) {
		t.Fatalf("a batch's run with read-only cgroups: %s\n%s", out, stderr.String())
	}
	log := stderr.String()
	if !strings.Contains(log, "start a template") || !strings.Contains(log, "--no-cgroup") {
		t.Errorf("the batch's log does not say the template failed, with the flag that fixes it:\n%s", log)
	}
	if m := goFieldNames.FindString(log); m != "" {
		t.Errorf("the batch's log names the Go field %s:\n%s", m, log)
	}
}

// A server whose root loses its interpreter after start (here: the bind
// of /usr that made it goes away) answers 503 naming the python check.
func TestHealthzRootGone(t *testing.T) {
	root := t.TempDir()
	os.Chmod(root, 0o755)
	os.Chmod(filepath.Dir(root), 0o755) // the jail's user must reach it
	for _, d := range []string{"usr", "proc", "dev", "tmp", "etc"} {
		os.MkdirAll(filepath.Join(root, d), 0o755)
	}
	for _, l := range []string{"bin", "lib", "lib64"} {
		os.Symlink("usr/"+l, filepath.Join(root, l))
	}
	prefix := append(privateMounts(t), "sh", "-c", `mount --bind /usr "$0/usr" && exec "$@"`, root)
	s := startAPIVia(t, prefix, "--rootfs", root, "--http-health-interval", "100ms")
	if code, h, body := getHealth(t, s, "/healthz"); code != http.StatusOK || h.check("run") == nil {
		t.Fatalf("a healthy server's /healthz: %d %s", code, body)
	}
	if out, err := exec.Command("nsenter", "-t", strconv.Itoa(s.cmd.Process.Pid), "-m", "umount", filepath.Join(root, "usr")).CombinedOutput(); err != nil {
		t.Fatalf("unmount the root's /usr: %v\n%s", err, out)
	}
	code, h, body := http.StatusOK, healthReport{}, ""
	for deadline := time.Now().Add(20 * time.Second); code == http.StatusOK && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		code, h, body = getHealth(t, s, "/healthz")
	}
	if code != http.StatusServiceUnavailable || !strings.HasPrefix(h.Error, "runs cannot work here: python failed: ") || !strings.Contains(h.Error, "--rootfs") {
		t.Fatalf("/healthz after the root lost its python: %d %s", code, body)
	}
}
