package main

// Tests of the HTTP API's connections and descriptors (internal/httpapi's
// conns.go, internal/server's pressure.go): caps on open connections,
// refusals and idle connections closed, runs that cannot start for want
// of descriptors answered 503, not as a verdict.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/microbox/microbox/internal/policy"
	"github.com/microbox/microbox/result"
)

// apiToken writes a token file for a server, and returns it and the
// token.
func apiToken(t *testing.T) (file, token string) {
	token = "0123456789abcdef0123456789abcdef"
	file = filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(file, []byte(token), 0o600); err != nil {
		t.Fatal(err)
	}
	return file, token
}

// dial opens a connection to the test's server.
func (s *apiServer) dial(t *testing.T) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(s.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	return conn
}

// closedByServer reports whether the server closes conn within wait
// (whatever it sends before).
func closedByServer(conn net.Conn, wait time.Duration) bool {
	conn.SetReadDeadline(time.Now().Add(wait))
	_, err := io.Copy(io.Discard, conn)
	return !isTimeout(err)
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// 300 connections that never authenticate, under a limit of 256
// descriptors, and 300 more answered 401: the token holder still gets its
// answer, and the server keeps open no more of them than its cap.
func TestHTTPUnauthenticatedConnectionsCapped(t *testing.T) {
	tokenFile, token := apiToken(t)
	s := startAPIVia(t, []string{"prlimit", "--nofile=256:256"}, "--http-token-file", tokenFile,
		"--http-read-timeout", "60s", "--http-max-unauth-conns", "16")
	const attackers = 300
	var mu sync.Mutex
	var conns []net.Conn
	var wg sync.WaitGroup
	for i := range 2 * attackers {
		wg.Go(func() {
			conn, err := net.Dial("tcp", strings.TrimPrefix(s.url, "http://"))
			if err != nil {
				t.Error(err)
				return
			}
			if i%2 == 0 { // never finishes its request
				fmt.Fprintf(conn, "POST /v1/runs HTTP/1.1\r\nHost: 127.0.0.1\r\n")
			} else { // a wrong token, then keeps the connection
				fmt.Fprintf(conn, "GET /v1/runs/x HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer wrong\r\n\r\n")
			}
			mu.Lock()
			conns = append(conns, conn)
			mu.Unlock()
		})
	}
	wg.Wait()
	client := &http.Client{Timeout: 30 * time.Second}
	req, _ := http.NewRequest(http.MethodPost, s.url+"/v1/runs", strings.NewReader(`{"code": "print(6 * 7)"}`))
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("the token holder got no answer with %d unauthenticated connections open: %v\n%.2000s", 2*attackers, err, s.log)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var r policy.Result
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &r) != nil || r.Status != result.StatusOK || r.Stdout != "42\n" {
		t.Fatalf("the token holder's run: %d %s", resp.StatusCode, body)
	}
	open := 0
	for _, conn := range conns {
		wg.Go(func() {
			if !closedByServer(conn, 3*time.Second) {
				mu.Lock()
				open++
				mu.Unlock()
			}
			conn.Close()
		})
	}
	wg.Wait()
	if open > 16 {
		t.Errorf("%d unauthenticated connections are still open, over the cap of 16", open)
	}
}

// A refusal (401; 403 for a browser's cross-origin request, or a host
// name not the loopback's) closes its connection, and so does the server
// when a kept-alive connection has been idle --http-idle-timeout.
func TestHTTPConnectionsClosed(t *testing.T) {
	tokenFile, token := apiToken(t)
	// The refusals' connections must close long before an idle one would.
	refusing := startAPI(t, "--http-token-file", tokenFile, "--http-idle-timeout", "5m")
	noToken := startAPI(t, "--http-idle-timeout", "5m") // loopback host names only
	idling := startAPI(t, "--http-token-file", tokenFile, "--http-idle-timeout", "1s")
	for _, c := range []struct {
		name    string
		s       *apiServer
		request string
		code    int
	}{
		{"no token", refusing, "GET /v1/runs/x HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", http.StatusUnauthorized},
		{"a cross-origin request", refusing, "POST /v1/runs HTTP/1.1\r\nHost: 127.0.0.1\r\nSec-Fetch-Site: cross-site\r\nOrigin: https://evil.example\r\nContent-Length: 2\r\n\r\n{}", http.StatusForbidden},
		{"another host name", noToken, "GET /healthz HTTP/1.1\r\nHost: evil.example\r\n\r\n", http.StatusForbidden},
		{"idle", idling, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " + token + "\r\n\r\n", http.StatusOK},
	} {
		conn := c.s.dial(t)
		defer conn.Close()
		fmt.Fprint(conn, c.request)
		br := bufio.NewReader(conn)
		conn.SetReadDeadline(time.Now().Add(30 * time.Second))
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		io.Copy(io.Discard, resp.Body)
		if resp.StatusCode != c.code {
			t.Errorf("%s: status %d, want %d", c.name, resp.StatusCode, c.code)
		}
		if c.code != http.StatusOK && !resp.Close {
			t.Errorf("%s: %d without Connection: close", c.name, resp.StatusCode)
		}
		conn.SetReadDeadline(time.Now().Add(20 * time.Second))
		if n, err := br.Read(make([]byte, 1)); n != 0 || err != io.EOF {
			t.Errorf("%s: the server kept the connection open (%d, %v)", c.name, n, err)
		}
	}
}

// Past --http-max-conns, a new connection waits until one closes.
func TestHTTPMaxConns(t *testing.T) {
	s := startAPI(t, "--http-max-conns", "3")
	request := "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
	var held []net.Conn
	for range 3 {
		conn := s.dial(t)
		defer conn.Close()
		fmt.Fprint(conn, request)
		if _, err := http.ReadResponse(bufio.NewReader(conn), nil); err != nil {
			t.Fatal(err)
		}
		held = append(held, conn) // kept alive
	}
	fourth := s.dial(t)
	defer fourth.Close()
	fmt.Fprint(fourth, request)
	br := bufio.NewReader(fourth)
	fourth.SetReadDeadline(time.Now().Add(time.Second))
	if _, err := http.ReadResponse(br, nil); !isTimeout(err) {
		t.Fatalf("a fourth connection was answered past --http-max-conns 3 (%v)", err)
	}
	held[0].Close()
	fourth.SetReadDeadline(time.Now().Add(20 * time.Second))
	if resp, err := http.ReadResponse(br, nil); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("the fourth connection once another closed: %v", err)
	}
}

// Under RLIMIT_NOFILE 64, runs that cannot start for want of descriptors
// are tried again, then answered 503 with Retry-After (through the MCP
// tool, a tool error; a background run's state, not_started): every
// answer is a run's true verdict or "busy", never a sandbox_error.
func TestHTTPOutOfDescriptors(t *testing.T) {
	s := startAPIVia(t, []string{"prlimit", "--nofile=64:64"}, "--http-concurrency", "8", "--http-queue", "200")
	const runs, calls = 120, 24
	answers := make(chan string, runs+calls)
	client := &http.Client{Timeout: 120 * time.Second}
	var wg sync.WaitGroup
	var mu sync.Mutex
	unavailable := 0
	mcpCalls(t, s, calls, &wg, answers, &unavailable, &mu)
	background(t, s, calls, &wg, answers, &unavailable, &mu)
	for i := range runs {
		wg.Go(func() {
			resp, err := client.Post(s.url+"/v1/runs", "application/json",
				strings.NewReader(fmt.Sprintf(`{"code": "import time; time.sleep(0.2); print(%d)"}`, i)))
			if err != nil {
				answers <- fmt.Sprintf("run %d: %v", i, err)
				return
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			var r policy.Result
			switch {
			case resp.StatusCode == http.StatusServiceUnavailable && resp.Header.Get("Retry-After") != "" &&
				strings.Contains(string(body), "out of file descriptors"):
				mu.Lock()
				unavailable++
				mu.Unlock()
			case resp.StatusCode != http.StatusOK || json.Unmarshal(body, &r) != nil || r.Status != result.StatusOK || r.Stdout != fmt.Sprintf("%d\n", i):
				answers <- fmt.Sprintf("run %d: %d %.300s", i, resp.StatusCode, body)
			}
		})
	}
	wg.Wait()
	close(answers)
	for a := range answers {
		t.Error(a)
	}
	t.Logf("%d of %d runs, MCP calls and background runs answered busy", unavailable, runs+2*calls)
	if r := s.runTask(t, `{"code": "print(1)"}`); r.Status != result.StatusOK {
		t.Errorf("a run once the others ended: %s %s", r.Status, deref(r.Error))
	}
}

// background starts runs with ?wait=false beside the others and follows
// each to its end: its result is its program's verdict, or its state says
// it did not start (counted in busy), never a sandbox_error.
func background(t *testing.T, s *apiServer, runs int, wg *sync.WaitGroup, answers chan<- string, busy *int, mu *sync.Mutex) {
	client := &http.Client{Timeout: 30 * time.Second}
	for i := range runs {
		wg.Go(func() {
			resp, err := client.Post(s.url+"/v1/runs?wait=false", "application/json",
				strings.NewReader(fmt.Sprintf(`{"code": "import time; time.sleep(0.2); print(%d)"}`, i)))
			if err != nil {
				answers <- fmt.Sprintf("background run %d: %v", i, err)
				return
			}
			resp.Body.Close()
			id := resp.Header.Get("Microbox-Run-Id")
			if resp.StatusCode != http.StatusAccepted || id == "" {
				answers <- fmt.Sprintf("background run %d: %d", i, resp.StatusCode)
				return
			}
			for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
				resp, err := client.Get(s.url + "/v1/runs/" + id)
				if err != nil {
					answers <- fmt.Sprintf("background run %d: %v", i, err)
					return
				}
				var st struct {
					State  string
					Error  string
					Result *policy.Result
				}
				err = json.NewDecoder(resp.Body).Decode(&st)
				resp.Body.Close()
				switch {
				case err != nil:
					answers <- fmt.Sprintf("background run %d: %v", i, err)
				case st.State == "not_started" && st.Result == nil && strings.Contains(st.Error, "out of file descriptors"):
					mu.Lock()
					*busy++
					mu.Unlock()
				case st.State == "done" && (st.Result == nil || st.Result.Status != result.StatusOK || st.Result.Stdout != fmt.Sprintf("%d\n", i)):
					answers <- fmt.Sprintf("background run %d: %+v", i, st.Result)
				case st.State == "done":
				default:
					continue
				}
				return
			}
			answers <- fmt.Sprintf("background run %d: not done in 2 minutes", i)
		})
	}
}

// mcpCalls calls the MCP tool at /mcp calls times at once beside the
// runs: each call answers its program's verdict, or a tool error saying
// the server is busy (counted in busy), never a sandbox_error.
func mcpCalls(t *testing.T, s *apiServer, calls int, wg *sync.WaitGroup, answers chan<- string, busy *int, mu *sync.Mutex) {
	client := mcp.NewClient(&mcp.Implementation{Name: "microbox-test", Version: "1"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	session, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: s.url + "/mcp"}, nil)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	for i := range calls {
		wg.Go(func() {
			res, err := session.CallTool(ctx, &mcp.CallToolParams{Name: "run_python",
				Arguments: map[string]any{"code": fmt.Sprintf("import time; time.sleep(0.2); print(%d)", i)}})
			if err != nil {
				answers <- fmt.Sprintf("MCP call %d: %v", i, err)
				return
			}
			out, _ := res.StructuredContent.(map[string]any)
			switch {
			case res.IsError && strings.Contains(res.Content[0].(*mcp.TextContent).Text, "busy: the run could not start"):
				mu.Lock()
				*busy++
				mu.Unlock()
			case res.IsError || out["status"] != "ok" || out["stdout"] != fmt.Sprintf("%d\n", i):
				answers <- fmt.Sprintf("MCP call %d: %+v", i, res.StructuredContent)
			}
		})
	}
	t.Cleanup(func() {
		session.Close()
		cancel()
	})
}
