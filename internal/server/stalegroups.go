package server

import (
	"sync"
	"time"
)

// staleGroups paces a server's collection of the groups of runs whose
// supervisor was killed (cgroup.GC): reading the hierarchies with every
// run is work for nothing when runs come many a second, so a server does
// it at most once a minute per cgroup parent.
type staleGroups struct {
	mu   sync.Mutex
	last map[string]time.Time // by cgroup parent
}

// due reports whether a run under parent is to collect, and if so counts
// the minute from now.
func (g *staleGroups) due(parent string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if t, ok := g.last[parent]; ok && time.Since(t) < time.Minute {
		return false
	}
	if g.last == nil {
		g.last = map[string]time.Time{}
	}
	g.last[parent] = time.Now()
	return true
}
