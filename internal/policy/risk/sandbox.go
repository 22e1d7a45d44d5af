package risk

import "github.com/microbox/microbox/nsjail"

// Options are a standalone analysis's sandbox (microbox check), where no
// program's run gives one: the root and interpreter the code would run on
// and the cgroup to analyze it under. Errors name these fields.
type Options struct {
	RootFS       string // "": chosen as a run's root is
	Python       string // "": a run's default
	NoCgroup     bool
	CgroupParent string
	// FieldNames spells the fields in messages as the caller calls them.
	FieldNames func(field string) string
}

// Base is the sandbox the analysis runs in, prepared (the root chosen and
// checked): a run's defaults and root, so that the parser that would run
// the code judges it, with a tighter process limit and scratch area and
// the default filter.
func (o *Options) Base() (nsjail.Options, error) {
	b := nsjail.Defaults()
	b.FieldNames = o.FieldNames
	b.RootFS, b.TmpfsSize, b.Pids = o.RootFS, 16<<20, 16
	if o.Python != "" {
		b.Python = o.Python
	}
	b.NoCgroup, b.CgroupParent = o.NoCgroup, o.CgroupParent
	if o.NoCgroup {
		b.Memory, b.CPUs, b.Pids = 0, 0, 0
	}
	return b, b.Prepare()
}
