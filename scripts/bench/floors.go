package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// The floors are two programs that print "1" and exit, built by the bench:
// c-floor in static C, go-floor in Go with cgo, linked statically as
// microbox is (make's LDFLAGS, less the version stamp). The gap between
// their medians is what Go's runtime costs any process that starts it,
// before its main does anything: a one-shot in-process exec pays it on top
// of whatever its sandbox costs, where bwrap (C) does not.

const cFloor = `#include <unistd.h>
int main(void) { return write(1, "1\n", 2) != 2; }
`

const goFloor = `package main

// int one = 1;
import "C"

import "os"

func main() {
	if C.one != 1 {
		os.Exit(2)
	}
	os.Stdout.Write([]byte("1\n"))
}
`

// floorsMarker names the floors' temporary directory.
const floorsMarker = "microbox-bench-floors-"

// buildFloors builds the two floors in a temporary directory and returns
// them as variants (skipped, with why, when one cannot be built), and a
// function that removes the directory.
func buildFloors() ([]*variant, func()) {
	c := &variant{Name: "c-floor"}
	g := &variant{Name: "go-floor"}
	dir, err := os.MkdirTemp("", floorsMarker)
	if err != nil {
		c.Skipped, g.Skipped = err.Error(), err.Error()
		return []*variant{c, g}, func() {}
	}
	remove := func() { os.RemoveAll(dir) }
	c.Argv = []string{filepath.Join(dir, "c-floor")}
	g.Argv = []string{filepath.Join(dir, "go-floor")}
	// The C source is kept out of the Go module's directory, where cgo
	// would link it into go-floor too.
	if err := os.WriteFile(filepath.Join(dir, "floor.c"), []byte(cFloor), 0o644); err != nil {
		c.Skipped = err.Error()
	} else if err := runIn(dir, nil, "gcc", "-static", "-O2", "-o", c.Argv[0], "floor.c"); err != nil {
		c.Skipped = "not built: " + err.Error()
	}
	mod, mkErr := filepath.Join(dir, "go"), error(nil)
	if mkErr = os.Mkdir(mod, 0o755); mkErr == nil {
		mkErr = os.WriteFile(filepath.Join(mod, "go.mod"), []byte("module floor\n\ngo 1.22\n"), 0o644)
	}
	if mkErr == nil {
		mkErr = os.WriteFile(filepath.Join(mod, "main.go"), []byte(goFloor), 0o644)
	}
	if mkErr != nil {
		g.Skipped = mkErr.Error()
	} else if err := runIn(mod, []string{"GOWORK=off", "CGO_ENABLED=1"}, "go", "build", "-tags", "netgo,osusergo",
		"-ldflags", `-linkmode external -extldflags "-static" -s -w`, "-o", g.Argv[0], "."); err != nil {
		g.Skipped = "not built: " + err.Error()
	}
	return []*variant{c, g}, remove
}

// isFloor tells a floor from the variants that run Python.
func isFloor(v *variant) bool { return v.Name == "c-floor" || v.Name == "go-floor" }

// runIn runs argv in dir with env added, and returns its error with the
// last line it printed.
func runIn(dir string, env []string, argv ...string) error {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %w: %s", strings.Join(argv, " "), err, lastLine(string(out)))
	}
	return nil
}

// renderFloor is the goals table's row on the floor: Go's runtime start
// and exit (go-floor's median over c-floor's) against bwrap's overhead.
func renderFloor(b *strings.Builder, rows map[string]row) {
	cf, okC := rows["c-floor"]
	gf, okG := rows["go-floor"]
	bw, okBW := rows["bwrap"]
	mb, okMB := rows["microbox"]
	if !okC || !okG || !okBW || !okMB {
		return
	}
	goStart := gf.Stats.Median - cf.Stats.Median
	fmt.Fprintf(b, "| (the floor) Go's runtime: a static Go program that prints 1 against a static C one | "+
		"%+.2f ms (go-floor %.2f, c-floor %.2f); microbox's overhead less it %+.2f ms, bwrap's %+.2f | — |\n",
		goStart, gf.Stats.Median, cf.Stats.Median, mb.OverMedian-goStart, bw.OverMedian)
}
