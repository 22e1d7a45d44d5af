package batch

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
)

// lineWriter writes result lines whole or not at all: each with one write
// of the whole line, and, where a write fails part way (a full disk) into
// a regular file, the part written cut off again, so that the file ends
// with the last whole result, which the error names.
type lineWriter struct {
	w    io.Writer
	buf  bytes.Buffer
	last *Result // the last result written whole
}

// put writes r as one JSON line.
func (l *lineWriter) put(r *Result) error {
	l.buf.Reset()
	enc := json.NewEncoder(&l.buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(r); err != nil {
		return fmt.Errorf("write results: encode the result of input line %d: %w", r.Line, err)
	}
	n, err := l.w.Write(l.buf.Bytes())
	if err == nil {
		l.last = r
		return nil
	}
	return fmt.Errorf("write results: %w; %s%s", err, l.lastWritten(), l.cutPart(n))
}

// lastWritten says which task's result was the last written whole.
func (l *lineWriter) lastWritten() string {
	if l.last == nil {
		return "no result was written whole"
	}
	return fmt.Sprintf("the last result written whole is that of the task with id %s on input line %d",
		compactID(l.last.ID), l.last.Line)
}

// file is what cutting a partial line off needs of an *os.File (or a
// type that embeds one).
type file interface {
	Stat() (os.FileInfo, error)
	Seek(offset int64, whence int) (int64, error)
	Truncate(size int64) error
}

// cutPart removes the n bytes of a line a failed write left at the end of
// a regular file, and says what became of them.
func (l *lineWriter) cutPart(n int) string {
	if n == 0 {
		return ""
	}
	f, ok := l.w.(file)
	if !ok {
		return "; part of the next line went out before the failure"
	}
	if err := truncateLast(f, int64(n)); err != nil {
		return fmt.Sprintf("; part of the next line was written, and could not be removed: %v", err)
	}
	return "; the part of the next line written was removed"
}

// truncateLast cuts the last n bytes written to f off, if it is a regular
// file: the write left its offset after them (O_APPEND or not).
func truncateLast(f file, n int64) error {
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return errors.New("not a regular file")
	}
	end, err := f.Seek(0, io.SeekCurrent)
	if err != nil {
		return err
	}
	if err := f.Truncate(end - n); err != nil {
		return err
	}
	_, err = f.Seek(end-n, io.SeekStart)
	return err
}
