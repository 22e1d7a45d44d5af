// The plan's interpreter: reads a part of the plan (plan.h) from PLAN_FD
// and carries out its steps, the mounts that make the jail's file system
// and the settings the program starts with (struct program), in order.

#include "init.h"

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

// parse_seccomp splits a stack of BPF programs (seccomp/stack.go: for
// each, its length in instructions as a native uint32, four zero bytes,
// then its struct sock_filter array) into prog's filters, to be loaded in
// order. A stack that does not add up ends the run: no filter is not an
// option once one was asked for.
static void parse_seccomp(struct program *prog, const struct arg *a)
{
	const char *p = a->p, *end = a->p + a->len;
	prog->nseccomp = 0;
	while (p < end) {
		uint32_t hdr[2];
		if (end - p < (long)sizeof hdr)
			die("plan: seccomp stack truncated");
		memcpy(hdr, p, sizeof hdr);
		p += sizeof hdr;
		if (hdr[0] == 0 || hdr[0] > BPF_MAXINSNS || hdr[1] != 0 ||
		    (uint64_t)(end - p) < (uint64_t)hdr[0] * sizeof(struct sock_filter))
			die("plan: seccomp program of %u instructions in a stack of %u bytes", hdr[0], a->len);
		if (prog->nseccomp == MAX_FILTERS)
			die("plan: more than %d seccomp filters", MAX_FILTERS);
		prog->seccomp[prog->nseccomp].len = hdr[0];
		prog->seccomp[prog->nseccomp].filter = (struct sock_filter *)p;
		prog->nseccomp++;
		p += hdr[0] * sizeof(struct sock_filter);
	}
	if (prog->nseccomp == 0)
		die("plan: empty seccomp stack");
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

// run_step executes one step, whose name and number of args parse_plan
// has checked (plan.h).
void run_step(struct arg *a, int n, struct program *prog)
{
	const char *op = a[0].p;
	if (!strcmp(op, "mount")) { // src dst fstype flags data
		if (mount(a[1].len ? a[1].p : NULL, a[2].p, a[3].len ? a[3].p : NULL,
			  parse_ul(&a[4]), a[5].len ? a[5].p : NULL) < 0)
			die("mount %s on %s", a[3].len ? a[3].p : a[1].p, a[2].p);
	} else if (!strcmp(op, "bind")) { // src dst flags (BIND_*)
		unsigned long flags = parse_ul(&a[3]);
		if ((flags & BIND_OPTIONAL) && access(a[1].p, F_OK) < 0 && errno == ENOENT)
			return;
		if (flags & BIND_READONLY) {
			bind_ro(a[1].p, a[2].p);
		} else if (mount(a[1].p, a[2].p, NULL, MS_BIND | MS_REC, NULL) < 0) {
			die("bind %s on %s", a[1].p, a[2].p);
		}
	} else if (!strcmp(op, "mask")) { // empty path: hide path, if it exists
		mask(a[1].p, a[2].p);
	} else if (!strcmp(op, "remount_ro")) { // path
		remount_ro(a[1].p);
	} else if (!strcmp(op, "mkdir")) { // path mode
		if (mkdir(a[1].p, parse_ul(&a[2])) == 0) {
			if (chmod(a[1].p, parse_ul(&a[2])) < 0) // not narrowed by umask
				die("chmod %s", a[1].p);
		} else if (errno != EEXIST) {
			die("mkdir %s", a[1].p);
		}
	} else if (!strcmp(op, "file")) { // path mode data
		write_file(a[1].p, parse_ul(&a[2]), &a[3]);
	} else if (!strcmp(op, "chown")) { // path uid gid
		if (lchown(a[1].p, parse_ul(&a[2]), parse_ul(&a[3])) < 0)
			die("chown %s", a[1].p);
	} else if (!strcmp(op, "symlink")) { // target path
		if (symlink(a[1].p, a[2].p) < 0)
			die("symlink %s -> %s", a[2].p, a[1].p);
	} else if (!strcmp(op, "pivot")) { // newroot putold
		if (syscall(SYS_pivot_root, a[1].p, a[2].p) < 0)
			die("pivot_root to %s", a[1].p);
	} else if (!strcmp(op, "umount")) { // path (lazily detached)
		if (umount2(a[1].p, MNT_DETACH) < 0)
			die("umount %s", a[1].p);
	} else if (!strcmp(op, "move")) { // src dst: a mount, moved
		if (mount(a[1].p, a[2].p, NULL, MS_MOVE, NULL) < 0)
			die("move the mount %s to %s", a[1].p, a[2].p);
	} else if (!strcmp(op, "rmdir")) { // path
		if (rmdir(a[1].p) < 0)
			die("rmdir %s", a[1].p);
	} else if (!strcmp(op, "chdir")) {
		if (chdir(a[1].p) < 0)
			die("chdir %s", a[1].p);
	} else if (!strcmp(op, "hostname")) {
		if (sethostname(a[1].p, a[1].len) < 0)
			die("sethostname");
	} else if (!strcmp(op, "loopback_up")) {
		loopback_up();
	} else if (!strcmp(op, "phase")) {
		phase(a[1].p);
	} else if (!strcmp(op, "stdin")) { // path, opened read-only as fd 0
		int fd = open(a[1].p, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			die("open %s", a[1].p);
		if (dup2(fd, 0) < 0)
			die("dup2 %s", a[1].p);
		close(fd);
	} else {
		collect(a, n, prog);
	}
}

// collect records the settings the program is started with.
static void collect(struct arg *a, int n, struct program *prog)
{
	const char *op = a[0].p;
	if (!strcmp(op, "path")) {
		prog->path = a[1].p;
	} else if (!strcmp(op, "cwd")) {
		prog->cwd = a[1].p;
	} else if (!strcmp(op, "arg")) {
		if (prog->argc == MAX_LIST)
			die("plan: too many arguments");
		prog->argv[prog->argc++] = (char *)a[1].p;
	} else if (!strcmp(op, "env")) {
		if (prog->envc == MAX_LIST)
			die("plan: too many environment variables");
		prog->envp[prog->envc++] = (char *)a[1].p;
	} else if (!strcmp(op, "user")) { // uid gid setgroups
		prog->uid = parse_ul(&a[1]);
		prog->gid = parse_ul(&a[2]);
		prog->setgroups = parse_ul(&a[3]);
	} else if (!strcmp(op, "nested_userns")) {
		prog->nested_userns = 1;
	} else if (!strcmp(op, "keep_root")) {
		prog->keep_root = 1;
	} else if (!strcmp(op, "prepare")) {
		prog->prepare = 1;
	} else if (!strcmp(op, "seccomp")) { // a stack of BPF programs
		parse_seccomp(prog, &a[1]);
	} else if (!strcmp(op, "timeout")) { // ns from the program's start
		prog->timeout_ns = strtoull(a[1].p, NULL, 10);
	} else if (!strcmp(op, "rlimit")) { // resource soft hard
		if (prog->nrlimits == 16)
			die("plan: too many rlimits");
		prog->rlimits[prog->nrlimits].res = parse_ul(&a[1]);
		prog->rlimits[prog->nrlimits].lim.rlim_cur = parse_ul(&a[2]);
		prog->rlimits[prog->nrlimits].lim.rlim_max = parse_ul(&a[3]);
		prog->nrlimits++;
	} else {
		die("plan: step %s is declared (plan.h) but not interpreted", op);
	}
}

// step_kinds is PLAN_STEPS as data: each step's name and how many args
// follow it.
static const struct {
	const char *name;
	uint32_t nargs;
} step_kinds[] = {
#define STEP_KIND(name, nargs) { #name, nargs },
	PLAN_STEPS(STEP_KIND)
#undef STEP_KIND
};

// check_step refuses a step plan.h does not declare, or one with another
// number of args, before any step of its part runs.
static void check_step(const struct arg *a, uint32_t n)
{
	for (size_t i = 0; i < sizeof step_kinds / sizeof step_kinds[0]; i++) {
		if (strcmp(a[0].p, step_kinds[i].name))
			continue;
		if (n != step_kinds[i].nargs + 1)
			die("plan: %s takes %u args", a[0].p, step_kinds[i].nargs);
		return;
	}
	die("plan: unknown step %s with %u args", a[0].p, n - 1);
}

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
		check_step(a, nargs);
		if (!strcmp(a[0].p, "trace")) {
			tracing = 1;
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
struct step *read_steps(size_t *count)
{
	size_t len;
	char *plan = read_part(&len);
	return parse_plan(plan, plan + len, count);
}
