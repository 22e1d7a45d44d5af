// The client half of `microbox serve` (internal/server holds the protocol
// and the server): a `microbox exec` that finds a server hands its run
// over before the Go runtime starts, and exits with the status the server
// sends back.
//
// It runs as an ELF constructor, like the jail's init (nsjail/nsinit), and
// returns, letting Go start and run exec in-process, whenever it cannot
// hand the run over: no socket, a server that does not answer or answers
// "run it yourself", a closed descriptor 0, 1 or 2. Nothing of the run has
// happened by then, so the fallback is always safe.

#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "mbx1.h"   // the protocol with the server
#include "nsinit.h" // the jail's init (nsjail/nsinit), for an exec run in-process

// What result.ExitSandboxError has too; internal/server/clientc_test.go
// holds the two equal, and wanted's variables to the server's.
#define EXIT_SANDBOX_ERROR 125
// Set when the client starts this binary again to report a server that
// died mid-run (client.go: serverLostEnv).
#define SERVER_LOST_ENV "_MICROBOX_SERVER_LOST"

// The connection and the signal that came, for the signal handler.
static int client_sock = -1;
static volatile sig_atomic_t client_signal;

// On SIGINT, SIGTERM or SIGHUP the client shuts its side of the
// connection: the server ends the run as an in-process exec would and still
// reports it, and the client exits with that status.
static void forward_signal(int sig)
{
	client_signal = sig;
	shutdown(client_sock, SHUT_WR);
}

// buf is the request body under construction.
struct buf {
	char *p;
	size_t len, cap;
	int failed;
};

static void put(struct buf *b, const void *p, size_t n)
{
	if (b->failed)
		return;
	if (b->len + n > b->cap) {
		size_t cap = (b->cap + n) * 2;
		char *q = realloc(b->p, cap);
		if (!q) {
			b->failed = 1;
			return;
		}
		b->p = q;
		b->cap = cap;
	}
	memcpy(b->p + b->len, p, n);
	b->len += n;
}

static void put_u32(struct buf *b, uint32_t v)
{
	unsigned char le[4] = { v, v >> 8, v >> 16, v >> 24 };
	put(b, le, 4);
}

static void put_str(struct buf *b, const char *s)
{
	size_t n = strlen(s);
	put_u32(b, (uint32_t)n);
	put(b, s, n);
}

// wanted reports whether exec reads the variable e (NAME=value); the
// server's clientVariables are the same ones.
static int wanted(const char *e)
{
	return !strncmp(e, "MICROBOX_", 9) || !strncmp(e, "HOME=", 5) ||
	       !strncmp(e, "XDG_CACHE_HOME=", 15);
}

// request builds the body: the working directory, exec's arguments and the
// variables exec reads.
static int request(struct buf *b, int argc, char **argv, char **envp)
{
	char *cwd = getcwd(NULL, 0);
	if (!cwd)
		return -1;
	put_str(b, cwd);
	free(cwd);
	put_u32(b, (uint32_t)(argc - 1));
	for (int i = 1; i < argc; i++)
		put_str(b, argv[i]);
	uint32_t n = 0;
	for (char **e = envp; *e; e++)
		if (wanted(*e))
			n++;
	put_u32(b, n);
	for (char **e = envp; *e; e++)
		if (wanted(*e))
			put_str(b, *e);
	return b->failed ? -1 : 0;
}

static int connect_server(const char *path)
{
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	if (strlen(path) >= sizeof addr.sun_path)
		return -1;
	strcpy(addr.sun_path, path);
	int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		return -1;
	if (connect(s, (struct sockaddr *)&addr, sizeof addr) < 0) {
		close(s);
		return -1;
	}
	return s;
}

// send_request sends the header with descriptors 0, 1 and 2, then the body.
static int send_request(int s, const struct buf *b)
{
	unsigned char header[SERVE_HEADER] = { 0, 0, 0, 0, b->len, b->len >> 8, b->len >> 16, b->len >> 24 };
	_Static_assert(sizeof SERVE_MAGIC == 4 + 1, "the magic is 4 bytes");
	memcpy(header, SERVE_MAGIC, 4);
	int fds[3] = { 0, 1, 2 };
	union {
		char buf[CMSG_SPACE(sizeof fds)];
		struct cmsghdr align;
	} control;
	struct iovec iov = { .iov_base = header, .iov_len = sizeof header };
	struct msghdr msg = {
		.msg_iov = &iov, .msg_iovlen = 1,
		.msg_control = control.buf, .msg_controllen = sizeof control.buf,
	};
	struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof fds);
	memcpy(CMSG_DATA(c), fds, sizeof fds);
	ssize_t n;
	while ((n = sendmsg(s, &msg, MSG_NOSIGNAL)) < 0 && errno == EINTR)
		;
	if (n != (ssize_t)sizeof header)
		return -1;
	for (size_t off = 0; off < b->len;) {
		n = send(s, b->p + off, b->len - off, MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		off += n;
	}
	return 0;
}

// wait_status reads the server's 4-byte answer; -1 when the server went
// away first.
static int64_t wait_status(int s)
{
	unsigned char st[4];
	size_t got = 0;
	while (got < sizeof st) {
		ssize_t n = read(s, st + got, sizeof st - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		got += n;
	}
	return (int64_t)st[0] | (int64_t)st[1] << 8 | (int64_t)st[2] << 16 | (int64_t)st[3] << 24;
}

static void set_handlers(void (*h)(int))
{
	struct sigaction sa = { .sa_handler = h };
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
}

// server_lost reports a server that ended before the run did, as exec
// reports any failure before a result: one line on stderr and, with
// --json, a sandbox_error result on stdout, which Go writes (one encoder
// of the contract, not two): this binary starts again, told why, and
// reports instead of running. Nothing is run again: the run may have
// begun.
static void server_lost(const char *path, char **argv) __attribute__((noreturn));
static void server_lost(const char *path, char **argv)
{
	char msg[4096 + 128];
	snprintf(msg, sizeof msg, "the server at %s ended before the run did; see its log, "
		 "or set " SOCKET_ENV "= to run without it", path);
	if (setenv(SERVER_LOST_ENV, msg, 1) == 0)
		execv("/proc/self/exe", argv);
	dprintf(2, "microbox: %s\n", msg); // the line, at least
	_exit(EXIT_SANDBOX_ERROR);
}

// hand_over gives the run to a server and exits with its status, or
// returns when the run is for this process to do.
static void hand_over(int argc, char **argv, char **envp)
{
	const char *path = getenv(SOCKET_ENV);
	if (!path)
		path = DEFAULT_SOCKET;
	if (!*path)
		return; // MICROBOX_SOCKET= turns the client off
	for (int fd = 0; fd < 3; fd++)
		if (fcntl(fd, F_GETFD) < 0)
			return; // nothing to hand over; exec copes in-process
	struct buf b = { 0 };
	if (request(&b, argc, argv, envp) < 0) {
		free(b.p);
		return;
	}
	int s = connect_server(path);
	if (s < 0) {
		free(b.p);
		return;
	}
	client_sock = s;
	set_handlers(forward_signal);
	int sent = send_request(s, &b);
	free(b.p);
	int64_t st = sent < 0 ? SERVE_FALLBACK : wait_status(s);
	if (st == SERVE_FALLBACK) {
		set_handlers(SIG_DFL);
		close(s);
		client_sock = -1;
		if (client_signal)
			raise(client_signal); // the caller asked for an end before any run
		return;                       // run in-process
	}
	if (st < 0)
		server_lost(path, argv);
	_exit((int)st);
}

// Go gives itself a processor per CPU its first thread may run on, counted
// once as it starts. A one-shot exec needs one: its goroutines wait on
// pipes and a pidfd, and a second processor only keeps threads spinning
// for work, which cost a run about 6 ms of CPU on a 2-CPU machine
// (BENCHMARKS.md). So Go starts confined to the CPU this constructor runs
// on (unless the caller set GOMAXPROCS), and main fixes GOMAXPROCS at 1
// and gives every thread the caller's CPUs back (microbox_unpin).
static cpu_set_t caller_cpus;
static int pinned;

static void pin_for_go_start(void)
{
	int cpu = sched_getcpu();
	if (getenv("GOMAXPROCS") || cpu < 0 || sched_getaffinity(0, sizeof caller_cpus, &caller_cpus) < 0)
		return;
	cpu_set_t one;
	CPU_ZERO(&one);
	CPU_SET(cpu, &one);
	pinned = sched_setaffinity(0, sizeof one, &one) == 0;
}

// microbox_unpin gives every thread the caller's CPUs back. Threads Go
// made since the pin inherited it, and one may be made during a pass, so
// passes go on while they change something (a few at most: a concurrent
// cpuset change could keep one from matching).
void microbox_unpin(void)
{
	if (pinned) // this thread at least, whatever the passes manage
		sched_setaffinity(0, sizeof caller_cpus, &caller_cpus);
	for (int pass = 0; pinned && pass < 4; pass++) {
		DIR *d = opendir("/proc/self/task");
		if (!d)
			return;
		int changed = 0;
		struct dirent *e;
		while ((e = readdir(d))) {
			pid_t tid = atoi(e->d_name);
			cpu_set_t cur;
			if (tid > 0 && sched_getaffinity(tid, sizeof cur, &cur) == 0 && !CPU_EQUAL(&cur, &caller_cpus) &&
			    sched_setaffinity(tid, sizeof caller_cpus, &caller_cpus) == 0)
				changed = 1;
		}
		closedir(d);
		pinned = changed;
	}
}

// An in-process exec's SIGINT, SIGTERM and SIGHUP, caught without Go's
// os/signal, whose Notify starts two threads and hands work between them
// (about 2 ms of CPU and of wall time per run on the machine in
// BENCHMARKS.md). The handler only writes the signal's number to a pipe,
// which Go reads in its poller (catchInterrupts in client.go). Go's
// documentation allows C code to take over an asynchronous signal after
// the runtime has started, with SA_ONSTACK: a signal may come while a
// goroutine's small stack is in use.
static volatile sig_atomic_t interrupt_pipe = -1;

static void on_interrupt(int sig)
{
	int saved = errno;
	unsigned char b = (unsigned char)sig;
	if (write(interrupt_pipe, &b, 1) < 0) {
		// full: earlier ones are still unread, and one is enough
	}
	errno = saved;
}

// microbox_catch_interrupts installs the handler and returns the pipe's
// read end (non-blocking), or -1 with errno.
int microbox_catch_interrupts(void)
{
	int p[2];
	if (pipe2(p, O_CLOEXEC | O_NONBLOCK) < 0)
		return -1;
	interrupt_pipe = p[1];
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_interrupt;
	sa.sa_flags = SA_ONSTACK | SA_RESTART;
	sigfillset(&sa.sa_mask);
	const int sigs[] = { SIGINT, SIGTERM, SIGHUP };
	struct sigaction old[3];
	for (size_t i = 0; i < 3; i++) {
		if (sigaction(sigs[i], &sa, &old[i]) < 0) {
			int err = errno;
			while (i-- > 0) // Go's handlers back, for os/signal to use
				sigaction(sigs[i], &old[i], NULL);
			interrupt_pipe = -1;
			close(p[0]);
			close(p[1]);
			errno = err;
			return -1;
		}
	}
	return p[0];
}

// When an exec's constructor began, in CLOCK_MONOTONIC nanoseconds: the
// first moment of the process that --trace reports (client.go).
long long microbox_constructor_ns;

__attribute__((constructor)) static void microbox_client(int argc, char **argv, char **envp)
{
	if (argc < 2 || strcmp(argv[1], "exec") != 0 || getenv(microbox_init_env) || getenv(SERVER_LOST_ENV))
		return;
	struct timespec now;
	if (clock_gettime(CLOCK_MONOTONIC, &now) == 0)
		microbox_constructor_ns = (long long)now.tv_sec * 1000000000LL + now.tv_nsec;
	hand_over(argc, argv, envp);
	// In-process, then: its jail's spawner starts now, while Go does, and
	// with the caller's CPUs, before Go's start is confined to one.
	microbox_prestart_spawner(argv);
	pin_for_go_start();
}
