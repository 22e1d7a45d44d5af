/* Shared by the C red-team cases (each #includes it, and the harness
 * sends it with the case as a file: --file probe.h). It is the Python
 * cases' judge, in C: a raw system call runs in a forked child (a seccomp
 * kill or a namespace change stays there) and is contained when it was
 * refused with EPERM, EACCES or ENOSYS or the child was killed; success or
 * any other error (EFAULT, EBADF, EINVAL, ...) means the call got past the
 * filter into the kernel's own argument checks, and is an escape for a
 * severe probe, a warning for a mild one. */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#define BAD 1L /* an address that always faults */

static int escapes, warnings;

struct outcome {
	int signaled; /* the child died of signal ret */
	long ret;
	int err;
};

/* in_child runs fn(arg) in a forked child and returns how it ended. */
static struct outcome in_child(long (*fn)(long), long arg)
{
	struct outcome o = {0, -1, 0};
	int fds[2];
	if (pipe(fds) < 0) {
		o.err = errno;
		return o;
	}
	fflush(stdout);
	pid_t pid = fork();
	if (pid < 0) {
		close(fds[0]);
		close(fds[1]);
		errno = 0;
		o.ret = fn(arg);
		o.err = errno;
		return o;
	}
	if (pid == 0) {
		close(fds[0]);
		errno = 0;
		long r = fn(arg);
		int e = errno;
		long msg[2] = {r, e};
		if (write(fds[1], msg, sizeof msg) != sizeof msg)
			_exit(3);
		_exit(0);
	}
	close(fds[1]);
	long msg[2];
	ssize_t n = read(fds[0], msg, sizeof msg);
	close(fds[0]);
	int status;
	waitpid(pid, &status, 0);
	if (WIFSIGNALED(status)) {
		o.signaled = 1;
		o.ret = WTERMSIG(status);
	} else if (n == sizeof msg) {
		o.ret = msg[0];
		o.err = (int)msg[1];
	} else {
		o.err = -1; /* the probe itself failed */
	}
	return o;
}

static void judge(const char *name, struct outcome o, int severe)
{
	if (o.signaled) {
		printf("ok: %s: killed by signal %ld\n", name, o.ret);
	} else if (o.err == -1) {
		printf("info: %s: probe failed\n", name);
	} else if (o.ret == -1 && (o.err == EPERM || o.err == EACCES || o.err == ENOSYS)) {
		printf("ok: %s: %s\n", name, strerror(o.err));
	} else if (severe) {
		printf("escape: %s reached the kernel (returned %ld, %s)\n", name, o.ret, strerror(o.err));
		escapes++;
	} else {
		printf("warn: %s reached the kernel (returned %ld, %s)\n", name, o.ret, strerror(o.err));
		warnings++;
	}
}

/* probe judges one call: fn(arg) in a child. */
#define PROBE(name, severe, fn, arg) judge(name, in_child(fn, arg), severe)

static int verdict(void)
{
	puts(escapes ? "ESCAPED" : "CONTAINED");
	return 0;
}
