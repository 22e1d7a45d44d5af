// A zygote's run's PID 1, from its clone to its exec of microbox's init
// (zygote.c). This code is not run by this binary: zygote.py copies its
// bytes (the section mbx_zspawn, which nsinit.go hands to Go) into its
// template and calls zspawn for each run. So it is position-independent
// and self-contained: system calls, and no C library but the fork whose
// address it is given; no data of its own: what it needs comes in struct
// zspawn, which zygote.py lays out alike.
// nsinit's zspawn_test.go checks that its code reaches nothing outside it.
//
// Why: PID 1 used to be an ordinary fork of the template, a full copy of
// its page tables, written to by the Python code it ran, and unmapped
// again by its exec, all in every run. Here PID 1 shares the template's
// memory (CLONE_VM) while the template waits (CLONE_VFORK), as
// posix_spawn's child does: only the program is a copy of the template.
//
//   the template  zspawn: blocks every signal, marks where the program
//                 resumes, clones PID 1 into the run's new namespaces and
//                 waits until PID 1 has exec'd (or ended);
//   PID 1         joins the run's v1 cgroups, says hello with its
//                 credentials (and, on v2, waits to be moved), forks the
//                 program with the C library's fork (the forked thread's
//                 own id is then the program's, as in any fork), puts its
//                 descriptors where zygote.h says, and execs the init;
//   the program   waits until PID 1's exec has left the template's memory,
//                 then jumps back into zspawn, on its copy of the
//                 template's stack, which returns 0 to zygote.py, as a
//                 fork does.
//
// Until its exec PID 1 runs on a stack of its own (8 MiB, a guard page
// below) in the template's memory, with every signal blocked, while the
// template is stopped. Its own code writes nothing of the template's but
// that stack and struct zspawn. The C library's fork runs the handlers
// the preloads registered with pthread_atfork, as any fork of the
// template would: prepare and parent in PID 1, so in the template's
// memory, before the program exists (nothing of a caller's is anywhere
// yet), child in the program. PID 1 dying inside them leaves in_fork set,
// and the template then retires (zygote.py). zygote_init unblocks the
// signals the exec kept blocked.

#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stddef.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/syscall.h>

#include "plan.h"
#include "rawsys.h"
#include "status.h"
#include "zygote.h"

#define ZS __attribute__((section("mbx_zspawn"), used, noinline, no_stack_protector, \
			  optimize("no-tree-loop-distribute-patterns")))

static void pid1(struct zspawn *z) __attribute__((noreturn));
static void resume(struct zspawn *z) __attribute__((noreturn));

// fail writes PID 1's error line (status.h: error) and ends PID 1.
ZS __attribute__((noreturn)) static void fail(struct zspawn *z, int report, int step, long err)
{
	int e = (int)-err;
	struct iovec iov[2] = {
		{(void *)z->what[step], 0},
		{(void *)z->why[e > 0 && e < z->nwhy ? e : 0], 0},
	};
	for (int i = 0; i < 2; i++)
		while (((const char *)iov[i].iov_base)[iov[i].iov_len])
			iov[i].iov_len++;
	sys(SYS_writev, report, iov, 2);
	for (;;)
		sys(SYS_exit, EXIT_SANDBOX_ERROR, 0, 0);
}

ZS static void pid1(struct zspawn *z)
{
	int report = z->ctl;
	long r;
	// The run's cgroups first, which the program is then born in: the
	// supervisor opened each hierarchy's tasks file, and the kernel checks
	// its right to move PID 1, not PID 1's.
	for (int i = 0; i < z->njoin; i++) {
		char zero = '0';
		if ((r = sys(SYS_write, z->join[i], &zero, 1)) != 1)
			fail(z, report, STEP_JOIN, r);
		sys(SYS_close, z->join[i], 0, 0);
	}
	// The program's SIGCHLD is not the template's SIG_IGN.
	struct { void *handler; unsigned long flags; void *restorer; uint64_t mask; } dfl = {0};
	sys6(SYS_rt_sigaction, SIGCHLD, (long)&dfl, 0, 8, 0, 0);
	sys(SYS_dup2, z->null, 0, 0); // not the template's control socket
	// The hello, whose credentials tell the supervisor PID 1's pid.
	struct iovec iov = {(void *)z->hello, sizeof ZYGOTE_HELLO - 1};
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(sizeof(struct ucred))];
	} c;
	// (Each a store of its own: merged, they would be a constant in the
	// binary's data, which the template has not.)
	*(volatile size_t *)&c.h.cmsg_len = CMSG_LEN(sizeof(struct ucred));
	*(volatile int *)&c.h.cmsg_level = SOL_SOCKET;
	*(volatile int *)&c.h.cmsg_type = SCM_CREDENTIALS;
	struct ucred *cred = (struct ucred *)CMSG_DATA(&c.h);
	cred->pid = (int)sys(SYS_getpid, 0, 0, 0);
	cred->uid = (unsigned)sys(SYS_getuid, 0, 0, 0);
	cred->gid = (unsigned)sys(SYS_getgid, 0, 0, 0);
	struct msghdr m = {0};
	m.msg_iov = &iov;
	m.msg_iovlen = 1;
	m.msg_control = c.buf;
	m.msg_controllen = sizeof c.buf;
	if ((r = sys(SYS_sendmsg, z->ctl, &m, MSG_NOSIGNAL)) != (long)iov.iov_len)
		fail(z, report, STEP_HELLO, r < 0 ? r : -EPIPE);
	if (!z->njoin) { // the supervisor moves PID 1, then says go
		char go[sizeof ZYGOTE_GO - 1];
		r = sys(SYS_recvfrom, z->ctl, go, sizeof go);
		int same = r == (long)sizeof go;
		for (int i = 0; same && i < (int)sizeof go; i++)
			same = go[i] == z->go[i];
		if (!same)
			fail(z, report, STEP_GO, r < 0 ? r : -EPROTO);
	}
	// go and start: the program's with the init (zygote.h); execd: the
	// program's wait for PID 1's exec, whose end PID 1 keeps until the
	// exec has left the template's memory (O_CLOEXEC closes it after).
	int go[2], start[2], execd[2];
	if ((r = sys(SYS_pipe2, go, O_CLOEXEC, 0)) < 0 || (r = sys(SYS_pipe2, start, O_CLOEXEC, 0)) < 0 ||
	    (r = sys(SYS_pipe2, execd, O_CLOEXEC, 0)) < 0)
		fail(z, report, STEP_PIPE, r);
	// The program: PID 1's own child, which the init reaps.
	z->in_fork = 1;
	long pid = z->fork();
	if (pid == 0) {
		if (z->rseq) // the C library has it registered; the kernel forgot it
			sys6(SYS_rseq, (long)z->rseq, z->rseq_len, 0, z->rseq_sig, 0, 0);
		z->go_r = go[0];
		z->start_w = start[1];
		int drop[6] = {z->ctl, go[1], start[0], z->binary, z->null, execd[1]};
		for (int i = 0; i < 6; i++) // so that each ends when its other side does
			sys(SYS_close, drop[i], 0, 0);
		// Nothing of the program's may run while PID 1, in its cgroup,
		// still shares the template's memory: a kill of the cgroup's
		// processes then (an OOM group kill on v2) would reach the template.
		char c;
		while (sys(SYS_read, execd[0], &c, 1) == -EINTR)
			;
		sys(SYS_close, execd[0], 0, 0);
		resume(z);
	}
	z->in_fork = 0;
	if (pid < 0)
		fail(z, report, STEP_FORK, -*z->errno_at);
	sys(SYS_close, execd[0], 0, 0);
	// The init's descriptors where zygote.h wants them, each copied out of
	// the way first (a target may be another's source), and no other.
	// (execd's end goes after them, closed by the exec too.)
	enum { EXECD_FD = ZYGOTE_BINARY_FD + 1 };
	int from[EXECD_FD + 1];
	from[0] = from[1] = from[2] = z->null;
	from[PLAN_FD] = from[STATUS_FD] = z->ctl;
	from[ZYGOTE_GO_FD] = go[1];
	from[ZYGOTE_START_FD] = start[0];
	from[ZYGOTE_BINARY_FD] = z->binary;
	from[EXECD_FD] = execd[1];
	for (int i = 0; i <= EXECD_FD; i++)
		if ((from[i] = (int)sys(SYS_fcntl, from[i], F_DUPFD_CLOEXEC, 64)) < 0)
			fail(z, report, STEP_DUP, from[i]);
	for (int i = 0; i <= EXECD_FD; i++) // the binary's own and execd's are closed by the exec
		if ((r = sys(SYS_dup3, from[i], i, i >= ZYGOTE_BINARY_FD ? O_CLOEXEC : 0)) < 0)
			fail(z, report, STEP_DUP, r);
	report = STATUS_FD;
	if ((r = sys(SYS_close_range, EXECD_FD + 1, ~0U, 0)) < 0)
		fail(z, report, STEP_CLOSE, r);
	r = sys6(SYS_execveat, ZYGOTE_BINARY_FD, (long)z->empty, (long)z->argv, (long)z->envp, AT_EMPTY_PATH, 0);
	fail(z, report, STEP_EXEC, r);
}

// The registers the program resumes with, at resume's index: all of them
// but rax, rcx and r11, which the syscall itself clobbers, and the resume
// point. (To the compiler, zspawn's clone is an asm statement that keeps
// every register it does not name, and it returns twice.)
#define RESUME_REGS(op)                                                    \
	op(rsp, 0) op(rbp, 8) op(rbx, 16) op(r12, 24) op(r13, 32) op(r14, 40) \
	op(r15, 48) op(rdi, 56) op(rsi, 64) op(rdx, 72) op(r8, 80) op(r9, 88)  \
	op(r10, 96)
#define RESUME_PC 104
#define STR_(x) #x
#define STR(x) STR_(x)
#define SAVE(reg, at) "mov %%" #reg ", " #at "+%c[r](%%r12)\n\t"
#define LOAD(reg, at) "mov " #at "+%c[r](%%rax), %%" #reg "\n\t"
_Static_assert(sizeof(((struct zspawn *)0)->resume) >= RESUME_PC + 8, "resume holds the registers");

// resume is the program's way back into zspawn's frame, on its copy of
// the template's stack, as if its clone had returned 0 there.
ZS __attribute__((noreturn)) static void resume(struct zspawn *z)
{
	__asm__ volatile("mov %%rdi, %%rax\n\t" //
			 RESUME_REGS(LOAD)      //
			 "mov " STR(RESUME_PC) "+%c[r](%%rax), %%rcx\n\t"
			 "xor %%eax, %%eax\n\t"
			 "jmp *%%rcx"
			 :
			 : "D"(z), [r] "i"(offsetof(struct zspawn, resume))
			 : "memory");
	__builtin_unreachable();
}

// zspawn clones the run's PID 1. It returns PID 1's pid (or -errno) to
// the template, and 0 in the program, as fork does.
ZS long zspawn(struct zspawn *z)
{
	uint64_t all = ~0ULL;
	sys6(SYS_rt_sigprocmask, SIG_SETMASK, (long)&all, (long)&z->mask, 8, 0, 0);
	register long r10 __asm__("r10") = 0; // clone's child_tid: none
	register long r8 __asm__("r8") = 0;   // and tls: the template's
	register struct zspawn *r12 __asm__("r12") = z;
	register void (*r13)(struct zspawn *) __asm__("r13") = pid1;
	long ret = SYS_clone, flags = (long)(z->flags | CLONE_VM | CLONE_VFORK), rdx = 0;
	char *stack = z->stack;
	// The registers first, for the program; then the clone. PID 1 starts
	// on its own stack with the registers the syscall left, and calls
	// pid1(z), which never returns; the program comes back at 2, with the
	// registers saved here. Every register but rsp and rbp is an output or
	// a clobber, so that the compiler keeps nothing in one across this
	// statement, whatever it makes of the code around it: the program's
	// way back depends on rsp, rbp and memory alone.
	__asm__ volatile(RESUME_REGS(SAVE) //
			 "lea 2f(%%rip), %%rcx\n\t"
			 "mov %%rcx, " STR(RESUME_PC) "+%c[r](%%r12)\n\t"
			 "syscall\n\t"
			 "test %%rax, %%rax\n\t"
			 "jnz 1f\n\t"
			 "xor %%ebp, %%ebp\n\t"
			 "mov %%r12, %%rdi\n\t"
			 "call *%%r13\n\t"
			 "ud2\n"
			 "2:\n\t"
			 "xor %%eax, %%eax\n"
			 "1:"
			 : "+a"(ret), "+D"(flags), "+S"(stack), "+d"(rdx), "+r"(r10), "+r"(r8), "+r"(r12), "+r"(r13)
			 : [r] "i"(offsetof(struct zspawn, resume))
			 : "rcx", "r11", "rbx", "r9", "r14", "r15", "memory", "cc", "xmm0", "xmm1", "xmm2", "xmm3",
			   "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14",
			   "xmm15", "st", "st(1)", "st(2)", "st(3)", "st(4)", "st(5)", "st(6)", "st(7)");
	sys6(SYS_rt_sigprocmask, SIG_SETMASK, (long)&z->mask, 0, 8, 0, 0);
	return ret;
}
