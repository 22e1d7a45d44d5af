package nsjail

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/microbox/microbox/rootfs"
)

// idMapping says how the jail's user ids relate to the host's.
//
// As root, the jail's ids 0..65535 map to an unprivileged host range of
// the jail's own (a uid slot, slots.go) above HostIDBase: the init is the
// jail's root (it needs its capabilities in the namespace to mount), the
// program runs as ProgramUID, and neither is ever root on the host. As
// another user, only that user's own id can be mapped, so the jail's root
// is the caller, and the program gets a nested user namespace in which it
// is ProgramUID; rootless jails share the caller's per-user quotas.
type idMapping struct {
	rootless               bool
	hostUID, hostGID, size int   // what the jail's id 0 maps to, and how many
	more                   []int // the host bases of further ranges of size, after the first
	programUID, programGID int
}

// HostIDBase is the first host uid/gid of the ranges root-run jails use
// (one per jail: slots.go). It is far above the ids that distributions
// hand out (and above /etc/subuid's usual 100000+ ranges), so no host file
// or process is owned by any of them.
const HostIDBase = 1 << 30

// ProgramUID is the user the program runs as inside the jail.
const ProgramUID = 1000

func hostIDs() idMapping {
	if RangesPerJail() {
		return idMapping{hostUID: HostIDBase, hostGID: HostIDBase, size: 65536,
			programUID: ProgramUID, programGID: ProgramUID}
	}
	return idMapping{rootless: true, hostUID: os.Geteuid(), hostGID: os.Getegid(), size: 1,
		programUID: ProgramUID, programGID: ProgramUID}
}

// inSlots is the mapping of a root-run jail that holds uid slots: its ids
// 0..65535 map to the first slot's range, and for a zygote's template
// each next 65536 to the next slot's (one per child, zygote_template.go).
func (m idMapping) inSlots(slots []uidSlot) idMapping {
	m.hostUID = HostIDBase + slots[0].n*slotSize
	m.hostGID = m.hostUID
	for _, s := range slots[1:] {
		m.more = append(m.more, HostIDBase+s.n*slotSize)
	}
	return m
}

// owner is the host uid that creates the jail's user namespace: the
// jail's root's own, or "" for the caller (rootless).
func (m idMapping) creator() string {
	if m.rootless {
		return ""
	}
	return num(m.hostUID)
}

// maps are the contents of the jail's uid_map and gid_map.
func (m idMapping) maps() (string, string) {
	uid, gid := fmt.Sprintf("0 %d %d\n", m.hostUID, m.size), fmt.Sprintf("0 %d %d\n", m.hostGID, m.size)
	for i, base := range m.more {
		line := fmt.Sprintf("%d %d %d\n", (i+1)*m.size, base, m.size)
		uid, gid = uid+line, gid+line
	}
	return uid, gid
}

func (m idMapping) identity() rootfs.Identity {
	return rootfs.Identity{User: "sandbox", Group: "sandbox", UID: m.programUID, GID: m.programGID, Home: "/tmp"}
}

// owner is the uid and gid, in the jail's own terms, that the program's
// files get: the program's user, or with a rootless jail (which maps only
// id 0) the jail's root, which is the program's user in its nested
// namespace.
func (m idMapping) owner() (uid, gid string) {
	if m.rootless {
		return "0", "0"
	}
	return num(m.programUID), num(m.programGID)
}

// RangesPerJail reports whether jails get a host uid range of their own:
// microbox runs as root and its user namespace maps every range of the
// slots. Root in a user namespace of its own that maps fewer ids (a
// container run with one, such as a Kubernetes pod with hostUsers: false)
// makes its jails as a rootless caller does: each maps only microbox's
// own id, and the program gets a nested namespace of its own.
func RangesPerJail() bool {
	return os.Geteuid() == 0 && slotsMapped()
}

var slotsMapped = sync.OnceValue(func() bool {
	end := uint64(HostIDBase) + slotCount*slotSize
	return mapsRange("/proc/self/uid_map", HostIDBase, end) && mapsRange("/proc/self/gid_map", HostIDBase, end)
})

// mapsRange reports whether one line of the id map file covers the ids
// [lo, hi) of this namespace.
func mapsRange(file string, lo, hi uint64) bool {
	data, err := os.ReadFile(file)
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) != 3 {
			continue
		}
		inside, err1 := strconv.ParseUint(f[0], 10, 64)
		count, err2 := strconv.ParseUint(f[2], 10, 64)
		if err1 == nil && err2 == nil && inside <= lo && hi <= inside+count {
			return true
		}
	}
	return false
}
