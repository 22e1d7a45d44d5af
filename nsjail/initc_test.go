package nsjail

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/microbox/microbox/internal/csource"
	"github.com/microbox/microbox/result"
)

// nsinitHeaders reads the headers in which nsinit declares its protocols.
func nsinitHeaders(t *testing.T) map[string]*csource.File {
	t.Helper()
	files := map[string]*csource.File{}
	for _, name := range []string{"plan.h", "status.h", "spawner.h", "zygote.h"} {
		f, err := csource.Read(filepath.Join("nsinit", name))
		if err != nil {
			t.Fatal(err)
		}
		files[name] = f
	}
	return files
}

// The C init runs before Go, and the two sides of each protocol are
// declared once per language: a header of nsinit's for C, a Go file for Go.
// They must stay equal, or jails fail at run time (a plan read from the
// wrong descriptor, a bind made writable, a status line misread).
func TestInitCConstants(t *testing.T) {
	h := nsinitHeaders(t)
	ints := map[string]map[string]int64{
		"plan.h":   {"PLAN_FD": planFD, "BIND_READONLY": bindReadOnly, "BIND_OPTIONAL": bindOptional},
		"status.h": {"STATUS_FD": statusFD, "EXIT_SANDBOX_ERROR": result.ExitSandboxError},
		"spawner.h": {"SPAWNER_FD": spawnerFD, "SYNC_FD": syncFD, "SPAWN_FDS": spawnFDs, "LOCK_FD": spawnFDs,
			"REQUEST_STRINGS": requestStrings, "MAX_REQUEST": maxRequest, "REPLY_ERROR_MAX": replyErrorMax,
			"MAX_LOCKS": maxLocks, "MAX_TASKS": maxTasks},
	}
	for file, want := range ints {
		for name, w := range want {
			if got, err := h[file].Int(name); err != nil || got != w {
				t.Errorf("%s's %s is %d (%v), Go's %d", file, name, got, err, w)
			}
		}
	}
	strs := map[string]map[string]string{
		"status.h": {"STATUS_ERROR": statusError, "STATUS_PHASE": statusPhase, "STATUS_READY": statusReady,
			"STATUS_START": statusStart, "STATUS_EXIT": statusExit, "STATUS_WALL": result.LimitWall},
		"spawner.h": {"INIT_ENV": initEnv, "EXTRA_CGROUP": string(rune(extraCgroup)), "EXTRA_LOCK": string(rune(extraLock)), "GO": string(rune(goByte))},
		"zygote.h":  {"ZYGOTE_HELLO": zygoteHello, "ZYGOTE_GO": zygoteGo, "ZYGOTE_READY": zygoteReady},
	}
	for file, want := range strs {
		for name, w := range want {
			if got, err := h[file].String(name); err != nil || got != w {
				t.Errorf("%s's %s is %q (%v), Go's %q", file, name, got, err, w)
			}
		}
	}
}

// define is a #define of a name, with a value or none.
var define = regexp.MustCompile(`(?m)^[ \t]*#[ \t]*define[ \t]+([A-Za-z_]\w*)`)

// Each name nsinit's C defines, it defines in one file: a protocol's
// value in its header, not again in the file that uses it.
func TestNsinitDefinesOnce(t *testing.T) {
	files, err := filepath.Glob("nsinit/*.[ch]")
	if err != nil || len(files) == 0 {
		t.Fatalf("nsinit's C: %v %v", files, err)
	}
	where := map[string][]string{}
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range define.FindAllStringSubmatch(string(src), -1) {
			where[m[1]] = append(where[m[1]], f)
		}
	}
	for name, in := range where {
		if len(in) > 1 && name != "_GNU_SOURCE" && !strings.HasPrefix(name, "NSINIT_") {
			t.Errorf("%s is defined in %v; a header should declare it once", name, in)
		}
	}
}

// stepDecl is one step of plan.h's PLAN_STEPS: X(name, nargs).
var stepDecl = regexp.MustCompile(`X\((\w+), (\d+)\)`)

// programDecl is plan.h's PROGRAM_STEPS: X(name) ...
var programDecl = regexp.MustCompile(`#define PROGRAM_STEPS\(X\) ((?:X\(\w+\) ?)+)`)

// A prepared program takes only PROGRAM_STEPS from its part of the plan
// (pid1.c refuses any other), and plan.go's launch part holds to
// programSteps: the two lists are one.
func TestProgramStepsDeclared(t *testing.T) {
	h, err := os.ReadFile("nsinit/plan.h")
	if err != nil {
		t.Fatal(err)
	}
	m := programDecl.FindStringSubmatch(string(h))
	if m == nil {
		t.Fatal("plan.h declares no PROGRAM_STEPS")
	}
	var declared []string
	for _, x := range regexp.MustCompile(`X\((\w+)\)`).FindAllStringSubmatch(m[1], -1) {
		declared = append(declared, x[1])
	}
	if !slices.Equal(declared, programSteps) {
		t.Errorf("plan.h's PROGRAM_STEPS are %v, plan.go's programSteps %v", declared, programSteps)
	}
}

// interpreted is a step plan.c handles: !strcmp(op, "name").
var interpreted = regexp.MustCompile(`!strcmp\(op, "(\w+)"\)`)

// The plan's steps are declared once per side, plan.h's PLAN_STEPS for C
// (whose parse_plan refuses any other) and planSteps for Go; each
// declared step must mean something to plan.c's interpreter.
func TestPlanStepsDeclared(t *testing.T) {
	h, err := os.ReadFile("nsinit/plan.h")
	if err != nil {
		t.Fatal(err)
	}
	declared := map[string]int{}
	for _, m := range stepDecl.FindAllStringSubmatch(string(h), -1) {
		declared[m[1]], _ = strconv.Atoi(m[2])
	}
	if !maps.Equal(declared, planSteps) {
		t.Errorf("plan.h's PLAN_STEPS are %v, plan.go's planSteps %v", declared, planSteps)
	}
	c, err := csource.Read("nsinit/plan.c")
	if err != nil {
		t.Fatal(err)
	}
	handled := map[string]int{}
	for _, fn := range []string{"run_step", "collect", "parse_plan"} {
		body, err := c.Body(fn)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range interpreted.FindAllStringSubmatch(body, -1) {
			handled[m[1]]++
		}
		if fn == "parse_plan" && strings.Contains(body, `!strcmp(a[0].p, "trace")`) {
			handled["trace"]++
		}
	}
	for name := range declared {
		if handled[name] != 1 {
			t.Errorf("plan.c interprets step %s in %d places, want 1", name, handled[name])
		}
	}
	for name := range handled {
		if _, ok := declared[name]; !ok {
			t.Errorf("plan.c interprets step %s, which plan.h does not declare", name)
		}
	}
}

// Every plan the Go side builds is made of declared steps, each with the
// number of arguments PID 1 takes: cold runs' (root-run and rootless, with
// and without trace, files, root files and a filter), a template's, a
// zygote child's.
func TestPlansUseDeclaredSteps(t *testing.T) {
	root := idMapping{hostUID: HostIDBase, hostGID: HostIDBase, size: 65536, programUID: ProgramUID, programGID: ProgramUID}
	rootless := idMapping{rootless: true, hostUID: 1000, hostGID: 1000, size: 1, programUID: 1000, programGID: 1000}
	full := testSpec()
	full.Trace, full.Workdir = true, "/work"
	full.Files = []File{{Path: "/work/a/b.txt", Data: []byte("x"), Mode: 0o644}}
	full.RootFiles = []File{{Path: RootFilesDir + "/f", Data: []byte("y"), Mode: 0o444}}
	full.Seccomp = make([]byte, 16)
	template := templateSpec(testSpec(), []string{"/usr/bin/python3"})
	var plans []*plan
	for _, ids := range []idMapping{root, rootless} {
		for _, s := range []*Spec{testSpec(), full, template} {
			mounts, err := mountPlan(s, ids)
			if err != nil {
				t.Fatal(err)
			}
			run, _ := runPlan(s, ids, s.Seccomp, false)
			plans = append(plans, jailPlan(s.Trace, mounts), run)
			if prepared := preparedPlan(s, ids); prepared != nil {
				run, launch := runPlan(s, ids, s.Seccomp, true)
				plans = append(plans, prepared, run, launch)
				for _, step := range decode(t, launch.buf.Bytes()) {
					if !slices.Contains(programSteps, step[0]) {
						t.Errorf("the program's part has step %q, not one of programSteps", step)
					}
				}
			}
		}
		plans = append(plans, zygotePlan(full, ids))
	}
	seen := map[string]bool{}
	for _, p := range plans {
		for _, step := range decode(t, p.buf.Bytes()) {
			n, ok := planSteps[step[0]]
			switch {
			case !ok:
				t.Errorf("plan step %q is not declared (planSteps, nsinit/plan.h)", step)
			case len(step)-1 != n:
				t.Errorf("plan step %q has %d args, declared %d", step, len(step)-1, n)
			}
			seen[step[0]] = true
		}
	}
	if len(seen) < len(planSteps)-1 { // all but nested_userns or keep_root's other
		t.Errorf("the plans used only %v of %d declared steps", slices.Sorted(maps.Keys(seen)), len(planSteps))
	}
}

// zygotePy is zygote.py's declarations of its protocol, as Python reads
// them (bytes as strings).
func zygotePy(t *testing.T) map[string]any {
	t.Helper()
	const dump = `import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("zygote", sys.argv[1])
m = importlib.util.module_from_spec(spec)
spec.loader.exec_module(m)
print(json.dumps({k: v.decode() if isinstance(v, bytes) else v for k, v in vars(m).items()
                  if k.isupper() and isinstance(v, (int, str, bytes))}))`
	out, err := exec.Command("/usr/bin/python3", "-c", dump, "zygote.py").Output()
	if err != nil {
		t.Fatalf("read zygote.py's constants: %v", err)
	}
	var consts map[string]any
	if err := json.Unmarshal(out, &consts); err != nil {
		t.Fatal(err)
	}
	return consts
}

// A zygote's run has three sides, Go, Python and C, and each declares the
// protocol once: zygote.py's constants must be zygote.h's (and those of
// the init's other headers it uses), and Go's.
func TestZygoteProtocolDeclared(t *testing.T) {
	h := nsinitHeaders(t)
	py := zygotePy(t)
	for file, names := range map[string][]string{
		"zygote.h":  {"ZYGOTE_INIT", "ZYGOTE_HELLO", "ZYGOTE_GO", "ZYGOTE_READY", "ZYGOTE_GO_BYTE", "ZYGOTE_FAILED", "MAX_JOIN"},
		"status.h":  {"STATUS_ERROR", "EXIT_SANDBOX_ERROR"},
		"spawner.h": {"INIT_ENV"},
	} {
		for _, name := range names {
			c, err := h[file].Define(name)
			if err != nil {
				t.Error(err)
				continue
			}
			if s, err := strconv.Unquote(c); err == nil {
				c = s
			} else if n, err := h[file].Int(name); err == nil {
				c = strconv.FormatInt(n, 10)
			}
			if got := pyString(py[name]); got != c {
				t.Errorf("zygote.py's %s is %q, %s's %q", name, got, file, c)
			}
		}
	}
	for name, want := range map[string]string{"ZYGOTE_HELLO": zygoteHello, "ZYGOTE_GO": zygoteGo, "ZYGOTE_READY": zygoteReady,
		"STATUS_ERROR": statusError, "INIT_ENV": initEnv} {
		if got := pyString(py[name]); got != want {
			t.Errorf("zygote.py's %s is %q, Go's %q", name, got, want)
		}
	}
}

// pyString is a constant of zygote.py's as C writes it: a number in
// decimal, a string or bytes as they are; "<none>" when it is missing.
func pyString(v any) string {
	switch v := v.(type) {
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	case string:
		return v
	}
	return "<none>"
}

// pyKey is a key zygote.py reads from, or writes to, a JSON message.
var pyKey = map[string]*regexp.Regexp{
	"childRequest":   regexp.MustCompile(`\breq\["(\w+)"\]`),
	"runRequest":     regexp.MustCompile(`\bspec\["(\w+)"\]`),
	"templateConfig": regexp.MustCompile(`\bcfg\.get\("(\w+)"\)`),
	"templateReady":  regexp.MustCompile(`\bsend\(ctl, \{"(\w+)"`),
}

// The zygote's JSON messages have one shape on each side: the keys
// zygote.py reads (or, for the template's answer, writes) are the Go
// types' fields, no more and no fewer.
func TestZygoteMessagesDeclared(t *testing.T) {
	src, err := os.ReadFile("zygote.py")
	if err != nil {
		t.Fatal(err)
	}
	for name, typ := range map[string]reflect.Type{
		"childRequest": reflect.TypeFor[childRequest](), "runRequest": reflect.TypeFor[runRequest](),
		"templateConfig": reflect.TypeFor[templateConfig](), "templateReady": reflect.TypeFor[templateReady](),
	} {
		var goKeys []string
		for i := range typ.NumField() {
			tag, _, _ := strings.Cut(typ.Field(i).Tag.Get("json"), ",")
			goKeys = append(goKeys, tag)
		}
		pyKeys := map[string]bool{}
		for _, m := range pyKey[name].FindAllStringSubmatch(string(src), -1) {
			pyKeys[m[1]] = true
		}
		if got, want := slices.Sorted(maps.Keys(pyKeys)), slices.Sorted(slices.Values(goKeys)); !slices.Equal(got, want) {
			t.Errorf("zygote.py's %s has the keys %q, Go's %q", name, got, want)
		}
	}
}

// PID 1 refuses a part of the plan with a step plan.h does not declare,
// or with another number of args, before it carries out any step of it:
// the chdir that would fail first is never tried.
func TestPlanRefusedBeforeItRuns(t *testing.T) {
	needNamespaces(t)
	sp := testSpawner(t)
	const missing = "/no-such-dir-of-initc-test"
	for _, c := range []struct {
		step []string
		want string
	}{
		{nil, "chdir " + missing + ": "}, // the chdir alone fails, when it runs
		{[]string{"bogus"}, "plan: unknown step bogus with 0 args"},
		{[]string{"mkdir", "/x"}, "plan: mkdir takes 2 args"},
	} {
		mounts := &plan{}
		mounts.step("chdir", missing)
		if c.step != nil {
			mounts.step(c.step[0], c.step[1:]...)
		}
		j, err := sp.Start(Shape{mounts: mounts})
		if err == nil {
			j.Close()
			t.Fatalf("a jail started with the plan step %q", c.step)
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("plan step %q: %v, want %q", c.step, err, c.want)
		}
	}
}

// PID 1 refuses a seccomp stack that does not add up (seccomp.Programs'
// format) instead of starting the program under fewer filters, or under
// bytes that are not the filters.
func TestPlanBadSeccompStack(t *testing.T) {
	needNamespaces(t)
	sp := testSpawner(t)
	header := func(n, pad uint32) []byte {
		return binary.NativeEndian.AppendUint32(binary.NativeEndian.AppendUint32(nil, n), pad)
	}
	retAllow := binary.NativeEndian.AppendUint32([]byte{0x06, 0, 0, 0}, 0x7fff0000)
	one := append(header(1, 0), retAllow...)
	for _, c := range []struct {
		name  string
		stack []byte
		want  string
	}{
		{"empty program", header(0, 0), "plan: seccomp program of 0 instructions"},
		{"truncated program", append(header(2, 0), retAllow...), "plan: seccomp program of 2 instructions"},
		{"bad header", append(header(1, 7), retAllow...), "plan: seccomp program of 1 instructions"},
		{"truncated header", append(slices.Clone(one), 1, 0, 0), "plan: seccomp stack truncated"},
		{"five programs", bytes.Repeat(one, 5), "plan: more than 4 seccomp filters"},
	} {
		mounts := &plan{}
		mounts.stepBytes("seccomp", c.stack)
		j, err := sp.Start(Shape{mounts: mounts})
		if err == nil {
			j.Close()
			t.Fatalf("%s: a jail started", c.name)
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
}

// A prepared jail (Shape.program: pid 2 forked and sandboxed before its
// run) holds its plan's last two parts to their roles: PID 1 refuses a
// run's part that sets what pid 2 has applied already, and pid 2 a step of
// its own part that is not one of PROGRAM_STEPS. Either way the jail ends
// with the error, and no program starts.
func TestPreparedPlanRefused(t *testing.T) {
	needNamespaces(t)
	launch := func(extra ...string) *plan {
		p := &plan{}
		if extra != nil {
			p.step(extra[0], extra[1:]...)
		}
		p.step("path", "/usr/bin/true")
		p.step("arg", "true")
		return p
	}
	timeout := func(extra ...string) *plan {
		p := &plan{}
		if extra != nil {
			p.step(extra[0], extra[1:]...)
		}
		p.step("timeout", "1000000000")
		return p
	}
	for _, c := range []struct {
		name         string
		run, program *plan
		want         string
	}{
		{"user in the run's part", timeout("user", "0", "0", "1"), launch(), "plan: step user in the run's part of a prepared jail"},
		{"cwd in the run's part", timeout("cwd", "/"), launch(), "plan: step cwd in the run's part of a prepared jail"},
		{"path in the run's part", timeout("path", "/usr/bin/true"), launch(), "plan: step path in the run's part of a prepared jail"},
		{"mount in the run's part", timeout("mount", "tmpfs", "/tmp", "tmpfs", "0", ""), launch(), "plan: step mount in the run's part of a prepared jail"},
		{"mount in the program's part", timeout(), launch("mount", "tmpfs", "/tmp", "tmpfs", "0", ""), "plan: step mount in the program's part"},
		{"rlimit in the program's part", timeout(), launch("rlimit", "7", "8", "8"), "plan: step rlimit in the program's part"},
	} {
		j := startFor(t, testSpec())
		if j.shape.program == nil {
			t.Fatal("the test spec's jail is not prepared")
		}
		sv := j.sv
		if err := writeAll(sv.pipes.planW, append(c.run.framed(), c.program.framed()...)); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		var errs []string
		for ev := range sv.events {
			switch ev.kind {
			case statusError:
				errs = append(errs, strings.Join(ev.args, " "))
			case statusStart:
				if !strings.Contains(c.name, "program's part") { // pid 2 failed in its own part: PID 1 saw no exec error
					t.Errorf("%s: the program started", c.name)
				}
			}
		}
		if !slices.ContainsFunc(errs, func(e string) bool { return strings.Contains(e, c.want) }) {
			t.Errorf("%s: errors %q, want %q", c.name, errs, c.want)
		}
		j.Close()
	}
}
