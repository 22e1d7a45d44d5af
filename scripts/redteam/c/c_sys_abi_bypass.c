// expect: any_but_escape
// limits: --mem 256M --timeout 10s
// checks: in C, the allowlist cannot be sidestepped by another system-call ABI: unshare and mount through the i386 ABI (int $0x80) and the x32 ABI (the call number with bit 30 set) are refused or kill the caller, never reach the kernel
#include "probe.h"
#include <sched.h>

#define X32_BIT 0x40000000L

/* i386 numbers: unshare 310, mount 21, getpid 20. */
static long int80(long nr)
{
	long ret;
	__asm__ volatile("int $0x80" : "=a"(ret) : "a"(nr), "b"((long)CLONE_NEWUSER), "c"(0L), "d"(0L) : "memory");
	if (ret < 0 && ret > -4096) {
		errno = (int)-ret;
		return -1;
	}
	return ret;
}
static long x32(long nr) { return syscall(X32_BIT | nr, CLONE_NEWUSER, 0, 0, 0, 0); }

int main(void)
{
	PROBE("int $0x80 unshare(CLONE_NEWUSER)", 1, int80, 310);
	PROBE("int $0x80 mount", 1, int80, 21);
	PROBE("int $0x80 getpid", 1, int80, 20);
	PROBE("x32 unshare(CLONE_NEWUSER)", 1, x32, SYS_unshare);
	PROBE("x32 getpid", 1, x32, SYS_getpid);
	return verdict();
}
