// A zygote's run (nsjail/zygote.py, zygote.go) has this binary as its
// PID 1, exec'd by the template's clone (zspawn.c) in the run's new
// namespaces, once it is in the run's cgroup and has forked the program
// (pid 2), which waits for its go. PID 1 makes the run's cgroup
// namespace, carries out the plan (the run's scratch areas, /proc,
// hostname, loopback), lets the program go on, and then is a jail's PID 1
// (pid1.c: reap_program): it reports the program's start and end, holds
// its deadline and reaps.
//
// Its descriptors and the messages on them: zygote.h.

#include "init.h"

void zygote_init(void)
{
	static struct program prog;
	sigset_t none; // zspawn.c's PID 1 exec'd this with every signal blocked
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	prctl(PR_SET_DUMPABLE, 0, 0, 0, 0); // nothing of PID 1 is the program's to read
	if (unshare(CLONE_NEWCGROUP) < 0) // rooted at the run's cgroup, which PID 1 was born in
		die("unshare the cgroup namespace");
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		die("make mounts private");
	size_t count;
	struct step *steps = read_steps(&count);
	for (size_t i = 0; i < count; i++)
		run_step(steps[i].a, steps[i].n, &prog);
	if (write(ZYGOTE_GO_FD, ZYGOTE_GO_BYTE, 1) != 1)
		die("let the program go on");
	close(ZYGOTE_GO_FD);
	char said[1024];
	ssize_t n;
	while ((n = read(ZYGOTE_START_FD, said, sizeof said - 1)) < 0 && errno == EINTR)
		;
	close(ZYGOTE_START_FD);
	said[n > 0 ? n : 0] = 0;
	if (n <= 0 || said[0] == ZYGOTE_FAILED[0]) {
		status(STATUS_ERROR " zygote: the run's program: %s", n > 0 ? said + 1 : "it ended before its run began");
		_exit(EXIT_SANDBOX_ERROR);
	}
	// The program's own moment of starting, not this read's, which may
	// come later: the run's wall time must not miss what it slept first.
	char *end;
	uint64_t timeout = strtoull(said, &end, 10), start = strtoull(end, NULL, 10), now = now_ns();
	if (start == 0 || start > now)
		start = now;
	status(STATUS_START " %llu", (unsigned long long)start);
	arm_deadline(now - start < timeout ? timeout - (now - start) : 1);
	reap_program(ZYGOTE_PROGRAM);
}
