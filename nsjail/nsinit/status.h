// PID 1's status lines: how a jail's PID 1 tells the supervisor
// (nsjail/supervise.go: record) what became of the jail and its program.
//
// One line per write(2) on STATUS_FD, a word and its fields:
//   "error <message>"                    setup failed; PID 1 exits
//                                        EXIT_SANDBOX_ERROR
//   "phase <name> <monotonic ns>"        only when tracing
//   "ready"                              PID 1 is in its namespaces, as
//                                        their root, and reads the run's part
//   "start <monotonic ns>"               the program's execve succeeded
//   "exit <wait status> <monotonic ns> <cpu µs> <max rss KiB> [wall]"
//                                        the program (pid 2) ended; "wall"
//                                        when PID 1 killed it at the
//                                        program's wall-clock limit
// A zygote's run writes the same lines (zygote.c), and so does zygote.py's
// "error" before the run's PID 1 is this binary.
//
// nsjail/init.go and zygote.py declare the same words; nsjail/initc_test.go
// holds them equal.
#ifndef NSINIT_STATUS_H
#define NSINIT_STATUS_H

#define STATUS_FD 4
#define EXIT_SANDBOX_ERROR 125 // result.ExitSandboxError

#define STATUS_ERROR "error"
#define STATUS_PHASE "phase"
#define STATUS_READY "ready"
#define STATUS_START "start"
#define STATUS_EXIT "exit"
#define STATUS_WALL "wall" // result.LimitWall

#endif
