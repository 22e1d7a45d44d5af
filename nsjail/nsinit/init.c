// The jail's init: the child side of a jail, run before the Go runtime.
//
// microbox's supervisor (nsjail, in Go) starts /proc/self/exe with INIT_ENV
// set in the environment. This constructor runs before Go's runtime starts
// (the pattern runc's nsexec uses), so the child never pays for a second Go
// runtime. It is one of two things:
//   - the spawner (spawner.c), which clones, on each request, one jail's
//     PID 1 (pid1.c) into new user, pid, mount, net, ipc and uts namespaces
//     as a child of the supervisor; PID 1 carries out the plan (plan.c);
//   - with INIT_ENV=ZYGOTE_INIT, the PID 1 of a run forked from a zygote's
//     template (zygote.c).
// Any other start of the binary has no INIT_ENV and goes on to Go.
// README.md says in which order a jail's steps run.

#include "init.h"

__attribute__((constructor)) static void microbox_init(void)
{
	const char *mode = getenv(INIT_ENV);
	if (!mode)
		return; // an ordinary microbox command: let Go start
	if (!strcmp(mode, ZYGOTE_INIT))
		zygote_init();
	spawner_main();
}
