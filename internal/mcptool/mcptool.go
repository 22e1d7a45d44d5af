// Package mcptool is microbox as a tool for agents, over the Model Context
// Protocol (the official Go SDK): one tool, run_python, whose input is a
// batch task (internal/batch's schema, less "id" and "file") and whose
// output is exec's result contract, as structured content with a short
// text summary. It is served on stdio by `microbox mcp` and over
// streamable HTTP at /mcp by `microbox serve --http`; runs go through
// internal/service like the HTTP API's.
package mcptool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/microbox/microbox/internal/batch"
	"github.com/microbox/microbox/internal/policy"
	"github.com/microbox/microbox/internal/service"
	"github.com/microbox/microbox/internal/session"
)

// ToolName is the tool's name.
const ToolName = "run_python"

// The tool's schemas: its input is the batch task's fields the tool
// accepts, its output the result contract (schema.go, from their
// declarations).
var (
	inputSchema  = taskSchema()
	outputSchema = resultSchema()
)

// NewServer is an MCP server with the run_python tool, running its calls
// through svc, and the session tools (sessions.go) of sessions' if it is
// not nil.
func NewServer(svc *service.Service, sessions *session.Manager, version string) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "microbox", Title: "microbox", Version: version}, nil)
	no := false
	mcp.AddTool(s, &mcp.Tool{
		Name:  ToolName,
		Title: "Run Python in a microbox sandbox",
		Description: "Run a Python program in a fresh, isolated Linux sandbox (microbox) and get how it ended: " +
			"status (ok, nonzero, signaled, timeout, memory, output_limit, sandbox_error, rejected), exit_code, " +
			"stdout, stderr, wall and CPU time, peak memory. The sandbox has no network, a read-only Python root, " +
			"a small writable /tmp, memory, CPU, process and time limits, and is discarded after the run: nothing " +
			"persists between calls. Put data in `files` and `stdin`; print results to stdout.",
		InputSchema:  inputSchema,
		OutputSchema: outputSchema,
		Annotations: &mcp.ToolAnnotations{
			Title:           "Run Python in a sandbox",
			ReadOnlyHint:    true, // each run's sandbox is its own and discarded: nothing outside changes
			DestructiveHint: &no,
			IdempotentHint:  false, // a program may print something new each time
			OpenWorldHint:   &no,   // no network inside
		},
	}, tool{svc}.call)
	if sessions != nil {
		addSessionTools(s, sessions)
	}
	return s
}

// HTTPHandler serves the MCP server over streamable HTTP (the API's /mcp),
// stateless: each request stands alone, as the HTTP API's runs do.
func HTTPHandler(svc *service.Service, sessions *session.Manager, version string, maxBody int64) http.Handler {
	s := NewServer(svc, sessions, version)
	return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s },
		&mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true, MaxRequestBodyBytes: maxBody})
}

// ServeStdio serves the MCP server on stdin and stdout until the client
// leaves or ctx ends. A line that is not a JSON-RPC message, or is longer
// than maxLine bytes, is answered with JSON-RPC's error and the session
// goes on (stdio.go).
func ServeStdio(ctx context.Context, svc *service.Service, sessions *session.Manager, version string, maxLine int) error {
	t := &lineTransport{in: os.Stdin, out: os.Stdout, maxLine: maxLine}
	err := NewServer(svc, sessions, version).Run(ctx, t)
	if err != nil && (errors.Is(err, context.Canceled) || ctx.Err() != nil) {
		return nil
	}
	return err
}

type tool struct{ svc *service.Service }

// call runs one tool call. Input the task refuses and a full queue are
// tool errors (the agent can fix or retry); a program that fails is a
// result like any other.
func (t tool) call(ctx context.Context, req *mcp.CallToolRequest, in map[string]any) (*mcp.CallToolResult, *policy.Result, error) {
	line, err := json.Marshal(in)
	if err != nil {
		return nil, nil, err
	}
	task, err := batch.DecodeTask(line)
	if err != nil {
		return nil, nil, err
	}
	tk, run, err := t.svc.Admit(ctx, task) // admission first: a refused call costs nothing
	var res *policy.Result
	switch {
	case errors.Is(err, service.ErrBusy):
		return nil, nil, fmt.Errorf("busy: %v; call again shortly", err)
	case batch.IsBadInput(err):
		return nil, nil, err
	case err != nil:
		res = t.svc.NotRun(err)
	default:
		t.svc.Run(ctx, tk, run, "mcp", func(r *policy.Result) { res = r })
		if res.Unavailable != nil { // no verdict: the same call may succeed
			return nil, nil, fmt.Errorf("busy: the run could not start, the server is %v; call again shortly", res.Unavailable)
		}
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: Summary(res)}}}, res, nil
}

// summaryMax bounds each stream in the text summary; the structured
// content has all of it.
const summaryMax = 2000

// Summary is a run's result in a few lines for an agent to read: the
// verdict, then stdout and stderr (their ends, when long).
func Summary(res *policy.Result) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s", res.Status)
	if res.ExitCode != nil {
		fmt.Fprintf(&b, " (exit %d)", *res.ExitCode)
	}
	if res.Error != nil {
		fmt.Fprintf(&b, ": %s", *res.Error)
	}
	fmt.Fprintf(&b, " in %.0f ms\n", res.WallTimeMs)
	for _, s := range []struct{ name, text string }{{"stdout", res.Stdout}, {"stderr", res.Stderr}} {
		if s.text == "" {
			continue
		}
		text := s.text
		if len(text) > summaryMax {
			text = "..." + text[len(text)-summaryMax:]
		}
		fmt.Fprintf(&b, "--- %s\n%s", s.name, text)
		if !strings.HasSuffix(text, "\n") {
			b.WriteString("\n")
		}
	}
	fetchedSummary(&b, res.Fetched)
	return b.String()
}
