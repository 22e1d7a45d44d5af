package session

import (
	"encoding/base64"
	"encoding/json"
	"strconv"
	"time"
)

// A cell's status (CellResult.Status).
const (
	CellOK      = "ok"      // it ran to its end
	CellRaised  = "error"   // it raised an exception (CellResult.Error)
	CellTimeout = "timeout" // it ran past its timeout and was interrupted; the session goes on
	CellEnded   = "ended"   // the session ended under it (CellResult.Session says why)
)

// CellRequest is a cell to run: its code, its stdin, its timeout ("" or
// absent: the session's).
type CellRequest struct {
	Code    *string  `json:"code"`
	Stdin   *string  `json:"stdin"`
	Timeout Duration `json:"timeout"`
}

// Duration is a duration as a request gives it, kept as sent: a number
// of seconds or a string such as "30s" (parseDuration reads it when it is
// used, and names the key of a wrong one).
type Duration json.RawMessage

// UnmarshalJSON keeps the value as sent.
func (d *Duration) UnmarshalJSON(b []byte) error {
	*d = append((*d)[:0], b...)
	return nil
}

// MarshalJSON writes the value as sent; null when none was.
func (d Duration) MarshalJSON() ([]byte, error) {
	if len(d) == 0 {
		return []byte("null"), nil
	}
	return d, nil
}

// CellResult is a cell's answer: what a notebook shows of it.
type CellResult struct {
	Status          string  `json:"status"`
	Stdout          string  `json:"stdout"`
	Stderr          string  `json:"stderr"`
	StdoutTruncated bool    `json:"stdout_truncated"`
	StderrTruncated bool    `json:"stderr_truncated"`
	Value           *string `json:"value"` // the trailing expression's repr (text/plain), unless None
	// Display are the rich outputs, each a map of MIME type to content:
	// "image/png" (base64) and "text/plain".
	Display    []map[string]string `json:"display"`
	Error      *CellError          `json:"error"`
	WallTimeMs float64             `json:"wall_time_ms"`
	CPUTimeMs  float64             `json:"cpu_time_ms"`
	Session    Info                `json:"session"`
}

// CellError is a cell's exception: its type's name, its message, its
// traceback from the cell on.
type CellError struct {
	Name      string `json:"name"`
	Value     string `json:"value"`
	Traceback string `json:"traceback"`
}

// The most a cell's display holds: figures, and the bytes of each text.
const (
	maxDisplay     = 64
	maxDisplayText = 64 << 10
	maxErrorName   = 200
)

// RunCell runs a cell and answers it; the error is the request's fault
// (IsBadInput) or the session's end before the cell could start
// (EndedError).
func (s *Session) RunCell(req CellRequest) (*CellResult, error) {
	timeout, err := s.cellTimeout(req)
	if err != nil {
		return nil, err
	}
	if err := s.begin(); err != nil {
		return nil, err
	}
	defer s.done()
	s.mu.Lock()
	s.cells++
	s.mu.Unlock()
	cpu0, t0 := s.held.CPUTime(), time.Now()
	b, interrupted, err := s.exchange(request{Op: opCell, Code: *req.Code, Stdin: req.Stdin, OutputLimit: s.o.outputLimit}, timeout)
	res := &CellResult{Status: CellOK, WallTimeMs: ms(time.Since(t0)), Display: []map[string]string{}}
	if err != nil {
		res.Status, res.Session = CellEnded, s.info
		return res, nil
	}
	res.CPUTimeMs = ms(s.held.CPUTime() - cpu0)
	var r cellReply
	if err := json.Unmarshal(b, &r); err != nil {
		s.end(ReasonError, "the interpreter's reply to a cell is not one: "+clip(err.Error(), 200))
		<-s.gone
		res.Status, res.Session = CellEnded, s.info
		return res, nil
	}
	if s.answers(r.Seq) != nil {
		res.Status, res.Session = CellEnded, s.info
		return res, nil
	}
	s.fill(res, &r)
	switch {
	case interrupted:
		res.Status = CellTimeout
	case res.Error != nil:
		res.Status = CellRaised
	}
	s.used()
	res.Session = s.Info()
	return res, nil
}

// cellTimeout checks a cell's request against the session's ceilings.
func (s *Session) cellTimeout(req CellRequest) (time.Duration, error) {
	switch {
	case req.Code == nil:
		return 0, badInput(`no "code": give the cell's Python code`)
	case int64(len(*req.Code)) > s.o.maxCellCode:
		return 0, badInput("%s", s.m.cfg.Limits.Over(`"code" is `+strconv.Itoa(len(*req.Code))+" bytes,", "code", strconv.Itoa(int(s.o.maxCellCode))))
	case req.Stdin != nil && int64(len(*req.Stdin)) > s.o.maxCellStdin:
		return 0, badInput("%s", s.m.cfg.Limits.Over(`"stdin" is `+strconv.Itoa(len(*req.Stdin))+" bytes,", "stdin", strconv.Itoa(int(s.o.maxCellStdin))))
	case len(req.Timeout) == 0 || string(req.Timeout) == "null":
		return s.o.cellTimeout, nil
	}
	d, err := parseDuration("timeout", json.RawMessage(req.Timeout))
	if err != nil {
		return 0, err
	}
	if d > s.o.maxCellTimeout {
		return 0, badInput("%s", s.m.cfg.Limits.Over(`"timeout" `+d.String()+" is", "timeout", s.o.maxCellTimeout.String()))
	}
	return d, nil
}

// fill copies the interpreter's reply into res within the session's
// bounds: it is the session's code's to forge.
func (s *Session) fill(res *CellResult, r *cellReply) {
	limit := s.o.outputLimit
	res.Stdout, res.StdoutTruncated = bounded(r.Stdout, r.StdoutTruncated, limit)
	res.Stderr, res.StderrTruncated = bounded(r.Stderr, r.StderrTruncated, limit)
	if r.Value != nil {
		v := clip(*r.Value, limit)
		res.Value = &v
	}
	if e := r.Error; e != nil {
		res.Error = &CellError{Name: clip(e.Name, maxErrorName), Value: clip(e.Value, limit), Traceback: clip(e.Traceback, limit)}
	}
	budget := s.o.fileCap
	for _, d := range r.Display {
		if len(res.Display) == maxDisplay {
			break
		}
		out := map[string]string{}
		if png, ok := d["image/png"]; ok && int64(len(png)) <= budget && validBase64(png) {
			out["image/png"] = png
			budget -= int64(len(png))
		}
		if text, ok := d["text/plain"]; ok {
			out["text/plain"] = clip(text, maxDisplayText)
		}
		if len(out) > 0 {
			res.Display = append(res.Display, out)
		}
	}
}

// bounded is output cut to limit bytes, and whether it was cut.
func bounded(s string, truncated bool, limit int64) (string, bool) {
	if int64(len(s)) > limit {
		return clip(s, limit), true
	}
	return s, truncated
}

func validBase64(s string) bool {
	_, err := base64.StdEncoding.DecodeString(s)
	return err == nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
