// A jail's PID 1 (jail_init): cloned by the spawner into the jail's
// namespaces, it waits for the supervisor's go, becomes the jail's root,
// carries out the plan's two parts (plan.c), starts the program (pid 2),
// reports its start and end (status.h), holds its deadline and reaps.
//
// Why an init at all: the program must not be PID 1 of its namespace, where
// the kernel drops signals that have no handler (a SIGSEGV it raises on itself
// would be ignored) and where its death would be the end of every process.
// This init is PID 1 instead: it reaps orphans, reports the program's status,
// and exits when the program does, which makes the kernel kill whatever the
// program left behind. The supervisor kills the whole tree by killing init.

#include "init.h"

static void write_proc(const char *path, const char *data)
{
	if (write_text(path, data) < 0)
		die("write %s", path);
}

// enter_nested_userns gives a rootless jail's program a user namespace of
// its own in which it is prog->uid, so it is not root even inside the jail.
static void enter_nested_userns(struct program *prog)
{
	uid_t outer_uid = getuid();
	gid_t outer_gid = getgid();
	char map[64];
	if (unshare(CLONE_NEWUSER) < 0)
		die("unshare user namespace for the program");
	write_proc("/proc/self/setgroups", "deny");
	snprintf(map, sizeof map, "%u %u 1", prog->uid, outer_uid);
	write_proc("/proc/self/uid_map", map);
	snprintf(map, sizeof map, "%u %u 1", prog->gid, outer_gid);
	write_proc("/proc/self/gid_map", map);
}

static void drop_privileges(struct program *prog)
{
	// A new user namespace starts with a full bounding set, so the nested
	// one (rootless) is entered before the bounding set is emptied.
	if (prog->nested_userns)
		enter_nested_userns(prog);
	// The bounding set can only shrink while CAP_SETPCAP is still held.
	for (int cap = 0; cap <= 63; cap++) {
		if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) == 0)
			continue;
		if (errno == EINVAL) // past the kernel's last capability
			break;
		die("drop capability %d from the bounding set", cap);
	}
	if (!prog->nested_userns) {
		if (prog->setgroups && setgroups(0, NULL) < 0)
			die("setgroups");
		if (setresgid(prog->gid, prog->gid, prog->gid) < 0)
			die("setresgid %u", prog->gid);
		if (setresuid(prog->uid, prog->uid, prog->uid) < 0)
			die("setresuid %u", prog->uid);
	}
	// setresuid away from 0 clears the effective and permitted sets; the
	// creator of the nested namespace holds a full set there: clear all
	// three explicitly either way.
	struct __user_cap_header_struct hdr = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct data[2];
	memset(data, 0, sizeof data);
	if (syscall(SYS_capset, &hdr, data) < 0)
		die("capset");
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
		die("clear ambient capabilities");
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		die("set no_new_privs");
}

// close_extra_fds marks every fd above 2 close-on-exec, so only stdin, stdout
// and stderr reach the program while the exec-error pipe still works.
static void close_extra_fds(void)
{
	if (syscall(SYS_close_range, 3, ~0U, 4 /* CLOSE_RANGE_CLOEXEC */) == 0)
		return;
	for (int fd = 3; fd < 65536; fd++)
		fcntl(fd, F_SETFD, FD_CLOEXEC);
}

// set_rlimit gives the program a limit, never above the hard limit it has
// from microbox (raising that needs a privilege no jail has): a lower
// limit than asked is a tighter one.
static void set_rlimit(int res, struct rlimit lim)
{
	struct rlimit have;
	if (getrlimit(res, &have) == 0 && have.rlim_max != RLIM_INFINITY && lim.rlim_max > have.rlim_max) {
		lim.rlim_max = have.rlim_max;
		if (lim.rlim_cur > lim.rlim_max)
			lim.rlim_cur = lim.rlim_max;
	}
	if (setrlimit(res, &lim) < 0)
		die("setrlimit %d", res);
}

// set_rlimits gives the program its limits.
static void set_rlimits(struct program *prog)
{
	for (int i = 0; i < prog->nrlimits; i++)
		set_rlimit(prog->rlimits[i].res, prog->rlimits[i].lim);
}

// sandbox_program takes, in the program's process (pid 2), every step
// between PID 1 and the program's execve: a session of its own, only
// stdin, stdout and stderr for the program, its credentials, limits,
// working directory and, last, its seccomp filters. A prepared program
// (prepare_program) sets its limits later, before its execve: under
// RLIMIT_DATA it could not read its own part of the plan.
static void sandbox_program(struct program *prog)
{
	// Dumpable again, as execve would make it anyway: a rootless program
	// must write its own /proc/self/uid_map, which a non-dumpable process
	// whose memory dates from the host's user namespace may not. (Only a
	// forked program: a vfork'ed one shares PID 1's memory, see
	// spawn_program.)
	if (prog->nested_userns)
		prctl(PR_SET_DUMPABLE, 1, 0, 0, 0);
	if (setsid() < 0) // no controlling terminal: TIOCSTI (CVE-2017-5226)
		die("setsid");
	close_extra_fds();
	// A zygote's template (nsjail/zygote.py) runs only microbox's code
	// and the operator's preloads; it needs the jail's root to give each
	// run's fork namespaces and mounts of its own, and drops it there.
	if (!prog->keep_root)
		drop_privileges(prog);
	if (!prog->prepare)
		set_rlimits(prog);
	if (chdir(prog->cwd) < 0)
		die("chdir %s", prog->cwd);
	for (int i = 0; i < prog->nseccomp; i++)
		if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog->seccomp[i]) < 0)
			die("load seccomp filter %d of %d", i + 1, prog->nseccomp);
}

// exec_program execs the program; on failure it tells PID 1 why through
// errpipe and exits.
static void exec_program(struct program *prog, int errpipe) __attribute__((noreturn));
static void exec_program(struct program *prog, int errpipe)
{
	execve(prog->path, prog->argv, prog->envp);
	int err = errno;
	// A prepared program's PID 1 never read its path: the program says
	// what failed itself, before PID 1 hears of it (the first error line
	// is the one reported).
	if (prog->prepare)
		status(STATUS_ERROR " exec %s: %s", prog->path, strerror(err));
	(void)!write(errpipe, &err, sizeof err);
	_exit(127);
}

// start_program runs in the program's process (pid 2), before its execve,
// and never returns.
static void start_program(struct program *prog, int errpipe)
{
	sandbox_program(prog);
	exec_program(prog, errpipe);
}

// is_program_step reports whether a step belongs in a prepared program's
// own part (plan.h: PROGRAM_STEPS).
static int is_program_step(const char *name)
{
#define PROGRAM_STEP(n) if (!strcmp(name, #n)) return 1;
	PROGRAM_STEPS(PROGRAM_STEP)
#undef PROGRAM_STEP
	return 0;
}

// prepare_program forks the program's process of a jail started ahead of
// its run, before the run is known, and returns its pid. The process
// takes every step that does not depend on the run (sandbox_program: its
// credentials, limits and filters, the jail part's settings) and then
// waits, sandboxed, for PID 1's go on go[0]: a run's path from request to
// execve is then the steps that do. With the go it reads the plan's last
// part, its own (PROGRAM_STEPS: stdin, path, arguments, environment), and
// execs. Without one (PID 1 gave up, or ended) it exits, and nothing ran.
static pid_t prepare_program(struct program *prog, int errpipe[2], int go[2])
{
	pid_t child = fork();
	if (child != 0)
		return child;
	close(errpipe[0]);
	close(go[1]);
	sandbox_program(prog);
	char c;
	ssize_t r;
	while ((r = read(go[0], &c, 1)) < 0 && errno == EINTR)
		;
	if (r != 1 || c != GO)
		_exit(EXIT_SANDBOX_ERROR);
	size_t count;
	struct step *steps = read_steps(&count);
	for (size_t i = 0; i < count; i++) {
		if (!is_program_step(steps[i].a[0].p)) {
			errno = 0;
			die("plan: step %s in the program's part", steps[i].a[0].p);
		}
		run_step(steps[i].a, steps[i].n, prog);
	}
	if (!prog->path)
		die("plan: no program");
	set_rlimits(prog); // under the filter: prlimit64 on itself
	exec_program(prog, errpipe[1]);
}

// go_program hands a prepared program its go, once PID 1 has carried out
// the run's part (its files are written).
static void go_program(int go)
{
	char c = GO;
	if (write(go, &c, 1) != 1)
		die("start the prepared program");
	close(go);
}

// refuse_after_prepare ends the jail when the run's part of a prepared
// jail has a step other than the caller's files and the timeout: the
// program's settings are pid 2's already, and a step that changed the
// file system under it (a mount over its working directory) would leave
// it where a cold run would not be. A run must never go on with another
// sandbox than it asked for.
static void refuse_after_prepare(const struct step *steps, size_t count)
{
	static const char *const allowed[] = { "file", "mkdir", "chown", "timeout", "phase" };
	for (size_t i = 0; i < count; i++) {
		int ok = 0;
		for (size_t k = 0; k < sizeof allowed / sizeof *allowed; k++)
			ok |= !strcmp(steps[i].a[0].p, allowed[k]);
		if (!ok) {
			errno = 0;
			die("plan: step %s in the run's part of a prepared jail", steps[i].a[0].p);
		}
	}
}

// await_run_part waits for the run's part of the plan on PLAN_FD, and
// ends the jail if the prepared program's process (child) ends first: a
// jail whose pid 2 is gone (the OOM killer, a kill by hand) must not look
// ready (nsjail/jail.go: Alive), or the run sent to it would fail.
static void await_run_part(pid_t child)
{
	int pidfd = syscall(SYS_pidfd_open, child, 0);
	if (pidfd < 0)
		return; // no pidfd (Linux < 5.3): the go's write reports it
	struct pollfd fds[2] = { { .fd = PLAN_FD, .events = POLLIN }, { .fd = pidfd, .events = POLLIN } };
	while (poll(fds, 2, -1) < 0)
		if (errno != EINTR)
			die("wait for the run");
	if (fds[1].revents) { // its run, if it came too, could not start
		errno = 0;
		die("the prepared program's process ended before its run");
	}
	close(pidfd);
}

static void exec_failed(const char *path, int err) __attribute__((noreturn));
static void exec_failed(const char *path, int err)
{
	errno = err;
	die("exec %s", path);
}

// become_jail_root runs in the jail's PID 1 once its id maps are written:
// it makes it the jail's root (the creator's capabilities in the new user
// namespace stay; files it creates must be owned by a mapped id).
static void become_jail_root(const struct jail *j)
{
	if (!strcmp(j->setgroups, "allow") && setgroups(0, NULL) < 0)
		die("setgroups in the jail");
	if (setresgid(0, 0, 0) < 0)
		die("setresgid 0 in the jail");
	if (setresuid(0, 0, 0) < 0)
		die("setresuid 0 in the jail");
}

// watch_supervisor ties PID 1 to the supervisor, its parent: if the
// supervisor dies, SIGKILL ends PID 1 and with it the whole namespace. Set
// after the credentials changed (which clears it); the supervisor's end of
// the sync pipe, which it keeps until the jail's teardown, still open
// proves it did not die before.
static void watch_supervisor(void)
{
	if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0)
		die("set parent-death signal");
	struct pollfd pfd = { .fd = SYNC_FD, .events = POLLIN };
	if (poll(&pfd, 1, 0) < 0)
		die("poll sync");
	if (pfd.revents & (POLLHUP | POLLERR))
		_exit(EXIT_SANDBOX_ERROR);
	close(SYNC_FD);
}

struct spawn_args {
	struct program *prog;
	int *errpipe;
};

static int program_main(void *arg)
{
	struct spawn_args *a = arg;
	close(a->errpipe[0]);
	start_program(a->prog, a->errpipe[1]);
	return 127;
}

// spawn_program starts the program's process. PID 1 is suspended until
// the program has called execve (CLONE_VFORK) and lends it its memory
// (CLONE_VM) rather than a copy: a fork would copy PID 1's page tables and
// then take a copy-on-write fault, with a TLB flush, for every page either
// side touched before the exec, dear in virtual machines. A rootless
// program is still forked: it must be dumpable to map its own ids, and
// dumpability belongs to the memory, which PID 1 must keep non-dumpable.
static pid_t spawn_program(struct program *prog, int errpipe[2])
{
	if (prog->nested_userns) {
		pid_t child = fork();
		if (child == 0) {
			close(errpipe[0]);
			start_program(prog, errpipe[1]);
		}
		return child;
	}
	static char stack[64 * 1024] __attribute__((aligned(16)));
	struct spawn_args a = { prog, errpipe };
	return clone(program_main, stack + sizeof stack, CLONE_VM | CLONE_VFORK | SIGCHLD, &a);
}

// PID 1 enforces the wall-clock limit itself, as well as the supervisor:
// a supervisor that is stopped (SIGSTOP), starved or swapped out must not
// stretch a run's time. When the program's time is up, SIGALRM interrupts
// PID 1's wait, and PID 1 kills every other process of its namespace.
static volatile sig_atomic_t deadline_passed;

static void on_deadline(int sig)
{
	deadline_passed = 1;
}

// arm_deadline starts the timer for the program's timeout; SIGALRM must
// interrupt wait4, so its handler is installed without SA_RESTART.
void arm_deadline(uint64_t timeout_ns)
{
	if (timeout_ns == 0)
		return;
	struct sigaction sa = { .sa_handler = on_deadline };
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGALRM, &sa, NULL) < 0)
		die("install the deadline's handler");
	struct itimerval it = { .it_value = {
		.tv_sec = timeout_ns / 1000000000ull,
		.tv_usec = (timeout_ns % 1000000000ull) / 1000 + 1,
	} };
	if (setitimer(ITIMER_REAL, &it, NULL) < 0)
		die("set the deadline");
}

// skip_program_pid makes a zygote's template other than pid 2, which is
// each of its runs' programs' pid in their own namespaces: OpenSSL (and
// any library keyed on getpid()) tells a fork by its pid changing, and a
// run with the template's pid would go on with the template's random
// stream. Pids are given in turn, so a child that ends at once takes 2.
static void skip_program_pid(void)
{
	pid_t pid = fork();
	if (pid == 0)
		_exit(0);
	if (pid < 0 || waitpid(pid, NULL, 0) != pid)
		die("take pid 2 for the template's runs");
}

// join_cgroups moves PID 1, its only thread, into the run's cgroup v1
// hierarchies: "0" written to a tasks file names the writer. The kernel
// moves the current thread without the global lock that moving another
// process takes (and that lock's wait for an RCU grace period, 7 to 13 ms
// on a v1 host). The supervisor opened the files: the kernel's check of
// who may move PID 1 is against it.
static void join_cgroups(const int *tasks, int n)
{
	for (int i = 0; i < n; i++) {
		if (write(tasks[i], "0", 1) != 1)
			die("join the run's cgroup (its tasks file)");
		close(tasks[i]);
	}
}

// await_go waits for the supervisor's go (spawner.h: SYNC_FD), which
// comes once the id maps are written, and joins the run's v1 cgroups
// whose tasks files it carries. On v1 the supervisor makes them while the
// spawner clones PID 1, which has run none of the plan and nothing of the
// program's until it is in them; on v2 PID 1 was cloned into its group
// and the go carries none. A go that is not whole ends the jail: PID 1
// must not go on outside a group it was meant to join.
static void await_go(void)
{
	unsigned char go[2];
	int tasks[MAX_TASKS];
	char control[CMSG_SPACE(sizeof tasks)];
	struct iovec iov = { go, sizeof go };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1,
			      .msg_control = control, .msg_controllen = sizeof control };
	ssize_t r;
	while ((r = recvmsg(SYNC_FD, &msg, MSG_CMSG_CLOEXEC)) < 0 && errno == EINTR)
		;
	if (r <= 0)
		_exit(EXIT_SANDBOX_ERROR); // the supervisor gave up on this jail
	int n = 0;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		int k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (int i = 0; i < k && n < MAX_TASKS; i++)
			memcpy(&tasks[n++], CMSG_DATA(c) + i * sizeof(int), sizeof(int));
	}
	if (r != sizeof go || go[0] != GO || go[1] != n || (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC))) {
		errno = 0;
		die("malformed go from the supervisor: %zd bytes, %d cgroup descriptors", r, n);
	}
	join_cgroups(tasks, n);
}

// jail_init is PID 1 of the new namespaces: it waits for the supervisor's
// go, builds the jail, waits for its run, starts the program, reports and
// reaps. It never returns.

void jail_init(const struct jail *j)
{
	static struct program prog;
	ssize_t r;
	await_go();
	// Not dumpable: nothing of PID 1 is for the program to read later
	// (/proc/1/*). Only now, since a non-dumpable process's uid_map is
	// root's, and a rootless spawner had to write it.
	prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
	become_jail_root(j);
	watch_supervisor();
	// The cgroup namespace is rooted at the cgroup PID 1 is in when it is
	// made: the run's, which on v1 it only joined after the clone.
	if ((j->clone_flags & CLONE_NEWCGROUP) && unshare(CLONE_NEWCGROUP) < 0)
		die("unshare the cgroup namespace");
	size_t nearly;
	struct step *early = read_steps(&nearly);
	phase("jail-plan-read");
	prog.cwd = "/";
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		die("make mounts private");
	for (size_t i = 0; i < nearly; i++)
		run_step(early[i].a, early[i].n, &prog);
	int errpipe[2], go[2];
	pid_t child = 0;
	if (pipe2(errpipe, O_CLOEXEC) < 0)
		die("pipe");
	if (prog.prepare) {
		if (prog.keep_root)
			die("plan: a zygote's template cannot be prepared");
		if (pipe2(go, O_CLOEXEC) < 0)
			die("pipe");
		if ((child = prepare_program(&prog, errpipe, go)) < 0)
			die("fork the program's process");
		close(go[0]);
	}
	status(STATUS_READY);
	if (prog.prepare)
		await_run_part(child);
	size_t count;
	struct step *steps = read_steps(&count);
	if (prog.prepare)
		refuse_after_prepare(steps, count);
	else
		close(PLAN_FD); // a prepared program reads its part from it
	phase("plan-read");
	for (size_t i = 0; i < count; i++)
		run_step(steps[i].a, steps[i].n, &prog);
	if (!prog.prepare && !prog.path)
		die("plan: no program");
	phase("exec");

	if (prog.prepare) {
		go_program(go[1]);
		close(PLAN_FD);
	} else {
		if (prog.keep_root)
			skip_program_pid();
		child = spawn_program(&prog, errpipe);
		if (child < 0)
			die("start the program");
		// The vfork'ed program changed its credentials while it shared PID
		// 1's memory, and a change of credentials resets that memory's
		// dumpable flag to fs.suid_dumpable: undo it.
		prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
	}
	close(errpipe[1]);
	int err;
	while ((r = read(errpipe[0], &err, sizeof err)) < 0 && errno == EINTR)
		;
	if (r == sizeof err)
		exec_failed(prog.path ? prog.path : "the program", err);
	close(errpipe[0]);
	status(STATUS_START " %llu", (unsigned long long)now_ns());
	arm_deadline(prog.timeout_ns);
	// Init keeps no end of the program's pipes: EOF on them is the program's.
	close(0);
	close(1);
	close(2);
	reap_program(child);
}

// reap_program is PID 1's last part: it reaps every process of its
// namespace and reports how the program, child, ended; at its deadline
// (arm_deadline) it kills the namespace. It never returns.
void reap_program(pid_t child)
{
	int killed = 0;
	for (;;) {
		int st;
		struct rusage ru;
		pid_t pid = wait4(-1, &st, __WALL, &ru);
		int err = errno;
		if (deadline_passed && !killed) {
			kill(-1, SIGKILL); // every process of the namespace but PID 1
			killed = 1;
		}
		if (pid < 0 && err == EINTR)
			continue;
		errno = err;
		if (pid < 0)
			die("wait for the program");
		if (pid == child) {
			unsigned long long cpu_us =
				(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000ull +
				ru.ru_utime.tv_usec + ru.ru_stime.tv_usec;
			// "wall" when the program's end is PID 1's own kill for the
			// deadline.
			status(STATUS_EXIT " %d %llu %llu %ld%s", st, (unsigned long long)now_ns(),
			       cpu_us, ru.ru_maxrss, killed ? " " STATUS_WALL : "");
			// Returning from PID 1 ends the namespace: the kernel kills
			// whatever the program left behind.
			_exit(0);
		}
	}
}
