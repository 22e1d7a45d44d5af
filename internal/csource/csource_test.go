package csource

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const sample = `#define _GNU_SOURCE
#define PLAN_FD 3
#define FALLBACK 0xFFFFFFFFu // the answer "run it yourself"
#  define NAME "a \"b\" //c" // trailing
#define NEED(k) do { check(k); } while (0)

// wanted is a function with braces in a string.
static int wanted(const char *e)
{
	// a comment's "don't" is no character constant, nor this '{'
	/* nor "}" these { */
	if (e[0] == '}')
		return strcmp(e, "{") == 0;
	return !strncmp(e, "HOME=", 5);
}
`

func sampleFile(t *testing.T) *File {
	t.Helper()
	path := filepath.Join(t.TempDir(), "sample.c")
	if err := os.WriteFile(path, []byte(sample), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestDefines(t *testing.T) {
	f := sampleFile(t)
	if n, err := f.Int("PLAN_FD"); err != nil || n != 3 {
		t.Errorf("PLAN_FD: %d %v", n, err)
	}
	if n, err := f.Int("FALLBACK"); err != nil || n != 0xFFFFFFFF {
		t.Errorf("FALLBACK: %#x %v", n, err)
	}
	if s, err := f.String("NAME"); err != nil || s != `a "b" //c` {
		t.Errorf("NAME: %q %v", s, err)
	}
	for _, name := range []string{"_GNU_SOURCE", "NEED", "MISSING"} {
		if v, err := f.Define(name); err == nil {
			t.Errorf("%s: got %q, want no object-like macro with a value", name, v)
		}
	}
	if _, err := f.Int("NAME"); err == nil {
		t.Error("a string read as an integer")
	}
	if _, err := f.String("PLAN_FD"); err == nil {
		t.Error("an integer read as a string")
	}
}

func TestBody(t *testing.T) {
	body, err := sampleFile(t).Body("wanted")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(body, `"HOME=", 5`) || strings.Contains(body, "static") {
		t.Errorf("body %q", body)
	}
	if _, err := sampleFile(t).Body("missing"); err == nil {
		t.Error("found a function that is not there")
	}
}
