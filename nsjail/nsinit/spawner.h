// The spawner's request: how the supervisor (nsjail/spawner.go) asks the
// spawner (spawner.c) for one jail's PID 1.
//
// INIT_ENV in the environment makes a start of this binary the spawner
// (any value but ZYGOTE_INIT's), serving on SPAWNER_FD, a SOCK_SEQPACKET
// socket, until EOF on it.
//
// Request, one message (integers little-endian):
//   u64 clone flags, then uid_map, gid_map, setgroups, owner and extras,
//   each ending in NUL (REQUEST_STRINGS in all); owner is the host uid the
//   jail's user namespace is created as ("": the spawner's), extras names
//   the optional descriptors that follow the SPAWN_FDS, in order:
//   EXTRA_CGROUP the run's cgroup v2 directory (CLONE_INTO_CGROUP),
//   EXTRA_LOCK a lock PID 1 holds for its life (from LOCK_FD on);
//   SCM_RIGHTS: PID 1's stdin, stdout, stderr, plan, status and sync, then
//   the extras.
// Reply, one message: i32 pid of PID 1 (0: none), then an error message of
// at most REPLY_ERROR_MAX bytes (empty: none).
//
// nsjail/init.go declares the same values; nsjail/initc_test.go holds the
// two sides equal.
#ifndef NSINIT_SPAWNER_H
#define NSINIT_SPAWNER_H

#include "plan.h"
#include "status.h"

#define INIT_ENV "_MICROBOX_INIT"
#define SPAWNER_FD 3 // the spawner's socket (it has no plan)
#define MAX_REQUEST 4096
#define REQUEST_STRINGS 5
#define REPLY_ERROR_MAX 1024

// PID 1's descriptors past stdin, stdout and stderr: PLAN_FD (plan.h),
// STATUS_FD (status.h), then SYNC_FD, a SOCK_SEQPACKET socket on which PID
// 1 waits for the supervisor's go: one message, GO and the number of
// descriptors it carries (SCM_RIGHTS), the run's cgroup v1 tasks files
// (at most MAX_TASKS; none on v2), which PID 1 joins before anything
// else. SPAWN_FDS in all.
#define SYNC_FD 5
#define SPAWN_FDS 6
#define LOCK_FD 6    // PID 1's first lock, if the request has any
#define MAX_LOCKS 33 // a zygote's template holds one uid slot per child
#define MAX_TASKS 8  // cgroup v1 hierarchies a run joins (4 today)
#define GO 'g'

#define EXTRA_CGROUP 'c'
#define EXTRA_LOCK 'l'

#endif
