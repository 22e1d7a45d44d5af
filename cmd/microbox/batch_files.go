package main

import (
	"io"
	"os"

	"github.com/microbox/microbox/internal/batch"
)

// batchFiles are a batch's task input and results output.
type batchFiles struct {
	in    *os.File
	total int64 // the tasks to run, for the progress bar; -1: unknown
	out   io.WriteCloser
	done  *batch.Done // with --resume, the tasks the results have already
}

// open opens the tasks (name) and the results file. The tasks come first,
// so that a task file that cannot be read leaves the results as they
// were; with --resume the results are read first, to count only the
// tasks left (and they are only appended to).
func (f *batchFlags) open(name string, shard batch.Shard) (*batchFiles, error) {
	files := &batchFiles{}
	var err error
	if f.resume {
		var out *os.File
		if out, files.done, err = batch.ResumeOutput(f.output); err != nil {
			return nil, flagError(err)
		}
		files.out = out
	}
	if files.in, files.total, err = batch.OpenTasks(name, f.skip, shard, files.done); err != nil {
		if files.out != nil {
			files.out.Close()
		}
		return nil, usagef("%v", err)
	}
	if files.out == nil {
		if files.out, err = batch.CreateOutput(f.output); err != nil {
			files.in.Close()
			return nil, flagError(err)
		}
	}
	return files, nil
}
