// expect: any_but_escape
// limits: --mem 256M --timeout 10s
// checks: in C, with raw system calls: ptrace (TRACEME, SEIZE and ATTACH of a child, a sibling, pid 1 and the parent), process_vm_readv/writev and pidfd_getfd are refused, as proc_ptrace.py finds them
#include "probe.h"
#include <sys/ptrace.h>
#include <sys/uio.h>

static char secret[32] = "mbxrt-secret-in-sibling";
static pid_t sibling;

static pid_t sleeper(void)
{
	pid_t pid = fork();
	if (pid == 0) {
		sleep(30);
		_exit(0);
	}
	return pid;
}

static long traceme(long a) { return syscall(SYS_ptrace, PTRACE_TRACEME, 0, a, 0); }
static long seize(long pid)
{
	long r = syscall(SYS_ptrace, PTRACE_SEIZE, pid, 0, 0);
	if (r == 0)
		syscall(SYS_ptrace, PTRACE_DETACH, pid, 0, 0);
	return r;
}
static long attach(long pid)
{
	long r = syscall(SYS_ptrace, PTRACE_ATTACH, pid, 0, 0);
	if (r == 0)
		syscall(SYS_ptrace, PTRACE_DETACH, pid, 0, 0);
	return r;
}
static long seize_own_child(long a)
{
	pid_t child = sleeper();
	long r = seize(child);
	int e = errno;
	kill(child, SIGKILL);
	waitpid(child, NULL, a);
	errno = e;
	return r;
}
static long vm_read(long pid)
{
	char local[32];
	struct iovec l = {local, sizeof local}, r = {secret, sizeof secret};
	return syscall(SYS_process_vm_readv, pid, &l, 1, &r, 1, 0);
}
static long vm_write(long pid)
{
	char local[32] = "mbxrt";
	struct iovec l = {local, sizeof local}, r = {secret, sizeof secret};
	return syscall(SYS_process_vm_writev, pid, &l, 1, &r, 1, 0);
}
static long steal_fd(long pid)
{
	long pidfd = syscall(SYS_pidfd_open, pid, 0);
	if (pidfd < 0)
		return pidfd;
	return syscall(SYS_pidfd_getfd, pidfd, 1, 0);
}

int main(void)
{
	sibling = sleeper();
	PROBE("PTRACE_TRACEME", 1, traceme, 0);
	PROBE("PTRACE_SEIZE own child", 1, seize_own_child, 0);
	PROBE("PTRACE_SEIZE sibling", 1, seize, sibling);
	PROBE("PTRACE_ATTACH sibling", 1, attach, sibling);
	PROBE("process_vm_readv sibling", 1, vm_read, sibling);
	PROBE("process_vm_writev sibling", 1, vm_write, sibling);
	PROBE("pidfd_getfd sibling", 1, steal_fd, sibling);
	pid_t others[] = {1, getppid()};
	for (int i = 0; i < 2; i++) {
		if (others[i] == 0 || others[i] == getpid() || (i == 1 && others[1] == others[0]))
			continue;
		char name[64];
		snprintf(name, sizeof name, "PTRACE_ATTACH pid %d (supervisor side)", others[i]);
		PROBE(name, 1, attach, others[i]);
	}
	kill(sibling, SIGKILL);
	waitpid(sibling, NULL, 0);
	return verdict();
}
