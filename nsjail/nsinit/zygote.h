// A zygote's run: how a template's fork becomes a run, between the
// supervisor (nsjail/zygote.go), the template and its fork's program
// (nsjail/zygote.py), and the run's PID 1, this binary (zygote.c).
//
// The supervisor and the template, on the template's fd 0 (SOCK_SEQPACKET,
// one JSON object a message):
//   supervisor: {"preload": [module...], "sandbox_uid", "rlimits",
//               "seccomp"}, with this binary's descriptor
//   template:   {"ready": version} or {"error": why}
//   then per child, supervisor: {"uid", "gid", "join"} with two
//   SOCK_STREAM sockets, ctl and run, then "join" v1 cgroup tasks files
//   (the run's, one per hierarchy), to each of which PID 1 writes "0".
// The child's PID 1 on ctl: ZYGOTE_HELLO with SCM_CREDENTIALS (its pid);
// if it joined no cgroup itself (join 0), the supervisor answers ZYGOTE_GO
// once PID 1 is in the run's cgroup; then it sends the plan (plan.h, one
// part); PID 1 writes status lines (status.h).
// The program on run: ZYGOTE_READY once sandboxed; the supervisor sends the
// run: u32 length with the program's stdin, stdout and stderr, then that
// many bytes of JSON {"argv", "orig_argv", "env", "cwd", "code", "file",
// "files", "timeout_ns", "stdin_null"}, then each file's bytes.
//
// PID 1 is exec'd with INIT_ENV=ZYGOTE_INIT and, as its descriptors,
// /dev/null at 0 to 2, ctl at PLAN_FD and STATUS_FD, and:
//   ZYGOTE_GO_FD     the pipe on which the program waits for its go
//                    (ZYGOTE_GO_BYTE), once PID 1 has made the mounts;
//   ZYGOTE_START_FD  the pipe on which the program says it starts the
//                    caller's code: "<timeout ns> <CLOCK_MONOTONIC ns>", or
//                    ZYGOTE_FAILED and why it could not;
//   ZYGOTE_BINARY_FD this binary, which zygote.py execs.
//
// nsjail/zygote_wire.go and zygote.py declare the same values;
// nsjail/initc_test.go holds the three equal.
#ifndef NSINIT_ZYGOTE_H
#define NSINIT_ZYGOTE_H

#define ZYGOTE_INIT "zinit" // INIT_ENV's value for a zygote's PID 1
#define ZYGOTE_GO_FD 5
#define ZYGOTE_START_FD 6
#define ZYGOTE_BINARY_FD 7
#define ZYGOTE_PROGRAM 2 // the program's pid in the run's namespace
#define ZYGOTE_HELLO "hello\n"
#define ZYGOTE_GO "go\n"
#define ZYGOTE_READY "ready"
#define ZYGOTE_GO_BYTE "g"
#define ZYGOTE_FAILED "!"

#include <stdint.h>

#define MAX_JOIN 8 // a run's v1 hierarchies (nsjail/zygote_child.go)

// What zspawn (zspawn.c) is given and gives back. zygote.py's ZSpawn is
// this struct, field for field: the supervisor sends its size and where
// resume is, and zygote.py refuses a layout of its own that differs.
struct zspawn {
	// Set once per template.
	uint64_t flags;                // clone's: the run's new namespaces, and SIGCHLD
	char *stack;                   // the top of PID 1's stack (16-byte aligned, a guard page below)
	long (*fork)(void);            // the C library's fork, for the program
	int *errno_at;                 // and where it says why it failed: the template's errno
	char *const *argv, *const *envp; // the init's
	const char *empty;             // "", execveat's path
	const char *hello, *go;        // ZYGOTE_HELLO and ZYGOTE_GO
	const char *const *what;       // each step's error line, up to its cause
	const char *const *why;        // strerror's text for each errno, with "\n"
	int32_t nwhy;                  // how many
	int32_t null;                  // /dev/null, the init's stdin, stdout and stderr
	int32_t binary;                // microbox's binary, the init
	// The template thread's rseq area, which the C library registered
	// with the kernel (0: none): a clone with CLONE_VM has none, nor has
	// what it forks, so the program registers it again.
	uint64_t rseq;
	uint32_t rseq_len, rseq_sig;
	// Set per run.
	int32_t ctl;                   // the run's control socket
	int32_t njoin;                 // v1 tasks files PID 1 writes 0 to
	int32_t join[MAX_JOIN];
	// For the program: the two pipes' ends it keeps.
	int32_t go_r, start_w;
	// 1 while PID 1 is in the C library's fork, whose handlers (the
	// preloads' pthread_atfork) run in the memory PID 1 shares with the
	// template: still 1 when the template goes on, PID 1 died there, and
	// the template's state is not to be trusted.
	int32_t in_fork;
	// zspawn's own: the template's signal mask, and where and with which
	// registers the program resumes.
	uint64_t mask;
	uint64_t resume[14];
};

// The steps zspawn's PID 1 can fail at, indexes of what (zygote.py: STEPS).
enum { STEP_JOIN, STEP_HELLO, STEP_GO, STEP_PIPE, STEP_FORK, STEP_DUP, STEP_CLOSE, STEP_EXEC };

#endif
