package eval

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/microbox/microbox/internal/batch"
	"github.com/microbox/microbox/internal/progress"
	"github.com/microbox/microbox/nsjail"
)

// Set.Run in this process, through a real pool (run it with -race): each
// sample's verdict is assembled from runs that end in any order, and
// --stop-on-fail's verdicts do not depend on how many run at once.
func TestSetRun(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("runs sandboxes: needs root, as the integration tests do")
	}
	dir := t.TempDir()
	problems := filepath.Join(dir, "p.jsonl")
	samples := filepath.Join(dir, "s.jsonl")
	os.WriteFile(problems, []byte(`{"task_id": "echo", "tests": [{"input": "1", "output": "1"}, {"input": "2", "output": "2"}, {"input": "3", "output": "3"}, {"input": "4", "output": "4"}, {"input": "5", "output": "5"}]}`+"\n"), 0o644)
	os.WriteFile(samples, []byte(`{"task_id": "echo", "completion": "print(input())"}
{"task_id": "echo", "completion": "x = input()\nprint(x if x != '2' else 'two')"}
{"task_id": "echo", "completion": "x = input()\nprint(x if x not in '24' else 1 / 0)"}
`), 0o644)
	base := nsjail.Defaults()
	base.Capture = true
	if err := base.Prepare(); err != nil {
		t.Fatal(err)
	}
	want := map[bool][][]string{
		false: {{"passed", "passed", "passed", "passed", "passed"}, {"passed", "wrong_answer", "passed", "passed", "passed"}, {"passed", "nonzero", "passed", "nonzero", "passed"}},
		true:  {{"passed", "passed", "passed", "passed", "passed"}, {"passed", "wrong_answer", "not_run", "not_run", "not_run"}, {"passed", "nonzero", "not_run", "not_run", "not_run"}},
	}
	for _, stop := range []bool{false, true} {
		for _, jobs := range []int{1, 4} {
			set, _, err := LoadStdio(problems, samples, StdioOptions{Compare: Compare{Mode: CompareLines}, StopOnFail: stop, OutputLimit: base.OutputLimit})
			if err != nil {
				t.Fatal(err)
			}
			p, err := batch.NewWorkerPool(base, batch.PoolOptions{Jobs: jobs})
			if err != nil {
				t.Fatal(err)
			}
			bar := progress.New(nil, int64(len(set.Samples)), "samples", Categories)
			verdicts := set.Run(context.Background(), p, bar)
			for i, v := range verdicts {
				if got := statuses(v.Tests); !slices.Equal(got, want[stop][i]) {
					t.Errorf("stop %v, jobs %d, sample %d: %v, want %v", stop, jobs, i, got, want[stop][i])
				}
			}
		}
	}
}
