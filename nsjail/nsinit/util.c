// What every role of the init uses: status lines to the supervisor
// (status.h), the monotonic clock, and writes to /proc's knobs.

#include "init.h"

// tracing turns on the "phase" status lines (the plan's "trace" step).
int tracing;

uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void status(const char *fmt, ...)
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

void die(const char *fmt, ...)
{
	char msg[900];
	int saved = errno;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	if (saved)
		status(STATUS_ERROR " %s: %s", msg, strerror(saved));
	else
		status(STATUS_ERROR " %s", msg);
	_exit(EXIT_SANDBOX_ERROR);
}

void phase(const char *name)
{
	if (tracing)
		status(STATUS_PHASE " %s %llu", name, (unsigned long long)now_ns());
}

// write_text writes data to an existing file (a /proc knob) in one
// write; on failure it returns -1 with errno set.
int write_text(const char *path, const char *data)
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
