package batch

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/microbox/microbox/field"
)

// Shard is one of Count parts of a batch's tasks, for spreading one batch
// over several machines (a Kubernetes Indexed Job's pods, each with its
// completion index): task k, counting the input's tasks from 0, belongs
// to shard k mod Count. Every shard of a batch reads the same input, and
// together they run each task exactly once. The zero Shard is the whole
// batch.
type Shard struct {
	Index, Count int
}

// ParseShard reads "I/N" (0 ≤ I < N), the field Shard.
func ParseShard(s string) (Shard, error) {
	i, n, ok := strings.Cut(s, "/")
	index, err1 := strconv.Atoi(i)
	count, err2 := strconv.Atoi(n)
	if !ok || err1 != nil || err2 != nil || count < 1 || index < 0 || index >= count {
		return Shard{}, field.Errorf("Shard", "{Shard} %q: give I/N, the shard's index I (from 0) of N shards, e.g. 0/4 (a Kubernetes Indexed Job's $JOB_COMPLETION_INDEX)", s)
	}
	return Shard{Index: index, Count: count}, nil
}

// Takes reports whether task k (counting from 0) is the shard's.
func (s Shard) Takes(k int) bool {
	return s.Count <= 1 || k%s.Count == s.Index
}

// Whole reports whether the shard is the whole batch.
func (s Shard) Whole() bool { return s.Count <= 1 }

func (s Shard) String() string { return fmt.Sprintf("%d/%d", s.Index, s.Count) }
