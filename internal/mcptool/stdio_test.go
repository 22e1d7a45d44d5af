package mcptool

import (
	"bufio"
	"io"
	"strings"
	"testing"
)

// Lines are read whole up to the limit, across the reader's buffer; a
// longer one is read to its end and only its length kept; "\r\n" ends a
// line as "\n" does, and a last line needs no end.
func TestReadLine(t *testing.T) {
	in := "abcd\nabcde\nab\r\n" + strings.Repeat("x", 40) + "\nok\n\nxy"
	r := bufio.NewReaderSize(strings.NewReader(in), 16)
	want := []line{{data: []byte("abcd")}, {tooLong: 6}, {data: []byte("ab")}, {tooLong: 41},
		{data: []byte("ok")}, {data: []byte{}}, {data: []byte("xy")}, {err: io.EOF}}
	for i, w := range want {
		got := readLine(r, 4)
		if string(got.data) != string(w.data) || got.tooLong != w.tooLong || got.err != w.err {
			t.Fatalf("line %d: %q %d %v, want %q %d %v", i, got.data, got.tooLong, got.err, w.data, w.tooLong, w.err)
		}
	}
}
