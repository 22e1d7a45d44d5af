package main

// Languages beside Python (internal/lang, docs/languages.md): each one's
// runs end with the verdicts a Python run's would, and a compiled one's
// compile step is a run of its own, reported apart.

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/microbox/microbox/internal/policy"
	"github.com/microbox/microbox/result"
)

// langCase is one program per language for each verdict.
type langCase struct {
	lang                                     string
	hello, echo, exit3, spin, hog, compileOK string
}

var langCases = []langCase{
	{lang: "c",
		hello: `#include <stdio.h>
int main(void) { puts("hello"); return 0; }`,
		echo: `#include <stdio.h>
int main(void) { char b[64]; if (fgets(b, sizeof b, stdin)) fputs(b, stdout); return 0; }`,
		exit3: `int main(void) { return 3; }`,
		spin:  `int main(void) { volatile int x = 1; while (x) {} return 0; }`,
		hog: `#include <stdlib.h>
#include <string.h>
int main(void) { for (;;) { char *p = malloc(1 << 20); if (!p) return 9; memset(p, 1, 1 << 20); } }`},
	{lang: "cpp",
		hello: `#include <iostream>
int main() { std::cout << "hello" << std::endl; }`,
		echo: `#include <iostream>
#include <string>
int main() { std::string s; std::getline(std::cin, s); std::cout << s << "\n"; }`,
		exit3: `int main() { return 3; }`,
		spin:  `int main() { volatile bool x = true; while (x) {} }`,
		hog: `#include <vector>
int main() { std::vector<std::vector<char>> v; for (;;) v.emplace_back(1 << 20, 1); }`},
	{lang: "bash",
		hello: `echo hello`,
		echo:  `read -r line; echo "$line"`,
		exit3: `exit 3`,
		spin:  `while :; do :; done`,
		hog:   `x=y; while :; do x="$x$x"; done`},
	{lang: "node",
		hello: `console.log("hello")`,
		echo:  `process.stdout.write(require("fs").readFileSync(0, "utf8"))`,
		exit3: `process.exit(3)`,
		spin:  `for (;;) {}`,
		hog:   `const a = []; for (;;) a.push(Buffer.alloc(1 << 20, 1))`},
}

// Each language's hello world, stdin, exit code, time limit and memory
// limit: the same verdicts as Python's, a compiled one's with the
// compile step's result beside them.
func TestLanguageVerdicts(t *testing.T) {
	for _, c := range langCases {
		t.Run(c.lang, func(t *testing.T) {
			run := func(stdin, code string, flags ...string) policy.Result {
				return execJSON(t, stdin, append(append([]string{"--lang", c.lang}, flags...), "-c", code)...)
			}
			r := run("", c.hello)
			wantStatus(t, r, result.StatusOK)
			if r.Stdout != "hello\n" {
				t.Errorf("hello: stdout %q", r.Stdout)
			}
			compiled := c.lang == "c" || c.lang == "cpp"
			if compiled != (r.Compile != nil) {
				t.Errorf("compile result %+v for %s", r.Compile, c.lang)
			}
			if compiled && (r.Compile.Status != result.StatusOK || r.Compile.Stdout != "") {
				t.Errorf("compile step: %+v (its stdout, the binary, must be left out)", r.Compile)
			}
			if r := run("a line\n", c.echo); r.Status != result.StatusOK || r.Stdout != "a line\n" {
				t.Errorf("stdin: %s stdout %q stderr %q", r.Status, r.Stdout, r.Stderr)
			}
			r = run("", c.exit3)
			wantStatus(t, r, result.StatusNonzero)
			if *r.ExitCode != 3 {
				t.Errorf("exit code %d, want 3", *r.ExitCode)
			}
			r = run("", c.spin, "--timeout", "1s")
			wantStatus(t, r, result.StatusTimeout)
			r = run("", c.hog, "--mem", "64M", "--tmpfs-size", "16M", "--timeout", "20s")
			wantStatus(t, r, result.StatusMemory)
		})
	}
}

// A compile error is the run's verdict compile_error (exit status 120),
// not one of the program's: the program does not start, and the
// compiler's messages are in compile.stderr (and on stderr without
// --json).
func TestLanguageCompileError(t *testing.T) {
	for _, lang := range []string{"c", "cpp"} {
		r := execJSON(t, "", "--lang", lang, "-c", "int main() { return undeclared; }")
		wantStatus(t, r, result.StatusCompileError)
		if r.ExitCode != nil || r.Stdout != "" || r.Compile == nil || r.Compile.Status != result.StatusNonzero ||
			!strings.Contains(r.Compile.Stderr, "undeclared") || r.Error == nil {
			t.Errorf("%s: %+v, compile %+v", lang, r, r.Compile)
		}
		cmd := exec.Command(microbox, "exec", "--lang", lang, "-c", "int main() { return undeclared; }")
		_, stderr, code := runCmd(t, cmd)
		if code != result.ExitCompileError || !strings.Contains(string(stderr), "undeclared") {
			t.Errorf("%s without --json: exit %d, stderr %q", lang, code, stderr)
		}
	}
}

// The compile step has limits of its own: time, memory and output (its
// stdout carries the binary); one it exceeds is compile_error with the
// limit in compile, and the run's own limits do not apply to it.
func TestLanguageCompileLimits(t *testing.T) {
	heavy := "#include <bits/stdc++.h>\nint main() { std::map<int, std::string> m; m[1] = \"x\"; std::cout << m[1]; }"
	for _, c := range []struct {
		flags  []string
		status result.Status
		limit  string
	}{
		{[]string{"--compile-timeout", "50ms"}, result.StatusTimeout, result.LimitWall},
		{[]string{"--compile-mem", "32M", "--tmpfs-size", "16M"}, result.StatusMemory, result.LimitMemory},
		{[]string{"--compile-output-limit", "4K"}, result.StatusOutputLimit, result.LimitStdout},
	} {
		r := execJSON(t, "", append(append([]string{"--lang", "cpp"}, c.flags...), "-c", heavy)...)
		wantStatus(t, r, result.StatusCompileError)
		if r.Compile == nil || r.Compile.Status != c.status || r.Compile.Limit != c.limit {
			t.Errorf("%v: compile %+v, want %s (%s)", c.flags, r.Compile, c.status, c.limit)
		}
	}
	// The run's memory limit is the program's, not the compiler's.
	r := execJSON(t, "", "--lang", "cpp", "--mem", "16M", "--tmpfs-size", "8M", "-c", heavy)
	wantStatus(t, r, result.StatusOK)
	// Limits a compile step cannot have are refused by name.
	for _, c := range [][]string{{"--compile-timeout", "0"}, {"--compile-mem", "8M"}} {
		cmd := exec.Command(microbox, append(append([]string{"exec", "--lang", "cpp"}, c...), "-c", "int main(){}")...)
		_, stderr, code := runCmd(t, cmd)
		if code != result.ExitSandboxError || !strings.Contains(string(stderr), c[0]) || bytes.Count(stderr, []byte("\n")) != 1 {
			t.Errorf("%v: exit %d, stderr %q", c, code, stderr)
		}
	}
}

// A program file keeps its name, and files sent with it (a header) are
// the compile step's too.
func TestLanguageFileAndHeaders(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "solve.cc")
	os.WriteFile(src, []byte("#include \"add.h\"\n#include <cstdio>\nint main(int argc, char **argv) { printf(\"%d %s\\n\", add(2, 3), argv[1]); }\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "add.h"), []byte("static int add(int a, int b) { return a + b; }\n"), 0o644)
	r := execJSON(t, "", "--lang", "cpp", "--file", filepath.Join(dir, "add.h"), src, "arg1")
	wantStatus(t, r, result.StatusOK)
	if r.Stdout != "5 arg1\n" {
		t.Errorf("stdout %q", r.Stdout)
	}
}

// A zygote forks a Python interpreter: --zygote with another language is
// refused by name, --zygote-fallback runs it cold.
func TestLanguageZygote(t *testing.T) {
	cmd := exec.Command(microbox, "exec", "--zygote", "--lang", "bash", "-c", "echo hi")
	_, stderr, code := runCmd(t, cmd)
	if code != result.ExitSandboxError || !strings.Contains(string(stderr), "--zygote") || !strings.Contains(string(stderr), "--lang bash") {
		t.Errorf("--zygote --lang bash: exit %d, stderr %q", code, stderr)
	}
	r := execJSON(t, "", "--zygote-fallback", "--lang", "bash", "-c", "echo hi")
	wantStatus(t, r, result.StatusOK)
	if r.Stdout != "hi\n" {
		t.Errorf("--zygote-fallback: stdout %q", r.Stdout)
	}
}

// A root without a language's tools is refused before the run, in one
// line naming the language and the fix; so are an unknown language and
// Python's policy layers on another language.
func TestLanguageBadInput(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{"proc", "dev", "tmp", "usr/bin"} {
		os.MkdirAll(filepath.Join(root, d), 0o755)
	}
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"--rootfs", root, "--lang", "cpp"}, []string{"--lang cpp needs /usr/bin/g++", "rootfs build --lang cpp"}},
		{[]string{"--rootfs", root, "--lang", "node"}, []string{"--lang node needs /usr/bin/node"}},
		{[]string{"--lang", "cobol"}, []string{`--lang: unknown language "cobol"`, "cpp"}},
		{[]string{"--lang", "cpp", "--max-risk", "3"}, []string{"--max-risk checks Python programs", "drop --max-risk"}},
		{[]string{"--lang", "node", "--pids", "4"}, []string{"--pids 4 is too few for --lang node", "at least 8"}},
	} {
		cmd := exec.Command(microbox, append(append([]string{"exec"}, c.args...), "-c", "x")...)
		_, stderr, code := runCmd(t, cmd)
		msg := strings.TrimSpace(string(stderr))
		if code != result.ExitSandboxError || strings.Contains(msg, "\n") {
			t.Errorf("%v: exit %d, stderr %q", c.args, code, msg)
		}
		for _, w := range c.want {
			if !strings.Contains(msg, w) {
				t.Errorf("%v: stderr %q lacks %q", c.args, msg, w)
			}
		}
	}
}

// A batch compiles a program once however many tasks run it: the same
// step again takes the binary it made (compile.cached), a different one
// (another header) compiles afresh; a task's "language" and compile
// limits are its own.
func TestBatchLanguage(t *testing.T) {
	task := func(header string) string {
		b, _ := json.Marshal(map[string]any{"language": "c", "code": "#include \"v.h\"\n#include <stdio.h>\nint main(void) { printf(\"%d\\n\", V); }",
			"files": map[string]string{"v.h": header}})
		return string(b)
	}
	in := strings.Join([]string{task("#define V 1"), task("#define V 1"), task("#define V 2"),
		`{"language": "nodejs", "code": "console.log(7)"}`,
		`{"language": "cpp", "code": "int main(){}", "compile_timeout": "1h"}`}, "\n") + "\n"
	cmd := exec.Command(microbox, "batch", "--jobs", "1")
	cmd.Stdin = strings.NewReader(in)
	out, stderr, code := runCmd(t, cmd)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var rows []policy.Result
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var r policy.Result
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatal(err)
		}
		rows = append(rows, r)
	}
	if len(rows) != 5 {
		t.Fatalf("%d results: %s", len(rows), out)
	}
	for i, want := range []struct {
		stdout string
		cached bool
	}{{"1\n", false}, {"1\n", true}, {"2\n", false}} {
		if r := rows[i]; r.Status != result.StatusOK || r.Stdout != want.stdout || r.Compile == nil || r.Compile.Cached != want.cached {
			t.Errorf("task %d: %s %q compile %+v, want %q cached %v", i+1, r.Status, r.Stdout, r.Compile, want.stdout, want.cached)
		}
	}
	if r := rows[3]; r.Status != result.StatusOK || r.Stdout != "7\n" || r.Compile != nil {
		t.Errorf("nodejs task: %+v", r)
	}
	if r := rows[4]; r.Status != result.StatusSandboxError || !strings.Contains(deref(r.Error).(string), `"compile_timeout" 1h is over`) {
		t.Errorf("compile_timeout over the ceiling: %s %v", r.Status, deref(r.Error))
	}
}

// "language" on the HTTP API's /v1/runs and on the MCP tool: the same
// task field, the same compile step.
func TestHTTPAndMCPLanguage(t *testing.T) {
	s := startAPI(t)
	code, body := s.post(t, "/v1/runs", `{"language": "cpp", "code": "#include <cstdio>\nint main() { int n; scanf(\"%d\", &n); printf(\"%d\\n\", n * 2); }", "stdin": "21"}`)
	var r policy.Result
	if err := json.Unmarshal(body, &r); err != nil || code != 200 {
		t.Fatalf("%d %s", code, body)
	}
	if r.Status != result.StatusOK || r.Stdout != "42\n" || r.Compile == nil || r.Compile.Status != result.StatusOK {
		t.Errorf("/v1/runs cpp: %s", body)
	}
	code, body = s.post(t, "/v1/runs", `{"language": "c", "code": "int main() { return undeclared; }"}`)
	if err := json.Unmarshal(body, &r); err != nil || code != 200 || r.Status != result.StatusCompileError {
		t.Errorf("/v1/runs compile error: %d %s", code, body)
	}

	p := startMCP(t)
	p.send(t, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	p.answer(t)
	p.send(t, `{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"run_python","arguments":{"language":"node","code":"console.log(6*7)"}}}`)
	m := p.answer(t)
	res, _ := m["result"].(map[string]any)
	out, _ := res["structuredContent"].(map[string]any)
	if out["status"] != "ok" || out["stdout"] != "42\n" {
		t.Errorf("MCP node: %v", m)
	}
}

// Redaction masks the compiler's messages too, which quote the source.
func TestLanguageRedactsCompileMessages(t *testing.T) {
	r := execJSON(t, "", "--redact", "--lang", "c", "-c", "int main(void) { return jane.doe@example.com; }")
	wantStatus(t, r, result.StatusCompileError)
	if r.Compile == nil || strings.Contains(r.Compile.Stderr, "jane.doe@example.com") || !strings.Contains(r.Compile.Stderr, "error") {
		t.Errorf("compile.stderr: %q", r.Compile.Stderr)
	}
}
