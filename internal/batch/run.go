package batch

import (
	"context"
	"errors"
	"fmt"
	"os"
	"reflect"

	"github.com/microbox/microbox/field"
	"github.com/microbox/microbox/internal/policy"
	"github.com/microbox/microbox/nsjail"
)

// A Run is a task made ready: its Spec and the policy layers around it.
// Every front end that takes tasks (batch, the HTTP API, the MCP tool)
// builds its runs here, so a task means the same run whoever sent it.
type Run struct {
	Spec   *nsjail.Spec
	layers *policy.Layers
}

// Prepare applies the task to a copy of base (prepared options) and of
// layers (the layers' settings every task starts from: cache directory,
// audit log), refusing it over one of limits' ceilings. Its error is
// spelled as the task's errors are (its own keys, else base's
// FieldNames); IsBadInput tells a fault of the task's from one of
// microbox's.
func Prepare(ctx context.Context, base nsjail.Options, layers policy.Options, limits Limits, t *Task) (*Run, error) {
	names := t.fieldNames(base.FieldNames)
	spell := func(err error) error {
		return &taskError{msg: field.Message(err, names), input: field.Is(err) || IsBadInput(err)}
	}
	o, err := taskOptions(base, t)
	if err != nil {
		return nil, spell(err)
	}
	if err := limits.check(base, o, t); err != nil {
		return nil, err
	}
	o.FieldNames = names
	s, err := o.Spec()
	if err != nil {
		return nil, spell(err)
	}
	lo, err := t.layers(layers)
	if err != nil {
		return nil, spell(err)
	}
	if t.Source != nil {
		lo.Source = []byte(*t.Source)
	}
	ly, err := lo.Prepare(ctx, o, s)
	if err != nil {
		return nil, spell(err)
	}
	if err := s.CheckZygote(); err != nil { // the layers may have added what a fork cannot run
		ly.Close()
		return nil, spell(err)
	}
	return &Run{Spec: s, layers: ly}, nil
}

// Execute runs the program through its layers with run. An audit line
// that could not be written is in the result's error (policy.Layers.Run)
// and, as the caller has no stderr of its own here, in microbox's log.
func (r *Run) Execute(ctx context.Context, run policy.Runner) *policy.Result {
	res, err := r.layers.Run(ctx, run, r.Spec)
	if err != nil {
		fmt.Fprintf(os.Stderr, "microbox: %v\n", err)
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
