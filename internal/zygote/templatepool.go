// Package zygote keeps a runner's zygote templates (nsjail.Template): one
// per key (the jail's shape, the preloads, the interpreter and its
// options), started by the first run of its key, with children forked
// ahead of their runs. A template retires after MaxForks forks or MaxAge,
// the least recently used one beyond Templates, and one whose interpreter
// died; a retired template ends once its last child has.
//
// A run no template can take (a template that failed to start or died
// under it, a run a fork cannot give what it asks) fails with
// sandbox_error saying why, unless it asked for the fallback
// (nsjail.Zygote.Fallback): it then starts cold, as nsjail.Spawner.RunEarly
// runs it, and its result says so (start: cold). A preload that fails is
// always the run's error. A run that finds all of its template's children
// in use waits for one.
package zygote

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/microbox/microbox/field"
	"github.com/microbox/microbox/nsjail"
	"github.com/microbox/microbox/result"
)

// Config bounds a TemplatePool; zero fields take the defaults.
type Config struct {
	Templates int           // templates kept at once (4)
	Ahead     int           // children each template forks ahead of their runs (0: each run forks its own)
	MaxForks  int           // a template retires after forking this many (10000)
	MaxAge    time.Duration // or once this old (1h)
	// Log receives the pool's own failures (a template that died, a start
	// that failed); nil is standard error, with the fields of errors
	// among its arguments spelled as FieldNames says (the caller's flags).
	Log        func(format string, args ...any)
	FieldNames func(field string) string
}

func (c Config) withDefaults() Config {
	if c.Templates <= 0 {
		c.Templates = 4
	}
	c.Ahead = max(c.Ahead, 0)
	if c.MaxForks <= 0 {
		c.MaxForks = 10000
	}
	if c.MaxAge <= 0 {
		c.MaxAge = time.Hour
	}
	if c.Log == nil {
		c.Log = func(format string, args ...any) {
			fmt.Fprintf(os.Stderr, "microbox: zygote: %s\n", field.Sprintf(c.FieldNames, format, args...))
		}
	}
	return c
}

// retryAfter is how long a key whose template failed to start runs cold
// before a run tries to start it again.
const retryAfter = 10 * time.Second

// A TemplatePool runs specs that ask for a zygote (Spec.Zygote) in
// children of its templates, all started with one spawner. It is safe for
// concurrent use.
type TemplatePool struct {
	sp  *nsjail.Spawner
	cfg Config

	mu      sync.Mutex
	live    []*template // most recently used last
	closed  bool
	stats   Stats
	working sync.WaitGroup // forks ahead and ends of templates, off the runs' path
}

// New is a TemplatePool whose templates sp starts.
func New(sp *nsjail.Spawner, cfg Config) *TemplatePool {
	return &TemplatePool{sp: sp, cfg: cfg.withDefaults()}
}

// template is one key's template and its children forked ahead.
type template struct {
	key      nsjail.ZygoteKey
	started  chan struct{} // closed once t or err is set
	t        *nsjail.Template
	err      error
	failedAt time.Time

	// Under the pool's mu:
	ahead    []*nsjail.ZygoteChild
	forking  int
	running  int           // children taken and not yet torn down
	freed    chan struct{} // closed, and replaced, when a run of tm ends
	retired  bool
	lastUsed time.Time
}

// A RunFunc runs a spec: like nsjail's RunEarly it never returns a nil
// result, and the caller must call teardown.
type RunFunc func(ctx context.Context, s *nsjail.Spec) (*result.Result, nsjail.Teardown)

// Dispatch is the one rule by which every entry point (exec through a
// server, batch, eval, HTTP, MCP) runs a spec: one that asks for no
// zygote (Spec.Zygote nil) with cold; one that asks, with or without the
// fallback, whether its caller asked or its task did, with p, which forks
// it from its key's template, starts it cold (the fallback), or refuses
// it saying why (TemplatePool.Run).
func Dispatch(p *TemplatePool, cold RunFunc) RunFunc {
	return func(ctx context.Context, s *nsjail.Spec) (*result.Result, nsjail.Teardown) {
		if s.Zygote == nil {
			return cold(ctx, s)
		}
		return p.Run(ctx, s)
	}
}

// Run runs s, which must ask for a zygote, in a child of its key's
// template, or cold when none can take it. Like nsjail's RunEarly it
// never returns a nil result, and the caller must call teardown.
func (p *TemplatePool) Run(ctx context.Context, s *nsjail.Spec) (*result.Result, nsjail.Teardown) {
	if s.Zygote != nil && s.Zygote.Cold != "" { // a fork cannot take it (Spec.CheckZygote)
		return p.cold(ctx, s)
	}
	key, err := nsjail.ZygoteKeyOf(s)
	if err != nil {
		return failed(s, err)
	}
	tm, err := p.template(key, s)
	switch {
	case preloadFailed(err): // the caller's to fix
		return failed(s, fmt.Errorf("zygote: %w", err))
	case field.Is(err): // bad input a cold run meets too, and reports as its own
		return p.sp.RunEarly(ctx, s)
	}
	var c *nsjail.ZygoteChild
	if err == nil {
		c, err = p.child(ctx, tm)
	}
	if err != nil && tm != nil && tm.t != nil && ctx.Err() == nil && tm.t.EndedWithin(templateSeenGone) {
		// Its template died before the child was forked: nothing of the
		// run was sent, and a new template of the key takes it, once.
		if tm, err = p.template(key, s); err == nil {
			c, err = p.child(ctx, tm)
		}
	}
	if err != nil {
		if s.Zygote != nil && s.Zygote.Fallback {
			return p.cold(ctx, s)
		}
		return failed(s, field.Errorf("ZygoteFallback", "zygote: %v ({ZygoteFallback} starts such runs cold)", err))
	}
	p.mu.Lock()
	p.stats.Runs++
	p.mu.Unlock()
	res, teardown := c.Run(ctx, s)
	return res, func() error {
		err := teardown()
		p.ran(tm)
		return err
	}
}

// cold runs s afresh; its result says so (start: cold).
func (p *TemplatePool) cold(ctx context.Context, s *nsjail.Spec) (*result.Result, nsjail.Teardown) {
	p.mu.Lock()
	p.stats.Cold++
	p.mu.Unlock()
	return p.sp.RunEarly(ctx, s)
}

// templateSeenGone bounds the wait, after a fork failed, for its
// template's end to be seen (Run): a fork that failed for another reason
// waits that much longer for its error.
const templateSeenGone = 200 * time.Millisecond

// failed is the result of a run no template could take, err saying why.
func failed(s *nsjail.Spec, err error) (*result.Result, nsjail.Teardown) {
	return result.SandboxError(field.Message(err, s.FieldNames)), nsjail.NoTeardown
}

// preloadFailed reports whether err is a preload's failure, rather than
// one a cold run would meet too (and report as its own).
func preloadFailed(err error) bool {
	var fe *field.Error
	return errors.As(err, &fe) && fe.Name == "Preload"
}

// template returns key's template, started for s if it was not; a key
// whose start failed less than retryAfter ago gets that error again.
func (p *TemplatePool) template(key nsjail.ZygoteKey, s *nsjail.Spec) (*template, error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, fmt.Errorf("the pool is closed")
	}
	tm := p.find(key)
	if tm == nil {
		tm = &template{key: key, started: make(chan struct{}), lastUsed: time.Now(), freed: make(chan struct{})}
		p.live = append(p.live, tm)
		p.evict()
		p.mu.Unlock()
		tm.t, tm.err = p.sp.StartTemplate(key, s)
		if tm.err == nil && tm.t.NotImage != nil { // slower, not less safe: said, not failed
			p.cfg.Log("a template's runs exec microbox's own binary as their init: %v", tm.t.NotImage)
		}
		p.mu.Lock()
		p.stats.Started++
		if tm.err != nil {
			p.stats.Failed++
			tm.failedAt = time.Now()
			if !preloadFailed(tm.err) {
				p.cfg.Log("%v", tm.err)
			}
		}
		close(tm.started)
	}
	tm.lastUsed = time.Now()
	p.mu.Unlock()
	<-tm.started
	return tm, tm.err
}

// find returns key's template, if one lives or failed lately; a dead,
// old or worn one is retired on the way. mu is held.
func (p *TemplatePool) find(key nsjail.ZygoteKey) *template {
	for i := len(p.live) - 1; i >= 0; i-- {
		tm := p.live[i]
		if !tm.key.Equal(key) {
			continue
		}
		select {
		case <-tm.started:
		default:
			return tm // starting: wait for it
		}
		switch {
		case tm.err != nil && time.Since(tm.failedAt) < retryAfter:
			return tm
		case tm.err != nil:
		case tm.t.Err() != nil:
			p.cfg.Log("a template ended: %v", tm.t.Err())
		case tm.t.Forks() >= p.cfg.MaxForks || time.Since(tm.t.Born) >= p.cfg.MaxAge:
		default:
			return tm
		}
		p.retire(tm)
	}
	return nil
}

// evict retires the least recently used templates beyond Templates. mu
// is held.
func (p *TemplatePool) evict() {
	for len(p.live) > p.cfg.Templates {
		oldest := p.live[0]
		for _, tm := range p.live[1:] {
			if tm.lastUsed.Before(oldest.lastUsed) {
				oldest = tm
			}
		}
		p.retire(oldest)
	}
}

// retire takes tm out of use, and ends it once its children have. mu is
// held.
func (p *TemplatePool) retire(tm *template) {
	for i, x := range p.live {
		if x == tm {
			p.live = append(p.live[:i], p.live[i+1:]...)
			break
		}
	}
	tm.retired = true
	p.endIfIdle(tm)
}

// endIfIdle ends a retired template that has no child running or being
// forked, in the background. mu is held.
func (p *TemplatePool) endIfIdle(tm *template) {
	if !tm.retired || tm.running > 0 || tm.forking > 0 {
		return
	}
	ahead := tm.ahead
	tm.ahead = nil
	p.working.Add(1)
	go func() {
		defer p.working.Done()
		<-tm.started
		for _, c := range ahead {
			c.Close()
		}
		if tm.t != nil {
			tm.t.Close()
		}
	}()
}

// child takes one of tm's children forked ahead, or forks one, waiting
// while all of tm's children are in use.
func (p *TemplatePool) child(ctx context.Context, tm *template) (*nsjail.ZygoteChild, error) {
	p.mu.Lock()
	tm.running++
	for len(tm.ahead) > 0 {
		c := tm.ahead[0]
		tm.ahead = tm.ahead[1:]
		if c.Alive() {
			p.mu.Unlock()
			return c, nil
		}
		p.closeLater(c)
	}
	p.mu.Unlock()
	c, err := tm.t.Fork()
	for errors.Is(err, nsjail.ErrBusy) {
		p.mu.Lock()
		freed := tm.freed
		p.mu.Unlock()
		select {
		case <-freed:
			c, err = tm.t.Fork()
		case <-ctx.Done():
			err = context.Cause(ctx)
		}
	}
	if err != nil {
		p.mu.Lock()
		tm.running--
		p.endIfIdle(tm)
		p.mu.Unlock()
		if tm.t.Err() == nil && ctx.Err() == nil {
			p.cfg.Log("%v", err)
		}
	}
	return c, err
}

// closeLater ends a child in the background. mu is held.
func (p *TemplatePool) closeLater(c *nsjail.ZygoteChild) {
	p.working.Add(1)
	go func() {
		defer p.working.Done()
		c.Close()
	}()
}

// ran records the end of a run of tm (after its teardown) and forks the
// children tm lacks for the next runs: forked during the run, they would
// compete with it for the CPUs.
func (p *TemplatePool) ran(tm *template) {
	p.mu.Lock()
	defer p.mu.Unlock()
	tm.running--
	close(tm.freed) // a run waiting for a child may fork one now
	tm.freed = make(chan struct{})
	if tm.retired || p.closed {
		p.endIfIdle(tm)
		return
	}
	for len(tm.ahead)+tm.forking < p.cfg.Ahead {
		tm.forking++
		p.working.Add(1)
		go p.forkAhead(tm)
	}
}

// forkAhead forks a child of tm for a later run.
func (p *TemplatePool) forkAhead(tm *template) {
	defer p.working.Done()
	c, err := tm.t.Fork()
	p.mu.Lock()
	defer p.mu.Unlock()
	tm.forking--
	switch {
	case err != nil:
		if tm.t.Err() == nil && !errors.Is(err, nsjail.ErrBusy) { // busy: the runs fork their own
			p.cfg.Log("fork ahead: %v", err)
		}
	case tm.retired || p.closed:
		p.closeLater(c)
	default:
		tm.ahead = append(tm.ahead, c)
	}
	p.endIfIdle(tm)
}

// Close retires every template and waits until each has ended; runs
// still going end their templates when they are torn down. Call it once
// no more runs come.
func (p *TemplatePool) Close() {
	p.mu.Lock()
	p.closed = true
	for len(p.live) > 0 {
		p.retire(p.live[0])
	}
	p.mu.Unlock()
	p.working.Wait()
}

// Stats count a pool's work since it was made.
type Stats struct {
	Templates int // templates in use now
	Started   int // templates started (Failed of them failed to)
	Failed    int
	Runs      int   // runs forked from a template
	Cold      int   // runs that started cold (with the fallback)
	Pids      []int // the templates' jails' PID 1s, in use now
}

// Stats returns the pool's counts.
func (p *TemplatePool) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	st := p.stats
	st.Pids = nil
	for _, tm := range p.live {
		select {
		case <-tm.started:
			if tm.err == nil {
				st.Templates++
				st.Pids = append(st.Pids, tm.t.Pid())
			}
		default:
		}
	}
	return st
}
