// Package session keeps sessions: each one a long-lived jail, made as a
// run's is (internal/batch's task fields and ceilings, nsjail's spawn
// path: namespaces, read-only root, scratch tmpfs, one cgroup with the
// session's memory, CPU and pids limits, seccomp, no capabilities, a host
// uid of its own), holding a Python interpreter (runner.py) that runs
// cells in one namespace of globals and moves files in and out of the
// scratch area. The Manager holds the sessions of a server: their cap,
// their idle and whole lifetimes, and their end with the server.
// docs/sessions.md is the reference.
package session

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/microbox/microbox/internal/batch"
	"github.com/microbox/microbox/internal/policy"
	"github.com/microbox/microbox/nsjail"
)

//go:embed runner.py
var runnerSource string

// Config is what a Manager makes its sessions from, as the server's runs
// are made (service.Config's fields of the same names).
type Config struct {
	Base   nsjail.Options
	Layers policy.Options
	Limits batch.Limits
}

// A Manager holds a server's sessions until Close.
type Manager struct {
	cfg     Config
	sp      *nsjail.Spawner
	max     int
	maxIdle time.Duration
	maxLife time.Duration
	files   int64 // the most bytes of one file in or out

	mu     sync.Mutex
	live   map[string]*Session
	ended  map[string]Info // the last ended sessions, for GET
	order  []string        // ended's ids, oldest first
	closed bool
	wg     sync.WaitGroup // sessions not yet torn down
	counts map[string]int // sessions ended, by reason
}

// ErrBusy refuses a session past the server's cap.
var ErrBusy = errors.New("the server holds as many sessions as it may (--max-sessions): end one (DELETE /v1/sessions/{id}) or try again later")

// ErrClosed refuses a session once the server is stopping.
var ErrClosed = errors.New("the server is stopping")

// keptEnded is how many ended sessions GET can still describe.
const keptEnded = 1000

// NewManager is a Manager of cfg's sessions, with a spawner of its own.
func NewManager(cfg Config) (*Manager, error) {
	sp, err := nsjail.NewSpawner()
	if err != nil {
		return nil, err
	}
	value := func(name string) float64 { return cfg.Limits.Value(name, cfg.Base) }
	return &Manager{cfg: cfg, sp: sp, max: int(value("sessions")),
		maxIdle: time.Duration(value("session-idle-ttl")), maxLife: time.Duration(value("session-lifetime")),
		files: int64(value("session-file-bytes")),
		live:  map[string]*Session{}, ended: map[string]Info{}, counts: map[string]int{}}, nil
}

// Close ends every session and waits until their jails and cgroups are
// gone; no session starts after it.
func (m *Manager) Close() {
	m.mu.Lock()
	m.closed = true
	live := slices.Collect(maps.Values(m.live))
	m.mu.Unlock()
	for _, s := range live {
		s.end(ReasonServerStopping, "")
	}
	m.wg.Wait()
	m.sp.Close()
}

// Stats are the counts of a Manager's sessions.
type Stats struct {
	Live  int
	Ended map[string]int // by reason
}

// Stats are the sessions' counts now.
func (m *Manager) Stats() Stats {
	m.mu.Lock()
	defer m.mu.Unlock()
	return Stats{Live: len(m.live), Ended: maps.Clone(m.counts)}
}

// Get is the live session id, or the description of an ended one.
func (m *Manager) Get(id string) (s *Session, ended Info, ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if s, ok := m.live[id]; ok {
		return s, Info{}, true
	}
	ended, ok = m.ended[id]
	return nil, ended, ok
}

// admit takes a place for a new session, or says why there is none.
func (m *Manager) admit(s *Session) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case m.closed:
		return ErrClosed
	case len(m.live) >= m.max:
		return ErrBusy
	}
	m.live[s.ID] = s
	m.wg.Add(1)
	return nil
}

// forget moves an ended session from the live ones to the ended ones.
func (m *Manager) forget(s *Session, info Info) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.live, s.ID)
	m.counts[info.Reason]++
	m.ended[s.ID] = info
	m.order = append(m.order, s.ID)
	if len(m.order) > keptEnded {
		delete(m.ended, m.order[0])
		m.order = m.order[1:]
	}
}

// Create starts a session as body (a JSON object, docs/sessions.md) asks
// and returns it once its interpreter is ready. Its error is the
// caller's fault when IsBadInput says so; ErrBusy past the cap.
func (m *Manager) Create(ctx context.Context, body []byte) (*Session, error) {
	o, err := m.options(body)
	if err != nil {
		return nil, err
	}
	r, err := batch.Prepare(ctx, m.cfg.Base, m.cfg.Layers, m.cfg.Limits, o.task)
	if err != nil {
		return nil, err
	}
	r.Close() // the layers a session keeps are those in its spec (modules, guard)
	// The task's timeout, output limit and scratch size are its cells'.
	o.cellTimeout, o.outputLimit, o.tmpfsSize = r.Spec.Timeout, r.Spec.OutputLimit, r.Spec.TmpfsSize
	s := newSession(m, o)
	if err := m.admit(s); err != nil {
		return nil, err
	}
	if err := s.start(r.Spec, o.preload); err != nil {
		s.end(ReasonError, err.Error())
		<-s.gone
		return nil, err
	}
	return s, nil
}

// sessionKeys are the task keys (batch.Fields) a session takes, with
// their ceilings; "timeout" is its cells' default timeout. The others
// (a program, its stdin and arguments, the layers that judge one run's
// code or output, the zygote's) are a run's, not a session's.
var sessionKeys = []string{"workdir", "files", "env", "mem", "timeout", "cpu_time", "cpus", "pids",
	"output_limit", "tmpfs_size", "deny_modules", "allow_modules", "guard", "preload"}

// ownFields are the keys a create request takes beside the task's.
var ownFields = []batch.Field{
	{Key: "idle_ttl", Kind: batch.KindDuration,
		Doc: "End the session after this long without a request: seconds, or a duration such as \"10m\"; at most the server's ceiling, its default."},
	{Key: "max_lifetime", Kind: batch.KindDuration,
		Doc: "End the session this long after it started, whatever it is doing: seconds, or a duration; at most the server's ceiling, its default."},
}

// CreateRequest is a create request's JSON object (Create's body): the
// keys CreateFields declares.
type CreateRequest map[string]json.RawMessage

// CreateFields are the keys a create request takes: the task's of
// sessionKeys (their timeout is each cell's) and the session's own.
func CreateFields() []batch.Field {
	var fields []batch.Field
	for _, f := range batch.Fields {
		if !slices.Contains(sessionKeys, f.Key) {
			continue
		}
		if f.Key == "timeout" {
			f.Doc = "Each cell's wall-clock limit, unless the cell gives its own: seconds, or a duration; at most the server's ceiling."
		}
		fields = append(fields, f)
	}
	return append(fields, ownFields...)
}

func init() {
	for _, k := range sessionKeys {
		if !slices.ContainsFunc(batch.Fields, func(f batch.Field) bool { return f.Key == k }) {
			panic("session: no task field " + k)
		}
	}
}

// options are what a session is made of.
type options struct {
	task           *batch.Task
	preload        []string
	idle, life     time.Duration
	cellTimeout    time.Duration // a cell's, unless it asks for another
	outputLimit    int64         // on each of a cell's stdout and stderr
	tmpfsSize      int64
	fileCap        int64
	maxCellCode    int64
	maxCellStdin   int64
	maxCellTimeout time.Duration
}

// options reads a create request: the session's own keys (idle_ttl,
// max_lifetime) and the task keys it takes, each bounded by its ceiling.
func (m *Manager) options(body []byte) (*options, error) {
	var raw CreateRequest
	dec := json.NewDecoder(bytes.NewReader(body))
	if len(bytes.TrimSpace(body)) > 0 {
		if err := dec.Decode(&raw); err != nil {
			return nil, badInput("the body is not a JSON object: %v", err)
		}
	}
	o := &options{idle: m.maxIdle, life: m.maxLife, fileCap: m.files}
	var err error
	if o.idle, err = m.duration(raw, "idle_ttl", "session-idle-ttl", m.maxIdle); err != nil {
		return nil, err
	}
	if o.life, err = m.duration(raw, "max_lifetime", "session-lifetime", m.maxLife); err != nil {
		return nil, err
	}
	for k := range raw {
		if !slices.Contains(sessionKeys, k) {
			return nil, badInput("%q is not a session's key: give %s, idle_ttl or max_lifetime (docs/sessions.md)", k, strings.Join(sessionKeys, ", "))
		}
	}
	rest, _ := json.Marshal(raw)
	t, err := batch.DecodeTask(rest)
	if err != nil {
		return nil, badInput("%v", err)
	}
	if most := int(m.value("preload")); len(t.Preload) > most {
		return nil, badInput("%s", m.cfg.Limits.Over(fmt.Sprintf("%q names %d modules,", "preload", len(t.Preload)), "preload", fmt.Sprint(most)))
	}
	// A session's interpreter starts cold, whatever the server's runs
	// do: its preloads are its own.
	o.preload, t.Preload = t.Preload, nil
	code, cold := runnerSource, false
	t.Code, t.Zygote, t.ZygoteFallback = &code, &cold, &cold
	o.task = t
	o.maxCellCode, o.maxCellStdin = int64(m.value("code")), int64(m.value("stdin"))
	o.maxCellTimeout = time.Duration(m.value("timeout"))
	return o, nil
}

func (m *Manager) value(name string) float64 { return m.cfg.Limits.Value(name, m.cfg.Base) }

// duration reads key of raw as a duration (a string such as "5m", or
// seconds), at most ceiling's value most; def when absent.
func (m *Manager) duration(raw CreateRequest, key, ceiling string, most time.Duration) (time.Duration, error) {
	v, ok := raw[key]
	if !ok {
		return most, nil
	}
	delete(raw, key)
	d, err := parseDuration(key, v)
	if err != nil {
		return 0, err
	}
	if d > most {
		return 0, badInput("%s", m.cfg.Limits.Over(fmt.Sprintf("%q %s is", key, d), ceiling, most.String()))
	}
	return d, nil
}

// parseDuration reads a JSON duration: "90s" or a number of seconds,
// positive.
func parseDuration(key string, v json.RawMessage) (time.Duration, error) {
	var d time.Duration
	var s string
	var n float64
	switch {
	case json.Unmarshal(v, &s) == nil:
		var err error
		if d, err = time.ParseDuration(s); err != nil {
			return 0, badInput("%q %q: give a duration such as \"10m\", or a number of seconds", key, s)
		}
	case json.Unmarshal(v, &n) == nil && n < float64(1<<33):
		d = time.Duration(n * float64(time.Second))
	default:
		return 0, badInput("%q %s: give a duration such as \"10m\", or a number of seconds", key, v)
	}
	if d <= 0 {
		return 0, badInput("%q %s: give a positive duration", key, v)
	}
	return d, nil
}

// inputError is a request's fault.
type inputError struct{ msg string }

func (e *inputError) Error() string { return e.msg }

func badInput(format string, args ...any) error {
	return &inputError{msg: fmt.Sprintf(format, args...)}
}

// IsBadInput reports whether err is the caller's fault (400), not the
// server's.
func IsBadInput(err error) bool {
	var ie *inputError
	return errors.As(err, &ie) || batch.IsBadInput(err)
}
