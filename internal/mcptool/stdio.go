package mcptool

// MCP on stdio, a JSON-RPC message a line, as the SDK's StdioTransport
// speaks it, but robust to what a client sends: the SDK's decodes stdin as
// one stream of JSON values and ends the session at the first that is not
// a message, so one bad line left every later request unanswered. Here a
// line that is not a message is answered with JSON-RPC's error for it
// (-32700 parse error, -32600 invalid request, id null when it has none)
// and the next line is read; a line longer than the limit is read to its
// end without being kept, and answered the same way.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sync"

	"github.com/docker/go-units"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// lineTransport is an mcp.Transport over in and out.
type lineTransport struct {
	in      io.ReadCloser
	out     io.Writer
	maxLine int // longest line kept, in bytes
}

func (t *lineTransport) Connect(context.Context) (mcp.Connection, error) {
	c := &lineConn{lines: make(chan line), closed: make(chan struct{}), in: t.in, out: t.out, maxLine: t.maxLine,
		pending: map[jsonrpc.ID]int{}, answered: make(chan struct{}, 1)}
	go c.readLines(bufio.NewReaderSize(t.in, 64<<10))
	return c, nil
}

// lineConn is the mcp.Connection of a lineTransport.
type lineConn struct {
	lines     chan line // from readLines
	closed    chan struct{}
	closeOnce sync.Once
	in        io.Closer
	maxLine   int
	writeMu   sync.Mutex // one message a write, whole
	out       io.Writer
	// pending counts the calls read and not yet answered, by id: at the
	// end of input Read waits for their answers before it says so, since
	// the SDK cancels what is under way when input ends (a client that
	// writes its requests and closes stdin lost the answers).
	pendingMu sync.Mutex
	pending   map[jsonrpc.ID]int
	answered  chan struct{} // a call was answered
}

// line is one line of input without its end, or how long it was when
// that was too long to keep, or why input ended.
type line struct {
	data    []byte
	tooLong int64
	err     error
}

// readLines passes each line of r to Read until r ends or fails, or the
// connection closes.
func (c *lineConn) readLines(r *bufio.Reader) {
	for {
		l := readLine(r, c.maxLine)
		select {
		case c.lines <- l:
		case <-c.closed:
			return
		}
		if l.err != nil {
			return
		}
	}
}

// readLine reads a line of at most max bytes (without "\n" or "\r\n"); of a
// longer one, it keeps only the length. A last line without a newline is a
// line; after it comes io.EOF.
func readLine(r *bufio.Reader, max int) line {
	var buf []byte
	var n int64
	for {
		chunk, err := r.ReadSlice('\n')
		n += int64(len(chunk))
		if n <= int64(max)+2 { // room for the line's end
			buf = append(buf, chunk...)
		} else {
			buf = nil
		}
		switch {
		case err == bufio.ErrBufferFull:
			continue
		case err == io.EOF && n > 0:
			err = nil
		case err != nil:
			return line{err: err}
		}
		buf = bytes.TrimSuffix(bytes.TrimSuffix(buf, []byte("\n")), []byte("\r"))
		if len(buf) > max || buf == nil && n > 0 {
			return line{tooLong: n}
		}
		return line{data: buf}
	}
}

// Read returns the next message, answering each line before it that is
// not one.
func (c *lineConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	for {
		var l line
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-c.closed:
			return nil, io.EOF
		case l = <-c.lines:
		}
		if l.err != nil {
			c.awaitAnswers(ctx)
			return nil, l.err
		}
		msg, answer := c.decode(l)
		if req, ok := msg.(*jsonrpc.Request); ok && req.IsCall() {
			c.track(req.ID, 1)
		}
		if msg != nil {
			return msg, nil
		}
		if answer != nil {
			if err := c.writeLine(answer); err != nil {
				return nil, err
			}
		}
	}
}

// decode is the line's message, or the error response that answers it
// (nil for a blank line, which needs none).
func (c *lineConn) decode(l line) (jsonrpc.Message, []byte) {
	if l.tooLong > 0 {
		return nil, errorResponse(nil, jsonrpc.CodeInvalidRequest, fmt.Sprintf(
			"invalid request: a line of %d bytes is longer than this server's limit of %s; send less (files and stdin count)",
			l.tooLong, units.BytesSize(float64(c.maxLine))))
	}
	data := bytes.TrimSpace(l.data)
	if len(data) == 0 {
		return nil, nil
	}
	var v json.RawMessage
	if err := json.Unmarshal(data, &v); err != nil {
		return nil, errorResponse(nil, jsonrpc.CodeParseError, "parse error: the line is not JSON: "+err.Error())
	}
	if data[0] == '[' {
		return nil, errorResponse(nil, jsonrpc.CodeInvalidRequest, "invalid request: batches are not served; send one message a line")
	}
	msg, err := jsonrpc.DecodeMessage(data)
	if err != nil {
		return nil, errorResponse(requestID(data), jsonrpc.CodeInvalidRequest, "invalid request: not a JSON-RPC 2.0 message: "+err.Error())
	}
	return msg, nil
}

// requestID is the "id" of an object that is not a valid message, if it
// is one an id may be (a string or a number), else nil (null).
func requestID(data []byte) json.RawMessage {
	var m struct {
		ID json.RawMessage `json:"id"`
	}
	if json.Unmarshal(data, &m) != nil || len(m.ID) == 0 {
		return nil
	}
	if b := m.ID[0]; b == '"' || b == '-' || '0' <= b && b <= '9' {
		return m.ID
	}
	return nil
}

// errorResponse is a JSON-RPC error response for id (nil: null).
func errorResponse(id json.RawMessage, code int64, msg string) []byte {
	if id == nil {
		id = json.RawMessage("null")
	}
	type wireError struct {
		Code    int64  `json:"code"`
		Message string `json:"message"`
	}
	data, _ := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   wireError       `json:"error"`
	}{"2.0", id, wireError{code, msg}})
	return data
}

func (c *lineConn) Write(_ context.Context, msg jsonrpc.Message) error {
	data, err := jsonrpc.EncodeMessage(msg)
	if err != nil {
		return err
	}
	err = c.writeLine(data)
	if resp, ok := msg.(*jsonrpc.Response); ok {
		c.track(resp.ID, -1)
	}
	return err
}

// track counts a call read (+1) or answered (-1).
func (c *lineConn) track(id jsonrpc.ID, n int) {
	c.pendingMu.Lock()
	defer c.pendingMu.Unlock()
	if c.pending[id] += n; c.pending[id] <= 0 {
		delete(c.pending, id)
	}
	if n < 0 {
		select {
		case c.answered <- struct{}{}:
		default:
		}
	}
}

// awaitAnswers returns once every call read has been answered, or ctx
// ends (a signal), or the connection closes. Each call ends by its run's
// own time limit.
func (c *lineConn) awaitAnswers(ctx context.Context) {
	for {
		c.pendingMu.Lock()
		n := len(c.pending)
		c.pendingMu.Unlock()
		if n == 0 {
			return
		}
		select {
		case <-c.answered:
		case <-ctx.Done():
			return
		case <-c.closed:
			return
		}
	}
}

// writeLine writes data and its newline in one write, after any other.
func (c *lineConn) writeLine(data []byte) error {
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	_, err := c.out.Write(append(data, '\n'))
	return err
}

// Close ends the connection: Read returns, and input is closed.
func (c *lineConn) Close() error {
	var err error
	c.closeOnce.Do(func() {
		close(c.closed)
		err = c.in.Close()
	})
	return err
}

func (c *lineConn) SessionID() string { return "" }
