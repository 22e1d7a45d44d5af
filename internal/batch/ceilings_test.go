package batch

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/microbox/microbox/internal/policy"
	"github.com/microbox/microbox/nsjail"
)

// prepare prepares one task line over the default base within limits.
func prepare(t *testing.T, limits Limits, line string) error {
	t.Helper()
	tk, err := DecodeTask([]byte(line))
	if err != nil {
		t.Fatalf("%s: %v", line, err)
	}
	r, err := Prepare(context.Background(), testBase(t), policy.Options{}, limits, tk)
	if err == nil {
		r.layers.Close()
	}
	return err
}

// A task may lower a limit, not raise it past its ceiling (by default,
// the base's own value), nor send more data than the data's ceilings:
// refused as bad input naming the key, the value and the ceiling.
func TestCeilings(t *testing.T) {
	long := strings.Repeat("x", 2000)
	for line, want := range map[string][]string{
		`{"code": "1", "mem": "999999T"}`:                      {`"mem" 999999T is over this server's ceiling 256M`, "--max-mem"},
		`{"code": "1", "timeout": 86400}`:                      {`"timeout" 86400 is over this server's ceiling 10s`, "--max-timeout"},
		`{"code": "1", "timeout": 1e300}`:                      {`"timeout" 1e+300 is over this server's ceiling 10s`, "--max-timeout"},
		`{"code": "1", "mem": 1e300}`:                          {`"mem" 1e+300 is over this server's ceiling 256M`, "--max-mem"},
		`{"code": "1", "cpus": 1e300}`:                         {`"cpus" 1e+300 is over this server's ceiling 1`, "--max-cpus"},
		`{"code": "1", "cpus": 1e19}`:                          {`"cpus" 1e+19 is over`, "--max-cpus"},
		`{"code": "1", "pids": 100000}`:                        {`"pids" 100000 is over this server's ceiling 128`, "--max-pids"},
		`{"code": "1", "pids": 9223372036854775807}`:           {`"pids" 9223372036854775807 is over`, "--max-pids"},
		`{"code": "1", "output_limit": "4g"}`:                  {`"output_limit" 4g is over this server's ceiling 1M`, "--max-output-limit"},
		`{"code": "1", "tmpfs_size": "128M"}`:                  {`"tmpfs_size" 128M is over this server's ceiling 64M`, "--max-tmpfs-size"},
		`{"code": "1", "files": {"a": "` + long + `"}}`:        {`"files" hold 2001 bytes, over this server's ceiling 1K`, "--max-file-bytes"},
		`{"code": "1", "redact_patterns": ["A=` + long + `"]}`: {`"redact_patterns" has a pattern of 2002 bytes, over this server's ceiling 1K`, "--max-redact-pattern-bytes"},
		`{"code": "1", "preload": ["a", "b", "c"]}`:            {`"preload" names 3 modules, over this server's ceiling 2`, "--max-preload"},
		`{"code": "1", "stdin": "` + long + `"}`:               {`"stdin" is 2000 bytes, over this server's ceiling 1K`, "--max-stdin"},
	} {
		limits, err := NewLimits("server", testBase(t), map[string]string{"file-bytes": "1K", "preload": "2", "stdin": "1K"})
		if err != nil {
			t.Fatal(err)
		}
		err = prepare(t, limits, line)
		if err == nil || !IsBadInput(err) || !strings.Contains(err.Error(), want[0]) || !strings.HasSuffix(err.Error(), want[1]) {
			t.Errorf("%.60s: %v, want bad input with %q ... %s", line, err, want[0], want[1])
		}
	}
	// Lower values pass; so does what the operator raised the ceiling to.
	if err := prepare(t, Limits{}, `{"code": "1", "mem": "128M", "timeout": 2, "cpus": 0.5, "pids": 64, "output_limit": "4K", "tmpfs_size": "16M"}`); err != nil {
		t.Errorf("lower limits: %v", err)
	}
	raised, err := NewLimits("server", testBase(t), map[string]string{"mem": "1g"})
	if err != nil {
		t.Fatal(err)
	}
	if err := prepare(t, raised, `{"code": "1", "mem": "512M"}`); err != nil {
		t.Errorf("512M under --max-mem 1g: %v", err)
	}
	if err := prepare(t, raised, `{"code": "1", "mem": "2g"}`); err == nil || !strings.Contains(err.Error(), "ceiling 1G") {
		t.Errorf("2g over --max-mem 1g: %v", err)
	}
}

// A 0 that means no limit is over any ceiling that is a limit.
func TestCeilingNoLimit(t *testing.T) {
	base := testBase(t)
	base.CPUTime = 5e9
	limits, err := NewLimits("batch", base, nil)
	if err != nil {
		t.Fatal(err)
	}
	tk, _ := DecodeTask([]byte(`{"code": "1", "cpu_time": 0}`))
	_, err = Prepare(context.Background(), base, policy.Options{}, limits, tk)
	if err == nil || !strings.Contains(err.Error(), `"cpu_time" 0 (no limit) is over this batch's ceiling 5s`) || !strings.HasSuffix(err.Error(), "run the batch with --max-cpu-time") {
		t.Errorf("cpu_time 0 under a ceiling of 5s: %v", err)
	}
}

// Past a ceiling the operator raised, the kernel's range still refuses a
// limit before it reaches cgroupfs, as the task's fault.
func TestKernelRanges(t *testing.T) {
	limits, err := NewLimits("server", testBase(t), map[string]string{"cpus": "1e300", "pids": "9223372036854775807", "timeout": "10000h"})
	if err != nil {
		t.Fatal(err)
	}
	for line, want := range map[string]string{
		`{"code": "1", "cpus": 1e19}`:                `"cpus" 1e+19 is outside the kernel's range`,
		`{"code": "1", "cpus": 1e-300}`:              `"cpus" 1e-300 is outside the kernel's range: give 0.01 to`,
		`{"code": "1", "pids": 9223372036854775807}`: `"pids" 9223372036854775807 is outside the kernel's range: give at most 4194304`,
		`{"code": "1", "timeout": "9000h"}`:          `"timeout" 9000h0m0s is longer than any run may last`,
	} {
		if err := prepare(t, limits, line); err == nil || !IsBadInput(err) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want bad input with %q", line, err, want)
		}
	}
}

// A ceiling under the base's own value is the operator's mistake.
func TestCeilingUnderBase(t *testing.T) {
	if _, err := NewLimits("server", testBase(t), map[string]string{"mem": "128M"}); err == nil || !strings.Contains(err.Error(), "--max-mem 128M is under Memory 256M") {
		t.Errorf("--max-mem under --mem: %v", err)
	}
	if _, err := NewLimits("server", testBase(t), map[string]string{"code": "32M"}); err == nil {
		t.Errorf("--max-code over the most a run holds: accepted")
	}
}

// The declaration is the task: every key of Task's is declared, with a
// field of Options or policy.Options of a type its kind can set, and
// every field a task can set is named in messages by its key.
func TestFieldsDeclared(t *testing.T) {
	var keys []string
	for _, f := range Fields {
		keys = append(keys, f.Key)
		if f.Name == "" {
			continue
		}
		if TaskKey(f.Name) != `"`+f.Key+`"` {
			t.Errorf("%s: TaskKey %q", f.Name, TaskKey(f.Name))
		}
		dst := reflect.ValueOf(&policyOrOptions{}).Elem().FieldByName("O")
		if f.Layer {
			dst = reflect.ValueOf(&policyOrOptions{}).Elem().FieldByName("L")
		}
		if !dst.FieldByName(f.Name).IsValid() {
			t.Errorf("%s: no field %s", f.Key, f.Name)
		}
	}
	for _, key := range []string{"zygote", "zygote_fallback", "preload", "stdin"} {
		if !strings.Contains(strings.Join(keys, ","), key) || len(FieldsIn(InMCP|InAPI)) == 0 {
			t.Errorf("%s is not declared", key)
		}
	}
	// Every declared field applies: a task setting each once builds.
	line := `{"code": "1", "stdin": "x", "args": ["a"], "workdir": "/tmp/w", "files": {"f": "1"}, "files_base64": {"g": "//A="}, "fetch": ["out"], "env": {"A": "1"},
		"mem": "128M", "timeout": 2, "cpu_time": "1s", "cpus": 0.5, "pids": 64, "output_limit": "4K", "tmpfs_size": "16M",
		"deny_modules": ["socket"], "allow_modules": [], "guard": "humaneval", "redact": true, "redact_patterns": ["K=key"],
		"max_risk": 100, "zygote_fallback": true, "preload": ["json"]}`
	tk, err := DecodeTask([]byte(line))
	if err != nil {
		t.Fatal(err)
	}
	o, err := taskOptions(testBase(t), tk)
	if err != nil {
		t.Fatal(err)
	}
	lo, err := tk.layers(policy.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if o.Memory != 128<<20 || o.CPUs != 0.5 || o.Pids != 64 || o.Workdir != "/tmp/w" || o.Stdin == nil || !o.ZygoteFallback ||
		len(o.Preload) != 1 || o.Files[0].Path != "/tmp/w/f" || string(o.Files[1].Data) != "\xff\xf0" || o.Fetch[0] != "out" || *lo.MaxRisk != 100 || !lo.Redact || lo.Guard != "humaneval" {
		t.Errorf("the task did not apply: %+v %+v", o, lo)
	}
}

type policyOrOptions struct { // the two structs a task sets
	O nsjailOptions
	L policy.Options
}

type nsjailOptions = nsjail.Options

// eval's runs take their limits from eval's own flags (MBPP's timeout is
// one per assert, summed): only the ceilings of what its samples send
// apply.
func TestCeilingsEval(t *testing.T) {
	limits, err := NewLimits("eval", testBase(t), map[string]string{"code": "1K"})
	if err != nil {
		t.Fatal(err)
	}
	if err := prepare(t, limits, `{"code": "1", "timeout": 60}`); err != nil {
		t.Errorf("eval's own timeout: %v", err)
	}
	if err := prepare(t, limits, `{"code": "`+strings.Repeat("1", 2000)+`"}`); err == nil || !strings.HasSuffix(err.Error(), "run the eval with --max-code") {
		t.Errorf("code over eval's --max-code: %v", err)
	}
}
