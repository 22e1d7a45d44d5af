package httpapi

// SandboxFusion's POST /run_code, for Python: code written for
// SandboxFusion (RL frameworks' reward functions) works by changing its
// URL. The request becomes a batch task like any other run's, run as
// SandboxFusion's runner runs it; the verdict is mapped onto
// SandboxFusion's response, field by field as docs/sandboxfusion.md
// tabulates. sandboxfusion_request.go reads the request as its server
// does.

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/microbox/microbox/internal/batch"
	"github.com/microbox/microbox/internal/lang"
	"github.com/microbox/microbox/internal/policy"
	"github.com/microbox/microbox/nsjail"
	"github.com/microbox/microbox/result"
)

// runCodeRequest is SandboxFusion's RunCodeRequest, its fields in its
// order (that of a 422's entries); decodeRunCode fills it as FastAPI
// does.
type runCodeRequest struct {
	CompileTimeout *laxFloat          `json:"compile_timeout"` // no compile step for Python
	RunTimeout     *laxFloat          `json:"run_timeout"`
	MemoryLimitMB  *laxInt            `json:"memory_limit_MB"`
	Code           *string            `json:"code"`
	Stdin          *string            `json:"stdin"`
	Language       *string            `json:"language"`
	Files          map[string]*string `json:"files"` // path: base64 content (null: skipped)
	FetchFiles     []string           `json:"fetch_files"`
	Args           []string           `json:"args"` // pytest's; SandboxFusion's python runner passes none
}

// runCodeResponse is SandboxFusion's RunCodeResponse.
type runCodeResponse struct {
	Status          string            `json:"status"` // Success, Failed, SandboxError
	Message         string            `json:"message"`
	CompileResult   *commandRunResult `json:"compile_result"`
	RunResult       *commandRunResult `json:"run_result"`
	ExecutorPodName *string           `json:"executor_pod_name"`
	Files           map[string]string `json:"files"`
}

// commandRunResult is SandboxFusion's CommandRunResult, and whether each
// stream was cut at the output limit (microbox's: SandboxFusion cuts
// without saying so).
type commandRunResult struct {
	Status          string   `json:"status"` // Finished, Error, TimeLimitExceeded
	ExecutionTime   *float64 `json:"execution_time"`
	ReturnCode      *int     `json:"return_code"`
	Stdout          *string  `json:"stdout"`
	Stderr          *string  `json:"stderr"`
	StdoutTruncated bool     `json:"stdout_truncated"`
	StderrTruncated bool     `json:"stderr_truncated"`
}

// sandboxFusionDefaultTimeout is run_timeout's default in SandboxFusion,
// in seconds.
const sandboxFusionDefaultTimeout = 10.0

// ignoredFile marks a file SandboxFusion does not write: any whose name
// contains it (its restore_files).
const ignoredFile = "IGNORE_THIS_FILE"

// runCode is POST /run_code.
func (a *API) runCode(w http.ResponseWriter, r *http.Request) {
	body, ok := a.readBody(w, r)
	if !ok {
		return
	}
	req, raw, problems := decodeRunCode(body)
	if len(problems) > 0 {
		writeDetail(w, problems)
		return
	}
	a.fusion.ignored(raw)
	t, err := req.task(a.cfg.Service.Base, a.cfg.Service.Limits, a.fusion.workdir)
	if err != nil {
		writeDetail(w, []fusionDetail{invalid(err, raw, body)})
		return
	}
	badInput := func(err error) { writeDetail(w, []fusionDetail{invalid(err, raw, body)}) }
	a.runAnswering(w, r, t, true, badInput, func(res *policy.Result) {
		answer, long := sandboxFusionAnswer(res.Result, a.fusion.pod)
		writeAnswer(w, http.StatusOK, answer, long)
	})
}

// task is the request as a batch task, within the server's ceilings
// (limits over base, the server's options), run as SandboxFusion's runner
// runs it: Python's code written to a file of its own, run as python
// FILE, in workdir; past the output limit each stream is cut and the run
// goes on; memory runs out as MemoryError in the program (under the
// cgroup's limit, which stays); the scratch tmpfs is lowered to a memory
// limit below it.
func (req *runCodeRequest) task(base nsjail.Options, limits batch.Limits, workdir string) (*batch.Task, error) {
	task := map[string]any{"code": *req.Code, "workdir": workdir, "output_mode": nsjail.OutputTruncate}
	if err := req.setLanguage(task); err != nil {
		return nil, fieldError("language", "%v", err)
	}
	timeout := sandboxFusionDefaultTimeout
	if req.RunTimeout != nil {
		timeout = float64(*req.RunTimeout)
		if err := checkRunTimeout(timeout, base, limits); err != nil {
			return nil, err
		}
	}
	task["timeout"] = timeout
	if task["language"] == lang.Python {
		task["code_path"] = tempName(".py")
	}
	if !base.NoCgroup {
		task["memory_rlimit"] = true
	}
	if req.Stdin != nil {
		task["stdin"] = *req.Stdin
	}
	if len(req.FetchFiles) > 0 {
		task["fetch"] = req.FetchFiles
	}
	if m := req.MemoryLimitMB; m != nil && *m > 0 {
		if err := checkMemoryLimitMB(int64(*m), base, limits); err != nil {
			return nil, err
		}
		task["mem"] = int64(*m) << 20
		task["tmpfs_size"] = min(base.TmpfsSize, int64(*m)<<20)
	}
	files, err := req.decodedFiles()
	if err != nil {
		return nil, err
	}
	line, err := json.Marshal(task)
	if err != nil {
		return nil, err
	}
	t, err := batch.DecodeTask(line)
	if err != nil || len(files) == 0 {
		return t, err
	}
	// The decoded bytes go into the task as they are, not through JSON,
	// whose strings are UTF-8: every byte from 0x80 up would come back
	// as U+FFFD (a 1024-byte blob arrived as 2048 bytes).
	t.Files = files
	return t, nil
}

// decodedFiles are the request's files, decoded, less those SandboxFusion
// does not write: a null content, a name with IGNORE_THIS_FILE in it.
func (req *runCodeRequest) decodedFiles() (map[string]string, error) {
	files := map[string]string{}
	for _, name := range slices.Sorted(maps.Keys(req.Files)) {
		b64 := req.Files[name]
		if b64 == nil || strings.Contains(name, ignoredFile) {
			continue
		}
		data, err := base64.StdEncoding.DecodeString(*b64)
		if err != nil {
			return nil, fieldError("files", `"files": %q is not base64 (%v); send each file's content base64-encoded`, name, err)
		}
		files[name] = string(data)
	}
	return files, nil
}

// checkRunTimeout refuses a run_timeout (seconds) that is not positive or
// is over the server's timeout ceiling, naming run_timeout.
func checkRunTimeout(secs float64, base nsjail.Options, limits batch.Limits) error {
	if !(secs > 0) { // NaN too
		return fieldError("run_timeout", `"run_timeout" %v: give a positive number of seconds, e.g. 10`, secs)
	}
	ceiling := limits.Value("timeout", base) / float64(time.Second)
	if secs > ceiling {
		return fieldError("run_timeout", "%s", limits.Over(fmt.Sprintf(`"run_timeout" %v is`, secs), "timeout", strconv.FormatFloat(ceiling, 'g', -1, 64)))
	}
	return nil
}

// checkMemoryLimitMB refuses a memory_limit_MB over the server's memory
// ceiling, naming memory_limit_MB: in MiB, as the caller wrote it (a
// number past what bytes in an int64 hold would wrap into a tiny limit).
func checkMemoryLimitMB(mb int64, base nsjail.Options, limits batch.Limits) error {
	bytes := limits.Value("mem", base)
	if math.IsInf(bytes, 1) {
		return nil // a server with no cgroup: Options refuses any memory limit
	}
	ceiling := int64(bytes) >> 20
	if mb > ceiling {
		return fieldError("memory_limit_MB", "%s", limits.Over(fmt.Sprintf(`"memory_limit_MB" %d is`, mb), "mem", strconv.FormatInt(ceiling, 10)))
	}
	return nil
}

// sandboxFusionResponse maps a verdict onto SandboxFusion's response:
// Success for ok; Failed for a program that ran and failed (nonzero, a
// signal, a limit), with TimeLimitExceeded for either time limit;
// SandboxError for microbox's own failure or refusal.
func sandboxFusionResponse(res *result.Result, pod *string) runCodeResponse {
	secs := res.WallTimeMs / 1000
	run := &commandRunResult{Status: "Finished", ExecutionTime: &secs, Stdout: &res.Stdout, Stderr: &res.Stderr,
		StdoutTruncated: res.StdoutTruncated, StderrTruncated: res.StderrTruncated}
	resp := runCodeResponse{Status: "Failed", RunResult: run, CompileResult: compileResult(res), ExecutorPodName: pod, Files: fetchedFiles(res)}
	switch res.Status {
	case result.StatusCompileError: // as SandboxFusion: Failed, no run_result
		resp.RunResult = nil
	case result.StatusOK:
		resp.Status = "Success"
		run.ReturnCode = res.ExitCode
	case result.StatusTimeout:
		run.Status = "TimeLimitExceeded"
	case result.StatusSandboxError, result.StatusRejected:
		resp.Status, run.Status = "SandboxError", "Error"
		if res.Error != nil {
			resp.Message = *res.Error
		}
	default: // nonzero, signaled, memory, output_limit
		run.ReturnCode = returnCode(res)
	}
	return resp
}

// fetchedFiles are the files fetched as SandboxFusion returns them, by
// the name asked for: base64 contents, of those fetched; one missing, not
// a regular file or over a ceiling is left out, as SandboxFusion leaves
// out what is not a file (the error is in /v1/runs's "fetched").
func fetchedFiles(res *result.Result) map[string]string {
	files := map[string]string{}
	for name, f := range res.Fetched {
		if f.Error == "" {
			files[name] = base64.StdEncoding.EncodeToString(f.Data)
		}
	}
	return files
}

// returnCode is the program's code as Python's subprocess reports it: its
// exit status, or -N for signal N; a run microbox killed for a limit
// (memory, output) died of SIGKILL.
func returnCode(res *result.Result) *int {
	code := -int(unix.SIGKILL)
	switch {
	case res.ExitCode != nil:
		code = *res.ExitCode
	case res.Signal != nil:
		code = -int(unix.SignalNum(*res.Signal))
	}
	return &code
}
