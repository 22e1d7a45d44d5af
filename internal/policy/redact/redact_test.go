package redact

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/microbox/microbox/result"
)

func testRedactor(t *testing.T, custom ...string) *Redactor {
	t.Helper()
	r, err := New(custom, []string{"/srv/microbox/rootfs"})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// unmetered is a meter no test output exhausts.
func unmetered() *Meter { return NewMeter(time.Hour) }

// redactAll is r.redact under an unmetered meter.
func redactAll(r *Redactor, text string) (string, []int) {
	out, counts, err := r.redact(text, unmetered())
	if err != nil {
		panic(err)
	}
	return out, counts
}

func TestRedactPatterns(t *testing.T) {
	r := testRedactor(t)
	cases := []struct{ in, want string }{
		{"key sk-proj-abcdefghijklmnopqrstuvwx12 end", "key [REDACTED_API_KEY] end"},
		{"aws AKIAIOSFODNN7EXAMPLE", "aws [REDACTED_API_KEY]"},
		{"gh ghp_" + strings.Repeat("a", 36), "gh [REDACTED_API_KEY]"},
		{"task-list sk-short", "task-list sk-short"}, // too short, and "sk-" inside a word
		{"-----BEGIN PRIVATE KEY-----\nMIIB\nxyz\n-----END PRIVATE KEY-----\nafter", "[REDACTED_PRIVATE_KEY]\nafter"},
		{"-----BEGIN OPENSSH PRIVATE KEY-----\nb3Bl", "[REDACTED_PRIVATE_KEY]"}, // cut off: masked to the end
		{"-----BEGIN CERTIFICATE-----", "-----BEGIN CERTIFICATE-----"},
		{"url postgres://app:hunter2@db.internal:5432/x?ssl=1 ok", "url [REDACTED_CONNECTION_STRING] ok"},
		{"redis://:pw@cache:6379", "[REDACTED_CONNECTION_STRING]"},
		{"https://example.com/a:b@c", "https://example.com/a:b@c"}, // no credentials before a host
		{"mail alice.b+x@mail.example.org.", "mail [REDACTED_EMAIL]."},
		{"10.0.0.1 172.16.5.4 172.31.255.255 192.168.1.1", "[REDACTED_PRIVATE_IP] [REDACTED_PRIVATE_IP] [REDACTED_PRIVATE_IP] [REDACTED_PRIVATE_IP]"},
		{"8.8.8.8 172.32.0.1 110.0.0.1 10.0.0.256", "8.8.8.8 172.32.0.1 110.0.0.1 10.0.0.256"},
		{"open('/home/alice/data.csv')", "open('[REDACTED_HOST_PATH]')"},
		{"/root/.ssh/id_rsa and /rootfs/x and /srv/home/x", "[REDACTED_HOST_PATH] and /rootfs/x and /srv/home/x"},
		{`C:\Users\bob\file.txt`, `[REDACTED_HOST_PATH]`},
		{"root /srv/microbox/rootfs/usr/lib but /srv/microbox/rootfs2", "root [REDACTED_HOST_PATH] but /srv/microbox/rootfs2"},
		{"/tmp/main.py /usr/lib/python3", "/tmp/main.py /usr/lib/python3"},
	}
	for _, c := range cases {
		if got, _ := redactAll(r, c.in); got != c.want {
			t.Errorf("redact(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// Where matches overlap, the earlier pattern wins: the credentials of a
// connection string are not also counted as an e-mail address.
func TestRedactOverlapsAndCounts(t *testing.T) {
	r := testRedactor(t, `password=pw=(?P<secret>\S+)`)
	out, counts := redactAll(r, "pw=abc postgres://u:p@host.example.com/db a@b.io a@b.io")
	if want := "pw=[REDACTED_PASSWORD] [REDACTED_CONNECTION_STRING] [REDACTED_EMAIL] [REDACTED_EMAIL]"; out != want {
		t.Fatalf("got %q, want %q", out, want)
	}
	want := []Redaction{{Kind: "password", Count: 1}, {Kind: "connection_string", Count: 1}, {Kind: "email", Count: 2}}
	if got := r.summary(counts); !slices.Equal(got, want) {
		t.Fatalf("summary %v, want %v", got, want)
	}
}

func TestRedactCustomPatternErrors(t *testing.T) {
	for _, bad := range []string{"noequals", "=x", "9x=a", "x=(", "x=a*"} {
		if _, err := New([]string{bad}, nil); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// Go's regexp is linear in its input; so is the merging of matches. A
// 1 MiB output of the worst shapes for these patterns takes a bounded
// time, and twice the input takes about twice the time, not four times.
func TestRedactLinearTime(t *testing.T) {
	r := testRedactor(t)
	shapes := map[string]string{
		"emails":   "a@b.io ",
		"near":     "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa@",
		"keys":     "sk-" + strings.Repeat("x", 30) + " ",
		"ips":      "10.1.1.1 ",
		"pem":      "-----BEGIN RSA PRIVATE KEY-----\n",
		"slashes":  "/home/",
		"noise":    "the quick brown fox 12.34.56 :// @ ",
		"oneline":  "x",
		"urlsplit": "a://b:c@",
	}
	for name, unit := range shapes {
		small := strings.Repeat(unit, (1<<20)/len(unit))
		large := small + small
		t1 := timeRedact(r, small)
		t2 := timeRedact(r, large)
		if t1 > 5*time.Second {
			t.Errorf("%s: 1 MiB took %v", name, t1)
		}
		// Generous: CI machines are noisy; quadratic would be ~4x.
		if t2 > 3*t1+200*time.Millisecond {
			t.Errorf("%s: 1 MiB %v, 2 MiB %v: not linear", name, t1, t2)
		}
	}
}

func timeRedact(r *Redactor, s string) time.Duration {
	start := time.Now()
	redactAll(r, s)
	return time.Since(start)
}

func BenchmarkRedact1MiB(b *testing.B) {
	r, _ := New(nil, nil)
	line := "result 42 for user bob@example.com at 10.0.0.7, token sk-abcdefghijklmnopqrstuvwxyz, ok\n"
	text := strings.Repeat(line+"plain output line with nothing secret in it at all\n", (1<<20)/(len(line)+51))
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		redactAll(r, text)
	}
}

// The streaming writer passes complete lines, holds a private key block
// until its END line even across writes, and masks the rest at the end.
func TestRedactWriter(t *testing.T) {
	r := testRedactor(t)
	var out bytes.Buffer
	w := r.NewWriter(&out, unmetered())
	for _, chunk := range []string{"mail a@b.", "io\nkey: -----BEGIN RSA PRIVATE KEY-----\nMIIE", "abc\n", "def\n-----END RSA PRIVATE KEY-----\n", "tail 10.0.0.1"} {
		w.Write([]byte(chunk))
		if strings.Contains(out.String(), "MIIE") {
			t.Fatalf("key material passed before its block ended: %q", out.String())
		}
	}
	if got := out.String(); got != "mail [REDACTED_EMAIL]\nkey: [REDACTED_PRIVATE_KEY]\n" {
		t.Fatalf("before flush: %q", got)
	}
	w.Flush()
	if got := out.String(); !strings.HasSuffix(got, "tail [REDACTED_PRIVATE_IP]") {
		t.Fatalf("after flush: %q", got)
	}
	if got := r.summary(w.counts); len(got) != 3 {
		t.Fatalf("counts %v", got)
	}
	// A line longer than the limit is passed in pieces, not held forever.
	out.Reset()
	w.Write(bytes.Repeat([]byte("x"), maxLine+1))
	if out.Len() != maxLine+1 {
		t.Fatalf("long line: %d bytes passed", out.Len())
	}
}

// Output with nothing to mask, the common case, costs only the search for
// the patterns' hints.
func BenchmarkRedact1MiBClean(b *testing.B) {
	r, _ := New(nil, nil)
	text := strings.Repeat("test_case_17 passed in 0.0031 s: expected [1, 2, 3], got [1, 2, 3]\n", (1<<20)/69)
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		redactAll(r, text)
	}
}

// A stream of one-byte writes stays linear: the writer looks for lines
// only when one ends.
func TestRedactWriterTinyWrites(t *testing.T) {
	r := testRedactor(t)
	var out bytes.Buffer
	w := r.NewWriter(&out, unmetered())
	start := time.Now()
	for range 1 << 20 {
		w.Write([]byte{'x'})
	}
	w.Write([]byte(" a@b.io\n"))
	w.Flush()
	if el := time.Since(start); el > 5*time.Second {
		t.Fatalf("1 MiB of one-byte writes took %v", el)
	}
	if out.Len() != 1<<20+len(" [REDACTED_EMAIL]\n") {
		t.Fatalf("%d bytes out", out.Len())
	}
}

// A captured result is masked; when the output also streamed, what the
// streams masked is counted, not the same secrets again.
func TestResult(t *testing.T) {
	r := testRedactor(t)
	res := &result.Result{Stdout: "a@b.io\n", Stderr: "10.0.0.1\n"}
	got, _ := r.Result(res, unmetered())
	if res.Stdout != "[REDACTED_EMAIL]\n" || res.Stderr != "[REDACTED_PRIVATE_IP]\n" || len(got) != 2 {
		t.Fatalf("stdout %q stderr %q redactions %v", res.Stdout, res.Stderr, got)
	}
	var out bytes.Buffer
	w := r.NewWriter(&out, unmetered())
	w.Write([]byte("a@b.io")) // no newline: passed on by Result's flush
	res = &result.Result{Stdout: "a@b.io"}
	got, _ = r.Result(res, unmetered(), nil, w)
	if out.String() != "[REDACTED_EMAIL]" || !slices.Equal(got, []Redaction{{Kind: "email", Count: 1}}) {
		t.Fatalf("streamed %q redactions %v", out.String(), got)
	}
}
