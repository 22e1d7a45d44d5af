package session

import (
	"encoding/json"
	"errors"
	"strings"
	"time"
	"unicode/utf8"
)

// FileInfo is one entry of a session's file listing: its path relative
// to the working directory, its size, its type ("file", "symlink",
// "other").
type FileInfo struct {
	Path string `json:"path"`
	Size int64  `json:"size"`
	Type string `json:"type"`
}

// Listing is the answer to a listing of a session's files: the entries,
// and whether there were more than it holds.
type Listing struct {
	Files     []FileInfo `json:"files"`
	Truncated bool       `json:"truncated"`
}

// Written is the answer to a file written: its path and size in bytes.
type Written struct {
	Path string `json:"path"`
	Size int    `json:"size"`
}

// Deleted is the answer to a file deleted.
type Deleted struct {
	Path    string `json:"path"`
	Deleted bool   `json:"deleted"`
}

// Errors of the file operations besides bad input and the session's end.
var (
	ErrNotFound = errors.New("no such file in the session's working directory")
	ErrTooLarge = errors.New("the file is larger than the server's --max-session-file-bytes")
)

// maxPath bounds a file's path.
const maxPath = 1024

// fileTimeout bounds a file operation: the interpreter does it between
// cells, at once.
const fileTimeout = 30 * time.Second

// CheckPath refuses a file path that could leave the session's working
// directory or name it oddly: it must be relative, each of its parts a
// name (no "", "." or ".."), valid UTF-8 without NUL. The interpreter
// also follows no symbolic link on the way (runner.py: open_dir).
func CheckPath(p string) error {
	switch {
	case p == "":
		return badInput("no file path: give one relative to the session's working directory, e.g. data/input.csv")
	case len(p) > maxPath:
		return badInput("file path of %d bytes: give at most %d", len(p), maxPath)
	case !utf8.ValidString(p) || strings.ContainsRune(p, 0):
		return badInput("file path %q is not valid UTF-8 without NUL", p)
	case strings.HasPrefix(p, "/"):
		return badInput("file path %q is absolute: give it relative to the session's working directory", p)
	}
	for _, part := range strings.Split(p, "/") {
		if part == "" || part == "." || part == ".." {
			return badInput("file path %q has a part %q: give plain names separated by single slashes, inside the working directory", p, part)
		}
	}
	return nil
}

// FileCap is the most bytes of one file in or out of a session.
func (s *Session) FileCap() int64 { return s.o.fileCap }

// PutFile writes data to path (its directories made as needed).
func (s *Session) PutFile(path string, data []byte) error {
	if int64(len(data)) > s.o.fileCap {
		return ErrTooLarge
	}
	_, err := s.fileOp(request{Op: opPut, Path: path, Data: data})
	return err
}

// GetFile reads path, a regular file of at most the file cap.
func (s *Session) GetFile(path string) ([]byte, error) {
	return s.GetFileUpTo(path, s.o.fileCap)
}

// GetFileUpTo reads path, a regular file of at most most bytes (and the
// file cap): a front end whose answer costs many times the file bounds
// it lower.
func (s *Session) GetFileUpTo(path string, most int64) ([]byte, error) {
	most = min(most, s.o.fileCap)
	r, err := s.fileOp(request{Op: opGet, Path: path, Limit: most})
	if err != nil {
		return nil, err
	}
	if int64(len(r.Data)) > most { // the interpreter's word is not enough
		return nil, ErrTooLarge
	}
	return r.Data, nil
}

// DeleteFile removes path.
func (s *Session) DeleteFile(path string) error {
	_, err := s.fileOp(request{Op: opDelete, Path: path})
	return err
}

// ListFiles lists the working directory's files, recursively, and says
// whether the list stops short.
func (s *Session) ListFiles() ([]FileInfo, bool, error) {
	r, err := s.fileOp(request{Op: opList})
	if err != nil {
		return nil, false, err
	}
	files := []FileInfo{}
	for _, f := range r.Files {
		if len(files) == maxListed {
			return files, true, nil
		}
		if CheckPath(f.Path) != nil || f.Size < 0 {
			continue // not a name a caller could ask for
		}
		files = append(files, FileInfo{Path: f.Path, Size: f.Size, Type: clip(f.Type, 16)})
	}
	return files, r.Truncated, nil
}

// maxListed bounds a listing (runner.py's MAX_LISTED).
const maxListed = 10000

// fileOp does one file operation: its path checked, its reply read.
func (s *Session) fileOp(req request) (*fileReply, error) {
	if req.Op != opList {
		if err := CheckPath(req.Path); err != nil {
			return nil, err
		}
	}
	if err := s.begin(); err != nil {
		return nil, err
	}
	defer s.done()
	b, _, err := s.exchange(req, fileTimeout)
	if err != nil {
		return nil, err
	}
	var r fileReply
	if err := json.Unmarshal(b, &r); err != nil {
		s.end(ReasonError, "the interpreter's reply to a file operation is not one: "+clip(err.Error(), 200))
		return nil, s.ended()
	}
	if err := s.answers(r.Seq); err != nil {
		return nil, err
	}
	switch r.Error {
	case "":
		return &r, nil
	case "not_found":
		return nil, ErrNotFound
	case "too_large":
		return nil, ErrTooLarge
	case "symlink":
		return nil, badInput("file path %q goes through a symbolic link, which sessions' files do not follow", req.Path)
	}
	return nil, badInput("file path %q: %s", req.Path, clip(r.Error, 200))
}
