package batch

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// ResumeOutput reads which input lines have their results, cuts off a
// last line a killed batch left partial, and appends after the rest; a
// results file it cannot read as one is refused, naming its line.
func TestResumeOutput(t *testing.T) {
	name := filepath.Join(t.TempDir(), "results.jsonl")
	whole := `{"id":1,"line":1,"status":"ok"}` + "\n" + `{"id":null,"line":3,"status":"ok"}` + "\n\n" +
		`{"id":{"k":[3]},"line":4,"status":"ok"}` + "\n"
	if err := os.WriteFile(name, []byte(whole+`{"id":5,"line":5,"sta`), 0o644); err != nil {
		t.Fatal(err)
	}
	f, done, err := ResumeOutput(name)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("next\n")
	f.Close()
	if data, _ := os.ReadFile(name); string(data) != whole+"next\n" {
		t.Errorf("file after the resume's write:\n%s", data)
	}
	for _, c := range []struct {
		line int
		task string
		done bool
		bad  bool
	}{
		{1, `{"id": 1, "code": "x"}`, true, false},
		{2, `{"id": 2, "code": "x"}`, false, false},
		{3, `{"code": "x"}`, true, false},
		{3, `not json`, true, false},
		{4, `{"id": {"k": [3]}, "code": "x"}`, true, false},
		{4, `{"id": 4, "code": "x"}`, true, true},
		{5, `{"id": 5, "code": "x"}`, false, false},
	} {
		has := done.hasLine(c.line)
		err := error(nil)
		if has {
			err = done.check(c.line, []byte(c.task))
		}
		if has != c.done || (err != nil) != c.bad {
			t.Errorf("line %d %s: done %v, error %v", c.line, c.task, has, err)
		}
	}

	os.WriteFile(name, []byte(whole+"not a result\n"), 0o644)
	if _, _, err := ResumeOutput(name); err == nil || !strings.Contains(err.Error(), name+":5 is not") {
		t.Errorf("a line that is no result: %v", err)
	}
	if _, _, err := ResumeOutput("-"); err == nil || !strings.Contains(err.Error(), "Output") {
		t.Errorf("stdout: %v", err)
	}
}
