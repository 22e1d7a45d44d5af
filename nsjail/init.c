// The sandbox's init: the child half of the jail, run before the Go runtime.
//
// microbox's parent (Go) re-execs /proc/self/exe with _MICROBOX_INIT set in
// the environment. This constructor runs before Go's runtime starts (the
// pattern runc's nsexec uses), so the child never pays for a second Go
// runtime: it becomes the spawner (at the end of this file), which clones,
// on each request, one jail's PID 1 into new user, pid, mount, net, ipc
// and uts namespaces as a child of the supervisor. PID 1 makes its cgroup
// namespace, reads the jail's part of a plan from fd 3 and builds the
// jail; then it reads the run's part, executes it, starts the program and
// reaps. The run's part may come much later: `microbox serve` starts jails
// before their runs are known (nsjail.Start).
//
// The plan is data computed by the Go side (plan.go): a list of steps, each a
// name and byte-string arguments. This file interprets the steps and knows no
// policy of its own, so what the jail does can be read and tested in Go.
//
// Wire format of the plan (all integers little-endian uint32):
//   plan := part(jail) part(run)     part := len step[len bytes]
//   step := nargs arg*               arg := len byte[len]
// The first arg of a step is its name. The jail part holds the steps that
// PID 1 takes before it is ready, whatever the run; the run part, all the
// others. PID 1 starts only when the supervisor writes a byte on fd 5.
//
// Status lines go to the parent on fd 4, one per write(2):
//   "error <message>"                    setup failed; init exits 125
//   "phase <name> <monotonic ns>"        only when tracing
//   "ready"                              PID 1 is in its namespaces, as
//                                        their root, and reads the run's part
//   "start <monotonic ns>"               the program's execve succeeded
//   "exit <wait status> <monotonic ns> <cpu µs> <max rss KiB> [wall]"
//                                        the program (pid 2) ended; "wall"
//                                        when PID 1 killed it at the
//                                        program's wall-clock limit
//
// Why an init at all: the program must not be PID 1 of its namespace, where
// the kernel drops signals that have no handler (a SIGSEGV it raises on itself
// would be ignored) and where its death would be the end of every process.
// This init is PID 1 instead: it reaps orphans, reports the program's status,
// and exits when the program does, which makes the kernel kill whatever the
// program left behind. The supervisor kills the whole tree by killing init.

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

// PID 1's descriptors and the spawner's, the variable that makes a start
// of this binary the spawner, and the exit status of a failed set-up:
// the Go side has the same values, and initc_test.go holds them equal.
#define PLAN_FD 3
#define STATUS_FD 4
#define SYNC_FD 5
#define SPAWNER_FD 3 // the spawner's socket (it has no plan)
#define INIT_ENV "_MICROBOX_INIT"
#define EXIT_SANDBOX_ERROR 125
#define MAX_ARGS 64
#define MAX_LIST 4096

// Flags of the "bind" step; plan.go has the same values (initc_test.go).
#define BIND_READONLY 1
#define BIND_OPTIONAL 2 // skip when the source does not exist

struct arg {
	const char *p; // NUL-terminated copy of the bytes
	uint32_t len;
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
	struct sock_fprog seccomp;
	int has_seccomp;
	struct { int res; struct rlimit lim; } rlimits[16];
	int nrlimits;
	uint64_t timeout_ns; // the wall-clock limit from execve; 0: none
	int keep_root;       // a zygote's template: trusted, it keeps the jail's root
};

static int trace;

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void status(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void status(const char *fmt, ...)
{
	char buf[1024];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(buf, sizeof buf - 1, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if (n > (int)sizeof buf - 2)
		n = sizeof buf - 2;
	buf[n++] = '\n';
	// One write per line: the parent reads whole lines off a pipe.
	while (write(STATUS_FD, buf, n) < 0 && errno == EINTR)
		;
}

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...)
{
	char msg[900];
	int saved = errno;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	if (saved)
		status("error %s: %s", msg, strerror(saved));
	else
		status("error %s", msg);
	_exit(EXIT_SANDBOX_ERROR);
}

static void phase(const char *name)
{
	if (trace)
		status("phase %s %llu", name, (unsigned long long)now_ns());
}

// read_exact reads n bytes of fd 3 into buf.
static void read_exact(char *buf, size_t n)
{
	while (n > 0) {
		ssize_t r = read(PLAN_FD, buf, n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			die("read plan");
		if (r == 0)
			die("plan: truncated");
		buf += r;
		n -= r;
	}
}

// read_part reads one part of the plan: its length, then that many bytes
// (not to EOF, which would cost a second wake-up).
static char *read_part(size_t *len)
{
	uint32_t n;
	read_exact((char *)&n, sizeof n);
	if (n > 1u << 31)
		die("plan: part of %u bytes", n);
	char *buf = malloc(n ? n : 1);
	if (!buf)
		die("read plan: out of memory");
	read_exact(buf, n);
	*len = n;
	return buf;
}

static uint32_t get_u32(const char **p, const char *end)
{
	if (end - *p < 4)
		die("plan: truncated");
	uint32_t v;
	memcpy(&v, *p, 4);
	*p += 4;
	return v;
}

static unsigned long parse_ul(const struct arg *a)
{
	char *end;
	errno = 0;
	unsigned long v = strtoul(a->p, &end, 10);
	if (errno || *end)
		die("plan: bad number %s", a->p);
	return v;
}

// remount_ro makes the mount at path read-only, keeping the flags the kernel
// locks on mounts inherited from a more privileged namespace (nosuid, nodev,
// noexec, atime flags): a remount that tried to clear them would get EPERM.
static void remount_ro(const char *path)
{
	struct statvfs sv;
	if (statvfs(path, &sv) < 0)
		die("statvfs %s", path);
	unsigned long flags = MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV;
	if (sv.f_flag & ST_NOEXEC)
		flags |= MS_NOEXEC;
	if (sv.f_flag & ST_NOATIME)
		flags |= MS_NOATIME;
	if (sv.f_flag & ST_NODIRATIME)
		flags |= MS_NODIRATIME;
	if (sv.f_flag & ST_RELATIME)
		flags |= MS_RELATIME;
	if (mount(NULL, path, NULL, flags, NULL) < 0)
		die("remount %s read-only", path);
}

// bind_ro binds src on dst read-only, nosuid and nodev, submounts included:
// a bind of /usr carries whatever the host mounted below it (/usr/local on
// its own disk, say), and a plain remount would leave those writable.
// mount_setattr (Linux 5.12) applies the flags to the whole tree at once;
// without it the bind is not recursive, so no submount comes along.
static void bind_ro(const char *src, const char *dst)
{
	struct {
		uint64_t attr_set, attr_clr, propagation, userns_fd;
	} attr = { 0x1 | 0x2 | 0x4, 0, 0, 0 }; // MOUNT_ATTR_RDONLY|NOSUID|NODEV
	if (mount(src, dst, NULL, MS_BIND | MS_REC, NULL) < 0)
		die("bind %s on %s", src, dst);
	if (syscall(SYS_mount_setattr, AT_FDCWD, dst, 0x8000 /* AT_RECURSIVE */,
		    &attr, sizeof attr) == 0)
		return;
	if (errno != ENOSYS)
		die("make %s read-only", dst);
	if (umount2(dst, MNT_DETACH) < 0)
		die("umount %s", dst);
	if (mount(src, dst, NULL, MS_BIND, NULL) < 0)
		die("bind %s on %s", src, dst);
	remount_ro(dst);
}

// mask hides path: a file behind a read-only bind of empty (an empty
// file), a directory behind an empty read-only tmpfs. A path the kernel
// does not offer is left alone.
static void mask(const char *empty, const char *path)
{
	struct stat st;
	if (lstat(path, &st) < 0) {
		if (errno == ENOENT)
			return;
		die("stat %s", path);
	}
	if (!S_ISDIR(st.st_mode)) {
		bind_ro(empty, path);
		return;
	}
	if (mount("tmpfs", path, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=4k,mode=0555") < 0)
		die("mask %s", path);
}

static void write_file(const char *path, unsigned long mode, const struct arg *data)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode);
	if (fd < 0)
		die("create %s", path);
	const char *p = data->p;
	size_t left = data->len;
	while (left > 0) {
		ssize_t w = write(fd, p, left);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			die("write %s", path);
		p += w;
		left -= w;
	}
	if (fchmod(fd, mode) < 0) // the umask must not narrow what the plan asked
		die("chmod %s", path);
	close(fd);
}

// loopback_up brings lo up in the new network namespace; the kernel then
// gives it 127.0.0.1 and ::1 by itself.
static void loopback_up(void)
{
	int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		die("socket for loopback");
	struct ifreq ifr;
	memset(&ifr, 0, sizeof ifr);
	strcpy(ifr.ifr_name, "lo");
	if (ioctl(s, SIOCGIFFLAGS, &ifr) < 0)
		die("get flags of lo");
	ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
	if (ioctl(s, SIOCSIFFLAGS, &ifr) < 0)
		die("bring lo up");
	close(s);
}

static void collect(struct arg *a, int n, struct program *prog);

// run_step executes one mount-namespace or exec-setting step.
static void run_step(struct arg *a, int n, struct program *prog)
{
	const char *op = a[0].p;
#define NEED(k) do { if (n != (k) + 1) die("plan: %s takes %d args", op, (k)); } while (0)
	if (!strcmp(op, "mount")) { // src dst fstype flags data
		NEED(5);
		if (mount(a[1].len ? a[1].p : NULL, a[2].p, a[3].len ? a[3].p : NULL,
			  parse_ul(&a[4]), a[5].len ? a[5].p : NULL) < 0)
			die("mount %s on %s", a[3].len ? a[3].p : a[1].p, a[2].p);
	} else if (!strcmp(op, "bind")) { // src dst flags (BIND_*)
		NEED(3);
		unsigned long flags = parse_ul(&a[3]);
		if ((flags & BIND_OPTIONAL) && access(a[1].p, F_OK) < 0 && errno == ENOENT)
			return;
		if (flags & BIND_READONLY) {
			bind_ro(a[1].p, a[2].p);
		} else if (mount(a[1].p, a[2].p, NULL, MS_BIND | MS_REC, NULL) < 0) {
			die("bind %s on %s", a[1].p, a[2].p);
		}
	} else if (!strcmp(op, "mask")) { // empty path: hide path, if it exists
		NEED(2);
		mask(a[1].p, a[2].p);
	} else if (!strcmp(op, "remount_ro")) { // path
		NEED(1);
		remount_ro(a[1].p);
	} else if (!strcmp(op, "mkdir")) { // path mode
		NEED(2);
		if (mkdir(a[1].p, parse_ul(&a[2])) == 0) {
			if (chmod(a[1].p, parse_ul(&a[2])) < 0) // not narrowed by umask
				die("chmod %s", a[1].p);
		} else if (errno != EEXIST) {
			die("mkdir %s", a[1].p);
		}
	} else if (!strcmp(op, "file")) { // path mode data
		NEED(3);
		write_file(a[1].p, parse_ul(&a[2]), &a[3]);
	} else if (!strcmp(op, "chown")) { // path uid gid
		NEED(3);
		if (lchown(a[1].p, parse_ul(&a[2]), parse_ul(&a[3])) < 0)
			die("chown %s", a[1].p);
	} else if (!strcmp(op, "symlink")) { // target path
		NEED(2);
		if (symlink(a[1].p, a[2].p) < 0)
			die("symlink %s -> %s", a[2].p, a[1].p);
	} else if (!strcmp(op, "pivot")) { // newroot putold
		NEED(2);
		if (syscall(SYS_pivot_root, a[1].p, a[2].p) < 0)
			die("pivot_root to %s", a[1].p);
	} else if (!strcmp(op, "umount")) { // path (lazily detached)
		NEED(1);
		if (umount2(a[1].p, MNT_DETACH) < 0)
			die("umount %s", a[1].p);
	} else if (!strcmp(op, "move")) { // src dst: a mount, moved
		NEED(2);
		if (mount(a[1].p, a[2].p, NULL, MS_MOVE, NULL) < 0)
			die("move the mount %s to %s", a[1].p, a[2].p);
	} else if (!strcmp(op, "rmdir")) { // path
		NEED(1);
		if (rmdir(a[1].p) < 0)
			die("rmdir %s", a[1].p);
	} else if (!strcmp(op, "chdir")) {
		NEED(1);
		if (chdir(a[1].p) < 0)
			die("chdir %s", a[1].p);
	} else if (!strcmp(op, "hostname")) {
		NEED(1);
		if (sethostname(a[1].p, a[1].len) < 0)
			die("sethostname");
	} else if (!strcmp(op, "loopback_up")) {
		NEED(0);
		loopback_up();
	} else if (!strcmp(op, "phase")) {
		NEED(1);
		phase(a[1].p);
	} else if (!strcmp(op, "stdin")) { // path, opened read-only as fd 0
		NEED(1);
		int fd = open(a[1].p, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			die("open %s", a[1].p);
		if (dup2(fd, 0) < 0)
			die("dup2 %s", a[1].p);
		close(fd);
	} else {
		collect(a, n, prog);
	}
#undef NEED
}

// collect records the settings the program is started with.
static void collect(struct arg *a, int n, struct program *prog)
{
	const char *op = a[0].p;
	if (!strcmp(op, "path") && n == 2) {
		prog->path = a[1].p;
	} else if (!strcmp(op, "cwd") && n == 2) {
		prog->cwd = a[1].p;
	} else if (!strcmp(op, "arg") && n == 2) {
		if (prog->argc == MAX_LIST)
			die("plan: too many arguments");
		prog->argv[prog->argc++] = (char *)a[1].p;
	} else if (!strcmp(op, "env") && n == 2) {
		if (prog->envc == MAX_LIST)
			die("plan: too many environment variables");
		prog->envp[prog->envc++] = (char *)a[1].p;
	} else if (!strcmp(op, "user") && n == 4) { // uid gid setgroups
		prog->uid = parse_ul(&a[1]);
		prog->gid = parse_ul(&a[2]);
		prog->setgroups = parse_ul(&a[3]);
	} else if (!strcmp(op, "nested_userns") && n == 1) {
		prog->nested_userns = 1;
	} else if (!strcmp(op, "keep_root") && n == 1) {
		prog->keep_root = 1;
	} else if (!strcmp(op, "seccomp") && n == 2) { // raw BPF program
		if (a[1].len == 0 || a[1].len % sizeof(struct sock_filter))
			die("plan: seccomp program of %u bytes", a[1].len);
		prog->seccomp.len = a[1].len / sizeof(struct sock_filter);
		prog->seccomp.filter = (struct sock_filter *)a[1].p;
		prog->has_seccomp = 1;
	} else if (!strcmp(op, "timeout") && n == 2) { // ns from the program's start
		prog->timeout_ns = strtoull(a[1].p, NULL, 10);
	} else if (!strcmp(op, "rlimit") && n == 4) { // resource soft hard
		if (prog->nrlimits == 16)
			die("plan: too many rlimits");
		prog->rlimits[prog->nrlimits].res = parse_ul(&a[1]);
		prog->rlimits[prog->nrlimits].lim.rlim_cur = parse_ul(&a[2]);
		prog->rlimits[prog->nrlimits].lim.rlim_max = parse_ul(&a[3]);
		prog->nrlimits++;
	} else {
		die("plan: unknown step %s with %d args", op, n - 1);
	}
}

// write_text writes data to an existing file (a /proc knob) in one
// write; on failure it returns -1 with errno set.
static int write_text(const char *path, const char *data)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t w = write(fd, data, strlen(data));
	int saved = errno;
	close(fd);
	errno = saved;
	return w < 0 ? -1 : 0;
}

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

// close_fds_from closes every descriptor from first up.
static void close_fds_from(int first)
{
	if (syscall(SYS_close_range, first, ~0U, 0) < 0)
		for (int fd = first; fd < 65536; fd++)
			close(fd);
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

// start_program runs in the program's process (pid 2), before its execve,
// and never returns.
static void start_program(struct program *prog, int errpipe)
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
	for (int i = 0; i < prog->nrlimits; i++)
		set_rlimit(prog->rlimits[i].res, prog->rlimits[i].lim);
	if (chdir(prog->cwd) < 0)
		die("chdir %s", prog->cwd);
	if (prog->has_seccomp &&
	    syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog->seccomp) < 0)
		die("load seccomp filter");
	execve(prog->path, prog->argv, prog->envp);
	int err = errno;
	(void)!write(errpipe, &err, sizeof err);
	_exit(127);
}

static void exec_failed(const char *path, int err) __attribute__((noreturn));
static void exec_failed(const char *path, int err)
{
	errno = err;
	die("exec %s", path);
}

// A step of the plan, parsed.
struct step {
	uint32_t n;
	struct arg *a;
};

// parse_plan splits a part of the plan into steps; a "trace" step turns
// tracing on and is not returned.
static struct step *parse_plan(const char *p, const char *end, size_t *count)
{
	size_t cap = 256, n = 0;
	struct step *steps = malloc(cap * sizeof *steps);
	if (!steps)
		die("plan: out of memory");
	while (p < end) {
		uint32_t nargs = get_u32(&p, end);
		if (nargs == 0 || nargs > MAX_ARGS)
			die("plan: step with %u args", nargs);
		struct arg *a = malloc(nargs * sizeof *a);
		if (!a)
			die("plan: out of memory");
		for (uint32_t i = 0; i < nargs; i++) {
			uint32_t l = get_u32(&p, end);
			if ((size_t)(end - p) < l)
				die("plan: truncated");
			// Copy so each arg is NUL-terminated and BPF is aligned.
			char *c = malloc(l + 8);
			if (!c)
				die("plan: out of memory");
			memcpy(c, p, l);
			c[l] = 0;
			a[i].p = c;
			a[i].len = l;
			p += l;
		}
		if (!strcmp(a[0].p, "trace") && nargs == 1) {
			trace = 1;
			continue;
		}
		if (n == cap) {
			cap *= 2;
			steps = realloc(steps, cap * sizeof *steps);
			if (!steps)
				die("plan: out of memory");
		}
		steps[n].n = nargs;
		steps[n].a = a;
		n++;
	}
	*count = n;
	return steps;
}

// read_steps reads and parses the next part of the plan.
static struct step *read_steps(size_t *count)
{
	size_t len;
	char *plan = read_part(&len);
	return parse_plan(plan, plan + len, count);
}

// How the spawner creates a jail: its namespaces, id maps, and the host
// uid that creates (owns) its user namespace ("": the spawner's own).
struct jail {
	unsigned long clone_flags;
	const char *uid_map, *gid_map, *setgroups, *owner;
};

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
static void arm_deadline(uint64_t timeout_ns)
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

// jail_init is PID 1 of the new namespaces: it waits for the supervisor's
// go, builds the jail, waits for its run, starts the program, reports and
// reaps. It never returns.
static void reap_program(pid_t child) __attribute__((noreturn));

static void jail_init(const struct jail *j)
{
	static struct program prog;
	char go;
	ssize_t r;
	// The supervisor says go once the id maps are written and, on cgroup
	// v1, once it has moved PID 1 into the run's cgroup.
	while ((r = read(SYNC_FD, &go, 1)) < 0 && errno == EINTR)
		;
	if (r != 1)
		_exit(EXIT_SANDBOX_ERROR); // the supervisor gave up on this jail
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
	status("ready");
	size_t count;
	struct step *steps = read_steps(&count);
	close(PLAN_FD);
	phase("plan-read");
	for (size_t i = 0; i < count; i++)
		run_step(steps[i].a, steps[i].n, &prog);
	if (!prog.path)
		die("plan: no program");
	phase("exec");

	int errpipe[2];
	if (pipe2(errpipe, O_CLOEXEC) < 0)
		die("pipe");
	if (prog.keep_root)
		skip_program_pid();
	pid_t child = spawn_program(&prog, errpipe);
	if (child < 0)
		die("start the program");
	// The vfork'ed program changed its credentials while it shared PID 1's
	// memory, and a change of credentials resets that memory's dumpable
	// flag to fs.suid_dumpable: undo it.
	prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
	close(errpipe[1]);
	int err;
	while ((r = read(errpipe[0], &err, sizeof err)) < 0 && errno == EINTR)
		;
	if (r == sizeof err)
		exec_failed(prog.path, err);
	close(errpipe[0]);
	status("start %llu", (unsigned long long)now_ns());
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
static void reap_program(pid_t child)
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
			status("exit %d %llu %llu %ld%s", st, (unsigned long long)now_ns(),
			       cpu_us, ru.ru_maxrss, killed ? " wall" : "");
			// Returning from PID 1 ends the namespace: the kernel kills
			// whatever the program left behind.
			_exit(0);
		}
	}
}

// The spawner is what the supervisor started: a process of this binary
// that never starts Go, in the host's namespaces, which clones one jail's
// PID 1 per request. Cloning from this small process costs a fraction of
// what an exec of the binary per jail did (BENCHMARKS.md), and CLONE_PARENT
// makes each PID 1 the supervisor's own child: the supervisor waits for it
// and kills it directly, and the spawner keeps no state between requests.
//
// Request, one SOCK_SEQPACKET message on fd 3 (integers little-endian):
//   u64 clone flags, then uid_map, gid_map, setgroups, owner and extras,
//   each ending in NUL; owner is the host uid the jail's user namespace is
//   created as ("": the spawner's), extras names the optional descriptors
//   that follow the six, in order: 'c' the run's cgroup v2 directory
//   (CLONE_INTO_CGROUP), 'l' a lock PID 1 holds for its life (LOCK_FD);
//   SCM_RIGHTS: PID 1's stdin, stdout, stderr, plan, status and sync, then
//   the extras.
// Reply: i32 pid of PID 1 (0: none), then an error message (empty: none).
// The spawner ends at EOF on its socket.

#define SPAWN_FDS 6 // PID 1's descriptors 0 to 5 (initc_test.go)
#define LOCK_FD 6   // PID 1's first lock, if the request has any
#define MAX_LOCKS 33 // a zygote's template holds one uid slot per child
#define MAX_EXTRA_FDS (1 + MAX_LOCKS)
#define MAX_REQUEST 4096

struct request {
	struct jail jail;
	int fds[SPAWN_FDS + MAX_EXTRA_FDS];
	int nfds;
	int cgroup_fd; // -1: clone into the spawner's cgroup
	int locks[MAX_LOCKS];
	int nlocks;
};

// parse_request checks a request's shape; its strings point into buf.
static const char *parse_request(char *buf, size_t n, struct request *req)
{
	if (n < 8 || buf[n - 1] != 0)
		return "malformed request";
	uint64_t flags;
	memcpy(&flags, buf, 8);
	req->jail.clone_flags = flags;
	const char *s[5], *p = buf + 8, *end = buf + n;
	for (int i = 0; i < 5; i++) {
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
		if (extras[i] == 'c' && req->cgroup_fd < 0)
			req->cgroup_fd = fd;
		else if (extras[i] == 'l' && req->nlocks < MAX_LOCKS)
			req->locks[req->nlocks++] = fd;
		else
			return "malformed request";
	}
	return NULL;
}

// become_pid1 runs in the clone: it puts the request's descriptors at 0 to
// 5 (and its locks from LOCK_FD on), closes every other (the spawner's
// socket among them) and is PID 1.
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

static void spawner_main(void) __attribute__((noreturn));
static void spawner_main(void)
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
		char err[1024] = "";
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

// A zygote's run (nsjail/zygote.py, zygote.go) has this binary as its
// PID 1, exec'd by the template's clone in the run's new namespaces, once
// the supervisor has moved it into the run's cgroup and it has forked the
// program (pid 2), which waits for its go. PID 1 makes the run's cgroup
// namespace, carries out the plan (the run's scratch areas, /proc,
// hostname, loopback), lets the program go on, and then is init.c's PID
// 1: it reports the program's start and end, holds its deadline and reaps.
//
// Descriptors: PLAN_FD and STATUS_FD, one socket to the supervisor;
// ZYGOTE_GO_FD, the pipe on which the program waits for its go;
// ZYGOTE_START_FD, the pipe on which the program says it starts the
// caller's code, with its time limit and its CLOCK_MONOTONIC then (ns),
// or "!" and why it could not.
#define ZYGOTE_GO_FD 5
#define ZYGOTE_START_FD 6
#define ZYGOTE_PROGRAM 2 // the program's pid in the run's namespace
#define ZYGOTE_INIT "zinit" // INIT_ENV's value for it

static void zygote_init(void) __attribute__((noreturn));
static void zygote_init(void)
{
	static struct program prog;
	prctl(PR_SET_DUMPABLE, 0, 0, 0, 0); // nothing of PID 1 is the program's to read
	if (unshare(CLONE_NEWCGROUP) < 0) // rooted at the run's cgroup, which PID 1 was born in
		die("unshare the cgroup namespace");
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		die("make mounts private");
	size_t count;
	struct step *steps = read_steps(&count);
	for (size_t i = 0; i < count; i++)
		run_step(steps[i].a, steps[i].n, &prog);
	if (write(ZYGOTE_GO_FD, "g", 1) != 1)
		die("let the program go on");
	close(ZYGOTE_GO_FD);
	char said[1024];
	ssize_t n;
	while ((n = read(ZYGOTE_START_FD, said, sizeof said - 1)) < 0 && errno == EINTR)
		;
	close(ZYGOTE_START_FD);
	said[n > 0 ? n : 0] = 0;
	if (n <= 0 || said[0] == '!') {
		status("error zygote: the run's program: %s", n > 0 ? said + 1 : "it ended before its run began");
		_exit(EXIT_SANDBOX_ERROR);
	}
	// The program's own moment of starting, not this read's, which may
	// come later: the run's wall time must not miss what it slept first.
	char *end;
	uint64_t timeout = strtoull(said, &end, 10), start = strtoull(end, NULL, 10), now = now_ns();
	if (start == 0 || start > now)
		start = now;
	status("start %llu", (unsigned long long)start);
	arm_deadline(now - start < timeout ? timeout - (now - start) : 1);
	reap_program(ZYGOTE_PROGRAM);
}

__attribute__((constructor)) static void microbox_init(void)
{
	const char *mode = getenv(INIT_ENV);
	if (!mode)
		return; // an ordinary microbox command: let Go start
	if (!strcmp(mode, ZYGOTE_INIT))
		zygote_init();
	spawner_main();
}
