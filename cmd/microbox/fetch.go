package main

// exec's --fetch and --out: files read from the run's scratch area once
// the program has ended (nsjail's Spec.Fetch), written under a host
// directory.

import (
	"fmt"
	"maps"
	"os"
	"path"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/microbox/microbox/result"
)

// fetchFlags are --fetch (repeatable) and --out.
type fetchFlags struct {
	paths []string
	out   string
}

func (f *fetchFlags) register(c *cobra.Command) {
	fl := c.Flags()
	fl.StringArrayVar(&f.paths, "fetch", nil, "after the run, fetch this file from the sandbox's scratch area (relative: the working directory); repeatable, with --out")
	fl.StringVar(&f.out, "out", "", "host directory the fetched files are written under, each at its sandbox path (made if missing)")
}

// check refuses, before the run, what could not be delivered: files
// with nowhere to go, a directory with no files, a name that would leave
// the directory.
func (f *fetchFlags) check(json bool) error {
	switch {
	case len(f.paths) == 0 && f.out != "":
		return usagef("--out %s: nothing to write; give the files with --fetch PATH", f.out)
	case len(f.paths) > 0 && f.out == "" && !json:
		return usagef("--fetch: give --out DIR to write the files to (or --json, whose result holds them)")
	}
	for _, p := range f.paths {
		if _, err := outName(p); err != nil && f.out != "" {
			return err
		}
	}
	return nil
}

// outName is where the fetched file p goes under --out: its sandbox path
// as asked, relative, cleaned; refused if it would leave the directory.
func outName(p string) (string, error) {
	name := path.Clean(strings.TrimLeft(p, "/"))
	if name == "." || name == ".." || strings.HasPrefix(name, "../") {
		return "", usagef("--fetch %q: it would be written outside --out's directory; name the file by a path under the working directory or /tmp, without ..", p)
	}
	return name, nil
}

// write puts the fetched files under --out (dir: where a relative --out
// starts) and says on stderr why any is missing; its error is a file it
// could not write, which the caller did not get.
func (f *fetchFlags) write(inv *invocation, res *result.Result) error {
	if f.out == "" || res.Fetched == nil {
		return nil
	}
	out := f.out
	if !path.IsAbs(out) && inv.dir != "" {
		out = inv.dir + "/" + out
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return fmt.Errorf("--out: %w", err)
	}
	// Every write stays inside out, even past a link a name meets there.
	root, err := os.OpenRoot(out)
	if err != nil {
		return fmt.Errorf("--out: %w", err)
	}
	defer root.Close()
	for _, p := range slices.Sorted(maps.Keys(res.Fetched)) {
		got := res.Fetched[p]
		if got.Error != "" {
			fmt.Fprintf(inv.stderr, "microbox: --fetch %s: %s\n", p, got.Error)
			continue
		}
		name, _ := outName(p) // checked before the run
		if dir := path.Dir(name); dir != "." {
			if err := root.MkdirAll(dir, 0o755); err != nil {
				return fmt.Errorf("--out: fetched file %s: %w", p, err)
			}
		}
		if err := root.WriteFile(name, got.Data, 0o644); err != nil {
			return fmt.Errorf("--out: fetched file %s: %w", p, err)
		}
	}
	return nil
}
