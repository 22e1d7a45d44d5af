package doctor

// The whole report, with its real run, is tested through the binary
// (cmd/microbox/doctor_test.go, and on cgroup v2 in the VM suite).

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/microbox/microbox/field"
	"github.com/microbox/microbox/nsjail"
)

func flagNames(f string) string {
	return map[string]string{"NoCgroup": "--no-cgroup", "Env": "--env", "Options": "the flags", "Seccomp": "--seccomp"}[f]
}

func TestPrint(t *testing.T) {
	r := &Report{OK: false, Checks: []Check{
		{Name: "host", Status: OK, Detail: "Linux 6.1"},
		{Name: "cgroup.delegation", Status: Fail, Detail: "not delegated", Fix: "pass --no-cgroup"},
	}}
	var b bytes.Buffer
	r.Print(&b)
	want := "ok    host                 Linux 6.1\n" +
		"fail  cgroup.delegation    not delegated — fix: pass --no-cgroup\n" +
		"doctor: runs would fail on this host; see the fixes above\n"
	if b.String() != want {
		t.Fatalf("text report\n%s\nwant\n%s", b.String(), want)
	}
	r.OK = true
	b.Reset()
	r.Print(&b)
	if !strings.HasSuffix(b.String(), "\ndoctor: runs work on this host\n") {
		t.Fatalf("verdict of a passing report: %q", b.String())
	}
}

// doctor --json's shape: a check without a fix has no fix key.
func TestReportJSON(t *testing.T) {
	out, _ := json.Marshal(&Report{OK: true, Checks: []Check{{Name: "host", Status: OK, Detail: "d"}, {Name: "x", Status: Warn, Detail: "e", Fix: "f"}}})
	want := `{"ok":true,"checks":[{"name":"host","status":"ok","detail":"d"},{"name":"x","status":"warn","detail":"e","fix":"f"}]}`
	if string(out) != want {
		t.Fatalf("JSON %s\nwant %s", out, want)
	}
}

// Options no run could have are an error naming the field, before any
// check.
func TestRunRefusesBadOptions(t *testing.T) {
	o := nsjail.Defaults()
	o.Memory = 0
	rep, err := Run(o)
	if rep != nil || !field.Is(err) || !strings.HasPrefix(err.Error(), "Memory") {
		t.Fatalf("report %v, error %v; want a Memory error", rep, err)
	}
}

// The report names the options' fields as the caller does; without
// names, by their Go names.
func TestFieldsSpelled(t *testing.T) {
	d := &doctor{opts: nsjail.Options{FieldNames: flagNames}}
	d.checkCgroups()
	if got := d.report.Checks[0].Detail; !strings.HasSuffix(got, ", not used (--no-cgroup: no memory, CPU or pids limits)") {
		t.Errorf("cgroup.mode: %q", got)
	}
	d = &doctor{}
	d.checkCgroups()
	if got := d.report.Checks[0].Detail; !strings.Contains(got, "(NoCgroup: ") {
		t.Errorf("cgroup.mode without names: %q", got)
	}
}

// A run its options cannot build is a failed run check, not a crash, and
// nothing runs.
func TestRunCheckOfUnbuildableOptions(t *testing.T) {
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Skip("the options' root needs the host's python3")
	}
	o := nsjail.Defaults().WithoutCgroup()
	o.Env, o.FieldNames = []string{"BAD"}, flagNames
	if err := o.Prepare(); err != nil {
		t.Fatal(err)
	}
	d := &doctor{opts: o}
	d.checkRun()
	want := Check{Name: "run", Status: Fail, Detail: `--env "BAD": write KEY=VALUE`, Fix: "fix the flags"}
	if len(d.report.Checks) != 1 || d.report.Checks[0] != want {
		t.Fatalf("checks %+v, want only %+v", d.report.Checks, want)
	}
}

func TestKernelAtLeast(t *testing.T) {
	for _, c := range []struct {
		release      string
		major, minor int
		want         bool
	}{
		{"6.1.0-18-amd64", 5, 19, true},
		{"5.19.0", 5, 19, true},
		{"5.15.0-91-generic", 5, 19, false},
		{"4.19.0", 5, 7, false},
		{"unknown", 5, 7, false},
	} {
		if got := kernelAtLeast(c.release, c.major, c.minor); got != c.want {
			t.Errorf("kernelAtLeast(%q, %d, %d) = %v", c.release, c.major, c.minor, got)
		}
	}
}

// Each restriction of unprivileged user namespaces: absent, lifted, set
// (which binds only others than root).
func TestRestrictions(t *testing.T) {
	procSys = t.TempDir() + "/"
	defer func() { procSys = "/proc/sys/" }()
	os.Mkdir(procSys+"kernel", 0o755)
	check := func(root bool) []Check {
		d := &doctor{}
		for _, r := range restrictions() {
			d.checkRestriction(r, root)
		}
		return d.report.Checks
	}
	want := []string{
		"ok kernel.unprivileged_userns_clone not present (no Debian/Ubuntu restriction)",
		"ok kernel.apparmor_restrict_unprivileged_userns not present",
	}
	compare := func(what string, got []Check) {
		t.Helper()
		for i, c := range got {
			if line := string(c.Status) + " " + c.Detail; line != want[i] || (c.Status == Fail) != (c.Fix != "") {
				t.Errorf("%s: %q (fix %q), want %q", what, line, c.Fix, want[i])
			}
		}
	}
	compare("absent", check(false))
	os.WriteFile(procSys+"kernel/unprivileged_userns_clone", []byte("1\n"), 0o644)
	os.WriteFile(procSys+"kernel/apparmor_restrict_unprivileged_userns", []byte("0\n"), 0o644)
	want = []string{"ok kernel.unprivileged_userns_clone = 1", "ok kernel.apparmor_restrict_unprivileged_userns = 0"}
	compare("lifted", check(false))
	os.WriteFile(procSys+"kernel/unprivileged_userns_clone", []byte("0\n"), 0o644)
	os.WriteFile(procSys+"kernel/apparmor_restrict_unprivileged_userns", []byte("1\n"), 0o644)
	want = []string{"ok kernel.unprivileged_userns_clone = 0, which does not bind root",
		"ok kernel.apparmor_restrict_unprivileged_userns = 1, which does not bind root"}
	compare("set, as root", check(true))
	want = []string{"fail kernel.unprivileged_userns_clone = 0: unprivileged users may not create user namespaces",
		"fail kernel.apparmor_restrict_unprivileged_userns = 1: AppArmor denies unprivileged user namespaces their capabilities, so the jail cannot mount"}
	compare("set", check(false))
}
