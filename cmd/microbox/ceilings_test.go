package main

// The operator's ceilings (--max-*): a task over one, or outside the
// kernel's range, is refused as bad input naming the key, the value and
// the ceiling, through every front end (HTTP /v1/runs, /v1/batch,
// SandboxFusion's /run_code, MCP, batch lines); a lower value runs, and a
// ceiling the operator raised lets more through.

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// overCeiling are tasks over the default server's ceilings (its own
// defaults: 256M, 10s, 1 core, 128 pids, 1M of output), each with what
// the refusal must say.
var overCeiling = map[string][]string{
	`{"code": "print(1)", "mem": "999999T"}`:                  {`"mem" 999999T is over this server's ceiling 256M: ask for at most 256M`, "--max-mem"},
	`{"code": "print(1)", "timeout": 86400}`:                  {`"timeout" 86400 is over this server's ceiling 10s`, "--max-timeout"},
	`{"code": "print(1)", "cpus": 1e300}`:                     {`"cpus" 1e+300 is over this server's ceiling 1`, "--max-cpus"},
	`{"code": "print(1)", "cpus": 1e19}`:                      {`"cpus" 1e+19 is over this server's ceiling 1`, "--max-cpus"},
	`{"code": "print(1)", "pids": 100000}`:                    {`"pids" 100000 is over this server's ceiling 128`, "--max-pids"},
	`{"code": "print(1)", "pids": 9223372036854775807}`:       {`"pids" 9223372036854775807 is over this server's ceiling 128`, "--max-pids"},
	`{"code": "print(1)", "output_limit": "4g"}`:              {`"output_limit" 4g is over this server's ceiling 1M`, "--max-output-limit"},
	`{"code": "print(1)", "redact_patterns": ["A=a", "B=b"]}`: {`"redact_patterns" has 2 patterns, over this server's ceiling 1`, "--max-redact-patterns"},
}

func TestCeilingsHTTP(t *testing.T) {
	s := startAPI(t, "--max-redact-patterns", "1")
	for task, want := range overCeiling {
		code, body := s.post(t, "/v1/runs", task)
		wantError(t, code, body, http.StatusBadRequest, want[0])
		wantError(t, code, body, http.StatusBadRequest, "start the server with "+want[1])
	}
	if r := s.runTask(t, `{"code": "print(1)", "mem": "128M", "timeout": 5, "cpus": 0.5, "pids": 64, "output_limit": "4K"}`); r.Status != "ok" {
		t.Errorf("lower limits: %+v", r)
	}
	// Messages to a task's caller speak its keys, never the server's flags.
	code, body := s.post(t, "/v1/runs", `{"code": "print(1)", "preload": ["json"]}`)
	wantError(t, code, body, http.StatusBadRequest, `"preload" needs "zygote"`)
	// SandboxFusion's fields, by their names, in its 422: 2^44+1 MiB
	// would wrap into a 1 MiB limit in bytes.
	code, body = s.post(t, "/run_code", `{"code": "print(1)", "language": "python", "memory_limit_MB": 17592186044417}`)
	wantDetail(t, code, body, `"memory_limit_MB" 17592186044417 is over this server's ceiling 256: ask for at most 256, or start the server with --max-mem`)
	code, body = s.post(t, "/run_code", `{"code": "print(1)", "language": "python", "run_timeout": 86400}`)
	wantDetail(t, code, body, `"run_timeout" 86400 is over this server's ceiling 10`)
	code, body = s.post(t, "/run_code", `{"code": "print(1)", "language": "python", "memory_limit_MB": 64, "run_timeout": 5}`)
	if code != http.StatusOK || !strings.Contains(string(body), `"Success"`) {
		t.Errorf("/run_code under the ceilings: %d %s", code, body)
	}
	// A batch's line over a ceiling gets its error; the others run.
	code, body = s.post(t, "/v1/batch?order=input", `{"id": 1, "code": "print(1)"}
{"id": 2, "code": "print(2)", "mem": "999999T"}
{"id": 3, "code": "print(3)"}
`)
	lines := strings.Split(strings.TrimSpace(string(body)), "\n")
	if code != http.StatusOK || len(lines) != 3 || !strings.Contains(lines[0], `"ok"`) || !strings.Contains(lines[2], `"ok"`) ||
		!strings.Contains(lines[1], `\"mem\" 999999T is over this server's ceiling 256M`) {
		t.Errorf("batch: %d\n%s", code, body)
	}
}

// Ceilings the operator raised: a limit under them runs; past the
// kernel's range, it is still refused, as the task's fault, not a
// sandbox_error naming the server's cgroups.
func TestCeilingsRaised(t *testing.T) {
	s := startAPI(t, "--max-mem", "1g", "--max-cpus", "1e300", "--max-pids", "9223372036854775807")
	r := s.runTask(t, `{"code": "b = bytearray(400 << 20); print(len(b) >> 20)", "mem": "512M", "tmpfs_size": "64M"}`)
	if r.Status != "ok" || r.Stdout != "400\n" {
		t.Errorf("512M under --max-mem 1g: %s %s %v", r.Status, r.Stdout, deref(r.Error))
	}
	for task, want := range map[string]string{
		`{"code": "print(1)", "mem": "2g"}`:                 `"mem" 2g is over this server's ceiling 1G: ask for at most 1G, or start the server with --max-mem`,
		`{"code": "print(1)", "cpus": 1e19}`:                `"cpus" 1e+19 is outside the kernel's range`,
		`{"code": "print(1)", "cpus": 1e-300}`:              `"cpus" 1e-300 is outside the kernel's range: give 0.01 to`,
		`{"code": "print(1)", "pids": 9223372036854775807}`: `"pids" 9223372036854775807 is outside the kernel's range: give at most 4194304`,
	} {
		code, body := s.post(t, "/v1/runs", task)
		wantError(t, code, body, http.StatusBadRequest, want)
		if strings.Contains(string(body), "/sys/fs/cgroup") || strings.Contains(string(body), "sandbox_error") {
			t.Errorf("%s: %s", task, body)
		}
	}
}

// `microbox mcp --mem 128M --timeout 2s`: an agent asking for 1g and 20 s
// gets a tool error naming the field, the value and the ceiling.
func TestCeilingsMCP(t *testing.T) {
	cmd := exec.Command(microbox, "mcp", "--mem", "128M", "--timeout", "2s")
	cmd.Env = append(os.Environ(), "MICROBOX_ROOTFS=")
	client := mcp.NewClient(&mcp.Implementation{Name: "microbox-test", Version: "1"}, nil)
	session, err := client.Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer session.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	call := func(args map[string]any) (*mcp.CallToolResult, string) {
		res, err := session.CallTool(ctx, &mcp.CallToolParams{Name: "run_python", Arguments: args})
		if err != nil {
			t.Fatal(err)
		}
		return res, res.Content[0].(*mcp.TextContent).Text
	}
	res, text := call(map[string]any{"code": "print(1)", "mem": "1g", "timeout": 20})
	if !res.IsError || !strings.Contains(text, `"mem" 1g is over this server's ceiling 128M: ask for at most 128M, or start the server with --max-mem`) {
		t.Errorf("mem 1g under mcp --mem 128M: %v %s", res.IsError, text)
	}
	res, text = call(map[string]any{"code": "print(1)", "timeout": 20})
	if !res.IsError || !strings.Contains(text, `"timeout" 20 is over this server's ceiling 2s`) {
		t.Errorf("timeout 20 under mcp --timeout 2s: %v %s", res.IsError, text)
	}
	res, text = call(map[string]any{"code": "print(1)", "mem": "64M", "timeout": 1})
	if out, _ := res.StructuredContent.(map[string]any); res.IsError || out["status"] != "ok" {
		t.Errorf("lower limits: %s", text)
	}
}

// A batch line over a ceiling gets its line's error; the other lines
// run; --max-mem 1g lets 512M through.
func TestCeilingsBatch(t *testing.T) {
	in := `{"id": 1, "code": "print(1)"}
{"id": 2, "code": "print(2)", "mem": "512M"}
{"id": 3, "code": "print(3)", "timeout": 86400}
{"id": 4, "code": "print(4)", "mem": "64M"}
`
	for _, c := range []struct {
		args []string
		want []string // each line's status, or its error
	}{
		{nil, []string{"ok", `"mem" 512M is over this batch's ceiling 256M: ask for at most 256M, or run the batch with --max-mem`,
			`"timeout" 86400 is over this batch's ceiling 10s`, "ok"}},
		{[]string{"--max-mem", "1g"}, []string{"ok", "ok", `"timeout" 86400 is over this batch's ceiling 10s`, "ok"}},
	} {
		cmd := exec.Command(microbox, append([]string{"batch", "--progress", "never", "-j", "2"}, c.args...)...)
		cmd.Env = append(os.Environ(), "MICROBOX_ROOTFS=")
		cmd.Stdin = strings.NewReader(in)
		out, errOut, code := runCmd(t, cmd)
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		if code != 0 || len(lines) != len(c.want) {
			t.Fatalf("batch %v: exit %d\n%s\n%s", c.args, code, out, errOut)
		}
		for i, line := range lines {
			var r struct {
				Status string
				Error  *string
			}
			json.Unmarshal([]byte(line), &r)
			if r.Status != c.want[i] && (r.Error == nil || !strings.Contains(*r.Error, c.want[i])) {
				t.Errorf("batch %v, line %d: %s, want %s", c.args, i+1, line, c.want[i])
			}
		}
	}
	assertNoRunCgroups(t)
}

// wantDetail checks a 422 answer in FastAPI's shape (/run_code's) whose
// one entry's message has want.
func wantDetail(t *testing.T, code int, body []byte, want string) {
	t.Helper()
	var d struct{ Detail []struct{ Msg string } }
	if code != http.StatusUnprocessableEntity || json.Unmarshal(body, &d) != nil || len(d.Detail) != 1 || !strings.Contains(d.Detail[0].Msg, want) {
		t.Errorf("got %d %s, want 422 with a detail of %q", code, body, want)
	}
}
