package openapi

// The result contract's types, as the schemas of the answers that carry
// it and of the MCP tool's output: their statuses and what their fields
// mean (docs/result-contract.md says it at length).

import (
	"encoding/json"
	"reflect"
	"time"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/microbox/microbox/internal/batch"
	"github.com/microbox/microbox/internal/doctor"
	"github.com/microbox/microbox/internal/policy"
	"github.com/microbox/microbox/internal/service"
	"github.com/microbox/microbox/result"
)

// ResultTypes are what the result's types do not say themselves.
var ResultTypes = Types{
	Enums: map[reflect.Type][]string{
		reflect.TypeFor[result.Status](): stringValues(result.Statuses),
		reflect.TypeFor[service.State](): stringValues(service.States),
		reflect.TypeFor[doctor.Status](): {string(doctor.OK), string(doctor.Warn), string(doctor.Fail)},
	},
	Docs: map[reflect.Type]map[string]string{
		reflect.TypeFor[result.Result](): {
			"status":            "The verdict (docs/result-contract.md): ok, nonzero, signaled, timeout, memory, output_limit, sandbox_error, rejected or compile_error.",
			"exit_code":         "The program's exit code; null when it did not exit by itself.",
			"signal":            "The signal that killed the program (status signaled), e.g. SIGSEGV; else null.",
			"stdout":            "The program's standard output (invalid UTF-8 replaced with U+FFFD).",
			"stderr":            "The program's standard error (invalid UTF-8 replaced with U+FFFD).",
			"stdout_truncated":  "stdout passed the output limit and was cut there.",
			"stderr_truncated":  "stderr passed the output limit and was cut there.",
			"wall_time_ms":      "The program's wall time, from its execve to its exit.",
			"cpu_time_ms":       "CPU time of all the run's processes; null when unknown.",
			"peak_memory_bytes": "Peak memory of the run's cgroup; null when unknown.",
			"error":             "Why microbox could not run the program, or refused it, in one line; else null.",
			"limit":             "The limit that ended the run: wall, cpu, memory, stdout or stderr; absent when none did.",
			"cgroup":            "The cgroup hierarchy that enforced the limits: v2, v1 or none.",
			"seccomp":           "The seccomp filter's mode.",
			"setup_time_ms":     "How long the sandbox took before the program started.",
			"trace":             "The set-up phases, in ms from the run's start (with trace).",
			"start":             "For a run that asked for a warm interpreter: zygote if it forked from one, cold if it started afresh.",
			"fetched":           "The files asked for with fetch, by name: each one's size and bytes (base64), or why it was not fetched.",
			"compile":           "A compiled language's compile step, as a result of its own (its stdout, the binary, left out); absent for an interpreted language.",
			"cached":            "On a compile step: its binary was reused from the same step run earlier in this process.",
		},
		reflect.TypeFor[policy.Result](): {
			"redactions":        "What redaction masked in stdout and stderr, by kind (with redact, when anything was).",
			"redaction_stopped": "Redaction ran out of its budget or the caller left: stdout and stderr are withheld, error says why.",
			"risk":              "The static risk report the run was judged by (with max_risk).",
		},
		reflect.TypeFor[batch.Result](): {
			"id":   "The task's id, as it was sent.",
			"line": "The task's line in the input, from 1.",
		},
		reflect.TypeFor[service.Status](): {
			"id":     "The run's id.",
			"state":  "queued, running, done (result holds the verdict) or not_started (error says why; send it again).",
			"result": "The run's result, once done.",
			"error":  "Why the run could not start (state not_started).",
		},
	},
	Marshaled: map[reflect.Type]*openapi3.Schema{
		reflect.TypeFor[result.Fetched](): fetchedSchema(),
		// A batch line's id is the task's, any JSON value as it was sent.
		reflect.TypeFor[json.RawMessage](): {},
		reflect.TypeFor[time.Time]():       {Type: typ(openapi3.TypeString), Format: "date-time"},
	},
}

// fetchedSchema is a fetched file's JSON (result.Fetched's MarshalJSON):
// its size and bytes, or why it is not there.
func fetchedSchema() *openapi3.Schema {
	fetched := &openapi3.Schema{Type: typ(openapi3.TypeObject), Required: []string{"size", "base64"},
		Properties: openapi3.Schemas{
			"size":   openapi3.NewSchemaRef("", &openapi3.Schema{Type: typ(openapi3.TypeInteger), Min: new(0.0), Description: "The file's size in bytes."}),
			"base64": openapi3.NewSchemaRef("", &openapi3.Schema{Type: typ(openapi3.TypeString), Description: "The file's bytes, base64."}),
		}}
	missing := &openapi3.Schema{Type: typ(openapi3.TypeObject), Required: []string{"error"},
		Properties: openapi3.Schemas{
			"error": openapi3.NewSchemaRef("", &openapi3.Schema{Type: typ(openapi3.TypeString), Description: "Why the file was not fetched: missing, not a regular file, over a ceiling."}),
		}}
	fetched.AdditionalProperties, missing.AdditionalProperties = openapi3.AdditionalProperties{Has: new(false)}, openapi3.AdditionalProperties{Has: new(false)}
	return anyOf(fetched, missing)
}

// ResultSchema is the schema of a run's result: the result contract with
// what the policy layers add (policy.Result), as every front end writes it.
func ResultSchema() (*openapi3.Schema, error) {
	return ResultTypes.Schema(reflect.TypeFor[policy.Result]())
}

// stringValues are a string type's values as strings.
func stringValues[S ~string](values []S) []string {
	out := make([]string, len(values))
	for i, v := range values {
		out[i] = string(v)
	}
	return out
}
