package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/microbox/microbox/internal/interrupt"
	"github.com/microbox/microbox/internal/rootcheck"
	"github.com/microbox/microbox/nsjail"
	"github.com/microbox/microbox/rootfs"
)

func rootfsCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "rootfs",
		Short: "Build, import and check root filesystems for --rootfs",
		Long: `Prepare the read-only root a sandbox runs in.

  microbox rootfs build DIR [--suite bookworm] [--with numpy,pandas,scipy] [--lang c,cpp,bash,node]
  microbox rootfs import IMAGE DIR
  microbox rootfs check DIR

exec uses --rootfs DIR, else $` + rootfs.EnvRootfs + `, else ` + rootfs.SystemDir + ` if it
exists, else a root derived from the host's /usr.`,
	}
	c.AddCommand(rootfsBuildCommand(), rootfsImportCommand(), rootfsCheckCommand())
	return c
}

func rootfsBuildCommand() *cobra.Command {
	var o rootfs.BuildOptions
	var replace bool
	c := &cobra.Command{
		Use:   "build DIR",
		Short: "Build a Debian root with Python's full standard library (and extras) using mmdebstrap",
		Long: `Build a Debian root with python3 (the full standard library) and the
Python packages named by --with (Debian's python3-NAME), using mmdebstrap.
Documentation, package-manager state and setuid bits are stripped, the
standard library and extras are precompiled to .pyc, and a manifest is
written to ` + rootfs.ManifestPath + `. The root is built beside DIR, checked in
the sandbox, and only then moved to DIR.

Without --mirror, the Debian mirrors this host's apt uses are used.`,
		Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			return runBuild(args[0], o, replace)
		},
	}
	fl := c.Flags()
	fl.StringVar(&o.Suite, "suite", "bookworm", "Debian release to build from")
	fl.StringSliceVar(&o.With, "with", nil, "extra Python packages by Debian name, without python3- (e.g. numpy,pandas,scipy)")
	fl.StringSliceVar(&o.Languages, "lang", nil, "languages besides Python to install the tools of (c,cpp,bash,node: Debian's gcc, g++, bash, nodejs)")
	fl.StringVar(&o.Mirror, "mirror", "", "Debian archive URL (default: this host's apt mirrors, with SUITE-updates and SUITE-security)")
	fl.BoolVar(&replace, "replace", false, "replace DIR if it already holds a root (kept beside it as .NAME.microbox-old until the next replace)")
	return c
}

func rootfsImportCommand() *cobra.Command {
	var o rootfs.ImportOptions
	var replace bool
	var python, maxSize string
	c := &cobra.Command{
		Use:   "import IMAGE DIR",
		Short: "Unpack an OCI image layout or a `docker save` archive into a root",
		Long: `Unpack a container image into DIR: an OCI image layout directory, an OCI
archive, or a ` + "`docker save`" + ` archive (e.g. of python:3.12-slim, pulled
elsewhere). Layers are applied in order with their whiteouts. Paths that
climb out of the root are refused; device nodes are not created, setuid and
setgid bits are removed, and files belong to the importing user. The root
is unpacked beside DIR, checked in the sandbox, and only then moved to DIR.`,
		Args: cobra.ExactArgs(2),
		RunE: func(c *cobra.Command, args []string) error {
			var err error
			if o.MaxSize, err = nsjail.ParseSize("MaxSize", maxSize); err != nil {
				return flagError(err)
			}
			return runImport(args[0], args[1], o, replace, python)
		},
	}
	fl := c.Flags()
	fl.StringVar(&o.Ref, "ref", "", "image to take from an archive or layout holding several (tag or ref name)")
	fl.StringVar(&maxSize, "max-size", "16G", "refuse an image that unpacks to more than this (it is untrusted: a little gzip can fill a disk)")
	fl.BoolVar(&replace, "replace", false, "replace DIR if it already holds a root (kept beside it as .NAME.microbox-old until the next replace)")
	fl.StringVar(&python, "python", "/usr/bin/python3", "interpreter path inside the root, for the check")
	return c
}

func rootfsCheckCommand() *cobra.Command {
	var python string
	c := &cobra.Command{
		Use:   "check DIR",
		Short: "Check that a root is usable and safe, and say what was found",
		Long: `Check a root: Python runs in it under the sandbox and imports its standard
library (and a build's extras), modules have valid .pyc, and the tree holds
no setuid/setgid files, device nodes, world-writable files or directories
without the sticky bit, nor anything owned by a user other than root or
the caller. Prints one finding per line; exits 0 if the root is usable, 1
if not, 125 if it could not check.`,
		Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			dir, err := absDir(args[0])
			if err != nil {
				return err
			}
			var modules []string
			if m, err := rootfs.ReadManifest(dir); err == nil {
				modules = (&rootfs.BuildOptions{With: m.With}).Modules()
			}
			report := rootcheck.Check(dir, python, modules, flagName)
			printFindings(report)
			if report.Failed() {
				fmt.Fprintf(os.Stderr, "microbox: rootfs %s is not usable: see the FAIL lines above\n", dir)
				os.Exit(1)
			}
			return nil
		},
	}
	c.Flags().StringVar(&python, "python", "/usr/bin/python3", "interpreter path inside the root")
	return c
}

func absDir(arg string) (string, error) {
	dir, err := filepath.Abs(arg)
	if err != nil {
		return "", usagef("%s: %v", arg, err)
	}
	return dir, nil
}

// buildSteps prints the steps of a long command on stderr with their times.
type buildSteps struct {
	n, of int
	began time.Time
}

func (p *buildSteps) step(format string, args ...any) {
	p.done()
	p.n++
	p.began = time.Now()
	fmt.Fprintf(os.Stderr, "microbox: [%d/%d] %s\n", p.n, p.of, fmt.Sprintf(format, args...))
}

func (p *buildSteps) done() {
	if p.n > 0 {
		fmt.Fprintf(os.Stderr, "microbox:       done in %.1f s\n", time.Since(p.began).Seconds())
	}
}

func runBuild(arg string, o rootfs.BuildOptions, replace bool) error {
	dir, err := absDir(arg)
	if err != nil {
		return err
	}
	if err := rootfs.PrepareTarget(dir, replace); err != nil {
		return usagef("%v", err)
	}
	pkgs, err := o.Packages()
	if err != nil {
		return usagef("%v", err)
	}
	sources, err := rootfs.Sources(o.Suite, o.Mirror)
	if err != nil {
		return usagef("%v", err)
	}
	ctx, stop := interrupt.Context(context.Background())
	defer stop()
	stage := rootfs.StagePath(dir)
	o.Log = os.Stderr
	p := &buildSteps{of: 3}
	began := time.Now()
	p.step("mmdebstrap: Debian %s with %s from %s", o.Suite, strings.Join(pkgs, ", "), strings.Fields(sources[0])[1])
	m, err := rootfs.Build(ctx, stage, o)
	if err != nil {
		rootfs.RemoveTree(stage)
		return fmt.Errorf("build %s: %w", dir, err)
	}
	if err := finishRoot(p, stage, dir, m, "/usr/bin/python3", o.Modules()); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "microbox: built %s in %.0f s; run code in it with: microbox exec --rootfs %s FILE.py\n", dir, time.Since(began).Seconds(), dir)
	return nil
}

func runImport(image, arg string, o rootfs.ImportOptions, replace bool, python string) error {
	dir, err := absDir(arg)
	if err != nil {
		return err
	}
	if err := rootfs.PrepareTarget(dir, replace); err != nil {
		return usagef("%v", err)
	}
	ctx, stop := interrupt.Context(context.Background())
	defer stop()
	stage := rootfs.StagePath(dir)
	o.Log = os.Stderr
	p := &buildSteps{of: 3}
	p.step("unpacking %s", image)
	m, err := rootfs.Import(ctx, image, stage, o)
	if err != nil {
		rootfs.RemoveTree(stage)
		return fmt.Errorf("import %s: %w", image, err)
	}
	for _, n := range m.Notes {
		fmt.Fprintf(os.Stderr, "microbox:       %s\n", n)
	}
	if err := finishRoot(p, stage, dir, m, python, nil); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "microbox: imported %s into %s; run code in it with: microbox exec --rootfs %s FILE.py\n", image, dir, dir)
	return nil
}

// finishRoot checks a built or imported stage in the sandbox, printing
// its findings, and installs it if it passed.
func finishRoot(p *buildSteps, stage, dir string, m *rootfs.Manifest, python string, modules []string) error {
	err := rootcheck.Finish(stage, dir, m, python, modules, flagName, func(s string) { p.step("%s", s) }, printFindings)
	p.done()
	return err
}

// printFindings prints a check's findings on stdout.
func printFindings(report *rootfs.Report) {
	for _, f := range report.Findings {
		fmt.Println(f)
	}
}
