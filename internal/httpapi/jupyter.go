package httpapi

// SandboxFusion's POST /run_jupyter, built on a session: its cells run one
// after another in one interpreter, each answered as a notebook shows it,
// then the session ends. docs/sessions.md maps the fields.

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/microbox/microbox/internal/session"
)

// runJupyterRequest is SandboxFusion's RunJupyterRequest.
type runJupyterRequest struct {
	Cells         []string          `json:"cells"`
	CellTimeout   float64           `json:"cell_timeout"`  // seconds; 0: only the total
	TotalTimeout  *float64          `json:"total_timeout"` // seconds; SandboxFusion's default 45
	Kernel        string            `json:"kernel"`
	MemoryLimitMB int64             `json:"memory_limit_MB"`
	Files         map[string]string `json:"files"` // path: base64 content
	FetchFiles    []string          `json:"fetch_files"`
}

// runJupyterResponse is SandboxFusion's RunJupyterResponse.
type runJupyterResponse struct {
	Status  string            `json:"status"` // Success, Failed, SandboxError
	Message string            `json:"message"`
	Driver  *commandRunResult `json:"driver"`
	Cells   []jupyterCell     `json:"cells"`
	Files   map[string]string `json:"files"`
}

// jupyterCell is SandboxFusion's CellRunResult: Jupyter's outputs.
type jupyterCell struct {
	Stdout  string              `json:"stdout"`
	Stderr  string              `json:"stderr"`
	Display []map[string]string `json:"display"`
	Error   []jupyterError      `json:"error"`
}

type jupyterError struct {
	Ename     string   `json:"ename"`
	Evalue    string   `json:"evalue"`
	Traceback []string `json:"traceback"`
}

// The most cells one request runs, and SandboxFusion's default total.
const (
	maxJupyterCells     = 256
	defaultJupyterTotal = 45 * time.Second
)

func (a *API) runJupyter(w http.ResponseWriter, r *http.Request) {
	body, ok := a.readBody(w, r)
	if !ok {
		return
	}
	var req runJupyterRequest
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, "not a RunJupyterRequest: %v", err)
		return
	}
	total, create, err := req.session()
	var files map[string][]byte
	if err == nil {
		files, err = decodeFiles(req.Files)
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, "%v", err)
		return
	}
	maxCell := time.Duration(a.cfg.Service.Limits.Value("timeout", a.cfg.Service.Base))
	if c := time.Duration(req.CellTimeout * float64(time.Second)); c > maxCell {
		writeError(w, http.StatusBadRequest, "cell_timeout %v is over this server's ceiling %v: ask for at most that, or start the server with --max-timeout", c, maxCell)
		return
	}
	limits, base := a.cfg.Service.Limits, a.cfg.Service.Base
	if most := int(limits.Value("files", base)); len(req.Files) > most {
		writeError(w, http.StatusBadRequest, "%s", limits.Over(fmt.Sprintf("files has %d files,", len(req.Files)), "files", strconv.Itoa(most)))
		return
	}
	if most := int(limits.Value("fetch", base)); len(req.FetchFiles) > most {
		writeError(w, http.StatusBadRequest, "%s", limits.Over(fmt.Sprintf("fetch_files names %d files,", len(req.FetchFiles)), "fetch", strconv.Itoa(most)))
		return
	}
	s, err := a.sessions.Create(context.WithoutCancel(r.Context()), create)
	if err != nil {
		if errors.Is(err, session.ErrBusy) || session.IsBadInput(err) {
			writeSessionError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, runJupyterResponse{Status: "SandboxError", Message: err.Error(), Cells: []jupyterCell{}, Files: map[string]string{}})
		return
	}
	defer s.End()
	for path, data := range files {
		if err := s.PutFile(path, data); err != nil {
			writeSessionError(w, err)
			return
		}
	}
	writeJSON(w, http.StatusOK, req.run(s, total, maxCell, int64(limits.Value("fetch-bytes", base))))
}

// session checks the request and is the session it asks for: its total
// time, the create request.
func (req *runJupyterRequest) session() (time.Duration, []byte, error) {
	switch {
	case req.Kernel != "" && req.Kernel != "python3":
		return 0, nil, fmt.Errorf("kernel %q: only python3", req.Kernel)
	case len(req.Cells) == 0 || len(req.Cells) > maxJupyterCells:
		return 0, nil, fmt.Errorf("%d cells: give 1 to %d", len(req.Cells), maxJupyterCells)
	case req.CellTimeout < 0 || req.TotalTimeout != nil && *req.TotalTimeout <= 0:
		return 0, nil, errors.New("cell_timeout must be at least 0 and total_timeout positive (seconds)")
	}
	total := defaultJupyterTotal
	if req.TotalTimeout != nil {
		total = time.Duration(*req.TotalTimeout * float64(time.Second))
	}
	create := map[string]any{"max_lifetime": total.Seconds() + 5, "idle_ttl": total.Seconds() + 5}
	if req.MemoryLimitMB > 0 {
		create["mem"] = fmt.Sprintf("%dM", req.MemoryLimitMB)
	}
	b, _ := json.Marshal(create)
	return total, b, nil
}

// decodeFiles are the request's files, their paths checked and their
// base64 decoded.
func decodeFiles(files map[string]string) (map[string][]byte, error) {
	out := map[string][]byte{}
	for path, content := range files {
		if err := session.CheckPath(path); err != nil {
			return nil, fmt.Errorf("files: %w", err)
		}
		data, err := base64.StdEncoding.DecodeString(content)
		if err != nil {
			return nil, fmt.Errorf("files[%q] is not base64: %v", path, err)
		}
		out[path] = data
	}
	return out, nil
}

// run runs the cells in order within total, and fetches the files,
// fetchBytes of them at most (the answer holds them all at once, and
// hard links make many names of one file): one past it is left out, as
// a file not there is. A cell's timeout is its cell_timeout, else what
// is left of the total, within the server's ceiling maxCell.
func (req *runJupyterRequest) run(s *session.Session, total, maxCell time.Duration, fetchBytes int64) runJupyterResponse {
	began := time.Now()
	res := runJupyterResponse{Status: "Success", Cells: []jupyterCell{}, Files: map[string]string{}}
	driver := "Finished"
	for _, code := range req.Cells {
		left := total - time.Since(began)
		if left <= 0 {
			driver = "TimeLimitExceeded"
			break
		}
		timeout := min(left, maxCell)
		if c := time.Duration(req.CellTimeout * float64(time.Second)); c > 0 && c < left {
			timeout = c
		}
		t, _ := json.Marshal(timeout.Seconds())
		out, err := s.RunCell(session.CellRequest{Code: &code, Timeout: session.Duration(t)})
		if err != nil {
			res.Message, driver = err.Error(), "Error"
			break
		}
		res.Cells = append(res.Cells, notebookCell(out))
		if out.Status == session.CellTimeout || out.Status == session.CellEnded {
			driver = "TimeLimitExceeded"
			if out.Status == session.CellEnded && out.Session.Reason != session.ReasonTimeout {
				driver, res.Message = "Error", "the session ended: "+out.Session.Reason
			}
			break
		}
	}
	for _, path := range req.FetchFiles {
		if _, done := res.Files[path]; done {
			continue
		}
		if data, err := s.GetFile(path); err == nil && int64(len(data)) <= fetchBytes {
			res.Files[path] = base64.StdEncoding.EncodeToString(data)
			fetchBytes -= int64(len(data))
		}
	}
	secs := time.Since(began).Seconds()
	res.Driver = &commandRunResult{Status: driver, ExecutionTime: &secs}
	if driver != "Finished" {
		res.Status = "Failed"
	}
	return res
}

// notebookCell is a cell's answer as Jupyter's outputs: the trailing
// expression's value first among the displays (an execute_result), the
// exception as an error output.
func notebookCell(c *session.CellResult) jupyterCell {
	out := jupyterCell{Stdout: c.Stdout, Stderr: c.Stderr, Display: []map[string]string{}, Error: []jupyterError{}}
	if c.Value != nil {
		out.Display = append(out.Display, map[string]string{"text/plain": *c.Value})
	}
	out.Display = append(out.Display, c.Display...)
	if e := c.Error; e != nil {
		out.Error = append(out.Error, jupyterError{Ename: e.Name, Evalue: e.Value, Traceback: strings.Split(strings.TrimRight(e.Traceback, "\n"), "\n")})
	}
	return out
}
