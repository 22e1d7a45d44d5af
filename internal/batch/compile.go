package batch

import (
	"bytes"
	"context"
	"fmt"

	"github.com/microbox/microbox/field"
	"github.com/microbox/microbox/internal/lang"
	"github.com/microbox/microbox/internal/policy"
	"github.com/microbox/microbox/nsjail"
	"github.com/microbox/microbox/result"
)

// compiling is run with the spec's compile step first, if it has one
// (nsjail.Spec.Compile): a run of its own on the same host, in a jail of
// its own, whose stdout (the binary) goes into the program's scratch
// area. It never leaves the host's memory: no host directory holds it,
// so nothing is left behind whatever happens. The same step run again
// in this process takes its binary from compiles. A compile step that does
// not succeed is the run's verdict (compile_error, or sandbox_error if
// microbox could not run it) and the program does not start; either way
// the step's own result is in Result.Compile.
func compiling(run policy.Runner) policy.Runner {
	return func(ctx context.Context, s *nsjail.Spec) *result.Result {
		if s.Compile == nil {
			return run(ctx, s)
		}
		step := compiles.get(ctx, s.Compile, func() compiled { return compile(ctx, run, s.Compile) })
		if step.res.Status != result.StatusOK {
			return compileFailed(step.result(), s.SeccompMode)
		}
		s.Files = append(s.Files, nsjail.File{Path: s.Argv[0], Data: step.binary, Mode: 0o755})
		res := run(ctx, s)
		res.Compile = step.result()
		return res
	}
}

// compile runs the compile step c: its result, without the binary
// (its stdout), and the binary if it succeeded.
func compile(ctx context.Context, run policy.Runner, c *nsjail.Spec) compiled {
	var binary bytes.Buffer
	step := *c
	step.Stdout = &binary // raw bytes; the result's copy is text
	res := run(ctx, &step)
	res.Stdout, res.StdoutTruncated = "", false
	if res.Status != result.StatusOK {
		return compiled{res: res}
	}
	return compiled{res: res, binary: binary.Bytes()}
}

// compileFailed is the result of a run whose compile step ended as cres
// did, other than ok: the run did not start.
func compileFailed(cres *result.Result, seccompMode string) *result.Result {
	status := result.StatusCompileError
	if cres.Status == result.StatusSandboxError {
		status = result.StatusSandboxError
	}
	res := result.NotRun(status, "the compile step "+compileWhy(cres), seccompMode)
	res.Unavailable = cres.Unavailable
	res.Compile = cres
	return res
}

// compileWhy says in a few words how a compile step ended short of ok.
func compileWhy(r *result.Result) string {
	switch {
	case r.Status == result.StatusNonzero:
		return fmt.Sprintf("failed: the compiler exited %d (compile.stderr has its messages)", *r.ExitCode)
	case r.Status == result.StatusOutputLimit && r.Limit == result.LimitStdout:
		return "made a binary larger than the compile output limit"
	case r.Status == result.StatusOutputLimit:
		return "wrote more messages than the compile output limit"
	case r.Status == result.StatusTimeout:
		return "reached its time limit"
	case r.Status == result.StatusMemory:
		return "reached its memory limit"
	}
	return "ended " + r.Why()
}

// checkLanguageLayers refuses the policy layers that read Python (the
// module policy, the guard, the risk report) for a program in another
// language, which they would not check at all.
func checkLanguageLayers(o nsjail.Options, lo policy.Options) error {
	l, err := lang.Lookup(o.Language)
	if err != nil || l.IsPython() {
		return nil // the Options' own check names a bad language
	}
	for _, f := range []struct {
		name string
		set  bool
	}{{"DenyModules", len(lo.DenyModules) > 0}, {"AllowModules", len(lo.AllowModules) > 0},
		{"Guard", lo.Guard != ""}, {"MaxRisk", lo.MaxRisk != nil}} {
		if f.set {
			return field.Errorf(f.name, "{"+f.name+"} checks Python programs; {Language} %s has none to check: drop {"+f.name+"}", l.Name)
		}
	}
	return nil
}
