package seccomp

import (
	"github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

// PolicyVersion names the revision of the default policy. Bump it whenever
// allowlist or refusals change, so that reports and logs say which policy a
// run had.
const PolicyVersion = "microbox-cpython-5"

// group is a set of system calls that the default policy treats alike, with
// the reason why.
type group struct {
	why   string
	names []string
}

// allowlist is what CPython 3.x, its standard library and numpy need on
// x86_64. It started from strace -f of /usr/bin/python3 (3.11, Debian 12)
// running testdata/python/*.py (threads, subprocess, multiprocessing,
// asyncio, loopback sockets, sqlite3, ctypes, mmap, numpy), then took in
// the calls newer libcs and kernels make. Calls are named, never numbered:
// on another architecture libseccomp resolves the same names, and skips
// those the architecture lacks (open, stat, fork, ... on aarch64, whose
// libc uses the *at forms that are listed too).
//
// clone, ioctl, socket, socketpair, setsockopt, fcntl, preadv2, mknod,
// mknodat and personality are not here: they are allowed only for some
// arguments (conditional, below); the sync calls succeed without effect
// (noop).
func allowlist() []group {
	return []group{
		{"process lifecycle; clone is conditional", []string{
			"execve", "execveat", "exit", "exit_group", "fork", "vfork",
			"wait4", "waitid", "kill", "tkill", "tgkill",
			"pidfd_open", "pidfd_send_signal", "restart_syscall",
		}},
		{"thread and libc start-up", []string{
			"arch_prctl", "set_tid_address", "set_robust_list",
			"get_robust_list", "rseq", "prctl", "membarrier",
		}},
		{"identity; changing it needs capabilities the program lacks", []string{
			"getpid", "getppid", "gettid", "getpgid", "getpgrp", "setpgid",
			"getsid", "setsid", "getuid", "geteuid", "getgid", "getegid",
			"getresuid", "getresgid", "getgroups", "setuid", "setgid",
			"setreuid", "setregid", "setresuid", "setresgid", "setgroups",
			"setfsuid", "setfsgid", "capget", "capset",
		}},
		{"scheduling and resource limits (cgroups bound them)", []string{
			"sched_yield", "sched_getaffinity", "sched_setaffinity",
			"sched_getparam", "sched_setparam", "sched_getscheduler",
			"sched_setscheduler", "sched_getattr", "sched_setattr",
			"sched_get_priority_max", "sched_get_priority_min",
			"sched_rr_get_interval", "getpriority", "setpriority",
			"getrlimit", "setrlimit", "getrusage", "times",
			"getcpu", "ioprio_get", "ioprio_set",
		}},
		{"memory", []string{
			"brk", "mmap", "munmap", "mprotect", "mremap", "madvise",
			"msync", "mincore", "mlock", "mlock2", "munlock", "mlockall",
			"munlockall", "memfd_create", "pkey_alloc", "pkey_free",
			"pkey_mprotect",
			"map_shadow_stack", // thread stacks under CET, glibc >= 2.39
		}},
		{"file descriptors and I/O; ioctl, fcntl and preadv2 are conditional", []string{
			"read", "write", "readv", "writev", "pread64", "pwrite64",
			"preadv", "pwritev", "pwritev2", "close",
			"close_range", "dup", "dup2", "dup3", "lseek", "flock",
			"fsync", "fdatasync",
			"ftruncate", "truncate", "fallocate", "readahead",
			"sendfile", "copy_file_range", "splice", "tee", "vmsplice",
			"pipe", "pipe2", "eventfd", "eventfd2",
		}},
		{"paths, metadata, directories; mknod is conditional", []string{
			"open", "openat", "openat2", "creat", "stat", "fstat", "lstat",
			"newfstatat", "statx", "statfs", "fstatfs", "access",
			"faccessat", "faccessat2", "readlink", "readlinkat", "getdents",
			"getdents64", "getcwd", "chdir", "fchdir", "umask", "mkdir",
			"mkdirat", "rmdir", "rename", "renameat", "renameat2", "link",
			"linkat", "symlink", "symlinkat", "unlink", "unlinkat", "chmod",
			"fchmod", "fchmodat", "fchmodat2", "chown", "fchown", "fchownat",
			"lchown", "utime", "utimes", "futimesat", "utimensat",
			"getxattr", "lgetxattr", "fgetxattr", "listxattr", "llistxattr",
			"flistxattr", "setxattr", "lsetxattr", "fsetxattr",
			"removexattr", "lremovexattr", "fremovexattr",
			"inotify_add_watch", "inotify_rm_watch",
		}},
		{"time and timers", []string{
			"clock_gettime", "clock_getres", "clock_nanosleep",
			"gettimeofday", "time", "nanosleep", "alarm", "getitimer",
			"setitimer", "timer_create", "timer_settime", "timer_gettime",
			"timer_getoverrun", "timer_delete", "timerfd_create",
			"timerfd_settime", "timerfd_gettime",
		}},
		{"signals", []string{
			"rt_sigaction", "rt_sigprocmask", "rt_sigreturn",
			"rt_sigpending", "rt_sigsuspend", "rt_sigtimedwait",
			"rt_sigqueueinfo", "rt_tgsigqueueinfo", "sigaltstack",
			"signalfd", "signalfd4", "pause",
		}},
		{"waiting: futexes, poll, select, epoll (asyncio)", []string{
			"futex", "futex_waitv", "poll", "ppoll", "select", "pselect6",
			"epoll_create", "epoll_create1", "epoll_ctl", "epoll_wait",
			"epoll_pwait", "epoll_pwait2",
		}},
		{"sockets; socket, socketpair and setsockopt are conditional", []string{
			"bind", "connect", "listen", "accept", "accept4",
			"getsockname", "getpeername", "getsockopt",
			"sendto", "recvfrom", "sendmsg", "recvmsg", "sendmmsg",
			"recvmmsg", "shutdown",
		}},
		{"System V shared memory and semaphores, private to the IPC namespace", []string{
			// Message queues (msg*, mq_*) are left out: neither the
			// standard library nor numpy uses them.
			"shmget", "shmat", "shmdt", "shmctl", "semget", "semop",
			"semtimedop", "semctl",
		}},
		{"system information and self-restriction", []string{
			"uname", "sysinfo", "getrandom", "seccomp",
		}},
	}
}

// refused answers EPERM, explicitly rather than by the default ENOSYS, so
// that a program (and its libc) sees "not permitted", not "try another
// way". These are the calls that reach into the host, other processes or
// large kernel attack surfaces; none has a use in a Python sandbox.
func refused() []group {
	return []group{
		{"other processes' memory and descriptors", []string{
			"ptrace", "process_vm_readv", "process_vm_writev",
			"pidfd_getfd", "process_madvise", "kcmp",
		}},
		{"kernel attack surface: eBPF, perf, userfaultfd, io_uring, keys", []string{
			"bpf", "perf_event_open", "userfaultfd", "io_uring_setup",
			"io_uring_enter", "io_uring_register", "keyctl", "add_key",
			"request_key", "fanotify_init", "lookup_dcookie", "modify_ldt",
		}},
		{"namespaces and mounts, old and new API", []string{
			"unshare", "setns", "mount", "umount2", "pivot_root", "chroot",
			"fsopen", "fsconfig", "fsmount", "fspick", "move_mount",
			"open_tree", "mount_setattr", "open_by_handle_at",
			"name_to_handle_at", "quotactl", "quotactl_fd",
		}},
		{"host administration: modules, kexec, power, swap, clock, hostname", []string{
			"kexec_load", "kexec_file_load", "init_module", "finit_module",
			"delete_module", "reboot", "swapon", "swapoff", "settimeofday",
			"clock_settime", "clock_adjtime", "adjtimex", "acct", "syslog",
			"iopl", "ioperm", "vhangup", "sethostname", "setdomainname",
		}},
		{"inotify instances: the kernel counts every one against the user " +
			"that owns the jail's user namespace, host root, whose limit " +
			"(fs.inotify.max_user_instances, 128 by default) a few runs " +
			"could exhaust for every root service on the host", []string{
			"inotify_init", "inotify_init1",
		}},
		{"the host's page cache of the files the run shares with it (the " +
			"default root's /usr): dropping another's cached pages is a " +
			"side channel and a slowdown", []string{
			"fadvise64",
		}},
		{"obsolete interfaces", []string{
			"nfsservctl", "uselib", "_sysctl",
		}},
	}
}

// noop answers success without doing anything. sync and syncfs write back
// every dirty page of the host's file systems (or of the one a descriptor
// is on: the read-only root is a host file system), which would make the
// caller, in uninterruptible sleep, wait on the host's disks, and
// sync_file_range likewise for a file's range. A run's own writable files
// are all in tmpfs, which has nothing to write back, so success is the
// truth for them; a refusal would only break programs that sync
// defensively.
func noop() []group {
	return []group{
		{"write-back of host file systems", []string{"sync", "syncfs", "sync_file_range"}},
	}
}

// Constants for the conditional rules.
const (
	// nsFlags are the clone flags that make a new namespace. CLONE_NEWTIME
	// (0x80) falls inside clone's exit-signal byte and cannot really be
	// passed to clone, only to clone3; it is in the mask anyway, which
	// costs nothing since no signal number has that bit.
	nsFlags = unix.CLONE_NEWUSER | unix.CLONE_NEWNS | unix.CLONE_NEWPID |
		unix.CLONE_NEWNET | unix.CLONE_NEWIPC | unix.CLONE_NEWUTS |
		unix.CLONE_NEWCGROUP | unix.CLONE_NEWTIME

	addrNoRandomize = 0x0040000  // ADDR_NO_RANDOMIZE (not in x/sys/unix)
	personaQuery    = 0xffffffff // personality(0xffffffff) reads
)

// argRules is a call allowed only for some arguments: Rules lists either
// the argument patterns it is allowed with (only: any other answers EPERM)
// or those it is refused with, EPERM (except: any other is allowed). Each
// rule is a conjunction of masked equalities; a call's rules are
// alternatives.
type argRules struct {
	name  string
	only  bool
	rules []specs.LinuxSyscall
}

// conditional returns the calls that are allowed only for some arguments.
//
// An int argument is compared on its low 32 bits only (mask 0xffffffff,
// not a plain equality): the kernel reads it as 32 bits, whatever the
// upper word holds (CVE-2019-10063: a 64-bit compare misses
// TIOCSTI|1<<32).
func conditional() []argRules {
	return []argRules{
		// glibc falls back from clone3 to clone, whose flags seccomp can
		// see (clone3 passes them in memory). Threads, fork, vfork,
		// posix_spawn and subprocess pass no namespace flag.
		only("clone", 0, nsFlags, 0),
		// TIOCSTI pushes bytes into a terminal's input and TIOCLINUX
		// pastes the console selection: both inject commands into the
		// caller's shell when stdin is its tty (CVE-2017-5226).
		except("ioctl", 1, 0xffffffff, unix.TIOCSTI, unix.TIOCLINUX),
		only("socketpair", 0, 0xffffffff, unix.AF_UNIX),
		// FIFOs (os.mkfifo) and plain files yes, device nodes no.
		only("mknod", 1, unix.S_IFMT, 0, unix.S_IFREG, unix.S_IFIFO),
		only("mknodat", 2, unix.S_IFMT, 0, unix.S_IFREG, unix.S_IFIFO),
		// personality(0) (Linux), the 0xffffffff query, and
		// ADDR_NO_RANDOMIZE (setarch -R), which only changes the
		// caller's own later exec layout. Any other persona, such as
		// READ_IMPLIES_EXEC, MMAP_PAGE_ZERO (a help to kernel
		// NULL-dereference exploits) or the 32-bit ones, is refused
		// with EPERM.
		only("personality", 0, 0xffffffff, 0, addrNoRandomize, personaQuery),
		// prlimit64 on the caller only (pid 0, which glibc's getrlimit
		// and setrlimit pass): in a rootless jail the program shares a
		// host uid with the jail's init, whose limits it must not touch.
		only("prlimit64", 0, 0xffffffff, 0),
		// F_NOTIFY (dnotify) would report accesses to the directories of
		// the root the run shares with the host and other runs (/usr/lib),
		// theirs included.
		except("fcntl", 1, 0xffffffff, unix.F_NOTIFY),
		// RWF_NOWAIT reads tell whether a page is in the page cache: with
		// a shared /usr, whether the host or another run read it lately.
		except("preadv2", 5, unix.RWF_NOWAIT, unix.RWF_NOWAIT),
		socketRules(),
		setsockoptRules(),
	}
}

// socketRules allow AF_UNIX sockets, and for AF_INET and AF_INET6 only TCP
// and UDP (protocol 0 or their own number): MPTCP, UDP-Lite, SCTP, ICMP
// (ping sockets) and raw sockets are each a kernel attack surface no
// program here needs. The type is compared without its SOCK_NONBLOCK and
// SOCK_CLOEXEC flags.
//
// Any other family answers EPERM. AF_NETLINK among them: traces of the
// standard library make no netlink socket, and glibc's
// getaddrinfo(AI_ADDRCONFIG), the one libc user of NETLINK_ROUTE, takes a
// refusal as "IPv4 and IPv6 both configured"; socket.if_nameindex()
// fails, which is acceptable. AF_PACKET, AF_VSOCK, AF_ALG, ... are each
// their own kernel attack surface.
func socketRules() argRules {
	const (
		all      = 0xffffffff
		typeMask = 0xf // SOCK_TYPE_MASK
	)
	rules := []specs.LinuxSyscall{rule("socket", specs.ActAllow, cond{0, all, unix.AF_UNIX})}
	for _, family := range []uint32{unix.AF_INET, unix.AF_INET6} {
		for _, k := range []struct{ typ, protocol uint32 }{
			{unix.SOCK_STREAM, 0}, {unix.SOCK_STREAM, unix.IPPROTO_TCP},
			{unix.SOCK_DGRAM, 0}, {unix.SOCK_DGRAM, unix.IPPROTO_UDP},
		} {
			rules = append(rules, rule("socket", specs.ActAllow,
				cond{0, all, family}, cond{1, typeMask, k.typ}, cond{2, all, k.protocol}))
		}
	}
	return argRules{name: "socket", only: true, rules: rules}
}

// setsockoptRules refuse, with EPERM, the options that load code or
// protocols into the kernel: classic and eBPF socket filters
// (SO_ATTACH_FILTER, SO_ATTACH_BPF and their SO_REUSEPORT forms) and
// TCP upper-layer protocols (TCP_ULP, e.g. kernel TLS). Any other option
// is allowed.
func setsockoptRules() argRules {
	const all = 0xffffffff
	refusedAt := []struct {
		level   uint32
		options []uint32
	}{
		{unix.SOL_SOCKET, []uint32{unix.SO_ATTACH_FILTER, unix.SO_ATTACH_BPF, unix.SO_ATTACH_REUSEPORT_CBPF, unix.SO_ATTACH_REUSEPORT_EBPF}},
		{unix.IPPROTO_TCP, []uint32{unix.TCP_ULP}},
	}
	var rules []specs.LinuxSyscall
	for _, r := range refusedAt {
		for _, o := range r.options {
			rules = append(rules, rule("setsockopt", specs.ActErrno, cond{1, all, r.level}, cond{2, all, o}))
		}
	}
	return argRules{name: "setsockopt", rules: rules}
}

// Default returns microbox's curated CPython allowlist: the calls listed by
// allowlist() are allowed, those listed by refused() answer EPERM, those
// listed by noop() succeed without effect, the conditional ones depend on
// their arguments, clone3 answers ENOSYS (so that glibc falls back to
// clone), and any other call answers ENOSYS, so that libc falls back as it
// does on an older kernel.
//
// It is three filters, stacked (see Policy), because one libseccomp filter
// can say "these arguments are allowed" but not "and any other answers
// EPERM": a call's arguments that meet none of its rules get the filter's
// default action, ENOSYS here. (Spelling out the other arguments as rules
// took a cover of up to 32 masked comparisons per listed value, some 550
// rules and 1,900 BPF instructions, which the kernel checked, converted and
// JIT-compiled on every run.) Instead, each filter has a default that
// fits, and each call has at most one action besides its filter's
// default, so that no rule depends on libseccomp's order among
// overlapping rules:
//
//   - the oldest, default EPERM: allows the allowlist, the calls refused
//     only for some arguments, and the calls allowed only for some
//     arguments with those arguments. Any other argument of those is
//     refused here.
//   - the next, default allow: refuses the calls refused only for some
//     arguments with those arguments.
//   - the newest, default ENOSYS: allows the allowlist and every
//     conditional call (the filters below judge their arguments), refuses
//     the refused calls, makes the noop calls succeed. Being the newest,
//     its errno is the one a program sees: ENOSYS for unknown calls,
//     although the oldest answers EPERM for them.
func Default() *Policy {
	var allowed, refusedAt []specs.LinuxSyscall
	var condNames []string
	for _, c := range conditional() {
		condNames = append(condNames, c.name)
		if c.only {
			allowed = append(allowed, c.rules...)
		} else {
			allowed = append(allowed, specs.LinuxSyscall{Names: []string{c.name}, Action: specs.ActAllow})
			refusedAt = append(refusedAt, c.rules...)
		}
	}
	return &Policy{
		Name: PolicyVersion,
		Below: []specs.LinuxSeccomp{
			{DefaultAction: specs.ActErrno, DefaultErrnoRet: eperm(), Syscalls: append(allowRules(), allowed...)},
			{DefaultAction: specs.ActAllow, Syscalls: refusedAt},
		},
		Spec: specs.LinuxSeccomp{
			DefaultAction:   specs.ActErrno,
			DefaultErrnoRet: errnoRet(unix.ENOSYS),
			Syscalls:        append(newestRules(), specs.LinuxSyscall{Names: condNames, Action: specs.ActAllow}),
		},
	}
}

// allowRules allow the allowlist's calls, a rule a group.
func allowRules() []specs.LinuxSyscall {
	var rules []specs.LinuxSyscall
	for _, g := range allowlist() {
		rules = append(rules, specs.LinuxSyscall{Names: g.names, Action: specs.ActAllow})
	}
	return rules
}

// newestRules are the newest filter's rules but the conditional calls':
// the allowlist, the refusals, the noop calls and clone3.
func newestRules() []specs.LinuxSyscall {
	rules := allowRules()
	for _, g := range refused() {
		rules = append(rules, specs.LinuxSyscall{Names: g.names, Action: specs.ActErrno, ErrnoRet: eperm()})
	}
	for _, g := range noop() {
		rules = append(rules, specs.LinuxSyscall{Names: g.names, Action: specs.ActErrno, ErrnoRet: errnoRet(0)})
	}
	return append(rules, specs.LinuxSyscall{Names: []string{"clone3"}, Action: specs.ActErrno, ErrnoRet: errnoRet(unix.ENOSYS)})
}

func errnoRet(e unix.Errno) *uint {
	u := uint(e)
	return &u
}

func eperm() *uint { return errnoRet(unix.EPERM) }

// only allows call name when the 32-bit word arg&mask is one of values and
// refuses it with EPERM otherwise.
func only(name string, arg uint, mask uint32, values ...uint32) argRules {
	return argRules{name: name, only: true, rules: masked(name, specs.ActAllow, arg, mask, values)}
}

// except refuses call name with EPERM when the 32-bit word arg&mask is one
// of values and allows it otherwise.
func except(name string, arg uint, mask uint32, values ...uint32) argRules {
	return argRules{name: name, rules: masked(name, specs.ActErrno, arg, mask, values)}
}

// masked returns a rule "name with arg&mask == value gets action" for each
// of values.
func masked(name string, action specs.LinuxSeccompAction, arg uint, mask uint32, values []uint32) []specs.LinuxSyscall {
	var rules []specs.LinuxSyscall
	for _, v := range values {
		rules = append(rules, rule(name, action, cond{arg, mask, v & mask}))
	}
	return rules
}

// cond is one masked comparison: argument arg, masked, equals value.
type cond struct {
	arg         uint
	mask, value uint32
}

// rule is "name whose arguments meet every cond gets action", where
// ActErrno means EPERM.
func rule(name string, action specs.LinuxSeccompAction, conds ...cond) specs.LinuxSyscall {
	r := specs.LinuxSyscall{Names: []string{name}, Action: action}
	for _, c := range conds {
		r.Args = append(r.Args, specs.LinuxSeccompArg{Index: c.arg, Op: specs.OpMaskedEqual, Value: uint64(c.mask), ValueTwo: uint64(c.value)})
	}
	if action == specs.ActErrno {
		r.ErrnoRet = eperm()
	}
	return r
}

// groupNames flattens groups, for tests and reports.
func groupNames(gs []group) []string {
	var out []string
	for _, g := range gs {
		out = append(out, g.names...)
	}
	return out
}
