package batch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"sync"

	"github.com/microbox/microbox/field"
	"github.com/microbox/microbox/internal/policy"
	"github.com/microbox/microbox/nsjail"
	"github.com/microbox/microbox/result"
)

// A Run is a run made ready: its Spec and the policy layers around it.
// Every entry point builds its runs with Assemble (exec, and eval's check
// of its layers) or Prepare (a task: batch, eval, the HTTP API, the MCP
// tool) and runs them with Execute, so a run is made and judged the same
// way whoever asked for it.
type Run struct {
	Spec   *nsjail.Spec
	layers *policy.Layers
}

// Assemble makes a run of o (whose errors name its fields, package
// field) with the policy layers layers returns, asked for once the Spec
// is built: the Spec, the layers around it, then whether a zygote can run
// what the layers made of it (Spec.CheckZygote, once).
func Assemble(ctx context.Context, o nsjail.Options, layers func() (policy.Options, error)) (*Run, error) {
	s, err := o.Build()
	if err != nil {
		return nil, err
	}
	lo, err := layers()
	if err != nil {
		return nil, err
	}
	if err := checkLanguageLayers(o, lo); err != nil {
		return nil, err
	}
	ly, err := lo.Prepare(ctx, o, s)
	if err != nil {
		return nil, err
	}
	if err := s.CheckZygote(); err != nil {
		ly.Close()
		return nil, err
	}
	return &Run{Spec: s, layers: ly}, nil
}

// Prepare applies the task to a copy of base (prepared options) and of
// layers (the layers' settings every task starts from: cache directory,
// audit log), refusing it over one of limits' ceilings, and assembles its
// run. Its error is spelled as the task's errors are (its own keys, else
// base's FieldNames); IsBadInput tells a fault of the task's from one of
// microbox's.
func Prepare(ctx context.Context, base nsjail.Options, layers policy.Options, limits Limits, t *Task) (*Run, error) {
	names := t.fieldNames(base.FieldNames)
	o, err := taskOptions(base, t)
	if err != nil {
		return nil, spell(err, names)
	}
	if err := limits.check(base, o, t); err != nil {
		return nil, err
	}
	if len(o.Fetch) > 0 {
		o.FetchMaxFile, o.FetchMaxTotal = int64(limits.Value("fetch-file-bytes", base)), int64(limits.Value("fetch-bytes", base))
	}
	o.FieldNames = names
	r, err := Assemble(ctx, o, func() (policy.Options, error) {
		lo, err := t.layers(layers)
		if t.Source != nil {
			lo.Source = []byte(*t.Source)
		}
		return lo, err
	})
	if err != nil {
		return nil, spell(err, names)
	}
	return r, nil
}

// spell is a task's error, its fields named as names has them.
func spell(err error, names func(string) string) error {
	return &taskError{msg: field.Message(err, names), input: field.Is(err) || IsBadInput(err)}
}

// Close releases what a run that will not be run holds (the audit log
// its layers opened).
func (r *Run) Close() { r.layers.Close() }

// A Host is where runs go: how it runs a spec, and what it does beside.
type Host struct {
	// Run runs the spec: nsjail.Run, a worker's spawner, a server's jails.
	Run policy.Runner
	// CollectStaleGroups, if set, removes the groups of runs whose
	// supervisor died under the run's cgroup parent while the run goes on
	// (it touches only groups whose owner is dead, never this run's; a
	// batch does it once, before its runs, and sets none).
	CollectStaleGroups func(parent string)
	// Verdict, if set, hears each result (a server's counts).
	Verdict func(*result.Result)
	// Log hears why an audit line could not be written; nil: microbox's
	// stderr (a server's log), for a caller with no stderr of its own.
	Log io.Writer
}

// Execute runs the program through its layers on h: stale groups
// collected beside the run, the run, then the verdict. An audit line
// that could not be written is in the result's error
// (policy.Layers.Run) and in h's log.
func (r *Run) Execute(ctx context.Context, h Host) *policy.Result {
	var collected sync.WaitGroup
	if c := r.Spec.Cgroup; c != nil && h.CollectStaleGroups != nil {
		collected.Go(func() { h.CollectStaleGroups(c.Parent) })
	}
	res, err := r.layers.Run(ctx, compiling(h.Run), r.Spec)
	if err != nil {
		log := h.Log
		if log == nil {
			log = os.Stderr
		}
		fmt.Fprintf(log, "microbox: %v\n", err)
	}
	collected.Wait()
	if h.Verdict != nil {
		h.Verdict(res.Result)
	}
	return res
}

// CheckRemote refuses what a task sent over the network may not ask for:
// "file", a path on the server's host, read with the server's rights.
func (t *Task) CheckRemote() error {
	if t.File != nil {
		return badInput(errors.New(`"file" names a file on the server's host, which a network caller may not read; send the program as "code", and its data in "files"`))
	}
	return nil
}

// layers are the policy layers' settings with the task's over base's.
func (t *Task) layers(base policy.Options) (policy.Options, error) {
	o := base
	dst := reflect.ValueOf(&o).Elem()
	for _, f := range Fields {
		if v := t.value(f.Key); f.Layer && v.IsValid() {
			if err := setField(dst.FieldByName(f.Name), f, v); err != nil {
				return o, err
			}
		}
	}
	return o, nil
}

// taskError is a task that cannot run, its message spelled.
type taskError struct {
	msg   string
	input bool // the task's fault, not microbox's
}

func (e *taskError) Error() string { return e.msg }

// badInput marks err as the task's fault.
func badInput(err error) error {
	if err == nil {
		return nil
	}
	return &taskError{msg: err.Error(), input: true}
}

// IsBadInput reports whether err is a fault of the task's (a field out of
// range, a key misspelt, not JSON) rather than of microbox or its host.
func IsBadInput(err error) bool {
	var te *taskError
	return errors.As(err, &te) && te.input
}
