package batch

import (
	"context"
	"os"
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
		p, err := NewPool(base, PoolOptions{Jobs: 1})
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
