package main

// exec's policy layers, on top of the sandbox (README, "Policy layers (not
// the boundary)"): the module policy (guard.go), output redaction
// (redact.go), the risk check (check.go) and the audit log (audit.go).
// None costs anything unless its flag is given: no file, mount, variable
// or extra run.

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/microbox/microbox/nsjail"
	"github.com/microbox/microbox/result"
)

// layerFlags are the layers' options, as typed.
type layerFlags struct {
	guard          guardFlags
	redact         bool
	redactPatterns []string
	maxRisk        int
	audit          auditFlags
}

func (l *layerFlags) register(c *cobra.Command) {
	l.guard.register(c)
	fl := c.Flags()
	fl.BoolVar(&l.redact, "redact", false, "mask secrets in stdout and stderr (API keys, private keys, credentials in URLs, e-mail addresses, private IPs, host paths)")
	fl.StringArrayVar(&l.redactPatterns, "redact-pattern", nil, "also mask matches of REGEX as [REDACTED_NAME]: NAME=REGEX (repeatable; implies --redact)")
	fl.IntVar(&l.maxRisk, "max-risk", 0, "refuse code whose risk score (see microbox check) is above `N`, with status rejected; costs one extra sandboxed run")
	l.audit.register(c)
}

// layeredResult is exec's result: the jail's, and after it what the
// layers add (the JSON of an embedded struct comes first, field by field).
type layeredResult struct {
	*result.Result
	// Redactions counts what --redact masked in stdout and stderr, by
	// kind; absent when nothing was.
	Redactions []Redaction `json:"redactions,omitempty"`
	// Risk is the static risk report the run was judged by (--max-risk).
	Risk *RiskReport `json:"risk,omitempty"`
}

// layers are one run's prepared layers.
type layers struct {
	policy     auditPolicy
	maxRisk    *int
	redactor   *redactor
	outW, errW *redactWriter
	audit      *auditLog
	inv        *invocation
	opts       nsjail.Options // the run's, for the layers' own sandboxed helpers
}

// prepare checks the layers' flags and applies them to the spec: the
// module policy's file and PYTHONPATH, redacting writers around streamed
// output, the audit log opened. args are exec's arguments (the program's
// file first, unless -c).
func (l *layerFlags) prepare(c *cobra.Command, o nsjail.Options, s *nsjail.Spec, args []string, inv *invocation) (*layers, error) {
	ly := &layers{inv: inv, opts: o, policy: auditPolicy{
		DenyModules: l.guard.deny, AllowModules: l.guard.allow, Guard: l.guard.guard,
	}}
	if err := l.guard.apply(context.Background(), o, s, inv.cacheDir()); err != nil {
		return nil, err
	}
	if c.Flags().Changed("max-risk") {
		if l.maxRisk < 0 {
			return nil, usagef("--max-risk %d: give a score of 0 or more (see microbox check --help)", l.maxRisk)
		}
		ly.maxRisk = &l.maxRisk
		ly.policy.MaxRisk = ly.maxRisk
	}
	if l.redact || len(l.redactPatterns) > 0 {
		var rootfs []string
		if s.RootDir != "" {
			rootfs = append(rootfs, s.RootDir) // /proc/self/mountinfo shows it
		}
		r, err := newRedactor(l.redactPatterns, rootfs)
		if err != nil {
			return nil, err
		}
		ly.redactor = r
		ly.policy.Redact = true
		if s.Stdout != nil {
			ly.outW = newRedactWriter(r, s.Stdout)
			s.Stdout = ly.outW
		}
		if s.Stderr != nil {
			ly.errW = newRedactWriter(r, s.Stderr)
			s.Stderr = ly.errW
		}
	}
	program := "-c"
	if !c.Flags().Changed("code") && len(args) > 0 {
		program, _ = filepath.Abs(inv.path(args[0]))
	}
	audit, err := l.audit.open(inv, program)
	if err != nil {
		return nil, err
	}
	if audit != nil && audit.output {
		s.Capture = true // a copy for the log, also when output streams
	}
	ly.audit = audit
	return ly, nil
}

// run runs the spec through the layers: the risk check first (which may
// refuse the program), then the program, then redaction and the audit
// line.
func (ly *layers) run(ctx context.Context, s *nsjail.Spec) *layeredResult {
	res, risk := ly.checkRisk(ctx, s)
	if res == nil {
		res = &layeredResult{Result: ly.inv.runSpec(ctx, s), Risk: risk}
	}
	ly.redactOutput(res)
	ly.writeAudit(s, res)
	return res
}

// checkRisk analyzes the program when --max-risk was given. It returns a
// result only when the program must not run: rejected (too risky, or the
// analysis could not get through the code) or sandbox_error. Code with a
// syntax error runs: Python refuses it before running any of it, and the
// caller gets Python's own error.
func (ly *layers) checkRisk(ctx context.Context, s *nsjail.Spec) (*layeredResult, *RiskReport) {
	if ly.maxRisk == nil {
		return nil, nil
	}
	code, ok := programSource(s)
	if !ok {
		return notRun(s, result.StatusSandboxError, "--max-risk: cannot find the program's source", nil), nil
	}
	rep, err := analyzeRisk(ctx, ly.opts, code)
	var aerr *analysisError
	switch {
	case errors.As(err, &aerr):
		return notRun(s, result.StatusRejected, aerr.Error()+"; unknown risk is refused under --max-risk", nil), nil
	case err != nil:
		return notRun(s, result.StatusSandboxError, err.Error(), nil), nil
	case rep.SyntaxError == nil && rep.Score > *ly.maxRisk:
		msg := fmt.Sprintf("risk score %d (%s) is above --max-risk %d: %s", rep.Score, rep.Level, *ly.maxRisk, riskSummary(rep))
		return notRun(s, result.StatusRejected, msg, rep), rep
	}
	return nil, rep
}

// notRun is the result of a program that was not run.
func notRun(s *nsjail.Spec, status result.Status, msg string, rep *RiskReport) *layeredResult {
	return &layeredResult{Result: result.NotRun(status, msg, s.SeccompMode), Risk: rep}
}

// redactOutput finishes the streams and masks the captured output.
func (ly *layers) redactOutput(res *layeredResult) {
	if ly.redactor == nil {
		return
	}
	var streamed []int
	for _, w := range []*redactWriter{ly.outW, ly.errW} {
		if w == nil {
			continue
		}
		w.Flush()
		if streamed == nil {
			streamed = make([]int, len(ly.redactor.patterns))
		}
		addRedactCounts(streamed, w.counts)
	}
	ly.redactor.redactResult(res, streamed)
}

// writeAudit appends the run's line to the audit log. A line that cannot
// be written does not change the verdict, but is not lost in silence.
func (ly *layers) writeAudit(s *nsjail.Spec, res *layeredResult) {
	if ly.audit == nil {
		return
	}
	if err := ly.audit.write(ly.audit.record(s, res, ly.policy)); err != nil {
		fmt.Fprintf(ly.inv.stderr, "microbox: %v\n", err)
		if res.Error == nil {
			msg := err.Error()
			res.Error = &msg
		}
	}
}
