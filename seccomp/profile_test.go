package seccomp

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/opencontainers/runtime-spec/specs-go"
	libseccomp "github.com/seccomp/libseccomp-golang"
)

// dockerStyle is a profile we wrote in Docker's dialect (defaultErrnoRet,
// archMap, comments, includes and excludes by caps, arches and minKernel,
// argument rules with every operator, an ERRNO 38 clone3 rule), for a
// CPython program: print, imports, threads, subprocess.
const dockerStyle = "testdata/docker-style.json"

// TestLoadDockerStyle loads testdata/docker-style.json, our own profile in
// Docker's dialect, which uses every field of that dialect the loader
// supports, and checks which of its rules apply on this machine to a
// program without capabilities. (TestFilterDockerStyle runs it.)
func TestLoadDockerStyle(t *testing.T) {
	p, err := LoadProfile(dockerStyle)
	if err != nil {
		t.Fatal(err)
	}
	prog, err := p.Compile()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: %d rules apply here, %d BPF instructions", dockerStyle, len(p.Spec.Syscalls), len(prog)/8)
	rules := func(name string) []specs.LinuxSyscall {
		var out []specs.LinuxSyscall
		for _, r := range p.Spec.Syscalls {
			if slices.Contains(r.Names, name) {
				out = append(out, r)
			}
		}
		return out
	}
	for _, name := range []string{"mount", "unshare", "setns", "chroot"} {
		if rs := rules(name); len(rs) > 0 {
			t.Errorf("%s: a rule that includes a capability applies (%+v), but the program holds none", name, rs)
		}
	}
	if rs := rules("clone"); len(rs) != 1 || len(rs[0].Args) != 1 || rs[0].Args[0].Op != specs.OpMaskedEqual {
		t.Errorf("clone rules %+v: want only the masked one (excludes CAP_SYS_ADMIN must not skip it, includes CAP_SYS_ADMIN must)", rs)
	}
	if runtime.GOARCH == "amd64" {
		if len(rules("arch_prctl")) != 1 {
			t.Error("the rule that includes amd64 (arch_prctl) was dropped")
		}
		if rs := rules("modify_ldt"); len(rs) != 1 || rs[0].Action != specs.ActErrno {
			t.Errorf("modify_ldt rules %+v: want only the refusal (the allow rule excludes amd64)", rs)
		}
	}
	if len(rules("s390_runtime_instr")) > 0 {
		t.Error("the rule that includes only s390 applies here")
	}
	for _, name := range []string{"pidfd_open", "openat2", "faccessat2", "close_range"} {
		if len(rules(name)) != 1 {
			t.Errorf("%s: a rule whose minKernel (5.9 at most) this kernel meets was dropped", name)
		}
	}
	if rs := rules("userfaultfd"); len(rs) != 1 || rs[0].Action != specs.ActErrno {
		t.Errorf("userfaultfd rules %+v: want only the refusal (the allow rule includes minKernel 99.0)", rs)
	}
	if rs := rules("uselib"); len(rs) != 1 || rs[0].Action != specs.ActErrno {
		t.Errorf("uselib rules %+v: want only the refusal (the allow rule excludes minKernel 3.0)", rs)
	}
	if rs := rules("clone3"); len(rs) != 1 || rs[0].Action != specs.ActErrno || rs[0].ErrnoRet == nil || *rs[0].ErrnoRet != 38 {
		t.Errorf("clone3 rules %+v, want one ERRNO 38", rs)
	}
	// Every operator of the format appears, so each is compiled and (in
	// TestFilterDockerStyle) probed.
	ops := map[specs.LinuxSeccompOperator]bool{}
	for _, r := range p.Spec.Syscalls {
		for _, a := range r.Args {
			ops[a.Op] = true
		}
	}
	for _, op := range []specs.LinuxSeccompOperator{specs.OpEqualTo, specs.OpNotEqual, specs.OpLessThan,
		specs.OpLessEqual, specs.OpGreaterThan, specs.OpGreaterEqual, specs.OpMaskedEqual} {
		if !ops[op] {
			t.Errorf("no rule uses %s", op)
		}
	}
	// Catch typos: names this libseccomp does not know would silently
	// fall to the default action. (The s390-only rule names calls of
	// another architecture and no longer applies here.)
	for _, r := range p.Spec.Syscalls {
		for _, name := range r.Names {
			if _, err := libseccomp.GetSyscallFromName(name); err != nil {
				t.Errorf("%s: %v", name, err)
			}
		}
	}
}

func TestLoadProfileRejects(t *testing.T) {
	const execve = `{"names": ["execve"], "action": "SCMP_ACT_ALLOW"}`
	for _, c := range []struct{ json, want string }{
		{`{"defaultAction": "SCMP_ACT_ALLOW", "bogus": 1}`, `"bogus"`},
		{`{"defaultAction": "SCMP_ACT_ALLOW", "syscalls": [{"names": ["getpid"], "action": "SCMP_ACT_ERRNO", "errno": 1}]}`, `"errno"`},
		{`{"defaultAction": "SCMP_ACT_ALLOW", "syscalls": [{"names": ["getpid"], "action": "SCMP_ACT_ERRNO", "args": [{"index": 0, "value": 1, "op": "SCMP_CMP_EQ", "mask": 2}]}]}`, `"mask"`},
		{`{"defaultAction": "SCMP_ACT_ALLOW", "flags": ["SECCOMP_FILTER_FLAG_LOG"]}`, "flags"},
		{`{"defaultAction": "SCMP_ACT_ALLOW", "listenerPath": "/run/agent.sock"}`, "listenerPath"},
		{`{"defaultAction": "SCMP_ACT_TRACE"}`, "SCMP_ACT_TRACE"},
		{`{"defaultAction": "SCMP_ACT_ALLOW", "syscalls": [{"names": ["getpid"], "action": "SCMP_ACT_NOTIFY"}]}`, "SCMP_ACT_NOTIFY"},
		{`{"defaultAction": "SCMP_ACT_ALLOW", "syscalls": [{"names": ["getpid"], "action": "SCMP_ACT_ALLOW", "args": [{"index": 0, "value": 1, "op": "SCMP_CMP_ABOUT"}]}]}`, "SCMP_CMP_ABOUT"},
		{`{"defaultAction": "SCMP_ACT_ALLOW", "syscalls": [{"names": ["getpid"], "action": "SCMP_ACT_ALLOW", "errnoRet": 1}]}`, "errnoRet"},
		{`{"syscalls": []}`, "defaultAction"},
		{`{"defaultAction": "SCMP_ACT_ALLOW"} {"defaultAction": "SCMP_ACT_KILL"}`, "after the profile"},
		{`{"defaultAction": "SCMP_ACT_ERRNO", "syscalls": [{"names": ["read"], "action": "SCMP_ACT_ALLOW"}]}`, "execve"},
		{`{"defaultAction": "SCMP_ACT_ALLOW", "syscalls": [{"names": ["execve"], "action": "SCMP_ACT_KILL"}]}`, "execve"},
		{`{"defaultAction": "SCMP_ACT_ERRNO", "architectures": ["SCMP_ARCH_PPC64LE"], "syscalls": [` + execve + `]}`, "architectures"},
		{`{"defaultAction": "SCMP_ACT_ERRNO", "syscalls": [` + execve + `, {"names": ["read"], "action": "SCMP_ACT_ALLOW", "includes": {"minKernel": "four"}}]}`, "minKernel"},
	} {
		_, err := LoadProfile(writeProfile(t, c.json))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s\n  error %v, want one naming %s", c.json, err, c.want)
		}
	}
}

func TestLoadProfileAccepts(t *testing.T) {
	// Unknown syscall names are skipped; several conditions on one
	// argument are alternatives; architectures may list the native one
	// among others.
	p, err := LoadProfile(writeProfile(t, `{
		"defaultAction": "SCMP_ACT_ERRNO",
		"defaultErrnoRet": 38,
		"architectures": ["SCMP_ARCH_X86_64", "SCMP_ARCH_AARCH64", "SCMP_ARCH_X86"],
		"syscalls": [
			{"names": ["execve", "no_such_call_yet", "exit_group"], "action": "SCMP_ACT_ALLOW"},
			{"names": ["personality"], "action": "SCMP_ACT_ALLOW", "args": [
				{"index": 0, "value": 0, "op": "SCMP_CMP_EQ"},
				{"index": 0, "value": 8, "op": "SCMP_CMP_EQ"}]},
			{"names": ["kill"], "action": "SCMP_ACT_KILL_PROCESS"},
			{"names": ["tkill"], "action": "SCMP_ACT_TRAP"},
			{"names": ["tgkill"], "action": "SCMP_ACT_LOG", "excludes": {"minKernel": "2.6"}}
		]}`))
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Spec.Syscalls) != 4 {
		t.Errorf("%d rules, want 4 (the excluded tgkill rule dropped)", len(p.Spec.Syscalls))
	}
	if _, err := p.Compile(); err != nil {
		t.Fatal(err)
	}
}

func TestMajorMinor(t *testing.T) {
	for in, want := range map[string][2]int{"4.8": {4, 8}, "6.18.44-fc-v769": {6, 18}, "6.1-rc1": {6, 1}} {
		if got, err := majorMinor(in); err != nil || got != want {
			t.Errorf("majorMinor(%q) = %v, %v", in, got, err)
		}
	}
	if _, err := majorMinor("6"); err == nil {
		t.Error(`majorMinor("6") accepted`)
	}
}

func writeProfile(t *testing.T, json string) string {
	path := filepath.Join(t.TempDir(), "profile.json")
	if err := os.WriteFile(path, []byte(json), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestDefaultAsProfile: each filter of the default policy, written out as
// an OCI profile, loads back and compiles to the same program, so users
// can start their own profile from one.
func TestDefaultAsProfile(t *testing.T) {
	for i, s := range Default().filters() {
		data, err := json.MarshalIndent(s, "", "\t")
		if err != nil {
			t.Fatal(err)
		}
		p, err := LoadProfile(writeProfile(t, string(data)))
		if err != nil {
			t.Fatal(err)
		}
		got, err := p.Compile()
		if err != nil {
			t.Fatal(err)
		}
		want, err := (&Policy{Name: "filter", Spec: s}).Compile()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("filter %d of the default policy compiles differently once written as a profile", i)
		}
	}
}
