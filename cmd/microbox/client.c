// The client half of `microbox serve` (internal/server holds the protocol
// and the server): a `microbox exec` that finds a server hands its run
// over before the C library and the Go runtime start, and exits with the
// status the server sends back.
//
// It is the binary's ELF entry point (mbxentry: client.go's LDFLAGS), so
// a served exec costs the kernel's exec and this code alone: glibc's
// static start probes the CPU with cpuid, which a hypervisor traps, and
// took most of a client's 0.45 ms on the VM in BENCHMARKS.md. Before the C
// library has started nothing of it may be called (its string functions
// are not even resolved yet, nor is errno's thread-local storage set up):
// this code makes system calls and calls itself only, all of it in the
// section mbx_entry, which client_test.go decodes to hold it to that.
//
// It returns to the C library's _start, letting Go start and run exec
// in-process, whenever it cannot hand the run over: no socket, a server
// that does not answer or answers "run it yourself", a closed descriptor
// 0, 1 or 2. Nothing of the run has happened by then, so the fallback is
// always safe. Then, after the C library's start, the constructor below
// prepares the in-process run.

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
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "mbx1.h"   // the protocol with the server
#include "nsinit.h" // the jail's init (nsjail/nsinit), for an exec run in-process
#include "rawsys.h" // system calls without the C library

// What result.ExitSandboxError has too; internal/server/clientc_test.go
// holds the two equal, and wanted's variables to the server's.
#define EXIT_SANDBOX_ERROR 125
// Set when the client starts this binary again to report a server that
// died mid-run (client.go: serverLostEnv).
#define SERVER_LOST_ENV "_MICROBOX_SERVER_LOST"

// The entry's code: its own section, no stack protector (its canary is
// thread-local), and no loop turned into a call of memcpy or memset.
#define EARLY __attribute__((section("mbx_entry"), used, noinline, no_stack_protector, \
			     optimize("no-tree-loop-distribute-patterns")))

// When an exec's process began, in CLOCK_MONOTONIC nanoseconds: the
// first moment of the process that --trace reports (client.go).
long long microbox_constructor_ns;
// Whether this start is `microbox exec`'s: the constructor leaves others be.
static int exec_start;

// The connection, and the signal that came and how many, for the signal
// handler.
static int client_sock = -1;
static volatile sig_atomic_t client_signal, client_signals;

EARLY static size_t length(const char *s)
{
	size_t n = 0;
	while (s[n])
		n++;
	return n;
}

// starts reports whether e's first n bytes are p's (p holds at least n).
EARLY static int starts(const char *e, const char *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (e[i] != p[i])
			return 0;
	return 1;
}

EARLY static void copy(char *to, const char *from, size_t n)
{
	for (size_t i = 0; i < n; i++)
		to[i] = from[i];
}

// variable is NAME's value in envp, or NULL.
EARLY static const char *variable(char **envp, const char *name)
{
	size_t n = length(name);
	for (char **e = envp; *e; e++)
		if (starts(*e, name, n) && (*e)[n] == '=')
			return *e + n + 1;
	return NULL;
}

// wanted reports whether exec reads the variable e (NAME=value); the
// server's clientVariables are the same ones.
EARLY static int wanted(const char *e)
{
	return starts(e, "MICROBOX_", 9) || starts(e, "HOME=", 5) || starts(e, "XDG_CACHE_HOME=", 15);
}

// buf is the request body, in a mapping made for its size.
struct buf {
	char *p;
	size_t len;
};

EARLY static void put_u32(struct buf *b, uint32_t v)
{
	char le[4] = { (char)v, (char)(v >> 8), (char)(v >> 16), (char)(v >> 24) };
	copy(b->p + b->len, le, 4);
	b->len += 4;
}

EARLY static void put_str(struct buf *b, const char *s)
{
	size_t n = length(s);
	put_u32(b, (uint32_t)n);
	copy(b->p + b->len, s, n);
	b->len += n;
}

// request builds the body: the working directory, exec's arguments and
// the variables exec reads. It measures first, then maps what it needs
// (b->p), which it fills to the byte: the caller unmaps b->len.
EARLY static int request(struct buf *b, char *cwd, int argc, char **argv, char **envp)
{
	size_t size = 4 + length(cwd) + 4 + 4;
	for (int i = 1; i < argc; i++)
		size += 4 + length(argv[i]);
	uint32_t n = 0;
	for (char **e = envp; *e; e++)
		if (wanted(*e)) {
			size += 4 + length(*e);
			n++;
		}
	long p = sys6(SYS_mmap, 0, (long)size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p < 0 && p > -4096)
		return -1;
	b->p = (char *)p;
	b->len = 0;
	put_str(b, cwd);
	put_u32(b, (uint32_t)(argc - 1));
	for (int i = 1; i < argc; i++)
		put_str(b, argv[i]);
	put_u32(b, n);
	for (char **e = envp; *e; e++)
		if (wanted(*e))
			put_str(b, *e);
	return 0;
}

EARLY static int connect_server(const char *path)
{
	struct sockaddr_un addr;
	size_t n = length(path);
	if (n >= sizeof addr.sun_path)
		return -1;
	addr.sun_family = AF_UNIX;
	copy(addr.sun_path, path, n + 1);
	int s = (int)sys(SYS_socket, AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		return -1;
	if (sys(SYS_connect, s, &addr, sizeof addr) < 0) {
		sys(SYS_close, s, 0, 0);
		return -1;
	}
	return s;
}

// send_request sends the header with descriptors 0, 1 and 2, then the body.
EARLY static int send_request(int s, const struct buf *b)
{
	char header[SERVE_HEADER] = { SERVE_MAGIC[0], SERVE_MAGIC[1], SERVE_MAGIC[2], SERVE_MAGIC[3],
				      (char)b->len, (char)(b->len >> 8), (char)(b->len >> 16), (char)(b->len >> 24) };
	_Static_assert(sizeof SERVE_MAGIC == 4 + 1, "the magic is 4 bytes");
	union {
		char buf[CMSG_SPACE(3 * sizeof(int))];
		struct cmsghdr align;
	} control;
	struct iovec iov = { .iov_base = header, .iov_len = sizeof header };
	struct msghdr msg = {
		.msg_iov = &iov, .msg_iovlen = 1,
		.msg_control = control.buf, .msg_controllen = sizeof control.buf,
	};
	struct cmsghdr *c = (struct cmsghdr *)control.buf;
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(3 * sizeof(int));
	int *fds = (int *)CMSG_DATA(c);
	fds[0] = 0, fds[1] = 1, fds[2] = 2;
	long n;
	while ((n = sys(SYS_sendmsg, s, &msg, MSG_NOSIGNAL)) == -EINTR)
		;
	if (n != (long)sizeof header)
		return -1;
	for (size_t off = 0; off < b->len;) {
		n = sys6(SYS_sendto, s, (long)(b->p + off), (long)(b->len - off), MSG_NOSIGNAL, 0, 0);
		if (n == -EINTR)
			continue;
		if (n <= 0)
			return -1;
		off += n;
	}
	return 0;
}

// wait_status reads the server's 4-byte answer; -1 when the server went
// away first, -2 when the caller's second signal came before it: the
// first asked the server to end the run, and one that does not answer
// (stopped, or stalled) must not keep its caller for ever.
EARLY static int64_t wait_status(int s)
{
	unsigned char st[4];
	size_t got = 0;
	while (got < sizeof st) {
		long n = sys(SYS_read, s, st + got, sizeof st - got);
		if (n == -EINTR && client_signals >= 2)
			return -2;
		if (n == -EINTR)
			continue;
		if (n <= 0)
			return -1;
		got += n;
	}
	return (int64_t)st[0] | (int64_t)st[1] << 8 | (int64_t)st[2] << 16 | (int64_t)st[3] << 24;
}

// On SIGINT, SIGTERM or SIGHUP the client shuts its side of the
// connection: the server ends the run as an in-process exec would and still
// reports it, and the client exits with that status.
EARLY static void forward_signal(int sig)
{
	client_signal = sig;
	client_signals++;
	sys(SYS_shutdown, client_sock, SHUT_WR, 0);
}

// The kernel's sigaction (not the C library's, whose mask is larger), and
// the return from a handler that x86_64's needs (SA_RESTORER: the
// kernel's value, asm/signal.h, which the C library's headers hide).
#define SA_RESTORER 0x04000000
struct kernel_sigaction {
	void (*handler)(int);
	unsigned long flags;
	void (*restorer)(void);
	uint64_t mask;
};
void microbox_restore_rt(void);
__asm__(".pushsection mbx_entry,\"ax\",@progbits\n"
	"microbox_restore_rt:\n"
	"\tmov $" "15" ", %eax\n" // SYS_rt_sigreturn
	"\tsyscall\n"
	".popsection\n");
_Static_assert(SYS_rt_sigreturn == 15, "x86_64's rt_sigreturn");

// The signals that end a run, and their actions as the caller left them
// (microbox_early reads them before anything changes them, Go's runtime
// included): one the caller ignores (nohup's SIGHUP, a background job's
// SIGINT) stays ignored, served (catch_signals) and in-process
// (microbox_catch_interrupts) alike, as in any process that keeps an
// inherited SIG_IGN.
static const int run_signals[3] = { SIGINT, SIGTERM, SIGHUP };
static struct kernel_sigaction caller_actions[3];

EARLY static void read_caller_actions(void)
{
	for (int i = 0; i < 3; i++)
		sys6(SYS_rt_sigaction, run_signals[i], 0, (long)&caller_actions[i], sizeof caller_actions[i].mask, 0, 0);
}

// catch_signals has forward_signal take the run's signals the caller does
// not ignore; restore_signals puts the caller's actions back.
EARLY static void catch_signals(void)
{
	struct kernel_sigaction sa = { .handler = forward_signal, .flags = SA_RESTORER, .restorer = microbox_restore_rt };
	for (int i = 0; i < 3; i++)
		if (caller_actions[i].handler != SIG_IGN)
			sys6(SYS_rt_sigaction, run_signals[i], (long)&sa, 0, sizeof sa.mask, 0, 0);
}

EARLY static void restore_signals(void)
{
	for (int i = 0; i < 3; i++)
		sys6(SYS_rt_sigaction, run_signals[i], (long)&caller_actions[i], 0, sizeof caller_actions[i].mask, 0, 0);
}

// server_lost reports a server that ended before the run did (unanswered
// 0), or did not answer the caller's second signal (1), as exec reports
// any failure before a result: one line on stderr and, with --json, a
// sandbox_error result on stdout, which Go writes (one encoder of the
// contract, not two): this binary starts again, told why, and reports
// instead of running. Nothing is run again: the run may have begun.
EARLY __attribute__((noreturn)) static void server_lost(const char *path, int unanswered, char **argv, char **envp)
{
	static const char name[] = SERVER_LOST_ENV "=", head[] = "the server at ",
			  ended[] = " ended before the run did",
			  silent[] = " did not answer the caller's signals (a second one ends the wait; the run ends when the server goes on)",
			  tail[] = "; see its log, or set " SOCKET_ENV "= to run without it";
	char var[sizeof name + sizeof head + 108 + sizeof silent + sizeof tail];
	_Static_assert(sizeof silent > sizeof ended, "var holds either");
	size_t n = 0, p = length(path); // a path the socket took: shorter than sun_path's 108
	copy(var, name, sizeof name - 1), n += sizeof name - 1;
	copy(var + n, head, sizeof head - 1), n += sizeof head - 1;
	copy(var + n, path, p), n += p;
	if (unanswered)
		copy(var + n, silent, sizeof silent - 1), n += sizeof silent - 1;
	else
		copy(var + n, ended, sizeof ended - 1), n += sizeof ended - 1;
	copy(var + n, tail, sizeof tail), n += sizeof tail - 1;
	size_t count = 0;
	while (envp[count])
		count++;
	long env = sys6(SYS_mmap, 0, (long)((count + 2) * sizeof(char *)), PROT_READ | PROT_WRITE,
			MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (env > 0 || env < -4095) {
		char **e = (char **)env;
		for (size_t i = 0; i < count; i++)
			e[i] = envp[i];
		e[count] = var, e[count + 1] = NULL;
		sys(SYS_execve, "/proc/self/exe", argv, e);
	}
	var[n++] = '\n'; // the line, at least
	sys(SYS_write, 2, "microbox: ", 10);
	sys(SYS_write, 2, var + sizeof name - 1, n - (sizeof name - 1));
	for (;;)
		sys(SYS_exit_group, EXIT_SANDBOX_ERROR, 0, 0);
}

// hand_over gives the run to a server and exits with its status, or
// returns when the run is for this process to do.
EARLY static void hand_over(int argc, char **argv, char **envp)
{
	const char *path = variable(envp, SOCKET_ENV);
	if (!path)
		path = DEFAULT_SOCKET;
	if (!*path)
		return; // MICROBOX_SOCKET= turns the client off
	for (int fd = 0; fd < 3; fd++)
		if (sys(SYS_fcntl, fd, F_GETFD, 0) < 0)
			return; // nothing to hand over; exec copes in-process
	char cwd[4096];
	long n = sys(SYS_getcwd, cwd, sizeof cwd, 0);
	if (n <= 0 || cwd[0] != '/')
		return; // longer than this, or unreachable: exec copes in-process
	struct buf b;
	if (request(&b, cwd, argc, argv, envp) < 0)
		return;
	size_t mapped = b.len;
	int s = connect_server(path);
	if (s < 0) {
		sys(SYS_munmap, b.p, mapped, 0);
		return;
	}
	client_sock = s;
	catch_signals();
	int sent = send_request(s, &b);
	sys(SYS_munmap, b.p, mapped, 0);
	int64_t st = sent < 0 ? SERVE_FALLBACK : wait_status(s);
	if (st == SERVE_FALLBACK) {
		restore_signals();
		sys(SYS_close, s, 0, 0);
		client_sock = -1;
		if (client_signal) // the caller asked for an end before any run
			sys(SYS_kill, sys(SYS_getpid, 0, 0, 0), client_signal, 0);
		return; // run in-process
	}
	if (st < 0)
		server_lost(path, st == -2, argv, envp);
	for (;;)
		sys(SYS_exit_group, (int)st, 0, 0);
}

// microbox_early is what the entry calls, with the stack the kernel set
// up: argc, then argv, then envp.
EARLY void microbox_early(long *stack)
{
	int argc = (int)stack[0];
	char **argv = (char **)(stack + 1), **envp = argv + argc + 1;
	read_caller_actions();
	if (argc < 2 || length(argv[1]) != 4 || !starts(argv[1], "exec", 4) ||
	    variable(envp, microbox_init_env) || variable(envp, SERVER_LOST_ENV))
		return;
	exec_start = 1;
	struct timespec now;
	if (sys(SYS_clock_gettime, CLOCK_MONOTONIC, &now, 0) == 0)
		microbox_constructor_ns = (long long)now.tv_sec * 1000000000LL + now.tv_nsec;
	hand_over(argc, argv, envp);
}

// mbxentry, the ELF entry point: microbox_early on the kernel's stack
// (16-byte aligned for the call), then the C library's _start with the
// stack and %rdx (the exit function to register: 0 from the kernel, the
// dynamic loader's in a dynamic build) as they came, kept in registers
// the call preserves.
__asm__(".pushsection mbx_entry,\"ax\",@progbits\n"
	".globl mbxentry\n"
	".type mbxentry,@function\n"
	"mbxentry:\n"
	"\tmov %rsp, %rbx\n"
	"\tmov %rdx, %r12\n"
	"\tmov %rsp, %rdi\n"
	"\tand $-16, %rsp\n"
	"\tcall microbox_early\n"
	"\tmov %rbx, %rsp\n"
	"\tmov %r12, %rdx\n"
	"\tjmp _start\n"
	".popsection\n");

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
	// A signal the caller ignores stays ignored (caller_actions): Go's
	// runtime keeps SIGINT's and SIGHUP's SIG_IGN but not SIGTERM's.
	struct sigaction ignore;
	memset(&ignore, 0, sizeof ignore);
	ignore.sa_handler = SIG_IGN;
	const int *sigs = run_signals;
	struct sigaction old[3];
	for (size_t i = 0; i < 3; i++) {
		if (sigaction(sigs[i], caller_actions[i].handler == SIG_IGN ? &ignore : &sa, &old[i]) < 0) {
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

__attribute__((constructor)) static void microbox_client(int argc, char **argv, char **envp)
{
	if (!exec_start)
		return; // not `microbox exec` (microbox_early)
	// In-process, then: its jail's spawner starts now, while Go does, and
	// with the caller's CPUs, before Go's start is confined to one.
	microbox_prestart_spawner(argv);
	pin_for_go_start();
}
