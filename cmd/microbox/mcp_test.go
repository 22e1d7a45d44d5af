package main

// The MCP tool (`microbox mcp`, internal/mcptool) through the official Go
// SDK's own client, on stdio and over the server's streamable HTTP; and
// once through the official TypeScript SDK's client (scripts/mcpclient).

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
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
	if err != nil || len(tools.Tools) != 1 || tools.Tools[0].Name != "run_python" {
		t.Fatalf("tools: %+v %v", tools, err)
	}
	tool := tools.Tools[0]
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
