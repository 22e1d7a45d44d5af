package zygote

import (
	"context"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/microbox/microbox/nsjail"
	"github.com/microbox/microbox/result"
)

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: a template's children each get a host uid range (CI runs as root)")
	}
}

func newPool(t *testing.T, cfg Config) *TemplatePool {
	t.Helper()
	needRoot(t)
	sp, err := nsjail.NewSpawner()
	if err != nil {
		t.Fatal(err)
	}
	cfg.Log = func(format string, args ...any) { t.Logf("pool: "+format, args...) }
	p := New(sp, cfg)
	t.Cleanup(func() {
		p.Close()
		sp.Close()
		for _, pid := range p.Stats().Pids {
			t.Errorf("template %d still in use after Close", pid)
		}
	})
	return p
}

func spec(t *testing.T, code string, change func(*nsjail.Options)) *nsjail.Spec {
	t.Helper()
	o := nsjail.Defaults()
	o.Code, o.Capture, o.Zygote = &code, true, true
	if change != nil {
		change(&o)
	}
	s, err := o.Spec()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func run(t *testing.T, p *TemplatePool, s *nsjail.Spec) *result.Result {
	t.Helper()
	return nsjail.Settle(p.Run(context.Background(), s))
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// Runs of one key fork from one template, each with a child of its own
// forked ahead; the template's jail ends with the pool.
func TestPoolForksFromOneTemplate(t *testing.T) {
	p := newPool(t, Config{Ahead: 1})
	s := spec(t, "import os; print(os.getpid())", nil)
	for i := range 4 {
		r := run(t, p, s)
		if r.Status != result.StatusOK || r.Start != "zygote" || r.Stdout != "2\n" {
			t.Fatalf("run %d: %s start %q stdout %q %s", i, r.Status, r.Start, r.Stdout, deref(r.Error))
		}
	}
	st := p.Stats()
	if st.Started != 1 || st.Templates != 1 || st.Runs != 4 || st.Cold != 0 {
		t.Fatalf("stats %+v", st)
	}
	pid := st.Pids[0]
	p.Close()
	if err := syscall.Kill(pid, 0); err == nil {
		t.Fatalf("the template's jail (pid %d) outlived the pool", pid)
	}
}

// A template retires after MaxForks forks, and beyond Templates the least
// recently used one does; each key's runs still fork.
func TestPoolRetires(t *testing.T) {
	p := newPool(t, Config{MaxForks: 2, Templates: 1})
	a := spec(t, "print('a')", nil)
	b := spec(t, "print('b')", func(o *nsjail.Options) { o.Memory = 128 << 20 })
	for i, s := range []*nsjail.Spec{a, a, a, b, a} {
		if r := run(t, p, s); r.Status != result.StatusOK || r.Start != "zygote" {
			t.Fatalf("run %d: %s start %q %s", i, r.Status, r.Start, deref(r.Error))
		}
	}
	// a, a | a (worn: new) | b (a evicted) | a (b evicted)
	if st := p.Stats(); st.Started != 4 || st.Templates != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// A template that dies is replaced by the next run of its key; a run it
// dies under fails saying so, or with the fallback starts cold with the
// same verdict; it never starts cold unasked.
func TestPoolReplacesDeadTemplate(t *testing.T) {
	p := newPool(t, Config{})
	strict := spec(t, "print(6 * 7)", nil)
	fallback := spec(t, "print(6 * 7)", func(o *nsjail.Options) { o.ZygoteFallback = true })
	if r := run(t, p, strict); r.Start != "zygote" {
		t.Fatalf("start %q", r.Start)
	}
	for _, s := range []*nsjail.Spec{fallback, strict} {
		syscall.Kill(p.Stats().Pids[0], syscall.SIGKILL)
		r := run(t, p, s)
		switch {
		case r.Status == result.StatusOK && r.Stdout == "42\n" && (r.Start == "zygote" || s.Zygote.Fallback && r.Start == "cold"):
		case r.Status == result.StatusSandboxError && !s.Zygote.Fallback && strings.Contains(deref(r.Error), "template"):
		default:
			t.Fatalf("fallback %v, after the kill: %s start %q %q %s", s.Zygote.Fallback, r.Status, r.Start, r.Stdout, deref(r.Error))
		}
		deadline := time.Now().Add(10 * time.Second)
		for {
			r := run(t, p, s)
			if r.Start == "zygote" && r.Stdout == "42\n" {
				break
			}
			if r.Start != "cold" && r.Status != result.StatusSandboxError || time.Now().After(deadline) {
				t.Fatalf("no new template: %s start %q %s, %+v", r.Status, r.Start, deref(r.Error), p.Stats())
			}
		}
	}
	if st := p.Stats(); st.Started != 3 {
		t.Fatalf("stats %+v", st)
	}
}

// A run whose template died before its child was forked (nothing of the
// run sent yet) forks from a new template of its key, not a
// sandbox_error: killed, then run at once, before or after the pool has
// seen the death, it runs. (With children forked ahead, one may be taken
// in that moment and die under its run: TestPoolReplacesDeadTemplate.)
func TestPoolForkOutlivesDeadTemplate(t *testing.T) {
	p := newPool(t, Config{Ahead: 0})
	s := spec(t, "print(6 * 7)", nil)
	for i := range 5 {
		if r := run(t, p, s); r.Status != result.StatusOK || r.Start != "zygote" || r.Stdout != "42\n" {
			t.Fatalf("run %d: %s start %q %q %s", i, r.Status, r.Start, r.Stdout, deref(r.Error))
		}
		syscall.Kill(p.Stats().Pids[0], syscall.SIGKILL)
	}
	if st := p.Stats(); st.Started != 5 {
		t.Errorf("stats %+v, want 5 templates started", st)
	}
}

// A preload that fails is the run's error, naming the module, and no run
// of its key starts cold in its place.
func TestPoolPreloadFails(t *testing.T) {
	p := newPool(t, Config{})
	s := spec(t, "print(1)", func(o *nsjail.Options) { o.Preload = []string{"json", "no_such_module"} })
	for range 2 {
		r := run(t, p, s)
		if r.Status != result.StatusSandboxError || !strings.Contains(deref(r.Error), "no_such_module: ModuleNotFoundError") {
			t.Fatalf("%s %q", r.Status, deref(r.Error))
		}
	}
	if st := p.Stats(); st.Started != 1 || st.Cold != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// Concurrent runs of a key share its template, each in a child of its
// own, more of them at once than it has children (the rest wait for one);
// every verdict is the run's own, and every run forked.
func TestPoolConcurrent(t *testing.T) {
	p := newPool(t, Config{Ahead: 2})
	var wg sync.WaitGroup
	n := nsjail.ZygoteChildren + 4
	for g := range n {
		wg.Go(func() {
			arg := strings.Repeat("x", g+1)
			s := spec(t, "import sys, time; time.sleep(0.5); print(sys.argv[1])", func(o *nsjail.Options) { o.Args = []string{arg} })
			r := run(t, p, s)
			if r.Status != result.StatusOK || r.Stdout != arg+"\n" || r.Start != "zygote" {
				t.Errorf("run %d: %s %q start %q %s", g, r.Status, r.Stdout, r.Start, deref(r.Error))
			}
		})
	}
	wg.Wait()
	if st := p.Stats(); st.Started != 1 || st.Runs != n || st.Cold != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// A run ends with its context (a server's client gone, a batch
// interrupted): killed, its processes gone by its teardown, the template
// left as it was.
func TestPoolRunEndsWithItsContext(t *testing.T) {
	p := newPool(t, Config{})
	s := spec(t, "import time; print('started', flush=True); time.sleep(30)", nil)
	run(t, p, spec(t, "pass", nil)) // the template, started
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	began := time.Now()
	res, teardown := p.Run(ctx, s)
	if err := teardown(); err != nil {
		t.Fatal(err)
	}
	if res.Status != result.StatusSandboxError || !strings.Contains(deref(res.Error), "interrupted") || time.Since(began) > 5*time.Second {
		t.Fatalf("%s %q after %s", res.Status, deref(res.Error), time.Since(began))
	}
	if n := len(zygoteProcesses(t)); n != 1 {
		t.Fatalf("%d of the template's processes after the run's teardown, want the template alone", n)
	}
}

// zygoteProcesses are this test's processes running zygote.py: its
// templates and their forks.
func zygoteProcesses(t *testing.T) []int {
	t.Helper()
	var pids []int
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		cmdline, _ := os.ReadFile("/proc/" + d.Name() + "/cmdline")
		if strings.Contains(string(cmdline), "zygote.py") && descends(pid, os.Getpid()) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// descends reports whether pid is a descendant of ancestor.
func descends(pid, ancestor int) bool {
	for pid > 1 {
		stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			return false
		}
		// pid (comm) state ppid ...: comm may hold spaces.
		f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		if len(f) < 2 {
			return false
		}
		if pid, _ = strconv.Atoi(f[1]); pid == ancestor {
			return true
		}
	}
	return false
}
