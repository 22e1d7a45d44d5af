package nsjail

// #cgo CFLAGS: -I${SRCDIR}/nsinit
// #include "nsinit.h"
import "C"

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// A Spawner starts jails: a small process of this binary (the spawner in
// nsinit/spawner.c, which never starts Go) that clones each jail's PID 1 into its
// namespaces as a child of the calling process. A jail then costs a clone
// of that small process instead of an exec of this binary, which is most of
// what starting a jail cost the CPU (BENCHMARKS.md); `microbox serve` keeps
// one for all its runs, a one-shot run starts one for itself.
//
// Every PID 1 is a fork of the spawner, so the jails of one spawner share
// its address layout and stack canary, where an exec per jail drew new
// ones. PID 1 takes no input from the program (it reads its plan from the
// supervisor and reaps), and is not dumpable once it goes on: nothing of
// it is the program's to probe.
//
// The jails' parent-death signal follows the thread that called NewSpawner
// (Linux ties it to the parent thread): Go ends a thread only when a
// goroutine locked to it returns, so call NewSpawner from a goroutine that
// is not locked, or that stays locked for as long as its jails run.
type Spawner struct {
	mu     sync.Mutex
	pid    int      // 0 while none runs: the next request starts one
	sock   *os.File // our end of a SOCK_SEQPACKET pair, in Go's poller
	closed bool
	once   bool       // serves one jail, and stops once its program has started (Run)
	reaped chan error // a stopped single-use spawner's reaping
	early  *earlyJail // asked for by SpawnEarly, not yet adopted: its reply comes first
}

// NewSpawner starts a spawner, or adopts the one a one-shot `microbox
// exec` forked before Go started (nsinit/spawner.c: microbox_prestart_spawner).
func NewSpawner() (*Spawner, error) {
	if sp := takeEarlySpawner(); sp != nil {
		return sp, nil
	}
	sp := &Spawner{}
	if sp.sock, sp.pid = takePrestarted(); sp.pid != 0 {
		return sp, nil
	}
	if err := sp.startLocked(); err != nil {
		return nil, err
	}
	return sp, nil
}

// prestarted makes sure only one Spawner adopts the prestarted spawner.
var prestarted sync.Once

// takePrestarted returns, to its first caller only, the spawner forked
// before Go started and its pid; 0 when there was none.
func takePrestarted() (sock *os.File, pid int) {
	prestarted.Do(func() {
		fd := int(C.microbox_prestarted_sock)
		if fd < 0 {
			return
		}
		if err := unix.SetNonblock(fd, true); err != nil {
			unix.Close(fd) // it exits at the EOF
			waitExit(int(C.microbox_prestarted_pid))
			return
		}
		sock, pid = os.NewFile(uintptr(fd), "spawner socket"), int(C.microbox_prestarted_pid)
	})
	return sock, pid
}

func (sp *Spawner) startLocked() error {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("start the jail spawner: socketpair: %w", err)
	}
	theirs := os.NewFile(uintptr(fds[1]), "spawner socket")
	defer theirs.Close()
	// Ours waits in Go's poller, not in a blocked thread: a thread blocked
	// in a system call keeps the runtime's monitor polling every 20 µs.
	if err := unix.SetNonblock(fds[0], true); err != nil {
		unix.Close(fds[0])
		return fmt.Errorf("start the jail spawner: %w", err)
	}
	ours := os.NewFile(uintptr(fds[0]), "spawner socket")
	cmd := &exec.Cmd{
		Path:       "/proc/self/exe",
		Args:       []string{"microbox-spawner"},
		Env:        []string{initEnv + "=spawner"},
		ExtraFiles: []*os.File{theirs}, // spawnerFD
		SysProcAttr: &syscall.SysProcAttr{
			// If microbox dies, so does the spawner; its jails have
			// their own parent-death signal (nsinit/pid1.c).
			Pdeathsig: syscall.SIGKILL,
			// Out of microbox's process group: a ^C or hang-up at the
			// terminal is microbox's to handle, not the spawner's to die
			// of (its jails are clones of it, so it cannot ignore them).
			Setpgid: true,
		},
	}
	if err := cmd.Start(); err != nil {
		ours.Close()
		return fmt.Errorf("start the jail spawner: %w", err)
	}
	// Waited for by pid, as the prestarted one is (stopLocked).
	sp.pid, sp.sock = cmd.Process.Pid, ours
	cmd.Process.Release()
	return nil
}

// Close ends the spawner. Jails it started run on: they are the caller's.
func (sp *Spawner) Close() error {
	if e := sp.takeEarly(); e != nil {
		sp.endEarly(e)
	}
	sp.mu.Lock()
	defer sp.mu.Unlock()
	sp.closed = true
	if sp.reaped != nil { // a single-use spawner, done already
		err := <-sp.reaped
		sp.reaped = nil
		return err
	}
	return sp.stopLocked()
}

// done tells a single-use spawner that its jail's program has started:
// the spawner is stopped and reaped while the program runs, on a CPU the
// program leaves idle, instead of after it, on the caller's wait. Not
// sooner: its exit would slow the jail's set-up. Other spawners serve on.
func (sp *Spawner) done() {
	if !sp.once { // set before the spawner's first use, never after
		return
	}
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if sp.closed || sp.pid == 0 {
		return
	}
	pid, sock, reaped := sp.pid, sp.sock, make(chan error, 1)
	sp.closed, sp.pid, sp.sock, sp.reaped = true, 0, nil, reaped
	go func() { reaped <- stop(pid, sock) }()
}

// stopLocked closes the socket, at which the spawner exits, and reaps it.
func (sp *Spawner) stopLocked() error {
	if sp.pid == 0 {
		return nil
	}
	pid, sock := sp.pid, sp.sock
	sp.pid, sp.sock = 0, nil
	return stop(pid, sock)
}

// stop closes a spawner's socket, at which it exits, and reaps it.
func stop(pid int, sock *os.File) error {
	sock.Close()
	ws, err := waitExit(pid)
	switch {
	case err != nil:
		return fmt.Errorf("jail spawner: %w", err)
	case ws.Signaled():
		return fmt.Errorf("jail spawner: killed by %v", ws.Signal())
	case ws.ExitStatus() != 0:
		return fmt.Errorf("jail spawner: exit status %d", ws.ExitStatus())
	}
	return nil
}

// spawnRequest is what the spawner needs to clone a PID 1: its namespaces,
// id maps, the host uid that creates them ("": the spawner's), and the
// optional descriptors (nsinit/spawner.h: the request's extras). Everything else
// PID 1 reads from its plan.
type spawnRequest struct {
	flags                            uint64
	uidMap, gidMap, setgroups, owner string
	cgroupFD                         int   // -1: none
	lockFDs                          []int // locks PID 1 holds for its life
}

// encode is the request's message and the extras it names.
func (r spawnRequest) encode() ([]byte, []int) {
	var extras string
	var fds []int
	if r.cgroupFD >= 0 {
		extras, fds = extras+string(extraCgroup), append(fds, r.cgroupFD)
	}
	for _, fd := range r.lockFDs {
		extras, fds = extras+string(extraLock), append(fds, fd)
	}
	b := binary.LittleEndian.AppendUint64(nil, r.flags)
	for _, s := range []string{r.uidMap, r.gidMap, r.setgroups, r.owner, extras} {
		b = append(append(b, s...), 0)
	}
	return b, fds
}

// errSpawnerGone says a request did not reach the spawner, which had died:
// nothing was started, and a new spawner may take the request.
var errSpawnerGone = errors.New("the jail spawner is gone")

// spawn asks for a PID 1 with descriptors files as its 0 to 5 (stdin,
// stdout, stderr, plan, status, sync), cloned into the cgroup v2 directory
// req.cgroupFD unless it is negative. meanwhile, if not nil, runs while the
// spawner clones (once the request has reached it): work of the caller's
// that PID 1 needs only at its go, done on this CPU while the spawner's
// runs on another. It returns PID 1's pid, which the caller must reap even
// when err is not nil, and meanwhile's error, if the clone had none.
func (sp *Spawner) spawn(req spawnRequest, files []int, meanwhile func() error) (pid int, err error) {
	if e := sp.takeEarly(); e != nil { // its reply comes before ours
		sp.endEarly(e)
	}
	msg, extras := req.encode()
	files = append(files[:len(files):len(files)], extras...)
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if sp.closed {
		return 0, errors.New("start jail: the spawner is closed")
	}
	oob := unix.UnixRights(files...)
	for retried := false; ; retried = true {
		if sp.pid == 0 { // it died during an earlier request
			if err := sp.startLocked(); err != nil {
				return 0, err
			}
		}
		pid, err = sp.roundTrip(msg, oob, meanwhile)
		if retried || !errors.Is(err, errSpawnerGone) {
			return pid, err
		}
		// Killed since the last request (by the OOM killer, say): the
		// request reached no one, so another spawner may take it.
		sp.stopLocked()
	}
}

// roundTrip sends one request, its descriptors in oob, runs meanwhile (if
// not nil) and reads the spawner's reply. A request that did not reach the
// spawner runs nothing (spawn tries it again).
func (sp *Spawner) roundTrip(msg, oob []byte, meanwhile func() error) (int, error) {
	err := sendmsg(sp.sock, msg, oob)
	switch {
	case errors.Is(err, unix.EPIPE) || errors.Is(err, unix.ECONNRESET):
		return 0, errSpawnerGone
	case err != nil:
		return 0, fmt.Errorf("start jail: send to the spawner: %w", err)
	}
	var meanwhileErr error
	if meanwhile != nil {
		meanwhileErr = meanwhile()
	}
	pid, err := sp.reply()
	if err == nil {
		err = meanwhileErr
	}
	return pid, err
}

// reply reads the spawner's answer to a request: PID 1's pid, or why
// there is none.
func (sp *Spawner) reply() (int, error) {
	reply := make([]byte, 4+replyErrorMax)
	n, _, err := recvmsg(sp.sock, reply, nil)
	if err != nil || n < 4 {
		// It died with the request: whatever it cloned dies at the sync
		// pipe's EOF, but is ours to reap and we do not know it. The next
		// request starts another spawner.
		sp.stopLocked()
		return 0, fmt.Errorf("start jail: the spawner died (%v)", err)
	}
	pid := int(int32(binary.LittleEndian.Uint32(reply)))
	if n > 4 {
		return pid, fmt.Errorf("start jail: %s", reply[4:n])
	}
	return pid, nil
}
