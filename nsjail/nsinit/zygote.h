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

#endif
