package batch

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/microbox/microbox/field"
)

// Done is what a results file already holds: the id of each input line
// that has its result. A resumed batch passes over those tasks and runs
// every other one, so that each task ends with exactly one result.
//
// Tasks are matched by their input line and their id together: a line
// whose task has a result with the same id is done. Ids alone would not
// do (they may repeat, or be absent: several samples of one problem, a
// task without "id"), and lines alone would run the wrong tasks on a task
// file that changed; a task whose line has a result with another id is an
// error (the results are not this task file's).
type Done struct {
	name string
	ids  map[int]string // by input line: the result's id, compact JSON
}

// hasLine reports whether input line n has its result.
func (d *Done) hasLine(n int) bool {
	if d == nil {
		return false
	}
	_, ok := d.ids[n]
	return ok
}

// check refuses the task raw on input line n, which has a result, when
// the result is another task's.
func (d *Done) check(n int, raw []byte) error {
	if id, tid := d.ids[n], taskID(raw); tid != id {
		return field.Errorf("Resume", "input line %d is the task with id %s, but its result in %s has id %s: "+
			"{Resume} goes on with the task file the results were made from", n, tid, d.name, id)
	}
	return nil
}

// taskID is the id of the task line raw as its result line spells it:
// compact JSON, null when it has none (or is not JSON: its result, an
// error, says null too).
func taskID(raw []byte) string {
	var value json.RawMessage
	if json.NewDecoder(bytes.NewReader(raw)).Decode(&value) != nil {
		return "null"
	}
	var idOnly struct {
		ID json.RawMessage `json:"id"`
	}
	json.Unmarshal(value, &idOnly)
	return compactID(idOnly.ID)
}

func compactID(id json.RawMessage) string {
	var b bytes.Buffer
	if len(id) == 0 || json.Compact(&b, id) != nil {
		return "null"
	}
	return b.String()
}

// ResumeOutput opens the results file name to go on with it: it reads
// the results it holds, cuts off a last line left partial (a batch killed
// while it wrote it: never a whole result), and returns the file, open
// for appending, with what it holds. A file that does not exist yet is
// created.
func ResumeOutput(name string) (*os.File, *Done, error) {
	if name == "-" {
		return nil, nil, field.Errorf("Resume", "{Resume} reads the results written so far, which stdout cannot give back: name the results file with {Output}")
	}
	f, err := os.OpenFile(name, os.O_RDWR|os.O_APPEND|os.O_CREATE, 0o666)
	if err != nil {
		return nil, nil, field.Errorf("Output", "{Output} %s: %v", name, errors.Unwrap(err))
	}
	d, whole, err := readDone(f, name)
	if err == nil {
		err = f.Truncate(whole)
	}
	if err != nil {
		f.Close()
		return nil, nil, field.Errorf("Resume", "{Resume}: %v", err)
	}
	return f, d, nil
}

// readDone reads the result lines of r, and returns them and the length
// of its whole lines.
func readDone(r io.Reader, name string) (*Done, int64, error) {
	d := &Done{name: name, ids: map[int]string{}}
	br := bufio.NewReaderSize(r, 1<<16)
	var whole int64
	for n := 1; ; n++ {
		line, err := br.ReadBytes('\n')
		if err == io.EOF {
			return d, whole, nil // a last line without its newline is partial
		}
		if err != nil {
			return nil, 0, fmt.Errorf("read %s: %w", name, err)
		}
		whole += int64(len(line))
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var res struct {
			ID   json.RawMessage `json:"id"`
			Line int             `json:"line"`
		}
		if err := json.Unmarshal(line, &res); err != nil || res.Line < 1 {
			return nil, 0, fmt.Errorf("%s:%d is not a batch's result line (one with the task's \"line\"); give the results file the batch wrote", name, n)
		}
		d.ids[res.Line] = compactID(res.ID)
	}
}
