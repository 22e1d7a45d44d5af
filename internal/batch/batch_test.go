package batch

// Units: tasks, their errors and the pool in this process. The commands
// that run the binary are tested in cmd/microbox.

import (
	"context"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/microbox/microbox/field"
	"github.com/microbox/microbox/nsjail"
	"github.com/microbox/microbox/result"
)

func TestDecodeTask(t *testing.T) {
	tk, id, err := decodeTask([]byte(`{"id": [1, "a"], "code": "x", "timeout": 2.5, "mem": "64M", "cpus": 0.5}`))
	if err != nil || string(id) != `[1, "a"]` {
		t.Fatalf("id %s err %v", id, err)
	}
	s, err := taskSpec(testBase(t), tk)
	if err != nil {
		t.Fatal(err)
	}
	if s.Timeout != 2500*time.Millisecond || s.Cgroup.Limits.Memory != 64<<20 || s.Cgroup.Limits.CPUs != 0.5 {
		t.Fatalf("timeout %v mem %d cpus %v", s.Timeout, s.Cgroup.Limits.Memory, s.Cgroup.Limits.CPUs)
	}
	if strings.Join(s.Argv, " ") != "/usr/bin/python3 -c x" {
		t.Fatalf("argv %q", s.Argv)
	}
	// The id survives a task that is otherwise invalid.
	if _, id, err := decodeTask([]byte(`{"id": 7, "bogus": 1}`)); err == nil || string(id) != "7" {
		t.Fatalf("id %s err %v", id, err)
	}
}

// A task's errors name its own keys for the fields it set, and the base's
// fields as the caller names them.
func TestTaskErrorNames(t *testing.T) {
	base := testBase(t)
	base.FieldNames = func(f string) string { return "base." + f }
	for line, want := range map[string]string{
		`{"code": "1", "mem": "12Q"}`:   `"mem" "12Q": give a positive size`,
		`{"code": "1", "mem": 1000000}`: `base.TmpfsSize (67108864 bytes) exceeds "mem"`,
		`{"mem": "64M"}`:                `no program: give "code" or "file"`,
	} {
		tk, _, err := decodeTask([]byte(line))
		if err != nil {
			t.Fatal(err)
		}
		_, err = taskSpec(base, tk)
		if msg := field.Message(err, tk.fieldNames(base.FieldNames)); err == nil || !strings.HasPrefix(msg, want) {
			t.Errorf("%s: %v, want %q...", line, msg, want)
		}
	}
}

// Tasks change copies: the base, shared by every run, stays as it was.
func TestTaskSpecLeavesBaseAlone(t *testing.T) {
	base := testBase(t)
	base.Env = []string{"A=1"}
	code := "1"
	tk := &Task{Code: &code, Env: map[string]string{"PATH": "/x", "NEW": "1"}, Files: map[string]string{"a.txt": "a"},
		Mem: &Quantity{text: "128M"}}
	if _, err := taskSpec(base, tk); err != nil {
		t.Fatal(err)
	}
	fresh := testBase(t)
	if strings.Join(base.Env, ",") != "A=1" || len(base.Files) != 0 || base.Memory != fresh.Memory {
		t.Fatalf("base changed: env %v files %v mem %d", base.Env, base.Files, base.Memory)
	}
}

func TestQuantity(t *testing.T) {
	cases := []struct {
		json string
		dur  time.Duration
		size int64
		ok   bool
	}{
		{`"1.5s"`, 1500 * time.Millisecond, 0, true},
		{`2`, 2 * time.Second, 2, true},
		{`"256M"`, 0, 256 << 20, true},
		{`-1`, 0, 0, false},
		{`true`, 0, 0, false},
	}
	for _, c := range cases {
		var q Quantity
		err := q.UnmarshalJSON([]byte(c.json))
		if err != nil {
			if c.ok {
				t.Errorf("%s: %v", c.json, err)
			}
			continue
		}
		d, derr := q.duration("d")
		n, serr := q.size("s")
		if !c.ok && derr == nil && serr == nil {
			t.Errorf("%s: accepted", c.json)
		}
		if c.dur != 0 && (derr != nil || d != c.dur) {
			t.Errorf("%s: duration %v %v", c.json, d, derr)
		}
		if c.size != 0 && (serr != nil || n != c.size) {
			t.Errorf("%s: size %d %v", c.json, n, serr)
		}
	}
}

// testBase is the base `microbox batch` builds by default.
func testBase(t testing.TB) nsjail.Options {
	t.Helper()
	base := nsjail.Defaults()
	base.Capture = true
	if err := base.Prepare(); err != nil {
		t.Fatal(err)
	}
	return base
}

// BenchmarkPool runs print(1) through the pool in this process:
// go test -run '^$' -bench Pool -cpuprofile cpu.out ./internal/batch
func BenchmarkPool(b *testing.B) {
	p, err := NewWorkerPool(testBase(b), PoolOptions{Jobs: 1})
	if err != nil {
		b.Fatal(err)
	}
	code := "print(1)"
	todo := make(chan *Item)
	go func() {
		for i := range b.N {
			todo <- &Item{Seq: i, Task: &Task{Code: &code}}
		}
		close(todo)
	}()
	for it := range p.Run(context.Background(), todo) {
		if it.Result.Status != result.StatusOK {
			b.Fatal(it.Result.Describe())
		}
	}
}

// Decoding a task costs at most twice its line, valid or not: a
// server decodes lines of up to its --http-max-body, one per request.
func TestDecodeTaskMemory(t *testing.T) {
	code := strings.Repeat("x", 16<<20)
	for name, line := range map[string]string{
		"valid":         `{"id": 7, "code": "` + code + `"}`,
		"unknown field": `{"id": 7, "code": "` + code + `", "bogus": 1}`,
		"two values":    `{"id": 7, "code": "` + code + `"} {}`,
	} {
		b := []byte(line)
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		_, id, _ := decodeTask(b)
		runtime.ReadMemStats(&after)
		if got := after.TotalAlloc - before.TotalAlloc; got > 2*uint64(len(line)) {
			t.Errorf("%s: decoding a %d-byte line allocated %d bytes; want at most twice the line", name, len(line), got)
		}
		if string(id) != "7" {
			t.Errorf("%s: id %s, want 7", name, id)
		}
	}
}

// taskSpec applies a task to a copy of the base options and returns its
// run's Spec (Prepare without the layers, for the tests).
func taskSpec(base nsjail.Options, t *Task) (*nsjail.Spec, error) {
	o, err := taskOptions(base, t)
	if err != nil {
		return nil, err
	}
	return o.Spec()
}
