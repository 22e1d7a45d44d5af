package mcptool

// The session tools (internal/session, docs/sessions.md): open a session,
// run a cell in it, upload and download a file, close it. A session is
// named by its id, so they work as well over stateless HTTP as on stdio.

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/microbox/microbox/internal/openapi"
	"github.com/microbox/microbox/internal/session"
)

// The tools' inputs; their schemas are reflected from these types
// (schema.go), described by sessionDocs.
type createIn struct {
	Options session.CreateRequest `json:"options"`
}

type cellIn struct {
	SessionID string `json:"session_id"`
	session.CellRequest
}

type fileIn struct {
	SessionID string `json:"session_id"`
	Path      string `json:"path"`
}

type uploadIn struct {
	SessionID     string  `json:"session_id"`
	Path          string  `json:"path"`
	Content       *string `json:"content"`
	ContentBase64 *string `json:"content_base64"`
}

type closeIn struct {
	SessionID string `json:"session_id"`
}

// sessionDocs describe the tools' own input and output fields.
var sessionDocs = openapi.Types{Docs: map[reflect.Type]map[string]string{
	reflect.TypeFor[createIn](): {"options": "The session's settings, as POST /v1/sessions takes them; absent: the server's defaults."},
	reflect.TypeFor[cellIn]():   {"session_id": sessionIDDoc},
	reflect.TypeFor[fileIn]():   {"session_id": sessionIDDoc, "path": pathDoc},
	reflect.TypeFor[uploadIn](): {"session_id": sessionIDDoc, "path": pathDoc,
		"content": "The file's text.", "content_base64": "The file's bytes, base64 (binary files)."},
	reflect.TypeFor[closeIn](): {"session_id": sessionIDDoc},
	reflect.TypeFor[fileOut](): {"content_base64": "The file's bytes, base64.", "text": "The file's text, when its bytes are UTF-8."},
}}

const (
	sessionIDDoc = "The id session_open answered."
	pathDoc      = "Relative to the session's working directory, e.g. data/input.csv."
)

// MaxDownload is the most bytes session_download_file answers: an MCP
// answer holds the file as base64, maybe as escaped JSON text (up to six
// bytes a byte), and the SDK copies it more than once, so a file of the
// session's cap (64M) could cost the server gigabytes. maxDownloadText is
// the most it also answers as text; maxDownloads calls read at once.
const (
	MaxDownload     = 8 << 20
	maxDownloadText = 1 << 20
	maxDownloads    = 2
)

// fileOut is a downloaded file: its bytes in base64, and as text when
// they are UTF-8 and at most maxDownloadText.
type fileOut struct {
	Path          string  `json:"path"`
	Size          int     `json:"size"`
	ContentBase64 string  `json:"content_base64"`
	Text          *string `json:"text,omitempty"`
}

// addSessionTools adds the session tools of m's sessions to s.
func addSessionTools(s *mcp.Server, m *session.Manager) {
	no, yes := false, true
	ann := func(title string, destructive bool) *mcp.ToolAnnotations {
		return &mcp.ToolAnnotations{Title: title, DestructiveHint: &destructive, OpenWorldHint: &no}
	}
	st := sessionTools{m: m, downloads: make(chan struct{}, maxDownloads)}
	mcp.AddTool(s, &mcp.Tool{Name: "session_open", Title: "Open a Python session",
		InputSchema: inSchema[createIn](), OutputSchema: outSchema[session.Info](),
		Description: "Start a Python interpreter in an isolated sandbox (no network, read-only root, memory, CPU and time limits) " +
			"that keeps its state between calls: variables, functions, imports and files persist from one session_run_cell to " +
			"the next, until session_close, its idle_ttl or its max_lifetime. Answers its id.",
		Annotations: ann("Open a Python session", false)}, st.open)
	mcp.AddTool(s, &mcp.Tool{Name: "session_run_cell", Title: "Run a cell in a Python session",
		InputSchema: inSchema[cellIn]("session_id", "code"), OutputSchema: outSchema[session.CellResult](),
		Description: "Run Python code in a session's interpreter, as a notebook cell: answers stdout, stderr, the value of " +
			"a trailing expression, the exception with its traceback, figures (PNG, base64) and status (ok, error, " +
			"timeout: interrupted and the session kept; ended: the session ended, session.reason says why).",
		Annotations: ann("Run a cell", false)}, st.cell)
	mcp.AddTool(s, &mcp.Tool{Name: "session_upload_file", Title: "Upload a file into a Python session",
		InputSchema: inSchema[uploadIn]("session_id", "path"), OutputSchema: outSchema[session.Written](),
		Description: "Write a file (text as content, or bytes as content_base64) into the session's working directory.",
		Annotations: ann("Upload a file", true)}, st.upload)
	mcp.AddTool(s, &mcp.Tool{Name: "session_download_file", Title: "Download a file from a Python session",
		InputSchema: inSchema[fileIn]("session_id", "path"), OutputSchema: outSchema[fileOut](),
		Description: "Read a file of the session's working directory: its bytes in base64, and as text when they are UTF-8.",
		Annotations: &mcp.ToolAnnotations{Title: "Download a file", ReadOnlyHint: true, OpenWorldHint: &no}}, st.download)
	mcp.AddTool(s, &mcp.Tool{Name: "session_close", Title: "Close a Python session",
		InputSchema: inSchema[closeIn]("session_id"), OutputSchema: outSchema[session.Info](),
		Description: "End the session: its interpreter, files and sandbox are gone.",
		Annotations: &mcp.ToolAnnotations{Title: "Close a session", DestructiveHint: &yes, IdempotentHint: true, OpenWorldHint: &no}}, st.close)
}

type sessionTools struct {
	m         *session.Manager
	downloads chan struct{} // session_download_file calls reading (maxDownloads)
}

func (st sessionTools) open(ctx context.Context, _ *mcp.CallToolRequest, in createIn) (*mcp.CallToolResult, *session.Info, error) {
	body, err := json.Marshal(in.Options)
	if err != nil {
		return nil, nil, err
	}
	s, err := st.m.Create(context.WithoutCancel(ctx), body)
	if err != nil {
		return nil, nil, err
	}
	info := s.Info()
	return text(fmt.Sprintf("session %s open (Python %s)", info.ID, info.Python)), &info, nil
}

// live is the session id names, or why there is none.
func (st sessionTools) live(id string) (*session.Session, error) {
	s, ended, ok := st.m.Get(id)
	switch {
	case !ok:
		return nil, fmt.Errorf("no session %q: open one with session_open", id)
	case s == nil:
		return nil, &session.EndedError{Info: ended}
	}
	return s, nil
}

func (st sessionTools) cell(ctx context.Context, _ *mcp.CallToolRequest, in cellIn) (*mcp.CallToolResult, *session.CellResult, error) {
	s, err := st.live(in.SessionID)
	if err != nil {
		return nil, nil, err
	}
	res, err := s.RunCell(in.CellRequest)
	if err != nil {
		return nil, nil, err
	}
	return text(cellSummary(res)), res, nil
}

// cellSummary is a cell's answer in a few lines for an agent to read.
func cellSummary(r *session.CellResult) string {
	var b strings.Builder
	b.WriteString(r.Status)
	if r.Status == session.CellEnded {
		fmt.Fprintf(&b, ": the session ended (%s) %s", r.Session.Reason, r.Session.Error)
	}
	b.WriteString("\n")
	for _, part := range []struct{ name, text string }{{"stdout", r.Stdout}, {"stderr", r.Stderr}} {
		if part.text != "" {
			fmt.Fprintf(&b, "%s:\n%s\n", part.name, clipEnd(part.text))
		}
	}
	if r.Value != nil {
		fmt.Fprintf(&b, "value: %s\n", clipEnd(*r.Value))
	}
	if r.Error != nil {
		fmt.Fprintf(&b, "%s\n", clipEnd(r.Error.Traceback))
	}
	if len(r.Display) > 0 {
		fmt.Fprintf(&b, "%d figure(s) in display\n", len(r.Display))
	}
	return b.String()
}

func clipEnd(s string) string {
	if len(s) > summaryMax {
		return "..." + s[len(s)-summaryMax:]
	}
	return s
}

func (st sessionTools) upload(_ context.Context, _ *mcp.CallToolRequest, in uploadIn) (*mcp.CallToolResult, *session.Written, error) {
	s, err := st.live(in.SessionID)
	if err != nil {
		return nil, nil, err
	}
	var data []byte
	switch {
	case (in.Content == nil) == (in.ContentBase64 == nil):
		return nil, nil, errors.New("give the file as content (text) or content_base64 (bytes), one of them")
	case in.Content != nil:
		data = []byte(*in.Content)
	default:
		if data, err = base64.StdEncoding.DecodeString(*in.ContentBase64); err != nil {
			return nil, nil, fmt.Errorf("content_base64: %v", err)
		}
	}
	if err := s.PutFile(in.Path, data); err != nil {
		return nil, nil, err
	}
	return text(fmt.Sprintf("wrote %s (%d bytes)", in.Path, len(data))), &session.Written{Path: in.Path, Size: len(data)}, nil
}

func (st sessionTools) download(_ context.Context, _ *mcp.CallToolRequest, in fileIn) (*mcp.CallToolResult, *fileOut, error) {
	s, err := st.live(in.SessionID)
	if err != nil {
		return nil, nil, err
	}
	st.downloads <- struct{}{}
	defer func() { <-st.downloads }()
	data, err := s.GetFileUpTo(in.Path, MaxDownload)
	if errors.Is(err, session.ErrTooLarge) {
		return nil, nil, fmt.Errorf("%s is over the %d bytes a file may have through MCP (its answer holds it several times over): read it in a cell in pieces, or fetch it with GET /v1/sessions/{id}/files/{path}", in.Path, MaxDownload)
	}
	if err != nil {
		return nil, nil, err
	}
	out := &fileOut{Path: in.Path, Size: len(data), ContentBase64: base64.StdEncoding.EncodeToString(data)}
	if len(data) <= maxDownloadText && utf8.Valid(data) {
		t := string(data)
		out.Text = &t
	}
	return text(fmt.Sprintf("%s: %d bytes", in.Path, len(data))), out, nil
}

func (st sessionTools) close(_ context.Context, _ *mcp.CallToolRequest, in closeIn) (*mcp.CallToolResult, *session.Info, error) {
	s, ended, ok := st.m.Get(in.SessionID)
	if !ok {
		return nil, nil, fmt.Errorf("no session %q", in.SessionID)
	}
	info := ended
	if s != nil {
		info = s.End()
	}
	return text(fmt.Sprintf("session %s ended (%s)", info.ID, info.Reason)), &info, nil
}

func text(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}
