package batch

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/microbox/microbox/field"
)

// OpenTasks opens the task file name ("-": stdin) and counts the tasks
// the batch runs (CountTasks) when it is a regular file, for a progress
// bar's ETA; -1 when unknown.
func OpenTasks(name string, skip int, shard Shard, done *Done) (*os.File, int64, error) {
	in := os.Stdin
	if name != "-" {
		var err error
		if in, err = os.Open(name); err != nil {
			// An *os.PathError, whose path the message names.
			return nil, 0, fmt.Errorf("%s: %v; give the path of a JSONL task file, or - for stdin", name, errors.Unwrap(err))
		}
	}
	return in, CountTasks(in, skip, shard, done), nil
}

// CreateOutput opens the results file name ("-": stdout, whose close
// then tells, as a file's does, whether its last writes failed).
func CreateOutput(name string) (io.WriteCloser, error) {
	if name == "-" {
		return os.Stdout, nil
	}
	f, err := os.Create(name)
	if err != nil {
		return nil, field.Errorf("Output", "{Output} %s: %v", name, errors.Unwrap(err))
	}
	return f, nil
}
