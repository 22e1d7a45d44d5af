// Package policy composes a run's policy layers, on top of the sandbox and
// not a boundary of their own: the module policy (package guard), output
// redaction (redact), the risk check (risk) and the audit log (audit).
// None costs anything unless its option is set: no file, mount, variable
// or extra run.
//
// A caller builds the run's Spec from nsjail.Options, then lets the layers
// shape it (Options.Prepare) and runs it through them (Layers.Run), with
// its own way of running a Spec.
package policy

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/microbox/microbox/field"
	"github.com/microbox/microbox/internal/policy/audit"
	"github.com/microbox/microbox/internal/policy/guard"
	"github.com/microbox/microbox/internal/policy/redact"
	"github.com/microbox/microbox/internal/policy/risk"
	"github.com/microbox/microbox/nsjail"
	"github.com/microbox/microbox/result"
)

// Options are the layers' settings for one run. Errors name these fields
// (package field); run-time messages spell them with the run's
// nsjail.Options.FieldNames.
type Options struct {
	// The module policy and compatibility guard (package guard).
	DenyModules  []string
	AllowModules []string
	Guard        string
	// Redact masks secrets in stdout and stderr; RedactPatterns
	// (NAME=REGEX) add the caller's own and imply it.
	Redact         bool
	RedactPatterns []string
	// RedactBudget bounds the time redaction may spend on one run's
	// output (0: DefaultRedactBudget); past it, or once the run's
	// caller has left, the output is withheld (Result.RedactionStopped).
	RedactBudget time.Duration
	// MaxRisk, if set, refuses code whose risk score (package risk) is
	// above it, with status rejected; it costs one more sandboxed run.
	MaxRisk *int
	// AuditLog and AuditInclude are the audit log's (package audit).
	AuditLog     string
	AuditInclude []string

	// Source, if set, is the program the risk check judges and the audit
	// log records, for a run whose code is a harness that runs it (eval
	// mbpp's); nil: the run's own code.
	Source []byte

	// PID is the microbox process the caller started, for the audit log.
	PID int
	// CacheDir is the caller's user cache directory, where the module
	// policy's bytecode is kept; "" for none.
	CacheDir string
}

// DefaultRedactBudget is RedactBudget's default: on our test machine the
// built-in patterns take about 25 ms over a megabyte dense with secrets,
// and a simple custom one without a literal start about 60 ms.
const DefaultRedactBudget = time.Second

// Result is a run's result with what the layers add (the JSON of an
// embedded struct comes first, field by field).
type Result struct {
	*result.Result
	// Redactions counts what Redact masked in stdout and stderr, by kind;
	// absent when nothing was.
	Redactions []redact.Redaction `json:"redactions,omitempty"`
	// RedactionStopped says redaction stopped before the end of the
	// output (its budget ran out, or the caller left): stdout and stderr
	// are then redact.Withheld and the error says why.
	RedactionStopped bool `json:"redaction_stopped,omitempty"`
	// Risk is the static risk report the run was judged by (MaxRisk).
	Risk *risk.Report `json:"risk,omitempty"`
}

// Runner runs a spec: nsjail.Run, or a server's ready jails.
type Runner func(ctx context.Context, s *nsjail.Spec) *result.Result

// Layers are one run's prepared layers.
type Layers struct {
	base       nsjail.Options // the run's, for the layers' own sandboxed helpers
	source     []byte         // Options.Source
	maxRisk    *int
	redactor   *redact.Redactor
	meter      *redact.Meter // the run's redaction budget
	outW, errW *redact.Writer
	audit      *audit.Log
}

// Prepare checks the options and applies them to s, a run built from
// base: the module policy's files and PYTHONPATH, redacting writers around
// streamed output, the audit log opened. ctx bounds the module policy's
// compilation, when its bytecode is not cached yet.
func (o *Options) Prepare(ctx context.Context, base nsjail.Options, s *nsjail.Spec) (*Layers, error) {
	g := guard.Options{DenyModules: o.DenyModules, AllowModules: o.AllowModules, Guard: o.Guard}
	if err := g.Apply(ctx, base, s, o.CacheDir); err != nil {
		return nil, err
	}
	if o.MaxRisk != nil && *o.MaxRisk < 0 {
		return nil, field.Errorf("MaxRisk", "{MaxRisk} %d: give a score of 0 or more (see microbox check --help)", *o.MaxRisk)
	}
	ly := &Layers{base: base, source: o.Source, maxRisk: o.MaxRisk}
	if err := ly.redact(o, s); err != nil {
		return nil, err
	}
	if err := ly.openAudit(o, s); err != nil {
		return nil, err
	}
	return ly, nil
}

// Close releases what Prepare took for a run that will not be run (the
// audit log it opened).
func (ly *Layers) Close() {
	if ly.audit != nil {
		ly.audit.Close()
	}
}

// redact builds the redactor, if the options ask for one, and puts its
// writers around the output that streams.
func (ly *Layers) redact(o *Options, s *nsjail.Spec) error {
	if !o.Redact && len(o.RedactPatterns) == 0 {
		return nil
	}
	budget := o.RedactBudget
	switch {
	case budget < 0:
		return field.Errorf("RedactBudget", "{RedactBudget} %v: give a positive duration such as 1s", budget)
	case budget == 0:
		budget = DefaultRedactBudget
	}
	var rootfs []string
	if s.RootDir != "" {
		rootfs = append(rootfs, s.RootDir) // /proc/self/mountinfo shows it
	}
	r, err := redact.New(o.RedactPatterns, rootfs)
	if err != nil {
		return err
	}
	ly.redactor, ly.meter = r, redact.NewMeter(budget)
	if s.Stdout != nil {
		ly.outW = r.NewWriter(s.Stdout, ly.meter)
		s.Stdout = ly.outW
	}
	if s.Stderr != nil {
		ly.errW = r.NewWriter(s.Stderr, ly.meter)
		s.Stderr = ly.errW
	}
	return nil
}

// openAudit opens the audit log, if the options or the caller's
// environment name one, and has the output captured if the log records it.
func (ly *Layers) openAudit(o *Options, s *nsjail.Spec) error {
	log, err := audit.Open(audit.Options{AuditLog: o.AuditLog, AuditInclude: o.AuditInclude}, &ly.base, o.PID, audit.Policy{
		DenyModules: o.DenyModules, AllowModules: o.AllowModules, Guard: o.Guard,
		Redact: ly.redactor != nil, MaxRisk: o.MaxRisk,
	})
	if err != nil {
		return err
	}
	if log != nil && log.CapturesOutput() {
		s.Capture = true // a copy for the log, also when output streams
	}
	ly.audit = log
	return nil
}

// Run runs s through the layers with run: the risk check first (which may
// refuse the program), then the program, then redaction and the audit
// line. An audit line that cannot be written, or redaction that stopped
// (its budget ran out, or ctx ended), does not change the verdict, but is
// not lost in silence: it is the error, and the result's if it has none.
func (ly *Layers) Run(ctx context.Context, run Runner, s *nsjail.Spec) (*Result, error) {
	if ly.meter != nil { // output streams during the run, redacted as it comes
		stop := context.AfterFunc(ctx, func() { ly.meter.Cancel(context.Cause(ctx)) })
		defer stop()
	}
	code, found := ly.source, ly.source != nil
	if !found {
		code, found = programSource(s)
	}
	res, rep := ly.checkRisk(ctx, s, code, found)
	if res == nil {
		res = &Result{Result: run(ctx, s), Risk: rep}
	}
	err := ly.redactResult(res)
	return res, errors.Join(err, ly.writeAudit(s, code, res))
}

// redactResult masks the result's output, if the options ask for it. If
// redaction stopped, the output is withheld and the error says why, in
// the run's spelling.
func (ly *Layers) redactResult(res *Result) error {
	if ly.redactor == nil {
		return nil
	}
	var err error
	res.Redactions, err = ly.redactor.Result(res.Result, ly.meter, ly.outW, ly.errW)
	if err == nil {
		return nil
	}
	msg := field.Message(err, ly.base.FieldNames) + "; output not yet masked is withheld"
	res.RedactionStopped = true
	if res.Error == nil {
		res.Error = &msg
	}
	return errors.New(msg)
}

// checkRisk analyzes the program when MaxRisk is set. It returns a result
// only when the program must not run: rejected (too risky, or the
// analysis could not get through the code) or sandbox_error. Code with a
// syntax error runs: Python refuses it before running any of it, and the
// caller gets Python's own error.
func (ly *Layers) checkRisk(ctx context.Context, s *nsjail.Spec, code []byte, found bool) (*Result, *risk.Report) {
	if ly.maxRisk == nil {
		return nil, nil
	}
	if !found {
		return notRun(s, result.StatusSandboxError, ly.spell("{MaxRisk}: cannot find the program's source"), nil), nil
	}
	rep, err := risk.Analyze(ctx, ly.base, code)
	var aerr *risk.AnalysisError
	switch {
	case errors.As(err, &aerr):
		return notRun(s, result.StatusRejected, aerr.Error()+ly.spell("; unknown risk is refused under {MaxRisk}"), nil), nil
	case err != nil:
		return notRun(s, result.StatusSandboxError, err.Error(), nil), nil
	case rep.SyntaxError == nil && rep.Score > *ly.maxRisk:
		msg := ly.spell("risk score %d (%s) is above {MaxRisk} %d: %s", rep.Score, rep.Level, *ly.maxRisk, rep.Summary())
		return notRun(s, result.StatusRejected, msg, rep), rep
	}
	return nil, rep
}

// spell is a run-time message about MaxRisk, the field spelled as the
// run's caller spells it.
func (ly *Layers) spell(format string, args ...any) string {
	return field.Message(field.Errorf("MaxRisk", format, args...), ly.base.FieldNames)
}

// notRun is the result of a program that was not run.
func notRun(s *nsjail.Spec, status result.Status, msg string, rep *risk.Report) *Result {
	return &Result{Result: result.NotRun(status, msg, s.SeccompMode), Risk: rep}
}

// writeAudit appends the run's line to the audit log, if there is one.
func (ly *Layers) writeAudit(s *nsjail.Spec, code []byte, res *Result) error {
	if ly.audit == nil {
		return nil
	}
	out := audit.Outcome{Result: res.Result, Redactions: res.Redactions}
	if res.Risk != nil {
		out.RiskScore = &res.Risk.Score
	}
	err := ly.audit.Write(s, code, out)
	if err != nil && res.Error == nil {
		msg := err.Error()
		res.Error = &msg
	}
	return err
}

// programSource is the code a spec runs: the -c string, or the contents of
// the script file it copies in.
func programSource(s *nsjail.Spec) ([]byte, bool) {
	for i := 1; i < len(s.Argv); i++ {
		a := s.Argv[i]
		switch {
		case a == "-c" && i+1 < len(s.Argv):
			return []byte(s.Argv[i+1]), true
		case strings.HasPrefix(a, "-"):
			continue
		}
		for _, f := range s.Files {
			if f.Path == a {
				return f.Data, true
			}
		}
		return nil, false
	}
	return nil, false
}
