// expect: any_but_escape
// limits: --mem 256M --timeout 10s
// checks: in C, with raw system calls: unshare of every namespace, setns, clone and clone3 into new namespaces, mount, umount2, pivot_root, chroot and the new mount API (fsopen, fsconfig, fsmount, open_tree, move_mount, mount_setattr) are refused by the allowlist, as sys_namespaces_unshare.py and sys_mount_chroot_pivot.py find them
#include "probe.h"
#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>

static long do_unshare(long flags) { return syscall(SYS_unshare, flags); }
static long do_setns(long fd) { return syscall(SYS_setns, fd, 0); }
static long clone_newuser(long flags)
{
	/* A raw clone: the new child (if any) exits at once. */
	long r = syscall(SYS_clone, flags | SIGCHLD, 0, NULL, NULL, 0);
	if (r == 0)
		_exit(0);
	if (r > 0)
		waitpid(r, NULL, 0);
	return r;
}
static long clone3_newuser(long flags)
{
	unsigned long args[11] = {0};
	args[0] = flags;       /* flags */
	args[4] = SIGCHLD;     /* exit_signal */
	long r = syscall(SYS_clone3, args, sizeof args);
	if (r == 0)
		_exit(0);
	if (r > 0)
		waitpid(r, NULL, 0);
	return r;
}
static long mount_tmpfs(long a) { return syscall(SYS_mount, "none", "/tmp", "tmpfs", a, NULL); }
static long bind_root(long a) { return syscall(SYS_mount, "/", "/tmp", NULL, MS_BIND | MS_REC | a, NULL); }
static long remount_rw(long a) { return syscall(SYS_mount, NULL, "/", NULL, MS_REMOUNT | MS_BIND | a, NULL); }
static long do_umount(long a) { return syscall(SYS_umount2, a, 2); }
static long do_pivot(long a) { return syscall(SYS_pivot_root, a, a); }
static long do_chroot(long a) { return syscall(SYS_chroot, a ? "/tmp" : "/"); }
static long do_fsopen(long a) { return syscall(SYS_fsopen, "tmpfs", a); }
static long do_fsconfig(long a) { return syscall(SYS_fsconfig, a, 0, NULL, NULL, 0); }
static long do_fsmount(long a) { return syscall(SYS_fsmount, a, 0, 0); }
static long do_open_tree(long a) { return syscall(SYS_open_tree, AT_FDCWD, "/", a); }
static long do_move_mount(long a) { return syscall(SYS_move_mount, a, "", a, "", 0); }
static long do_mount_setattr(long a) { return syscall(SYS_mount_setattr, a, "", 0, NULL, 0); }

int main(void)
{
	static const struct {
		const char *name;
		long flag;
	} ns[] = {
		{"unshare(CLONE_NEWUSER)", CLONE_NEWUSER}, {"unshare(CLONE_NEWNS)", CLONE_NEWNS},
		{"unshare(CLONE_NEWNET)", CLONE_NEWNET}, {"unshare(CLONE_NEWPID)", CLONE_NEWPID},
		{"unshare(CLONE_NEWUTS)", CLONE_NEWUTS}, {"unshare(CLONE_NEWIPC)", CLONE_NEWIPC},
		{"unshare(CLONE_NEWCGROUP)", CLONE_NEWCGROUP}, {"unshare(CLONE_NEWTIME)", 0x80},
		{"unshare(CLONE_NEWUSER|CLONE_NEWNS|CLONE_NEWNET)", CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWNET},
	};
	for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++)
		PROBE(ns[i].name, 1, do_unshare, ns[i].flag);
	PROBE("setns(-1, 0)", 1, do_setns, -1);
	static const char *nsfiles[] = {"mnt", "net", "pid", "user", "uts", "ipc", "cgroup"};
	for (size_t i = 0; i < sizeof nsfiles / sizeof nsfiles[0]; i++) {
		char path[64], name[64];
		snprintf(path, sizeof path, "/proc/1/ns/%s", nsfiles[i]);
		int fd = open(path, O_RDONLY);
		if (fd < 0) {
			printf("ok: open %s: %s\n", path, strerror(errno));
			continue;
		}
		snprintf(name, sizeof name, "setns(%s)", path);
		PROBE(name, 1, do_setns, fd);
		close(fd);
	}
	PROBE("clone(CLONE_NEWUSER)", 1, clone_newuser, CLONE_NEWUSER);
	PROBE("clone(CLONE_NEWNS|CLONE_NEWPID)", 1, clone_newuser, CLONE_NEWNS | CLONE_NEWPID);
	PROBE("clone3(CLONE_NEWUSER)", 1, clone3_newuser, CLONE_NEWUSER);
	PROBE("mount tmpfs", 1, mount_tmpfs, 0);
	PROBE("bind-mount /", 1, bind_root, 0);
	PROBE("remount / read-write", 1, remount_rw, 0);
	PROBE("umount2(bad pointer)", 1, do_umount, BAD);
	PROBE("pivot_root(bad pointers)", 1, do_pivot, BAD);
	PROBE("chroot(/tmp)", 1, do_chroot, 1);
	PROBE("fsopen(tmpfs)", 1, do_fsopen, 0);
	PROBE("fsconfig(-1)", 1, do_fsconfig, -1);
	PROBE("fsmount(-1)", 1, do_fsmount, -1);
	PROBE("open_tree(/, OPEN_TREE_CLONE)", 1, do_open_tree, 1);
	PROBE("move_mount(-1)", 1, do_move_mount, -1);
	PROBE("mount_setattr(-1)", 1, do_mount_setattr, -1);
	return verdict();
}
