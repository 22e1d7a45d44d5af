package batch

import (
	"context"
	"io"
	"strings"
	"testing"
)

// N shards take every task exactly once, by its place among the tasks
// (blank lines are no tasks), whatever --skip passes over.
func TestShardsTakeEachTaskOnce(t *testing.T) {
	in := "a\n\nb\nc\n  \nd\ne\n"
	for _, skip := range []int{0, 3} {
		seen := map[string]int{}
		for i := range 3 {
			sh, err := ParseShard(string(rune('0'+i)) + "/3")
			if err != nil {
				t.Fatal(err)
			}
			lines := make(chan lineOrErr)
			go readLines(context.Background(), strings.NewReader(in), selection{skip: skip, shard: sh}, lines)
			for l := range lines {
				if l.err == io.EOF {
					break
				}
				seen[strings.TrimSpace(string(l.text))]++
			}
		}
		want := map[int]string{0: "abcde", 3: "cde"}[skip]
		for _, task := range strings.Split(want, "") {
			if seen[task] != 1 {
				t.Errorf("skip %d: task %s run %d times", skip, task, seen[task])
			}
		}
		if len(seen) != len(want) {
			t.Errorf("skip %d: ran %v, want %s", skip, seen, want)
		}
	}
	if (Shard{}).Takes(5) != true || !(Shard{}).Whole() {
		t.Error("the zero shard is not the whole batch")
	}
	for _, bad := range []string{"", "1/1", "2/1", "-1/3", "x/3", "1/0", "1/"} {
		if _, err := ParseShard(bad); err == nil {
			t.Errorf("ParseShard(%q) accepted", bad)
		}
	}
}
