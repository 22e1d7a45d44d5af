// The run plan: what the supervisor (nsjail/plan.go) tells a jail's PID 1
// to do, as data. PID 1 carries the steps out in order (plan.c) and knows
// no policy of its own, so what a jail does can be read and tested in Go.
//
// Wire format, read from PLAN_FD (all integers little-endian uint32):
//   plan := part(jail) part(run) [part(program)]   part := len step[len bytes]
//   step := nargs arg*               arg := len byte[len]
// The first arg of a step is its name; nargs counts it. The jail part holds
// the steps PID 1 takes before it is ready, whatever the run; the run part,
// all the others. A zygote's run (zygote.c) reads one part only.
//
// A jail started ahead of its run (nsjail/jail.go) may end its first part
// with "prepare": its program's process is then forked and sandboxed
// before the run is known (pid1.c: prepare_program), and the plan has a
// third part, the program's own (PROGRAM_STEPS), which that process reads
// once PID 1 has carried out the run's part.
//
// nsjail/plan.go declares the same steps and values (planSteps, bindReadOnly,
// ...); nsjail/initc_test.go holds the two sides equal.
#ifndef NSINIT_PLAN_H
#define NSINIT_PLAN_H

#define PLAN_FD 3
#define MAX_ARGS 64   // args of one step, its name included
#define MAX_LIST 4096 // the program's arguments, and its variables
#define MAX_FILTERS 4 // seccomp filters stacked (seccomp.maxPrograms)

// Flags of the "bind" step, a bit mask.
#define BIND_READONLY 1
#define BIND_OPTIONAL 2 // skip when the source does not exist

// PLAN_STEPS lists every step: its name and how many args follow the name.
// A step of another name or count is refused before any step runs.
#define PLAN_STEPS(X)                                                          \
	X(trace, 0)         /* turns on the "phase" status lines */            \
	X(mount, 5)         /* src dst fstype flags data ("": none) */         \
	X(bind, 3)          /* src dst flags (BIND_*) */                       \
	X(mask, 2)          /* empty path: hide path, if it exists */          \
	X(remount_ro, 1)    /* path */                                         \
	X(mkdir, 2)         /* path mode */                                    \
	X(file, 3)          /* path mode data */                               \
	X(chown, 3)         /* path uid gid */                                 \
	X(symlink, 2)       /* target path */                                  \
	X(pivot, 2)         /* newroot putold */                               \
	X(umount, 1)        /* path, lazily detached */                        \
	X(move, 2)          /* src dst: a mount, moved */                      \
	X(rmdir, 1)         /* path */                                         \
	X(chdir, 1)         /* path */                                         \
	X(hostname, 1)      /* name */                                         \
	X(loopback_up, 0)   /* lo up in the new network namespace */           \
	X(phase, 1)         /* name: a "phase" status line, when tracing */    \
	X(stdin, 1)         /* path, opened read-only as fd 0 */               \
	/* the program's settings, applied when it starts: */                  \
	X(path, 1)          /* the file execve runs */                         \
	X(cwd, 1)           /* its working directory */                        \
	X(arg, 1)           /* one argument, in order */                       \
	X(env, 1)           /* one NAME=value, in order */                     \
	X(user, 3)          /* uid gid setgroups (1: clear the groups) */      \
	X(nested_userns, 0) /* a user namespace of its own (rootless) */       \
	X(keep_root, 0)     /* a zygote's template: keeps the jail's root */   \
	X(seccomp, 1)       /* a stack of BPF programs (seccomp/stack.go) */   \
	X(timeout, 1)       /* ns from the program's start; 0: none */         \
	X(rlimit, 3)        /* resource soft hard */                           \
	/* last of a jail started ahead's part, after the settings above that */ \
	/* do not depend on the run: fork the program's process now (pid1.c) */ \
	X(prepare, 0)

// PROGRAM_STEPS are the steps of a prepared program's own part: what it
// still needs once it is sandboxed. Any other step there is refused.
#define PROGRAM_STEPS(X) X(stdin) X(path) X(arg) X(env)

#endif
