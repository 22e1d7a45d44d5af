// Package helper runs microbox's own Python code (the risk analyzer, the
// module policy's compilation) in a sandbox shaped like a program's run:
// the same root, interpreter, cgroup, limits and seccomp filter, so that
// the code is handled by the Python that would run the program.
package helper

import (
	"bytes"
	"context"
	"time"

	"github.com/microbox/microbox/nsjail"
	"github.com/microbox/microbox/result"
)

// timeout bounds one helper run: parsing or compiling even megabytes of
// code takes well under a second.
const timeout = 5 * time.Second

// Run runs code (python -I -S -c code args...) with stdin as its input on
// behalf of a run of base, its output captured. The error is a run that
// could not be built; a run that failed is in the result.
func Run(ctx context.Context, base nsjail.Options, stdin []byte, code string, args ...string) (*result.Result, error) {
	o := options(base, stdin, code, args...)
	s, err := o.Spec()
	if err != nil {
		return nil, err
	}
	return nsjail.Run(ctx, s), nil
}

// options are base with the program replaced by code: input on stdin,
// output captured, nothing of the program's (files, environment, working
// directory, trace) kept, and the interpreter isolated from the
// environment (-I) and from site (-S).
func options(base nsjail.Options, stdin []byte, code string, args ...string) nsjail.Options {
	o := base
	o.Code, o.File, o.Args, o.PythonFlags = &code, "", args, []string{"-I", "-S"}
	o.Stdin, o.Stdout, o.Stderr, o.Capture = bytes.NewReader(stdin), nil, nil, true
	o.OutputLimit, o.Timeout, o.CPUTime = 4<<20, timeout, 0
	o.Workdir, o.Env, o.HostFiles, o.Files = "/tmp", nil, nil, nil
	o.Trace, o.Before = false, nil
	return o
}
