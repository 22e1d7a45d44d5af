package httpapi

// SandboxFusion's languages on /run_code: its names ("python", "cpp",
// "nodejs", "bash"; "c" is microbox's own) onto the task's "language",
// and a compiled program's compile step onto its "compile_result".

import (
	"fmt"

	"github.com/microbox/microbox/internal/lang"
	"github.com/microbox/microbox/result"
)

// setLanguage puts the request's language, and for a compiled one its
// compile_timeout, into the task (whose ceilings then bound it, named
// "compile_timeout" as SandboxFusion names it). SandboxFusion ignores
// compile_timeout for an interpreted language; so does this.
func (req *runCodeRequest) setLanguage(task map[string]any) error {
	l, err := lang.Lookup(*req.Language)
	if err != nil || *req.Language == "" {
		return fmt.Errorf(`"language" %q: microbox runs %s (SandboxFusion's names: python, cpp, nodejs, bash)`, *req.Language, lang.NamesAndAliases())
	}
	task["language"] = l.Name
	if t := req.CompileTimeout; t != nil && l.Compiled() {
		if !(*t > 0) { // NaN too
			return fmt.Errorf(`"compile_timeout" %v: give a positive number of seconds, e.g. 10`, *t)
		}
		task["compile_timeout"] = float64(*t)
	}
	return nil
}

// compileResult is a compile step's result as SandboxFusion's
// compile_result (nil: no compile step). Its stdout is the compiler's,
// which microbox sends to stderr: the binary left on stdout.
func compileResult(res *result.Result) *commandRunResult {
	c := res.Compile
	if c == nil {
		return nil
	}
	secs := c.WallTimeMs / 1000
	empty := ""
	cr := &commandRunResult{Status: "Finished", ExecutionTime: &secs, Stdout: &empty, Stderr: &c.Stderr}
	switch c.Status {
	case result.StatusTimeout:
		cr.Status = "TimeLimitExceeded"
	case result.StatusSandboxError:
		cr.Status = "Error"
	default:
		cr.ReturnCode = returnCode(c)
	}
	return cr
}

// sandboxFusionAnswer is the response to a run's result, its long
// strings held (writeAnswer): the run's output when it ran (a compile
// error has no run_result to hold it in), and the compiler's messages.
func sandboxFusionAnswer(res *result.Result, pod *string) (runCodeResponse, longStrings) {
	var long longStrings
	held := *res
	if res.Status != result.StatusCompileError {
		held = *long.result(res)
	}
	if c := res.Compile; c != nil {
		compile := *c
		compile.Stderr = long.hold(c.Stderr)
		held.Compile = &compile
	}
	return sandboxFusionResponse(&held, pod), long
}
