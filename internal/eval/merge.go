package eval

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/microbox/microbox/field"
	"github.com/microbox/microbox/internal/batch"
	"github.com/microbox/microbox/result"
)

// Keep narrows the set to the shard's samples (sample k, counting from
// 0, is shard k mod N's). The set was loaded whole, so human-eval's
// refusal of problems without samples applies to the samples file, not
// to one shard of it.
func (s *Set) Keep(shard batch.Shard) {
	var kept []*Sample
	for k, sm := range s.Samples {
		if shard.Takes(k) {
			kept = append(kept, sm)
		}
	}
	s.Samples = kept
}

// Merge reads results files (each shard's, as `microbox eval humaneval
// --shard` writes them), copies their lines to out (nil: nowhere), and
// summarizes them all together: pass@k over the merged results, as over
// one evaluation's.
func Merge(files []string, ks []int, out io.Writer) (Summary, error) {
	total, correct := map[string]int{}, map[string]int{}
	sum := Summary{Counts: map[string]int{}}
	for _, name := range files {
		err := readJSONLines(name, func(line []byte) error {
			var r struct {
				TaskID string        `json:"task_id"`
				Passed *bool         `json:"passed"`
				Result string        `json:"result"`
				Status result.Status `json:"status"`
			}
			if err := json.Unmarshal(line, &r); err != nil || r.TaskID == "" || r.Passed == nil {
				return fmt.Errorf("not a result line (task_id, passed, result): %v", err)
			}
			sum.Samples++
			total[r.TaskID]++
			if *r.Passed {
				correct[r.TaskID]++
			}
			sum.Counts[Category(r.Result)]++
			if r.Status == result.StatusSandboxError {
				sum.SandboxErrors++
			}
			if out != nil {
				if _, err := out.Write(line); err != nil {
					return err
				}
				if line[len(line)-1] != '\n' {
					_, err := out.Write([]byte{'\n'})
					return err
				}
			}
			return nil
		})
		if err != nil {
			return sum, err
		}
	}
	sum.Problems = len(total)
	sum.Scores, sum.LeftOut = passAtKs(ks, total, correct)
	return sum, nil
}

// MergeInto merges files as Merge does, writing the merged lines to the
// results file output ("": none), put in place only once all were read.
func MergeInto(files []string, ks []int, output string) (Summary, error) {
	if output == "" {
		return Merge(files, ks, nil)
	}
	out, err := CreateResults(output)
	if err != nil {
		return Summary{}, err
	}
	defer out.Abort()
	sum, err := Merge(files, ks, out.Lines())
	if err != nil {
		return sum, err
	}
	return sum, out.Commit()
}

// ParseKs reads the k of pass@k: whole numbers from 1, comma-separated.
func ParseKs(s string) ([]int, error) {
	var ks []int
	for _, part := range strings.Split(s, ",") {
		k, err := strconv.Atoi(strings.TrimSpace(part))
		if err != nil || k < 1 {
			return nil, field.Errorf("K", "{K} %q: give positive whole numbers separated by commas, e.g. 1,10,100", s)
		}
		ks = append(ks, k)
	}
	return ks, nil
}
