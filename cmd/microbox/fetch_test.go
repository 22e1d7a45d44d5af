package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/microbox/microbox/internal/service"
	"github.com/microbox/microbox/result"
)

// allBytes is every byte value once: what must survive the way in and
// the way out.
var allBytes = func() []byte {
	b := make([]byte, 256)
	for i := range b {
		b[i] = byte(i)
	}
	return b
}()

// fetchProgram copies in.bin to out.bin and plants what a fetch must
// refuse: links to a host file and out of the jail, a FIFO (which must
// not block the fetch), a directory, a socket and a huge sparse file.
const fetchProgram = `
import os, socket
hostpath = os.environ.get("HOSTPATH", "/nonexistent")
open("out.bin", "wb").write(open("in.bin", "rb").read())
os.symlink("/etc/passwd", "passwd")
os.symlink(hostpath, "host")
os.symlink("/proc/1/root/etc/passwd", "proc")
os.mkdir("sub"); os.symlink("/etc", "sub/etc")
os.mkfifo("fifo")
os.mkdir("dir")
socket.socket(socket.AF_UNIX).bind("sock")
with open("sparse", "wb") as f:
    f.truncate(1 << 40)
`

// fetchNames are the files fetchProgram leaves, and what each fetch's
// error must say ("" : fetched).
var fetchNames = map[string]string{
	"out.bin": "", "passwd": "symbolic link", "host": "symbolic link", "proc": "symbolic link",
	"sub/etc/passwd": "symbolic link", "fifo": "not a regular file", "dir": "not a regular file",
	"sock": "not a regular file", "sparse": "too big", "missing": "missing",
}

func fetchList() []string {
	var names []string
	for n := range fetchNames {
		names = append(names, n)
	}
	return names
}

// checkFetched checks a run's fetched files against fetchNames.
func checkFetched(t *testing.T, how string, r result.Result) {
	t.Helper()
	if r.Status != result.StatusOK || len(r.Fetched) != len(fetchNames) {
		t.Fatalf("%s: status %s (%v), fetched %d files, want %d: %+v", how, r.Status, deref(r.Error), len(r.Fetched), len(fetchNames), r.Fetched)
	}
	for name, want := range fetchNames {
		got := r.Fetched[name]
		switch {
		case got == nil:
			t.Errorf("%s: %s not in fetched", how, name)
		case want == "" && (got.Error != "" || !bytes.Equal(got.Data, allBytes)):
			t.Errorf("%s: %s came back as %q (error %q), want the 256 byte values", how, name, got.Data, got.Error)
		case want != "" && (!strings.Contains(got.Error, want) || got.Data != nil):
			t.Errorf("%s: %s: error %q, data %q; want an error saying %q", how, name, got.Error, got.Data, want)
		}
	}
}

// exec --fetch: every byte value out of the run, in the JSON result and
// under --out, with the links, FIFO, directory, socket and sparse file
// refused, in /tmp and in a working directory of its own.
func TestExecFetch(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "secret")
	os.WriteFile(secret, []byte("host secret"), 0o644)
	in := filepath.Join(t.TempDir(), "in.bin")
	os.WriteFile(in, allBytes, 0o644)
	for _, workdir := range []string{"/tmp", "/work"} {
		out := filepath.Join(t.TempDir(), "out")
		args := []string{"--workdir", workdir, "--file", in, "--env", "HOSTPATH=" + secret, "--out", out}
		for _, n := range fetchList() {
			args = append(args, "--fetch", n)
		}
		r := execJSON(t, "", append(args, "-c", fetchProgram)...)
		checkFetched(t, "exec --workdir "+workdir, *r.Result)
		if got, err := os.ReadFile(filepath.Join(out, "out.bin")); err != nil || !bytes.Equal(got, allBytes) {
			t.Errorf("--out %s: out.bin %q, %v", workdir, got, err)
		}
		entries, _ := os.ReadDir(out)
		if len(entries) != 1 {
			t.Errorf("--out holds %d entries, want out.bin alone: %v", len(entries), entries)
		}
	}
	// An absolute path lands at its own path under --out.
	out := t.TempDir()
	if _, code := runMicrobox(t, "", "exec", "--fetch", "/tmp/a/b", "--out", out, "-c",
		"import os; os.makedirs('/tmp/a'); open('/tmp/a/b', 'wb').write(bytes(range(256)))"); code != 0 {
		t.Fatalf("exit %d", code)
	}
	if got, _ := os.ReadFile(filepath.Join(out, "tmp", "a", "b")); !bytes.Equal(got, allBytes) {
		t.Errorf("/tmp/a/b under --out: %q", got)
	}
	// Refused before the run: outside the scratch areas, out of --out,
	// and nowhere to write.
	for _, args := range [][]string{
		{"--fetch", "/etc/passwd", "--json"},
		{"--fetch", "../etc/passwd", "--json"},
		{"--fetch", "../x", "--workdir", "/tmp/w", "--out", t.TempDir()},
		{"--fetch", "x"},
		{"--out", t.TempDir()},
	} {
		cmd := exec.Command(microbox, append(append([]string{"exec"}, args...), "-c", "open('/tmp/ran', 'w')")...)
		if _, errOut, code := runCmd(t, cmd); code != result.ExitSandboxError || !strings.Contains(string(errOut), "--") {
			t.Errorf("%v: exit %d, stderr %q; want 125 and a line naming the flag", args, code, errOut)
		}
	}
}

// The HTTP API: files_base64 in and "fetch" out on /v1/runs, cold and
// forked from a zygote, within the operator's ceilings; /run_code's
// files in and fetch_files out, as SandboxFusion answers them.
func TestHTTPFetchFiles(t *testing.T) {
	s := startAPI(t, "--max-fetch", "12", "--max-fetch-file-bytes", "1K", "--max-fetch-bytes", "2K")
	secret := filepath.Join(t.TempDir(), "secret")
	os.WriteFile(secret, []byte("host secret"), 0o644)
	b64 := base64.StdEncoding.EncodeToString(allBytes)
	for _, zygote := range []bool{false, true} {
		task, _ := json.Marshal(obj{"code": fetchProgram, "files_base64": obj{"in.bin": b64}, "fetch": fetchList(),
			"env": obj{"HOSTPATH": secret}, "zygote": zygote})
		r := s.runTask(t, string(task))
		checkFetched(t, fmt.Sprintf("/v1/runs zygote %v", zygote), *r.Result)
		if zygote && r.Start != "zygote" {
			t.Errorf("a zygote run started %q", r.Start)
		}
	}
	// The ceilings: one file over its own, then the total spent in order.
	r := s.runTask(t, `{"code": "for n in 'abc': open(n, 'w').write('x' * 900)\nopen('big', 'w').write('x' * 1025)", "fetch": ["big", "a", "b", "c"]}`)
	if e := r.Fetched["big"].Error; !strings.Contains(e, "too big: 1025 bytes") {
		t.Errorf("a file over --max-fetch-file-bytes: %q", e)
	}
	if r.Fetched["a"].Error != "" || r.Fetched["b"].Error != "" || !strings.Contains(r.Fetched["c"].Error, "left of the ceiling") {
		t.Errorf("the third 900-byte file past --max-fetch-bytes 2K: %+v %+v %+v", r.Fetched["a"], r.Fetched["b"], r.Fetched["c"])
	}
	code, body := s.post(t, "/v1/runs", `{"code": "1", "fetch": ["1","2","3","4","5","6","7","8","9","10","11","12","13"]}`)
	wantError(t, code, body, 400, "--max-fetch")
	code, body = s.post(t, "/v1/runs", `{"code": "1", "files_base64": {"a": "not base64!"}}`)
	wantError(t, code, body, 400, `"files_base64": "a" is not base64`)

	req, _ := json.Marshal(obj{"language": "python", "code": "open('o.bin', 'wb').write(open('i.bin', 'rb').read())",
		"files": obj{"i.bin": b64}, "fetch_files": []string{"o.bin", "missing"}})
	code, body = s.post(t, "/run_code", string(req))
	var got struct {
		Status string
		Files  map[string]string
	}
	if err := json.Unmarshal(body, &got); err != nil || code != 200 {
		t.Fatalf("/run_code: %d %s: %v", code, body, err)
	}
	data, err := base64.StdEncoding.DecodeString(got.Files["o.bin"])
	if got.Status != "Success" || len(got.Files) != 1 || err != nil || !bytes.Equal(data, allBytes) {
		t.Errorf("/run_code: status %s, files %v: want o.bin's 256 byte values alone", got.Status, got.Files)
	}
}

// A batch: files_base64 in and "fetch" out, cold and with --zygote.
func TestBatchFetch(t *testing.T) {
	task := obj{"id": 1, "code": fetchProgram, "files_base64": obj{"in.bin": base64.StdEncoding.EncodeToString(allBytes)},
		"fetch": fetchList()}
	for _, args := range [][]string{nil, {"--zygote"}} {
		lines, code := runBatchCmd(t, jsonl(t, task), args...)
		if code != 0 || len(lines) != 1 {
			t.Fatalf("batch %v: exit %d, %d lines", args, code, len(lines))
		}
		checkFetched(t, fmt.Sprintf("batch %v", args), lines[0].Result)
	}
}

// The MCP tool takes files_base64 and fetch, and its structured result
// holds the fetched files.
func TestMCPFetch(t *testing.T) {
	cmd := exec.Command(microbox, "mcp")
	cmd.Env = append(os.Environ(), "MICROBOX_ROOTFS=")
	client := mcp.NewClient(&mcp.Implementation{Name: "microbox-test", Version: "1"}, nil)
	session, err := client.Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer session.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := session.CallTool(ctx, &mcp.CallToolParams{Name: "run_python", Arguments: obj{
		"code": fetchProgram, "files_base64": obj{"in.bin": base64.StdEncoding.EncodeToString(allBytes)}, "fetch": fetchList()}})
	if err != nil || res.IsError {
		t.Fatalf("call: %+v %v", res, err)
	}
	structured, _ := json.Marshal(res.StructuredContent)
	var r result.Result
	if err := json.Unmarshal(structured, &r); err != nil {
		t.Fatal(err)
	}
	checkFetched(t, "mcp", r)
	if text := res.Content[0].(*mcp.TextContent).Text; !strings.Contains(text, "out.bin: 256 bytes\n") || !strings.Contains(text, "fifo: /tmp/fifo: not a regular file\n") {
		t.Errorf("the text summary does not list the fetched files: %q", text)
	}
}

// A kept result counts its fetched files against --http-keep-bytes: two
// results of 900K each do not fit in 1M, and the older goes.
func TestHTTPFetchKeptResultsCounted(t *testing.T) {
	s := startAPI(t, "--http-keep-bytes", "1M")
	task := `{"code": "open('f', 'wb').write(b'x' * 900000)", "fetch": ["f"]}`
	var ids []string
	for range 2 {
		code, body := s.post(t, "/v1/runs?wait=false", task)
		var st service.Status
		if code != http.StatusAccepted || json.Unmarshal(body, &st) != nil {
			t.Fatalf("wait=false: %d %s", code, body)
		}
		ids = append(ids, st.ID)
		for deadline := time.Now().Add(30 * time.Second); st.State != service.StateDone; time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("run %s never done", st.ID)
			}
			_, body := s.do(t, http.MethodGet, "/v1/runs/"+st.ID, "", nil)
			json.Unmarshal(body, &st)
		}
		if f := st.Result.Fetched["f"]; f == nil || len(f.Data) != 900000 {
			t.Fatalf("fetched %+v", st.Result.Fetched)
		}
	}
	code, _ := s.do(t, http.MethodGet, "/v1/runs/"+ids[0], "", nil)
	if code != http.StatusNotFound {
		t.Errorf("the older result of 900K is still kept (%d) beside another in --http-keep-bytes 1M", code)
	}
	if code, _ := s.do(t, http.MethodGet, "/v1/runs/"+ids[1], "", nil); code != http.StatusOK {
		t.Errorf("the newer result: %d", code)
	}
}
