package nsjail

import (
	"fmt"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/microbox/microbox/cgroup"
)

// A one-shot `microbox exec` asks for its run's PID 1 as soon as Go's main
// starts (SpawnEarly), before it has parsed its flags: the spawner clones
// PID 1 (about a millisecond) on another CPU while Go parses the command
// line, builds the spec and makes the run's cgroup. Nothing of the run is
// in the request: PID 1 has its namespaces, id maps and descriptors, and
// waits for its go, which carries the run's cgroup (v1) and comes with its
// plan. The first run of the exec's spawner adopts it (supervisor.start);
// a run it does not fit (a zygote's template, which has a control socket
// and more uid ranges) ends it first.

// earlyJail is a PID 1 asked for and not yet adopted: the spawner's reply
// (its pid) is the next on the spawner's socket.
type earlyJail struct {
	pipes *pipes
	slots []uidSlot
	owner int   // the host uid that owns its user namespace (0: microbox's)
	asked int64 // monotonic ns of the request
}

// earlySpawner is the spawner SpawnEarly asked, for the first NewSpawner.
var earlySpawner struct {
	sync.Mutex
	sp *Spawner
}

// SpawnEarly asks the spawner a one-shot exec forked before Go started for
// the PID 1 of the exec's first run; NewSpawner then returns that spawner.
// Not on cgroup v2, where PID 1 is cloned into its run's group, which must
// exist first. When it cannot ask, the run starts as any other.
func SpawnEarly() {
	if cgroup.HostMode() == cgroup.ModeV2 {
		return
	}
	sock, pid := takePrestarted()
	if pid == 0 {
		return
	}
	sp := &Spawner{sock: sock, pid: pid}
	sp.mu.Lock()
	sp.early, _ = sp.askEarlyLocked()
	sp.mu.Unlock()
	earlySpawner.Lock()
	earlySpawner.sp = sp
	earlySpawner.Unlock()
}

// takeEarlySpawner returns, once, the spawner SpawnEarly asked; nil if none.
func takeEarlySpawner() *Spawner {
	earlySpawner.Lock()
	defer earlySpawner.Unlock()
	sp := earlySpawner.sp
	earlySpawner.sp = nil
	return sp
}

// askEarlyLocked sends the request for a PID 1 with one uid range and
// no cgroup descriptor, without waiting for the reply. sp.mu is held.
func (sp *Spawner) askEarlyLocked() (*earlyJail, error) {
	e := &earlyJail{asked: monotonic()}
	req, slots, owner, err := newSpawnRequest(0)
	e.slots, e.owner = slots, owner
	if err == nil {
		e.pipes, err = newPipes()
	}
	if err == nil {
		msg, extras := req.encode()
		err = sendmsg(sp.sock, msg, unix.UnixRights(append(e.pipes.jail[:], extras...)...))
	}
	if err != nil {
		e.release()
		return nil, fmt.Errorf("start jail: %w", err)
	}
	return e, nil
}

// newSpawnRequest is the request for a PID 1 with childSlots more uid
// ranges than its own (a zygote's template's), with the ranges it took (a
// root-run jail's) and the host uid that will own its user namespace (0:
// microbox's). On an error it holds no range.
func newSpawnRequest(childSlots int) (req spawnRequest, slots []uidSlot, owner int, err error) {
	ids := hostIDs()
	req = spawnRequest{flags: namespaces, setgroups: "allow", cgroupFD: -1}
	if ids.rootless {
		req.setgroups = "deny" // required before an unprivileged gid_map
	} else {
		for range 1 + childSlots {
			slot, err := takeSlot()
			if err != nil {
				for i := range slots {
					slots[i].release()
				}
				return req, nil, 0, err
			}
			slots = append(slots, slot)
			req.lockFDs = append(req.lockFDs, slot.fd) // PID 1 holds them as long as it lives
		}
		ids = ids.inSlots(slots)
		owner = ids.hostUID
	}
	req.uidMap, req.gidMap = ids.maps()
	req.owner = ids.creator()
	return req, slots, owner, nil
}

// release closes what an early jail holds in this process.
func (e *earlyJail) release() {
	e.pipes.closeAll()
	for i := range e.slots {
		e.slots[i].release()
	}
}

// takeEarly returns the early jail still to be adopted, if any; the
// caller reads its reply (adoptReply) or ends it (endEarly).
func (sp *Spawner) takeEarly() *earlyJail {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	e := sp.early
	sp.early = nil
	return e
}

// adoptReply reads the spawner's reply to the early request: PID 1's pid,
// which the caller must reap even when err is not nil.
func (sp *Spawner) adoptReply() (int, error) {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if sp.pid == 0 {
		return 0, errSpawnerGone
	}
	return sp.reply()
}

// endEarly ends an early PID 1 no run adopted: closing its go's socket
// ends it before it does anything, and it is reaped.
func (sp *Spawner) endEarly(e *earlyJail) {
	sp.mu.Lock()
	pid := 0
	if sp.pid != 0 {
		pid, _ = sp.reply()
	}
	sp.mu.Unlock()
	e.release()
	if pid > 0 {
		waitExit(pid)
	}
}
