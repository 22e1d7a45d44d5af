// The spawner (spawner_main) is what the supervisor started: a process of
// this binary that never starts Go, in the host's namespaces, which clones
// one jail's PID 1 per request (spawner.h) and then is done with it: the
// clone goes on in pid1.c. Cloning from this small process costs a
// fraction of what an exec of the binary per jail did (BENCHMARKS.md), and
// CLONE_PARENT makes each PID 1 the supervisor's own child: the supervisor
// waits for it and kills it directly, and the spawner keeps no state
// between requests. It ends at EOF on its socket.
//
// A one-shot `microbox exec` forks its spawner before Go starts instead
// (microbox_prestart_spawner, the pre-start, at the end of this file).

#include "init.h"

#define MAX_EXTRA_FDS (1 + MAX_LOCKS)

struct request {
	struct jail jail;
	int fds[SPAWN_FDS + MAX_EXTRA_FDS];
	int nfds;
	int cgroup_fd; // -1: clone into the spawner's cgroup
	int locks[MAX_LOCKS];
	int nlocks;
};

// close_fds_from closes every descriptor from first up.
static void close_fds_from(int first)
{
	if (syscall(SYS_close_range, first, ~0U, 0) < 0)
		for (int fd = first; fd < 65536; fd++)
			close(fd);
}

// parse_request checks a request's shape; its strings point into buf.
static const char *parse_request(char *buf, size_t n, struct request *req)
{
	if (n < 8 || buf[n - 1] != 0)
		return "malformed request";
	uint64_t flags;
	memcpy(&flags, buf, 8);
	req->jail.clone_flags = flags;
	const char *s[REQUEST_STRINGS], *p = buf + 8, *end = buf + n;
	for (int i = 0; i < REQUEST_STRINGS; i++) {
		if (p >= end)
			return "malformed request";
		s[i] = p;
		p += strlen(p) + 1;
	}
	if (p != end)
		return "malformed request";
	req->jail.uid_map = s[0];
	req->jail.gid_map = s[1];
	req->jail.setgroups = s[2];
	req->jail.owner = s[3];
	const char *extras = s[4];
	if (req->nfds != SPAWN_FDS + (int)strlen(extras))
		return "request with the wrong number of descriptors";
	req->cgroup_fd = -1;
	req->nlocks = 0;
	for (int i = 0; extras[i]; i++) {
		int fd = req->fds[SPAWN_FDS + i];
		if (extras[i] == EXTRA_CGROUP && req->cgroup_fd < 0)
			req->cgroup_fd = fd;
		else if (extras[i] == EXTRA_LOCK && req->nlocks < MAX_LOCKS)
			req->locks[req->nlocks++] = fd;
		else
			return "malformed request";
	}
	return NULL;
}

// become_pid1 runs in the clone: it puts the request's descriptors at 0
// to 5 (and its locks from LOCK_FD on), closes every other (the
// spawner's socket among them) and is PID 1, which joins the run's v1
// cgroups at its go (pid1.c: await_go) before anything else.
static void become_pid1(struct request *req)
{
	int high[SPAWN_FDS + MAX_LOCKS];
	int n = SPAWN_FDS + req->nlocks;
	// Each first copied to n or above, where no target is (a fixed base
	// could exceed a low RLIMIT_NOFILE, which F_DUPFD refuses).
	for (int i = 0; i < n; i++) {
		high[i] = fcntl(i < SPAWN_FDS ? req->fds[i] : req->locks[i - SPAWN_FDS], F_DUPFD, n);
		if (high[i] < 0)
			_exit(EXIT_SANDBOX_ERROR);
	}
	for (int i = 0; i < n; i++)
		if (dup2(high[i], i) < 0)
			_exit(EXIT_SANDBOX_ERROR);
	close_fds_from(n);
	jail_init(&req->jail);
}

static int write_pid_file(pid_t pid, const char *file, const char *data)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/%d/%s", pid, file);
	return write_text(path, data);
}

// spawn_jail clones PID 1 and writes its id maps from outside (only a
// process in the parent user namespace may map more than its own id). It
// returns PID 1's pid (0 if none) and fills err when the jail cannot run.
static pid_t spawn_jail(struct request *req, char *err, size_t errlen)
{
	struct {
		uint64_t flags, pidfd, child_tid, parent_tid, exit_signal, stack,
			stack_size, tls, set_tid, set_tid_size, cgroup;
	} args;
	memset(&args, 0, sizeof args);
	// The cgroup namespace is PID 1's to make (see jail_init). With
	// CLONE_PARENT the exit signal is the spawner's own, SIGCHLD.
	args.flags = (req->jail.clone_flags & ~(uint64_t)CLONE_NEWCGROUP) | CLONE_PARENT;
	if (req->cgroup_fd >= 0) {
		args.flags |= 0x200000000ULL; // CLONE_INTO_CGROUP
		args.cgroup = req->cgroup_fd;
	}
	// The jail's user namespace is created by its own unprivileged host
	// uid, not by root: the kernel charges what the jail queues and holds
	// per user (pending signals, message queues, locked memory) to the
	// namespace's creator as well, and root's count is the host's. The
	// spawner keeps its capabilities meanwhile (SECBIT_NO_SETUID_FIXUP):
	// the clone into the run's cgroup needs them.
	uid_t owner = 0;
	int as_owner = *req->jail.owner != 0;
	if (as_owner) {
		char *end;
		errno = 0;
		owner = strtoul(req->jail.owner, &end, 10);
		if (errno || *end || setresuid(-1, owner, -1) < 0) {
			snprintf(err, errlen, "create the jail as uid %s: %s", req->jail.owner, strerror(errno ? errno : EINVAL));
			return 0;
		}
	}
	pid_t pid = syscall(SYS_clone3, &args, sizeof args);
	if (pid == 0)
		become_pid1(req); // never returns
	if (pid < 0) {
		int clone_err = errno;
		if (as_owner && setresuid(-1, 0, -1) < 0)
			_exit(EXIT_SANDBOX_ERROR); // a spawner that cannot be root again must not serve on
		snprintf(err, errlen, "clone the jail's namespaces: %s (if user namespaces are disabled: "
			 "sysctl user.max_user_namespaces, kernel.unprivileged_userns_clone, "
			 "kernel.apparmor_restrict_unprivileged_userns; or run as root)", strerror(clone_err));
		return 0;
	}
	const char *files[][2] = {
		{ "uid_map", req->jail.uid_map },
		{ "setgroups", req->jail.setgroups },
		{ "gid_map", req->jail.gid_map },
		// Under memory pressure the OOM killer must pick the jail, whose
		// processes all inherit this from PID 1, before anything on the
		// host; raising a score needs no privilege. (PID 1 itself, a few
		// hundred KiB, is the last the killer picks within the jail; if it
		// is, the run ends all the same, with the memory verdict.)
		{ "oom_score_adj", "1000" },
	};
	// The maps are written while the spawner is still the namespace's
	// owner: the kernel lets a writer map a range only if it holds
	// CAP_SYS_ADMIN over the new namespace, which its owner does without
	// holding CAP_SYS_ADMIN itself (in a container that grants none; the
	// range itself takes only CAP_SETUID and CAP_SETGID, kept across the
	// change of uid). Their files belong to host root (PID 1 is not
	// dumpable): the file system uid stays root's to open them.
	if (as_owner) {
		setfsuid(0);
		if (setfsuid((uid_t)-1) != 0) {
			snprintf(err, errlen, "spawner: cannot open the jail's id maps as root (setfsuid)");
			kill(pid, SIGKILL); // the supervisor reaps it
		}
	}
	for (size_t i = 0; !*err && i < sizeof files / sizeof files[0]; i++) {
		if (write_pid_file(pid, files[i][0], files[i][1]) < 0) {
			snprintf(err, errlen, "write /proc/%d/%s: %s", pid, files[i][0], strerror(errno));
			kill(pid, SIGKILL); // the supervisor reaps it
			break;
		}
	}
	if (as_owner && setresuid(-1, 0, -1) < 0)
		_exit(EXIT_SANDBOX_ERROR); // a spawner that cannot be root again must not serve on
	return pid;
}

void spawner_main(void)
{
	static char buf[MAX_REQUEST];
	char control[CMSG_SPACE(sizeof(int) * (SPAWN_FDS + MAX_EXTRA_FDS + 1))];
	// Jails start from a clean signal state whatever microbox inherited
	// from its caller: none blocked, none ignored (both would survive
	// the program's execve, and an ignored SIGCHLD would make PID 1's
	// wait lose the program's status).
	sigset_t none;
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	struct sigaction dfl = { .sa_handler = SIG_DFL };
	for (int sig = 1; sig < NSIG; sig++)
		sigaction(sig, &dfl, NULL); // fails, harmlessly, for KILL and STOP
	// As root, jails are created by uids of their own (spawn_jail): keep
	// the capabilities while the effective uid is one of them. A jail's
	// PID 1 gets the default securebits back with its user namespace.
	if (geteuid() == 0 && prctl(PR_SET_SECUREBITS, SECBIT_NO_SETUID_FIXUP, 0, 0, 0) < 0)
		_exit(EXIT_SANDBOX_ERROR);
	for (;;) {
		struct iovec iov = { buf, sizeof buf };
		struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1,
				      .msg_control = control, .msg_controllen = sizeof control };
		ssize_t n = recvmsg(SPAWNER_FD, &msg, MSG_CMSG_CLOEXEC);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			_exit(0); // the supervisor closed its end, or is gone
		struct request req = { .nfds = 0 };
		int extra = 0; // descriptors beyond what a request may carry
		for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
			if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
				continue;
			int k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
			int *fds = (int *)CMSG_DATA(c);
			for (int i = 0; i < k; i++) {
				if (req.nfds < SPAWN_FDS + MAX_EXTRA_FDS)
					req.fds[req.nfds++] = fds[i];
				else {
					close(fds[i]);
					extra = 1;
				}
			}
		}
		char err[REPLY_ERROR_MAX] = "";
		const char *bad = extra || (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC))
			? "request too large" : parse_request(buf, n, &req);
		int32_t pid = 0;
		if (bad)
			snprintf(err, sizeof err, "spawner: %s", bad);
		else
			pid = spawn_jail(&req, err, sizeof err);
		for (int i = 0; i < req.nfds; i++)
			close(req.fds[i]);
		char reply[4 + sizeof err];
		memcpy(reply, &pid, 4);
		size_t len = strlen(err);
		memcpy(reply + 4, err, len);
		while (send(SPAWNER_FD, reply, 4 + len, MSG_NOSIGNAL) < 0)
			if (errno != EINTR)
				_exit(0);
	}
}

// The spawner a one-shot `microbox exec` forked before Go started
// (microbox_prestart_spawner), for nsjail.NewSpawner to adopt: our end of
// its socket and its pid; -1 and 0 when there is none.
int microbox_prestarted_sock = -1;
int microbox_prestarted_pid;

// microbox_prestart_spawner forks the spawner a one-shot exec will ask for
// its jail, from the client's constructor (cmd/microbox/client.c), before
// the Go runtime starts: the spawner is then ready by the time Go is, and
// costs a fork of a process that is still small, not an exec of this
// binary. On any failure it leaves none: NewSpawner starts one as usual.
// argv is microbox's, for the spawner to wipe its copy of.
void microbox_prestart_spawner(char **argv)
{
	for (int fd = 0; fd < 3; fd++)
		if (fcntl(fd, F_GETFD) < 0)
			return; // the socket would land on it, where Go sees stdio
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
		return;
	pid_t parent = getpid();
	pid_t pid = fork();
	if (pid < 0) {
		close(sv[0]);
		close(sv[1]);
		return;
	}
	if (pid == 0) {
		// What exec.Cmd gives the spawner NewSpawner starts: death with
		// microbox (whose main thread, the one forking here, lives as
		// long as it does), a process group of its own, its socket at
		// SPAWNER_FD, /dev/null at 0 to 2 and nothing else open. And none
		// of microbox's environment or arguments, which every PID 1 would
		// otherwise carry: in its memory (a caller's API key, say) and, for
		// the arguments, in /proc/1/cmdline, which the program may read
		// (host paths, --env values).
		for (char **e = environ; *e; e++)
			explicit_bzero(*e, strlen(*e));
		for (char **a = argv; *a; a++)
			explicit_bzero(*a, strlen(*a));
		if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0 || getppid() != parent)
			_exit(0);
		setpgid(0, 0);
		if (dup2(sv[1], SPAWNER_FD) < 0)
			_exit(0);
		int null = open("/dev/null", O_RDWR);
		for (int fd = 0; fd < 3; fd++)
			if (null < 0 || dup2(null, fd) < 0)
				_exit(0);
		close_fds_from(SPAWNER_FD + 1);
		spawner_main();
	}
	close(sv[1]);
	microbox_prestarted_sock = sv[0];
	microbox_prestarted_pid = pid;
}

// INIT_ENV for exec's client (cmd/microbox/client.c), which leaves a
// spawner's start alone.
const char microbox_init_env[] = INIT_ENV;
