package nsjail

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// A uid slot is a host uid range of a jail's own. As root, each jail maps
// its ids 0..65535 to the range of a slot that no other living jail has,
// and its user namespace is created by the range's first uid (the
// spawner's owner): so the kernel's per-user quotas (pending signals,
// pipe buffers, descriptors in flight over sockets, inotify, message
// queues) count each run apart, and none of them count against host
// root. A slot is held by a lock on a file of slotDir, taken by the
// supervisor and passed to the jail's PID 1: it is free again only when
// both are gone, that is when every process of the jail has ended.
const (
	slotDir   = "/run/microbox/uid-slots"
	slotSize  = 65536
	slotCount = 4096 // HostIDBase + 4096 × 65536 stays below 2^31
)

// uidSlot is a slot held: its number and its locked file.
type uidSlot struct {
	n  int
	fd int
}

// takeSlot locks a free slot, starting at a random one so that
// concurrent runs rarely try the same.
func takeSlot() (uidSlot, error) {
	if err := slotDirReady(); err != nil {
		return uidSlot{}, err
	}
	start := rand.IntN(slotCount)
	for i := range slotCount {
		n := (start + i) % slotCount
		fd, err := unix.Open(slotDir+"/"+strconv.Itoa(n), unix.O_RDWR|unix.O_CREAT|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0o600)
		if err != nil {
			return uidSlot{}, fmt.Errorf("uid range: open %s/%d: %w", slotDir, n, err)
		}
		if unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB) == nil {
			return uidSlot{n: n, fd: fd}, nil
		}
		unix.Close(fd)
	}
	return uidSlot{}, fmt.Errorf("uid range: all %d are held by running jails", slotCount)
}

// slotDirReady makes slotDir, which only root may write: whoever could
// would hold every slot's lock.
func slotDirReady() error {
	if err := os.MkdirAll(slotDir, 0o700); err != nil {
		return fmt.Errorf("uid range: %w", err)
	}
	var st unix.Stat_t
	if err := unix.Lstat(slotDir, &st); err != nil {
		return fmt.Errorf("uid range: %w", err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR || st.Uid != 0 || st.Mode&0o022 != 0 {
		return errors.New("uid range: " + slotDir + " must be a directory that only root may write")
	}
	return nil
}

// release lets go of the slot (PID 1's copy of the lock, if any, keeps it
// held until PID 1 ends).
func (s *uidSlot) release() {
	if s.fd > 0 {
		unix.Close(s.fd)
		s.fd = -1
	}
}
