package batch

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/microbox/microbox/result"
)

// A task forks from a template whenever its spec asks for a zygote: the
// base's fallback alone (which implies the zygote) and a task's own
// "zygote" key each fork, not only the base's zygote.
func TestPoolForksWhatAsks(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for the templates' uid ranges (CI runs as root)")
	}
	yes := true
	code := "print(1)"
	for name, c := range map[string]struct {
		base func() *Task
		fall bool
	}{
		"base fallback": {func() *Task { return &Task{Code: &code} }, true},
		"task zygote":   {func() *Task { return &Task{Code: &code, Zygote: &yes} }, false},
	} {
		base := testBase(t)
		base.ZygoteFallback = c.fall
		p, err := NewWorkerPool(base, PoolOptions{Jobs: 1})
		if err != nil {
			t.Fatal(err)
		}
		todo := make(chan *Item, 1)
		todo <- &Item{Task: c.base()}
		close(todo)
		for it := range p.Run(context.Background(), todo) {
			if r := it.Result; r.Status != result.StatusOK || r.Start != "zygote" {
				t.Errorf("%s: status %s start %q %s", name, r.Status, r.Start, r.Describe())
			}
		}
	}
}

// A task's zygote errors speak in its keys, and say "zygote" once.
func TestPoolZygoteMessages(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for the templates' uid ranges (CI runs as root)")
	}
	base := testBase(t)
	base.FieldNames = func(f string) string { return "the server's --" + strings.ToLower(f) }
	p, err := NewWorkerPool(base, PoolOptions{Jobs: 1})
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]string{
		`{"code": "print(1)", "preload": ["json"]}`:                            `"preload" needs "zygote"`,
		`{"code": "print(1)", "zygote": true, "preload": ["no_such_module"]}`:  `zygote: "preload" no_such_module: ModuleNotFoundError`,
		`{"code": "print(1)", "zygote": true, "env": {"LD_PRELOAD": "/x.so"}}`: `environment variable LD_PRELOAD cannot take effect`,
	}
	todo := make(chan *Item, len(cases))
	var lines []string
	for line := range cases {
		todo <- &Item{Seq: len(lines), Raw: []byte(line)}
		lines = append(lines, line)
	}
	close(todo)
	for it := range p.Run(context.Background(), todo) {
		line, msg := lines[it.Seq], ""
		if it.Result.Error != nil {
			msg = *it.Result.Error
		}
		if !strings.Contains(msg, cases[line]) || strings.Count(msg, "zygote:") > 1 || strings.Contains(msg, "server's") {
			t.Errorf("%s: %s %q; want %q, in its keys", line, it.Result.Status, msg, cases[line])
		}
	}
}
