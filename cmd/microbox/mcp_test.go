package main

// The MCP tool (`microbox mcp`, internal/mcptool) through the official Go
// SDK's own client, on stdio and over the server's streamable HTTP; and
// once through the official TypeScript SDK's client (scripts/mcpclient).

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// checkTool lists the tools and calls run_python as an agent would.
func checkTool(t *testing.T, session *mcp.ClientSession) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tools, err := session.ListTools(ctx, nil)
	i := -1
	if err == nil {
		i = slices.IndexFunc(tools.Tools, func(tool *mcp.Tool) bool { return tool.Name == "run_python" })
	}
	if i < 0 {
		t.Fatalf("tools: %+v %v", tools, err)
	}
	tool := tools.Tools[i]
	if a := tool.Annotations; a == nil || a.OpenWorldHint == nil || *a.OpenWorldHint || !a.ReadOnlyHint ||
		!strings.Contains(tool.Description, "no network") {
		t.Errorf("annotations %+v, description %q: want sandboxed, no network (open world false)", a, tool.Description)
	}
	schema, _ := json.Marshal(tool.InputSchema)
	if !strings.Contains(string(schema), `"mem"`) || tool.OutputSchema == nil {
		t.Errorf("input schema %s, output schema %v", schema, tool.OutputSchema)
	}
	res, err := session.CallTool(ctx, &mcp.CallToolParams{Name: "run_python",
		Arguments: map[string]any{"code": "import sys; print(sys.stdin.read() * 2)", "stdin": "ab", "timeout": 5}})
	if err != nil || res.IsError {
		t.Fatalf("call: %+v %v", res, err)
	}
	out, _ := res.StructuredContent.(map[string]any)
	if out["status"] != "ok" || out["stdout"] != "abab\n" {
		t.Errorf("structured content %v", res.StructuredContent)
	}
	if text, ok := res.Content[0].(*mcp.TextContent); !ok || !strings.HasPrefix(text.Text, "ok (exit 0)") || !strings.Contains(text.Text, "abab") {
		t.Errorf("text summary %+v", res.Content)
	}
	res, err = session.CallTool(ctx, &mcp.CallToolParams{Name: "run_python",
		Arguments: map[string]any{"code": "while True: pass", "timeout": 0.3}})
	if out, _ := res.StructuredContent.(map[string]any); err != nil || res.IsError || out["status"] != "timeout" {
		t.Errorf("a program that times out: %+v %v", res, err)
	}
	res, err = session.CallTool(ctx, &mcp.CallToolParams{Name: "run_python",
		Arguments: map[string]any{"code": "1", "mem": "12Q"}})
	if err != nil || !res.IsError || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, `"mem" "12Q"`) {
		t.Errorf("bad input: %+v %v, want a tool error naming \"mem\"", res, err)
	}
	res, err = session.CallTool(ctx, &mcp.CallToolParams{Name: "run_python",
		Arguments: map[string]any{"code": "1", "file": "/etc/passwd"}})
	if err != nil || !res.IsError {
		t.Errorf("a host file: %+v %v, want a tool error", res, err)
	}
}

func TestMCPStdio(t *testing.T) {
	cmd := exec.Command(microbox, "mcp")
	cmd.Env = append(os.Environ(), "MICROBOX_ROOTFS=")
	client := mcp.NewClient(&mcp.Implementation{Name: "microbox-test", Version: "1"}, nil)
	session, err := client.Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	checkTool(t, session)
	if err := session.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
	assertNoRunCgroups(t)
}

func TestMCPStreamableHTTP(t *testing.T) {
	s := startAPI(t)
	client := mcp.NewClient(&mcp.Implementation{Name: "microbox-test", Version: "1"}, nil)
	session, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: s.url + "/mcp"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer session.Close()
	checkTool(t, session)
}

// The official TypeScript SDK's client (scripts/mcpclient, installed by
// `npm ci` there, as scripts/deps does) lists the tool and calls it over
// stdio.
func TestMCPNodeClient(t *testing.T) {
	dir, _ := filepath.Abs("../../scripts/mcpclient")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@modelcontextprotocol", "sdk")); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("the Node MCP client is not installed in CI: scripts/deps runs npm ci in %s", dir)
		}
		t.Skipf("the Node MCP client is not installed: run npm ci in %s (scripts/deps does)", dir)
	}
	cmd := exec.Command("node", filepath.Join(dir, "client.mjs"), microbox)
	cmd.Env = append(os.Environ(), "MICROBOX_ROOTFS=")
	out, errOut, code := runCmd(t, cmd)
	if code != 0 || !strings.Contains(string(out), "PASS") {
		t.Fatalf("node client: exit %d\n%s\n%s", code, out, errOut)
	}
	t.Logf("%s", out)
}

// The MCP inspector's CLI (scripts/mcpclient, installed with the client)
// lists the tools (run_python, the session tools) with --strict: its
// schema portability check finds nothing to warn of (no type arrays, no
// schema that constrains nothing, no remote $ref), so agent frameworks
// that take one JSON type per property take the tools.
func TestMCPInspectorStrict(t *testing.T) {
	inspector := mcpInspector(t)
	cmd := exec.Command(inspector, "--cli", microbox, "mcp", "--method", "tools/list", "--strict", "--format", "json")
	// Its catalog goes under HOME: a directory of the test's own.
	cmd.Env = append(os.Environ(), "MICROBOX_ROOTFS=", "HOME="+t.TempDir())
	out, errOut, code := runCmd(t, cmd)
	var answer struct {
		Result struct {
			Tools []struct {
				Name                      string
				InputSchema, OutputSchema map[string]any
			}
		}
		SchemaFindings []any
	}
	if err := json.Unmarshal(out, &answer); err != nil || code != 0 {
		t.Fatalf("inspector: exit %d, %v\n%s\n%s", code, err, out, errOut)
	}
	names := map[string]bool{}
	for _, tool := range answer.Result.Tools {
		names[tool.Name] = true
		if tool.InputSchema == nil || tool.OutputSchema == nil {
			t.Errorf("tool %s lacks an input or output schema", tool.Name)
		}
	}
	if !names["run_python"] || !names["session_run_cell"] {
		t.Fatalf("the inspector listed %s", out)
	}
	if len(answer.SchemaFindings) > 0 || strings.Contains(string(errOut), "Warning:") {
		t.Errorf("--strict found portability problems in the tool's schemas: %v\n%s", answer.SchemaFindings, errOut)
	}
}

// The session tools through the MCP inspector's CLI, a real client that
// connects afresh for each call: over the API's /mcp, a session opened by
// one call keeps its state for the next, and is gone once closed.
func TestMCPInspectorSessions(t *testing.T) {
	inspector := mcpInspector(t)
	s := startAPI(t)
	home := t.TempDir() // the inspector's catalog goes under HOME
	call := func(tool string, args ...string) map[string]any {
		t.Helper()
		argv := []string{"--cli", s.url + "/mcp", "--transport", "http", "--method", "tools/call", "--tool-name", tool, "--format", "json"}
		for _, a := range args {
			argv = append(argv, "--tool-arg", a)
		}
		cmd := exec.Command(inspector, argv...)
		cmd.Env = append(os.Environ(), "HOME="+home)
		out, errOut, code := runCmd(t, cmd)
		var answer struct {
			Result struct {
				IsError           bool           `json:"isError"`
				StructuredContent map[string]any `json:"structuredContent"`
			}
		}
		if err := json.Unmarshal(out, &answer); err != nil || code != 0 || answer.Result.IsError {
			t.Fatalf("inspector %s: exit %d, %v\n%s\n%s", tool, code, err, out, errOut)
		}
		return answer.Result.StructuredContent
	}
	id, _ := call("session_open", `options={"mem": "128M"}`)["id"].(string)
	if id == "" {
		t.Fatal("session_open answered no id")
	}
	call("session_run_cell", "session_id="+id, "code=x = 41")
	if out := call("session_run_cell", "session_id="+id, "code=x + 1"); out["value"] != "42" {
		t.Errorf("the second call's cell: %v", out)
	}
	if out := call("session_close", "session_id="+id); out["reason"] != "deleted" {
		t.Errorf("close: %v", out)
	}
}

// mcpInspector is the MCP inspector's CLI that scripts/mcpclient pins;
// the test skips where it is not installed, except in CI.
func mcpInspector(t *testing.T) string {
	t.Helper()
	dir, _ := filepath.Abs("../../scripts/mcpclient")
	inspector := filepath.Join(dir, "node_modules", ".bin", "mcp-inspector")
	if _, err := os.Stat(inspector); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("the MCP inspector is not installed in CI: scripts/deps runs npm ci in %s", dir)
		}
		t.Skipf("the MCP inspector is not installed: run npm ci in %s (scripts/deps does)", dir)
	}
	return inspector
}

// mcpPipe is a `microbox mcp` process spoken to a line at a time.
type mcpPipe struct {
	cmd     *exec.Cmd
	in      io.WriteCloser
	answers chan map[string]any
}

func startMCP(t *testing.T, args ...string) *mcpPipe {
	t.Helper()
	cmd := exec.Command(microbox, append([]string{"mcp"}, args...)...)
	cmd.Env = append(os.Environ(), "MICROBOX_ROOTFS=")
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &mcpPipe{cmd: cmd, in: in, answers: make(chan map[string]any, 16)}
	go func() {
		defer close(p.answers)
		sc := bufio.NewScanner(out)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var m map[string]any
			if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
				m = map[string]any{"not JSON": sc.Text()}
			}
			p.answers <- m
		}
	}()
	t.Cleanup(func() {
		in.Close()
		if err := cmd.Wait(); err != nil {
			t.Errorf("microbox mcp: %v", err)
		}
	})
	return p
}

// send writes lines to the server's stdin.
func (p *mcpPipe) send(t *testing.T, lines ...string) {
	t.Helper()
	for _, l := range lines {
		if _, err := io.WriteString(p.in, l+"\n"); err != nil {
			t.Fatalf("write: %v (has the server exited?)", err)
		}
	}
}

// answer is the next line the server writes.
func (p *mcpPipe) answer(t *testing.T) map[string]any {
	t.Helper()
	select {
	case m, ok := <-p.answers:
		if !ok {
			t.Fatal("the server closed its stdout: it has exited")
		}
		return m
	case <-time.After(time.Minute):
		t.Fatal("no answer in a minute")
	}
	return nil
}

// wantRPCError checks an answer is JSON-RPC's error code for id.
func wantRPCError(t *testing.T, m map[string]any, code float64, id any, want string) {
	t.Helper()
	e, _ := m["error"].(map[string]any)
	if m["jsonrpc"] != "2.0" || e == nil || e["code"] != code || m["id"] != id || !strings.Contains(fmt.Sprint(e["message"]), want) {
		t.Errorf("answer %v, want error %v for id %v saying %q", m, code, id, want)
	}
	if _, ok := m["id"]; !ok {
		t.Errorf("answer %v has no id (null is due)", m)
	}
}

// A line that is not a JSON-RPC message is answered with JSON-RPC's error
// (-32700 when it is not JSON, -32600 when it is JSON but no message, a
// batch, or longer than --max-message), and the server goes on: a tool
// call after them is answered. The long line is not held (the server's
// peak memory stays below its size).
func TestMCPStdioMalformedLines(t *testing.T) {
	p := startMCP(t, "--max-message", "1M")
	p.send(t, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	if m := p.answer(t); m["id"] != 1.0 || m["result"] == nil {
		t.Fatalf("initialize: %v", m)
	}
	p.send(t, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, "", "this is not json {")
	wantRPCError(t, p.answer(t), -32700, nil, "not JSON")
	p.send(t, `{"hello": "world"}`)
	wantRPCError(t, p.answer(t), -32600, nil, "not a JSON-RPC 2.0 message")
	p.send(t, `{"id": "q7", "method": 12}`)
	wantRPCError(t, p.answer(t), -32600, "q7", "not a JSON-RPC 2.0 message")
	p.send(t, `[{"jsonrpc":"2.0","id":2,"method":"ping"}]`)
	wantRPCError(t, p.answer(t), -32600, nil, "batches")
	long := `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"run_python","arguments":{"code":"#` +
		strings.Repeat("x", 64<<20) + `"}}}`
	p.send(t, long)
	wantRPCError(t, p.answer(t), -32600, nil, fmt.Sprintf("a line of %d bytes is longer than this server's limit of 1MiB", len(long)+1))
	p.send(t, `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"run_python","arguments":{"code":"print(6*7)"}}}`)
	m := p.answer(t)
	res, _ := m["result"].(map[string]any)
	out, _ := res["structuredContent"].(map[string]any)
	if m["id"] != 4.0 || out["status"] != "ok" || out["stdout"] != "42\n" {
		t.Fatalf("tools/call after the bad lines: %v", m)
	}
	status, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	var peakKB int
	for _, l := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			fmt.Sscan(v, &peakKB)
		}
	}
	if peakKB == 0 || peakKB<<10 >= len(long) {
		t.Errorf("peak memory %d KiB: the %d-byte line was held", peakKB, len(long))
	}
}

// A client that writes its requests and closes stdin gets every answer:
// the calls read before the end of input are answered before the server
// ends, not cancelled with it.
func TestMCPStdioAnswersBeforeEOF(t *testing.T) {
	cmd := exec.Command(microbox, "mcp")
	cmd.Env = append(os.Environ(), "MICROBOX_ROOTFS=")
	cmd.Stderr = os.Stderr
	cmd.Stdin = strings.NewReader(strings.Join([]string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"run_python","arguments":{"code":"import time; time.sleep(0.5); print(6*7)"}}}`,
	}, "\n") + "\n")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("microbox mcp: %v\n%s", err, out)
	}
	answered := map[float64]map[string]any{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("not JSON: %q", line)
		}
		if id, ok := m["id"].(float64); ok {
			answered[id] = m
		}
	}
	res, _ := answered[2]["result"].(map[string]any)
	content, _ := res["structuredContent"].(map[string]any)
	if answered[1] == nil || content["status"] != "ok" || content["stdout"] != "42\n" {
		t.Fatalf("answers %v; want initialize's and the tool call's (42)", answered)
	}
}

// The session tools through the Go SDK's client on stdio: state across
// cells, a binary file up and down byte for byte, the close.
func TestMCPSessionTools(t *testing.T) {
	cmd := exec.Command(microbox, "mcp")
	cmd.Env = append(os.Environ(), "MICROBOX_ROOTFS=")
	client := mcp.NewClient(&mcp.Implementation{Name: "microbox-test", Version: "1"}, nil)
	cs, err := client.Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	call := func(name string, args map[string]any) map[string]any {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil || res.IsError {
			t.Fatalf("%s %v: %+v %v", name, args, res, err)
		}
		out, _ := res.StructuredContent.(map[string]any)
		return out
	}
	id, _ := call("session_open", map[string]any{"options": map[string]any{"mem": "128M"}})["id"].(string)
	call("session_run_cell", map[string]any{"session_id": id, "code": "x = 41"})
	if out := call("session_run_cell", map[string]any{"session_id": id, "code": "x + 1"}); out["value"] != "42" {
		t.Errorf("second cell: %v", out)
	}
	all := make([]byte, 256)
	for i := range all {
		all[i] = byte(i)
	}
	b64 := base64.StdEncoding.EncodeToString(all)
	call("session_upload_file", map[string]any{"session_id": id, "path": "in/all.bin", "content_base64": b64})
	if out := call("session_run_cell", map[string]any{"session_id": id, "code": "open('in/all.bin', 'rb').read() == bytes(range(256))"}); out["value"] != "True" {
		t.Errorf("the cell's view of the upload: %v", out)
	}
	if out := call("session_download_file", map[string]any{"session_id": id, "path": "in/all.bin"}); out["content_base64"] != b64 {
		t.Errorf("download: %v", out)
	}
	// Downloads are bounded below the session's file cap: an MCP answer
	// holds a file several times over. Text comes only for small files.
	call("session_run_cell", map[string]any{"session_id": id, "code": "open('big', 'w').write('a' * (8 << 20) + 'a'); open('mid', 'w').write('b' * (2 << 20))"})
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "session_download_file", Arguments: map[string]any{"session_id": id, "path": "big"}})
	if err != nil || !res.IsError || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, "over the 8388608 bytes") {
		t.Errorf("a download past the MCP cap: %+v %v", res, err)
	}
	if out := call("session_download_file", map[string]any{"session_id": id, "path": "mid"}); out["size"] != float64(2<<20) || out["text"] != nil {
		t.Errorf("a 2 MiB download: size %v, text given %v", out["size"], out["text"] != nil)
	}
	if out := call("session_close", map[string]any{"session_id": id}); out["reason"] != "deleted" {
		t.Errorf("close: %v", out)
	}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "session_run_cell", Arguments: map[string]any{"session_id": id, "code": "x"}})
	if err != nil || !res.IsError || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, "has ended (deleted") {
		t.Errorf("a cell after the close: %+v %v", res, err)
	}
}
