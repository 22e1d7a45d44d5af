package httpapi

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/microbox/microbox/internal/policy"
	"github.com/microbox/microbox/result"
)

// Output streamed in pieces is exactly encoding/json's encoding of it,
// whatever falls on a piece's edge (a character cut in two, invalid
// bytes, NULs, U+2028, HTML characters), and the answer's
// Content-Length is its length.
func TestAnswerStreamsAsEncodingJSON(t *testing.T) {
	edge := strings.Repeat("a", escapePiece-1)
	outputs := []string{
		"", "plain\n", strings.Repeat("\x00", 3*escapePiece+5),
		edge + "é" + edge + "€€" + edge + "😀x",
		edge + "\xff\xfe" + edge + "\xe2\x82" + "x" + strings.Repeat("\x80", 7),
		strings.Repeat("<&>\"\\\u2028\u2029\t\b\f\x7f", escapePiece/5),
	}
	for i, out := range outputs {
		res := &policy.Result{Result: &result.Result{Status: result.StatusOK, Stdout: out, Stderr: out[:len(out)/2]}}
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			writeResult(w, http.StatusOK, res)
		}))
		resp, err := http.Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		srv.Close()
		var want bytes.Buffer
		enc := json.NewEncoder(&want)
		enc.SetEscapeHTML(false)
		enc.Encode(res)
		if err != nil || !bytes.Equal(got, want.Bytes()) {
			t.Errorf("output %d: the answer differs from encoding/json's (%v)", i, err)
		}
		if resp.Header.Get("Content-Length") != strconv.Itoa(want.Len()) {
			t.Errorf("output %d: Content-Length %s, want %d", i, resp.Header.Get("Content-Length"), want.Len())
		}
	}
}
