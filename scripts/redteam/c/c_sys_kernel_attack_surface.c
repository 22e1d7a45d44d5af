// expect: any_but_escape
// limits: --mem 256M --timeout 10s
// checks: in C, with raw system calls: bpf, perf_event_open, userfaultfd, io_uring_setup/enter/register, keyctl, add_key and request_key are refused by the allowlist (EPERM/ENOSYS/SIGSYS) exactly as sys_kernel_attack_surface.py finds them refused
#include "probe.h"

static long bpf_prog_load(long a) { return syscall(SYS_bpf, 5, a, 128); }
static long bpf_map_create(long a) { return syscall(SYS_bpf, 0, a, 72); }
static long perf_open(long a) { return syscall(SYS_perf_event_open, a, 0, -1, -1, 0); }
static long uffd(long a) { return syscall(SYS_userfaultfd, 02000000 | a); }
static long uring_setup(long a) { return syscall(SYS_io_uring_setup, 8, a); }
static long uring_enter(long a) { return syscall(SYS_io_uring_enter, a, 0, 0, 0, NULL, 0); }
static long uring_register(long a) { return syscall(SYS_io_uring_register, a, 0, NULL, 0); }
static long keyctl_id(long a) { return syscall(SYS_keyctl, 0, a, 0); }
static long addkey(long a) { return syscall(SYS_add_key, "user", "mbxrt", "x", 1, a); }
static long reqkey(long a) { return syscall(SYS_request_key, "user", "mbxrt-none", NULL, a); }

int main(void)
{
	PROBE("bpf(BPF_PROG_LOAD)", 1, bpf_prog_load, BAD);
	PROBE("bpf(BPF_MAP_CREATE)", 1, bpf_map_create, BAD);
	PROBE("perf_event_open", 1, perf_open, BAD);
	PROBE("userfaultfd(UFFD_USER_MODE_ONLY)", 1, uffd, 1);
	PROBE("userfaultfd(0)", 1, uffd, 0);
	PROBE("io_uring_setup", 1, uring_setup, BAD);
	PROBE("io_uring_enter(-1)", 1, uring_enter, -1);
	PROBE("io_uring_register(-1)", 1, uring_register, -1);
	PROBE("keyctl(GET_KEYRING_ID, session)", 1, keyctl_id, -3);
	PROBE("add_key(user, process keyring)", 1, addkey, -2);
	PROBE("request_key(user, no callout)", 1, reqkey, 0);
	return verdict();
}
