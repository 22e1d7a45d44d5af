package batch

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"hash"
	"sync"

	"github.com/microbox/microbox/nsjail"
	"github.com/microbox/microbox/result"
)

// compiled is a compile step's outcome: its result and, if it succeeded,
// the binary.
type compiled struct {
	res    *result.Result
	binary []byte
}

// result is a copy of the step's result for one run's, which the run's
// layers may change (redaction) while the cache holds the original.
func (c compiled) result() *result.Result {
	r := *c.res
	return &r
}

// compileCache keeps the binaries of successful compile steps by
// everything the step's outcome depends on (compileKey), so that the
// same program run on many inputs (eval stdio's tests, a batch's) is
// compiled once per process, not once per run. Concurrent runs of one
// program wait for its first compile. A failed step is not kept: it is
// cheap to repeat, and a timeout or memory kill may not repeat.
type compileCache struct {
	mu       sync.Mutex
	entries  map[[32]byte]*cacheEntry
	order    [][32]byte // oldest first, for eviction
	bytes    int64
	maxBytes int64
}

type cacheEntry struct {
	done chan struct{} // closed once c is set
	c    compiled
}

// compiles is the process's cache: at most 256 MiB of binaries.
var compiles = &compileCache{entries: map[[32]byte]*cacheEntry{}, maxBytes: 256 << 20}

// get is the outcome of the compile step c, from the cache or from
// compile (run at most once at a time per key).
func (cc *compileCache) get(ctx context.Context, c *nsjail.Spec, compile func() compiled) compiled {
	key := compileKey(c)
	cc.mu.Lock()
	if e, ok := cc.entries[key]; ok {
		cc.mu.Unlock()
		select {
		case <-e.done:
			if e.c.binary != nil {
				hit := e.c.result()
				hit.Cached = true
				return compiled{res: hit, binary: e.c.binary}
			}
		case <-ctx.Done():
		}
		return compile() // the first one failed, or the caller left: its own
	}
	e := &cacheEntry{done: make(chan struct{})}
	cc.entries[key] = e
	cc.mu.Unlock()

	e.c = compile()
	cc.mu.Lock()
	if e.c.res.Status == result.StatusOK {
		cc.add(key, int64(len(e.c.binary)))
	} else {
		delete(cc.entries, key)
	}
	cc.mu.Unlock()
	close(e.done)
	return e.c
}

// add accounts for key's binary of n bytes, evicting the oldest entries
// past maxBytes.
func (cc *compileCache) add(key [32]byte, n int64) {
	cc.order = append(cc.order, key)
	cc.bytes += n
	for cc.bytes > cc.maxBytes && len(cc.order) > 0 {
		old := cc.order[0]
		cc.order = cc.order[1:]
		if e, ok := cc.entries[old]; ok {
			cc.bytes -= int64(len(e.c.binary))
			delete(cc.entries, old)
		}
	}
}

// compileKey hashes what a compile step's outcome depends on: its argv,
// environment, files, root, working directory, filter and limits.
func compileKey(c *nsjail.Spec) [32]byte {
	h := sha256.New()
	for _, a := range c.Argv {
		str(h, a)
	}
	for _, e := range c.Env {
		str(h, e)
	}
	for _, f := range c.Files {
		str(h, f.Path)
		str(h, string(f.Data))
		num(h, int64(f.Mode))
	}
	str(h, c.RootDir)
	str(h, c.Workdir)
	str(h, c.SeccompMode)
	str(h, string(c.Seccomp))
	num(h, int64(c.Timeout))
	num(h, c.OutputLimit)
	num(h, c.TmpfsSize)
	if c.Cgroup != nil {
		num(h, c.Cgroup.Limits.Memory)
		num(h, c.Cgroup.Limits.Pids)
	}
	var key [32]byte
	h.Sum(key[:0])
	return key
}

// str and num write a length-prefixed string and a number, so that no
// two different specs hash the same bytes.
func str(h hash.Hash, s string) {
	num(h, int64(len(s)))
	h.Write([]byte(s))
}

func num(h hash.Hash, n int64) {
	binary.Write(h, binary.LittleEndian, n)
}
