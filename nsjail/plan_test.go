package nsjail

import (
	"encoding/binary"
	"strings"
	"testing"
	"time"
)

// decode reads a plan back into steps, the way nsinit/plan.c does.
func decode(t *testing.T, b []byte) [][]string {
	t.Helper()
	var steps [][]string
	for len(b) > 0 {
		n := binary.LittleEndian.Uint32(b)
		b = b[4:]
		var step []string
		for i := uint32(0); i < n; i++ {
			l := binary.LittleEndian.Uint32(b)
			step = append(step, string(b[4:4+l]))
			b = b[4+l:]
		}
		steps = append(steps, step)
	}
	return steps
}

func testSpec() *Spec {
	return &Spec{
		Argv:        []string{"/usr/bin/python3", "-c", "print(1)"},
		Env:         []string{"PATH=/usr/bin"},
		Workdir:     "/tmp",
		TmpfsSize:   64 << 20,
		Hostname:    "microbox",
		OutputLimit: 1 << 20,
		Timeout:     time.Second,
	}
}

func index(steps [][]string, want ...string) int {
	for i, s := range steps {
		if len(s) >= len(want) && strings.Join(s[:len(want)], "\x00") == strings.Join(want, "\x00") {
			return i
		}
	}
	return -1
}

// wholePlan is what PID 1 does for a run: the jail's mounts, then the
// run's part.
func wholePlan(t *testing.T, s *Spec, seccompBPF []byte) [][]string {
	t.Helper()
	mounts, err := mountPlan(s, hostIDs())
	if err != nil {
		t.Fatal(err)
	}
	run, _ := runPlan(s, hostIDs(), seccompBPF, false)
	return append(decode(t, mounts.buf.Bytes()), decode(t, run.buf.Bytes())...)
}

func TestPlanOrder(t *testing.T) {
	s := testSpec()
	s.Workdir = "/work"
	s.Files = []File{{Path: "/work/sub/data.csv", Data: []byte("a,b"), Mode: 0o644}}
	s.Seccomp = make([]byte, 16)
	steps := wholePlan(t, s, s.Seccomp)
	order := [][]string{
		{"bind", oldRoot + "/usr", newRoot + "/usr"}, // read-only /usr
		{"remount_ro", newRoot},                      // root read-only before scratch mounts
		{"mount", "proc", newRoot + "/proc"},
		{"mount", "tmpfs", newRoot + "/tmp"},
		{"mount", "tmpfs", newRoot + "/work"},
		{"chown", newRoot + "/work"}, // the working directory is the program's
		{"hostname"},
		{"pivot", ".", "."},
		{"umount", "."}, // the host is detached
		{"mkdir", "/work/sub"},
		{"file", "/work/sub/data.csv"}, // the run's files, in the jail's root
		{"chown", "/work/sub/data.csv"},
		{"seccomp"},
	}
	last := -1
	for _, want := range order {
		i := index(steps, want...)
		if i < 0 {
			t.Fatalf("no step %v in plan:\n%v", want, steps)
		}
		if i < last {
			t.Fatalf("step %v comes too early", want)
		}
		last = i
	}
	if i := index(steps, "bind", oldRoot+"/usr", newRoot+"/usr"); steps[i][3] != num(bindReadOnly) {
		t.Fatalf("/usr bound with flags %q", steps[i][3])
	}
	if index(steps, "mkdir", "/work") >= 0 {
		t.Fatal("the run's part makes the working directory again")
	}
}

// The jail part is what a jail started ahead of its run (Start) does
// before the run is known: the stage and the mounts (the namespaces and
// id maps are the spawner's). The run's part repeats none of it.
func TestJailPlan(t *testing.T) {
	ids := hostIDs()
	part := jailPlan(false, &plan{}).framed()
	if n := binary.LittleEndian.Uint32(part); int(n) != len(part)-4 {
		t.Fatalf("frame says %d bytes, part has %d", n, len(part)-4)
	}
	steps := decode(t, part[4:])
	order := [][]string{
		{"mount", "tmpfs", stage},
		{"pivot", stage, stage + oldRoot}, // host reachable under /oldroot
		{"loopback_up"},
	}
	last := -1
	for _, want := range order {
		i := index(steps, want...)
		if i < last || i < 0 {
			t.Fatalf("step %v missing or out of order in %v", want, steps)
		}
		last = i
	}
	if len(steps) != 6 {
		t.Fatalf("jail part has %d steps, want the stage's 5 and loopback_up: %v", len(steps), steps)
	}
	mounts, err := mountPlan(testSpec(), ids)
	if err != nil {
		t.Fatal(err)
	}
	withMounts := decode(t, jailPlan(false, mounts).buf.Bytes())
	if i := index(withMounts, "pivot", ".", "."); i < 0 || i < index(withMounts, "loopback_up") {
		t.Fatalf("the mounts are not in the jail part, after the stage: %v", withMounts)
	}
	runPart, _ := runPlan(testSpec(), ids, nil, false)
	run := decode(t, runPart.buf.Bytes())
	for _, name := range []string{"clone", "idmap", "loopback_up", "mount", "bind", "pivot", "umount"} {
		if index(run, name) >= 0 {
			t.Fatalf("the run part repeats %s: %v", name, run)
		}
	}
}

func TestPlanPreparedRoot(t *testing.T) {
	s := testSpec()
	s.RootDir = "/srv/root"
	steps := wholePlan(t, s, nil)
	if i := index(steps, "bind", oldRoot+"/srv/root", newRoot); i < 0 || steps[i][3] != num(bindReadOnly) {
		t.Fatalf("prepared root not bound read-only: %v", steps)
	}
	if index(steps, "file", newRoot+"/etc/passwd") >= 0 || index(steps, "seccomp") >= 0 {
		t.Fatal("a prepared root must be used as is, and no filter was asked for")
	}
}

func TestValidate(t *testing.T) {
	cases := []struct {
		name   string
		modify func(*Spec)
		want   string
	}{
		{"no program", func(s *Spec) { s.Argv = nil }, "nothing to run"},
		{"NUL in argument", func(s *Spec) { s.Argv = append(s.Argv, "a\x00b") }, "NUL"},
		{"bad env", func(s *Spec) { s.Env = []string{"NOEQUALS"} }, "KEY=VALUE"},
		{"relative workdir", func(s *Spec) { s.Workdir = "work" }, "absolute"},
		{"workdir hides the root", func(s *Spec) { s.Workdir = "/usr/lib" }, "hide"},
		{"file outside scratch", func(s *Spec) { s.Files = []File{{Path: "/etc/x"}} }, "outside the writable"},
		{"file with dotdot", func(s *Spec) { s.Files = []File{{Path: "/tmp/../etc/x"}} }, "clean"},
		{"no timeout", func(s *Spec) { s.Timeout = 0 }, "Timeout"},
		{"cpu time without cgroup", func(s *Spec) { s.CPUTime = time.Second }, "NoCgroup"},
		{"missing python", func(s *Spec) { s.Argv[0] = "/usr/bin/nope" }, "not found"},
		{"python outside /usr", func(s *Spec) { s.Argv[0] = "/proc/self/exe" }, "outside /usr"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := testSpec()
			c.modify(s)
			err := s.Validate()
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Validate() = %v, want an error mentioning %q", err, c.want)
			}
		})
	}
	if err := testSpec().Validate(); err != nil {
		t.Fatalf("a good spec: %v", err)
	}
}
