package session

// The wire between a session's supervisor (this package) and its
// interpreter (runner.py, whose first lines name the same ops): on the
// interpreter's fd 0, a stream socket, each message is a frame of a
// 4-byte big-endian length and one JSON object. The supervisor sends a
// config, the interpreter answers ready; then each request gets exactly
// one reply, in order, which echoes its seq. Every reply is the session's, whose code controls
// the interpreter: readFrame bounds it, and replies are checked before
// anything of them is answered (cell.go, files.go).

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
)

// The requests' ops.
const (
	opCell   = "cell"
	opPut    = "put"
	opGet    = "get"
	opDelete = "delete"
	opList   = "list"
)

// config is the supervisor's first message: the modules to import first.
type config struct {
	Preload []string `json:"preload"`
}

// ready answers the config: the interpreter's Python version, or why a
// preload failed.
type ready struct {
	Ready string `json:"ready"`
	Error string `json:"error"`
}

// request is one request: a cell (Code, Stdin, OutputLimit) or a file
// operation (Path; Data for put, Limit for get).
type request struct {
	Op          string  `json:"op"`
	Seq         uint64  `json:"seq"` // the session's count of requests, which its reply echoes
	Code        string  `json:"code,omitempty"`
	Stdin       *string `json:"stdin,omitempty"`
	OutputLimit int64   `json:"output_limit,omitempty"`
	Path        string  `json:"path,omitempty"`
	Data        []byte  `json:"data,omitempty"`
	Limit       int64   `json:"limit,omitempty"`
}

// cellReply is a cell's reply: its output, the value of its trailing
// expression (repr), what it displayed, and its exception.
type cellReply struct {
	Seq             uint64              `json:"seq"`
	Stdout          string              `json:"stdout"`
	Stderr          string              `json:"stderr"`
	StdoutTruncated bool                `json:"stdout_truncated"`
	StderrTruncated bool                `json:"stderr_truncated"`
	Value           *string             `json:"value"`
	Display         []map[string]string `json:"display"`
	Error           *CellError          `json:"error"`
}

// fileReply is a file operation's reply: Error ("not_found", "too_large"
// or the system's words), the file's bytes (get), the listing (list).
type fileReply struct {
	Seq       uint64     `json:"seq"`
	Error     string     `json:"error"`
	Data      []byte     `json:"data"`
	Files     []FileInfo `json:"files"`
	Truncated bool       `json:"truncated"`
}

// errOtherReply is a reply that does not echo its request's seq: the
// session's code wrote a reply of its own to the wire, and the real one
// would answer the next request (a file's GET answered 200 with a
// cell's reply, empty).
var errOtherReply = errors.New("the interpreter answered another request than the one asked (its code wrote to the wire)")

// errFrameTooLarge is a reply over its bound: the interpreter broke the
// wire.
var errFrameTooLarge = errors.New("the interpreter sent a message too large")

// writeFrame sends v as one frame.
func writeFrame(w io.Writer, v any) error {
	body, err := json.Marshal(v)
	if err != nil {
		return err
	}
	frame := binary.BigEndian.AppendUint32(make([]byte, 0, 4+len(body)), uint32(len(body)))
	_, err = w.Write(append(frame, body...))
	return err
}

// readFrame reads one frame's JSON, refusing one over max bytes. The
// buffer grows with the bytes that really arrive: the announced length is
// the interpreter's word, and an interpreter that announces max and sends
// little must not cost the server max bytes.
func readFrame(r *bufio.Reader, max int64) ([]byte, error) {
	var head [4]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return nil, err
	}
	n := int64(binary.BigEndian.Uint32(head[:]))
	if n > max {
		return nil, fmt.Errorf("%w: %d bytes, over the %d this session allows", errFrameTooLarge, n, max)
	}
	body := make([]byte, 0, min(n, frameChunk))
	for int64(len(body)) < n {
		if len(body) == cap(body) { // double, but never past n
			body = slices.Grow(body, int(min(int64(cap(body)), n-int64(len(body)))))
		}
		m, err := r.Read(body[len(body):min(cap(body), int(n))])
		body = body[:len(body)+m]
		if int64(len(body)) == n {
			break
		}
		if err == io.EOF {
			return nil, io.ErrUnexpectedEOF
		}
		if err != nil {
			return nil, err
		}
	}
	return body, nil
}

// frameChunk is what readFrame sets aside before a frame's bytes arrive.
const frameChunk = 64 << 10
