// What the files of the jail's init share: its types and the functions
// one file calls of another. README.md says which file does what.
#ifndef NSINIT_INIT_H
#define NSINIT_INIT_H

#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <linux/securebits.h>
#include <net/if.h>
#include <poll.h>
#include <signal.h>
#include <sched.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "nsinit.h"
#include "plan.h"
#include "spawner.h"
#include "status.h"
#include "zygote.h"

// One argument of a plan's step.
struct arg {
	const char *p; // NUL-terminated copy of the bytes
	uint32_t len;
};

// A step of the plan, parsed: n args, its name first.
struct step {
	uint32_t n;
	struct arg *a;
};

// What the program is started with; filled from the plan's exec steps.
struct program {
	const char *path;
	const char *cwd;
	char *argv[MAX_LIST + 1];
	int argc;
	char *envp[MAX_LIST + 1];
	int envc;
	uid_t uid;
	gid_t gid;
	int setgroups;          // 1: clear supplementary groups (root-mapped jail)
	int nested_userns;      // 1: enter a user namespace of its own (rootless)
	struct sock_fprog seccomp[MAX_FILTERS]; // loaded in order, oldest first
	int nseccomp;
	struct { int res; struct rlimit lim; } rlimits[16];
	int nrlimits;
	uint64_t timeout_ns; // the wall-clock limit from execve; 0: none
	int keep_root;       // a zygote's template: trusted, it keeps the jail's root
	int prepare;         // fork the program's process ahead of the run (pid1.c)
};

// How the spawner creates a jail: its namespaces, id maps, and the host
// uid that creates (owns) its user namespace ("": the spawner's own).
struct jail {
	unsigned long clone_flags;
	const char *uid_map, *gid_map, *setgroups, *owner;
};

// util.c: status lines, the clock, /proc knobs.
extern int tracing; // set by the plan's "trace" step
uint64_t now_ns(void);
void status(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
void phase(const char *name);
int write_text(const char *path, const char *data);

// plan.c: the plan's interpreter.
struct step *read_steps(size_t *count);
void run_step(struct arg *a, int n, struct program *prog);

// pid1.c: a jail's PID 1.
void jail_init(const struct jail *j) __attribute__((noreturn));
void arm_deadline(uint64_t timeout_ns);
void reap_program(pid_t child) __attribute__((noreturn));

// spawner.c: the spawner.
void spawner_main(void) __attribute__((noreturn));

// zygote.c: a zygote's run's PID 1.
void zygote_init(void) __attribute__((noreturn));

#endif
