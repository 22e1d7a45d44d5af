// Package rootcheck checks a prepared root with rootfs.Check, running the
// root's Python in the sandbox (the root may be an untrusted image, so its
// Python runs confined like any program), and installs a built or imported
// root that passes.
package rootcheck

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/microbox/microbox/cgroup"
	"github.com/microbox/microbox/internal/batch"
	"github.com/microbox/microbox/internal/policy"
	"github.com/microbox/microbox/nsjail"
	"github.com/microbox/microbox/result"
	"github.com/microbox/microbox/rootfs"
)

// Check runs the full check of the root at dir with python; names spells
// the fields of the sandbox's options in its errors (nil: Go's names).
func Check(dir, python string, modules []string, names func(string) string) *rootfs.Report {
	var languages []string
	if m, err := rootfs.ReadManifest(dir); err == nil {
		languages = m.Languages // a build's --lang
	}
	return rootfs.Check(dir, rootfs.CheckOptions{
		Python:  python,
		Owners:  []int{0, os.Geteuid()},
		Modules: modules,
		Run: func(code string, args ...string) (string, error) {
			return run(dir, python, "", code, args, names)
		},
		Languages: languages,
		RunLanguage: func(language, code string) (string, error) {
			return run(dir, python, language, code, nil, names)
		},
	})
}

// Finish records m in the stage, checks the stage (step names each step,
// found gets the check's report), and moves the stage to dir if it
// passed; one that fails is left for inspection and dir is unchanged.
func Finish(stage, dir string, m *rootfs.Manifest, python string, modules []string, names func(string) string,
	step func(string), found func(*rootfs.Report)) error {
	m.Format, m.Created = 1, time.Now().UTC().Truncate(time.Second)
	if err := rootfs.WriteManifest(stage, m); err != nil {
		return err
	}
	step("checking the new root in the sandbox")
	report := Check(stage, python, modules, names)
	found(report)
	if report.Failed() {
		return fmt.Errorf("the new root fails its check (FAIL lines above); it is left at %s for inspection and %s is unchanged", stage, dir)
	}
	m.Python = report.Python
	if err := rootfs.WriteManifest(stage, m); err != nil {
		return err
	}
	step("installing at " + dir)
	return rootfs.Install(stage, dir)
}

// run runs code in language ("": python -c code args) in the sandbox on
// the root at dir, as exec does with its default options (environment,
// seccomp filter, limits, a compile step for a compiled language), and
// returns its stdout.
func run(dir, python, language, code string, args []string, names func(string) string) (string, error) {
	o := nsjail.Defaults()
	o.RootFS, o.Python, o.Language, o.Code, o.Args, o.Capture = dir, python, language, &code, args, true
	o.Memory, o.FieldNames = 512<<20, names
	o.Timeout = time.Minute // generous: the first run reads a cold root from disk
	if os.Geteuid() == 0 {
		cgroup.GC("")
	} else {
		// Without root, a cgroup needs delegation this command cannot
		// assume; the jail's namespaces, seccomp filter and time limit
		// still apply.
		o = o.WithoutCgroup()
	}
	r, err := batch.Assemble(context.Background(), o, func() (policy.Options, error) { return policy.Options{}, nil })
	if err != nil {
		return "", err
	}
	res := r.Execute(context.Background(), batch.Host{Run: nsjail.Run})
	if res.Status != result.StatusOK {
		return "", errors.New(res.Describe())
	}
	return res.Stdout, nil
}
