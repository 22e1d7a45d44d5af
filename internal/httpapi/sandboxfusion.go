package httpapi

// SandboxFusion's POST /run_code, for Python: code written for
// SandboxFusion (RL frameworks' reward functions) works by changing its
// URL. The request becomes a batch task like any other run's; the verdict
// is mapped onto SandboxFusion's response, field by field as
// docs/http-api.md tabulates.

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
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
	"github.com/microbox/microbox/internal/policy"
	"github.com/microbox/microbox/nsjail"
	"github.com/microbox/microbox/result"
)

// runCodeRequest is SandboxFusion's RunCodeRequest.
type runCodeRequest struct {
	Code           *string            `json:"code"`
	Language       *string            `json:"language"`
	Stdin          *string            `json:"stdin"`
	CompileTimeout *float64           `json:"compile_timeout"` // a compiled language's (sandboxfusion_lang.go)
	RunTimeout     *float64           `json:"run_timeout"`
	MemoryLimitMB  *int64             `json:"memory_limit_MB"`
	Files          map[string]*string `json:"files"` // path: base64 content (null: skipped)
	FetchFiles     []string           `json:"fetch_files"`
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

// commandRunResult is SandboxFusion's CommandRunResult.
type commandRunResult struct {
	Status        string   `json:"status"` // Finished, Error, TimeLimitExceeded
	ExecutionTime *float64 `json:"execution_time"`
	ReturnCode    *int     `json:"return_code"`
	Stdout        *string  `json:"stdout"`
	Stderr        *string  `json:"stderr"`
}

// sandboxFusionDefaultTimeout is run_timeout's default in SandboxFusion,
// in seconds.
const sandboxFusionDefaultTimeout = 10.0

// runCode is POST /run_code.
func (a *API) runCode(w http.ResponseWriter, r *http.Request) {
	body, ok := a.readBody(w, r)
	if !ok {
		return
	}
	var req runCodeRequest
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, "not a valid run_code request: %s", strings.TrimPrefix(err.Error(), "json: "))
		return
	}
	t, err := req.task(a.cfg.Service.Base, a.cfg.Service.Limits)
	if err != nil {
		writeError(w, http.StatusBadRequest, "%v", err)
		return
	}
	a.run(w, r, t, true, func(res *policy.Result) {
		answer, long := sandboxFusionAnswer(res.Result)
		writeAnswer(w, http.StatusOK, answer, long)
	})
}

// task is the request as a batch task, within the server's ceilings
// (limits over base, the server's options); the scratch tmpfs is lowered
// to a memory limit below it.
func (req *runCodeRequest) task(base nsjail.Options, limits batch.Limits) (*batch.Task, error) {
	if req.Language == nil || req.Code == nil {
		return nil, fmt.Errorf(`"code" and "language" are required: {"code": "print(1)", "language": "python"}`)
	}
	if len(req.FetchFiles) > 0 {
		return nil, fmt.Errorf(`"fetch_files": microbox returns no files from a run; leave it empty and print what you need to stdout`)
	}
	timeout := sandboxFusionDefaultTimeout
	if req.RunTimeout != nil {
		timeout = *req.RunTimeout
		if err := checkRunTimeout(timeout, base, limits); err != nil {
			return nil, err
		}
	}
	task := map[string]any{"code": *req.Code, "timeout": timeout}
	if err := req.setLanguage(task); err != nil {
		return nil, err
	}
	if req.Stdin != nil {
		task["stdin"] = *req.Stdin
	}
	if m := req.MemoryLimitMB; m != nil && *m > 0 {
		if err := checkMemoryLimitMB(*m, base, limits); err != nil {
			return nil, err
		}
		task["mem"] = *m << 20
		task["tmpfs_size"] = min(base.TmpfsSize, *m<<20)
	}
	files := map[string]string{}
	for _, name := range slices.Sorted(maps.Keys(req.Files)) {
		b64 := req.Files[name]
		if b64 == nil {
			continue // as SandboxFusion: a null content is no file
		}
		data, err := base64.StdEncoding.DecodeString(*b64)
		if err != nil {
			return nil, fmt.Errorf(`"files": %q is not base64 (%v); send each file's content base64-encoded`, name, err)
		}
		files[name] = string(data)
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

// checkRunTimeout refuses a run_timeout (seconds) that is not positive or
// is over the server's timeout ceiling, naming run_timeout.
func checkRunTimeout(secs float64, base nsjail.Options, limits batch.Limits) error {
	if !(secs > 0) { // NaN too
		return fmt.Errorf(`"run_timeout" %v: give a positive number of seconds, e.g. 10`, secs)
	}
	ceiling := limits.Value("timeout", base) / float64(time.Second)
	if secs > ceiling {
		return errors.New(limits.Over(fmt.Sprintf(`"run_timeout" %v is`, secs), "timeout", strconv.FormatFloat(ceiling, 'g', -1, 64)))
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
		return errors.New(limits.Over(fmt.Sprintf(`"memory_limit_MB" %d is`, mb), "mem", strconv.FormatInt(ceiling, 10)))
	}
	return nil
}

// sandboxFusionResponse maps a verdict onto SandboxFusion's response:
// Success for ok; Failed for a program that ran and failed (nonzero, a
// signal, a limit), with TimeLimitExceeded for either time limit;
// SandboxError for microbox's own failure or refusal.
func sandboxFusionResponse(res *result.Result) runCodeResponse {
	secs := res.WallTimeMs / 1000
	run := &commandRunResult{Status: "Finished", ExecutionTime: &secs, Stdout: &res.Stdout, Stderr: &res.Stderr}
	resp := runCodeResponse{Status: "Failed", RunResult: run, CompileResult: compileResult(res), Files: map[string]string{}}
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
