// expect: any_but_escape
// limits: --mem 256M --timeout 10s
// checks: in C, with raw system calls: reboot, kexec_load, kexec_file_load, init_module, finit_module, delete_module, swapon, swapoff, acct, the clocks, syslog, iopl, ioperm, quotactl and open_by_handle_at are refused by the allowlist, as sys_privileged_ops.py finds them
#include "probe.h"
#include <fcntl.h>

static long do_reboot(long a) { return syscall(SYS_reboot, 0xfee1dead, 0x28121969, a, NULL); }
static long kexec(long a) { return syscall(SYS_kexec_load, 0, 0, NULL, a); }
static long kexec_file(long a) { return syscall(SYS_kexec_file_load, -1, -1, 0, NULL, a); }
static long initmod(long a) { return syscall(SYS_init_module, NULL, a, ""); }
static long finitmod(long a) { return syscall(SYS_finit_module, a, "", 0); }
static long delmod(long a) { return syscall(SYS_delete_module, "mbxrt_no_such_module", a); }
static long swap_on(long a) { return syscall(SYS_swapon, a, 0); }
static long swap_off(long a) { return syscall(SYS_swapoff, a); }
static long do_acct(long a) { return syscall(SYS_acct, a); }
static long settime(long a) { return syscall(SYS_clock_settime, 0, a); }
static long settod(long a) { return syscall(SYS_settimeofday, a, NULL); }
static long clockadj(long a) { return syscall(SYS_clock_adjtime, 0, a); }
static long do_syslog(long a)
{
	static char buf[16384];
	return syscall(SYS_syslog, a, buf, sizeof buf);
}
static long do_iopl(long a) { return syscall(SYS_iopl, a); }
static long do_ioperm(long a) { return syscall(SYS_ioperm, a, 1, 1); }
static long do_quotactl(long a) { return syscall(SYS_quotactl, 0x800005, a, 0, NULL); }
static long shocker(long a)
{
	/* A forged handle for inode 2, the root of an ext4/xfs file system. */
	struct {
		unsigned int bytes;
		int type;
		unsigned int ino, gen;
	} handle = {8, 1, 2, 0};
	int root = open("/", O_RDONLY | O_DIRECTORY);
	return syscall(SYS_open_by_handle_at, root, &handle, O_RDONLY | O_DIRECTORY | a);
}

int main(void)
{
	PROBE("reboot(invalid cmd)", 1, do_reboot, 0xdeadbeef);
	PROBE("kexec_load(invalid flags)", 1, kexec, 0xFFFF0000);
	PROBE("kexec_file_load(invalid flags)", 1, kexec_file, 0xFFFF0000);
	PROBE("init_module(empty image)", 1, initmod, 0);
	PROBE("finit_module(-1)", 1, finitmod, -1);
	PROBE("delete_module(nonexistent)", 1, delmod, 04000);
	PROBE("swapon(bad)", 1, swap_on, BAD);
	PROBE("swapoff(bad)", 1, swap_off, BAD);
	PROBE("acct(bad)", 1, do_acct, BAD);
	PROBE("clock_settime(REALTIME, bad)", 1, settime, BAD);
	PROBE("settimeofday(bad)", 1, settod, BAD);
	PROBE("clock_adjtime(REALTIME, bad)", 1, clockadj, BAD);
	PROBE("syslog(READ_ALL)", 1, do_syslog, 3);
	PROBE("iopl(3)", 1, do_iopl, 3);
	PROBE("ioperm(0x80)", 1, do_ioperm, 0x80);
	PROBE("quotactl(bad)", 1, do_quotactl, BAD);
	PROBE("open_by_handle_at(forged inode-2 handle)", 1, shocker, 0);
	return verdict();
}
