package nsjail

import (
	"fmt"
	"runtime"

	"golang.org/x/sys/unix"
)

// killAsOwner sends SIGKILL with send (kill(2) or pidfd_send_signal(2)) to
// a jail's PID 1, whose user namespace owner (a host uid) owns.
//
// A root-run jail's processes have host uids of their own (ids.go), so
// signalling them takes CAP_KILL, which a container may not grant:
// docs/deploy.md's pods give microbox only CAP_SETUID, CAP_SETGID and
// CAP_SETPCAP. There kill(2) fails with EPERM, and a jail that the
// supervisor means to end (a limit, a gone client, a server stopping)
// would live on. A process whose effective uid owns a user namespace
// holds every capability in it, though, so on EPERM the signal is sent
// again from a thread of its own whose effective uid is owner (CAP_SETUID
// is what it takes). setresuid(2) as a raw system call changes that thread
// alone, and the thread is never unlocked: it ends with its goroutine, and
// no other code ever runs with that uid.
func killAsOwner(owner int, send func() error) error {
	err := send()
	if err != unix.EPERM || owner <= 0 {
		return err
	}
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: see above
		if _, _, e := unix.RawSyscall(unix.SYS_SETRESUID, ^uintptr(0), uintptr(owner), ^uintptr(0)); e != 0 {
			done <- fmt.Errorf("kill a jail as its owner, uid %d: setresuid: %w", owner, e)
			return
		}
		done <- send()
	}()
	return <-done
}
