// What the rest of microbox calls of the jail's init, which runs before Go:
// cmd/microbox/client.c (exec's constructor) and nsjail/spawner.go.
#ifndef NSINIT_NSINIT_H
#define NSINIT_NSINIT_H

// microbox_prestart_spawner forks the spawner of a one-shot exec, from
// exec's constructor, before the Go runtime starts (spawner.c); argv is
// microbox's, for the spawner to wipe its copy of.
void microbox_prestart_spawner(char **argv);

// The spawner it forked, for nsjail.NewSpawner to adopt: our end of its
// socket and its pid; -1 and 0 when there is none.
extern int microbox_prestarted_sock;
extern int microbox_prestarted_pid;

// INIT_ENV (spawner.h): set, a start of this binary is the spawner's or a
// zygote's PID 1, which exec's client leaves alone.
extern const char microbox_init_env[];

#endif
