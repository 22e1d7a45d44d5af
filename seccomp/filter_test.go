package seccomp

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	libseccomp "github.com/seccomp/libseccomp-golang"
	"golang.org/x/sys/unix"
)

// The tests in this file load compiled filters into a child process: the
// test binary re-execs itself with helperEnv set, the child
// (helperProcess, from TestMain) loads the filter from the file named by bpfEnv and
// then either runs a set of probes, printing one line per probe, or execs a
// program. Probes use harmless or invalid arguments: a refused call must
// get the filter's errno, and a call the filter lets through gets the
// kernel's own error (EINVAL, EBADF, EFAULT, ...), which shows it reached
// the kernel.
const (
	helperEnv = "MICROBOX_SECCOMP_HELPER" // "probe", "exec" or "x32"
	bpfEnv    = "MICROBOX_SECCOMP_BPF"
)

// TestMain runs the tests, or, in a child the tests started, the child's
// side (helperProcess), which runs no test.
func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		helperProcess(mode, os.Args[1:])
	}
	os.Exit(m.Run())
}

// helperProcess loads the filter and does what mode says with args; it
// exits, never returns.
func helperProcess(mode string, args []string) {
	// No controlling terminal, so that vhangup and TIOCSTI probes could
	// touch nothing even if they got through; no core file from SIGSYS.
	unix.Setsid()
	unix.Setrlimit(unix.RLIMIT_CORE, &unix.Rlimit{})
	prog, err := os.ReadFile(os.Getenv(bpfEnv))
	if err == nil {
		err = loadFilter(prog)
	}
	if err != nil {
		fmt.Println("load filter:", err)
		os.Exit(2)
	}
	switch mode {
	case "probe":
		for _, p := range probes(args[0]) {
			fmt.Printf("probe %q %d\n", p.name, p.run())
		}
	case "exec":
		err := unix.Exec(args[0], args, os.Environ())
		fmt.Println("exec:", err)
		os.Exit(127)
	case "x32":
		// getpid through the x32 ABI: same AUDIT_ARCH as x86_64, number
		// with __X32_SYSCALL_BIT set.
		_, _, errno := unix.Syscall(unix.SYS_GETPID|0x40000000, 0, 0, 0)
		fmt.Println("x32 getpid survived:", errno)
	}
	os.Exit(0)
}

// loadFilter installs the stack of programs as microbox's init does, plus
// TSYNC so that every thread of the Go runtime gets them. No thread may be
// made between two loads: under the oldest filter alone, clone3 answers
// EPERM (the newest's ENOSYS, which glibc falls back on, is not there yet),
// and the runtime's pthread_create aborts the helper (CI saw it once). So
// the loads are raw system calls, which the scheduler does not see (no
// other thread is started to take this one's processor), on the only
// processor, with the collector off.
func loadFilter(stack []byte) error {
	runtime.GOMAXPROCS(1)
	debug.SetGCPercent(-1)
	runtime.LockOSThread()
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("no_new_privs: %w", err)
	}
	progs, err := Programs(stack)
	if err != nil {
		return err
	}
	for _, prog := range progs {
		fprog := unix.SockFprog{
			Len:    uint16(len(prog) / 8),
			Filter: (*unix.SockFilter)(unsafe.Pointer(&prog[0])),
		}
		_, _, errno := unix.RawSyscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER,
			unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&fprog)))
		runtime.KeepAlive(prog)
		if errno != 0 {
			return fmt.Errorf("seccomp: %w", errno)
		}
	}
	return nil
}

// runHelper compiles p, starts the child in mode with args and returns
// its output and exit error.
func runHelper(t *testing.T, p *Policy, mode string, args ...string) (string, error) {
	t.Helper()
	prog, err := p.Compile()
	if err != nil {
		t.Fatal(err)
	}
	return runHelperProgram(t, prog, mode, args...)
}

// runHelperProgram is runHelper for a compiled program.
func runHelperProgram(t *testing.T, prog []byte, mode string, args ...string) (string, error) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "filter.bpf")
	if err := os.WriteFile(path, prog, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], args...)
	cmd.Env = append(os.Environ(), helperEnv+"="+mode, bpfEnv+"="+path)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// probe is one system call made by the child and the outcomes allowed for
// it (0: success).
type probe struct {
	name string
	run  func() unix.Errno
	want []unix.Errno
}

const all = ^uintptr(0) // -1: an invalid fd, flag set or pointer

// call makes a raw system call and closes what it returned on success.
func call(nr uintptr, closeResult bool, args ...uintptr) func() unix.Errno {
	return func() unix.Errno {
		var a [6]uintptr
		copy(a[:], args)
		r, _, errno := unix.Syscall6(nr, a[0], a[1], a[2], a[3], a[4], a[5])
		if errno == 0 && closeResult {
			unix.Close(int(r))
		}
		return errno
	}
}

// mknod makes device 1:3 (or a FIFO) at a path that does not exist, with
// mknod or mknodat.
func mknod(nr uintptr, mode uintptr) func() unix.Errno {
	return func() unix.Errno {
		// A directory that cannot exist: /proc holds no such entry and no
		// one can create one there, so a call that reaches the kernel gets
		// ENOENT whatever the host's filesystem holds.
		path, _ := unix.BytePtrFromString("/proc/microbox-no-such-dir/node")
		args := []uintptr{uintptr(unsafe.Pointer(path)), mode, 0x103}
		if nr == unix.SYS_MKNODAT {
			args = append([]uintptr{uintptr(0xffffff9c)}, args...) // AT_FDCWD (-100) as an int
		}
		errno := call(nr, false, args...)()
		runtime.KeepAlive(path)
		return errno
	}
}

func nr(name string) uintptr {
	n, err := libseccomp.GetSyscallFromName(name)
	if err != nil || n < 0 {
		panic(fmt.Sprintf("no syscall %s here", name))
	}
	return uintptr(n)
}

func execTrue() unix.Errno {
	if err := exec.Command("/bin/true").Run(); err != nil {
		var errno unix.Errno
		if errors.As(err, &errno) {
			return errno
		}
		return unix.EIO
	}
	return 0
}

// probes returns the probe set name; parent and child build the same list.
func probes(set string) []probe {
	ok, eperm, enosys := []unix.Errno{0}, []unix.Errno{unix.EPERM}, []unix.Errno{unix.ENOSYS}
	common := []probe{
		{"getpid", call(unix.SYS_GETPID, false), ok},
		{"fork+exec /bin/true", execTrue, ok},
	}
	switch set {
	case "default":
		ps := append(common,
			probe{"clone3", call(nr("clone3"), false, 0, 0), enosys},
			probe{"clone CLONE_THREAD reaches the kernel", call(unix.SYS_CLONE, false, unix.CLONE_THREAD), []unix.Errno{unix.EINVAL}},
			probe{"ioctl TIOCSTI", call(unix.SYS_IOCTL, false, all, unix.TIOCSTI), eperm},
			probe{"ioctl TIOCSTI|1<<32", call(unix.SYS_IOCTL, false, all, unix.TIOCSTI|1<<32), eperm},
			probe{"ioctl TIOCLINUX", call(unix.SYS_IOCTL, false, all, unix.TIOCLINUX), eperm},
			probe{"ioctl TIOCLINUX|0xffffffff<<32", call(unix.SYS_IOCTL, false, all, unix.TIOCLINUX|0xffffffff<<32), eperm},
			probe{"ioctl TCGETS", call(unix.SYS_IOCTL, false, all, unix.TCGETS), []unix.Errno{unix.EBADF}},
			probe{"ioctl sign-extended TIOCGPTN", call(unix.SYS_IOCTL, false, all, 0xffffffff_00000000|unix.TIOCGPTN), []unix.Errno{unix.EBADF}},
			probe{"socket AF_INET", call(unix.SYS_SOCKET, true, unix.AF_INET, unix.SOCK_STREAM), ok},
			probe{"socket AF_UNIX", call(unix.SYS_SOCKET, true, unix.AF_UNIX, unix.SOCK_DGRAM), ok},
			probe{"socket AF_INET6", call(unix.SYS_SOCKET, true, unix.AF_INET6, unix.SOCK_DGRAM), []unix.Errno{0, unix.EAFNOSUPPORT}},
			probe{"socket AF_PACKET", call(unix.SYS_SOCKET, true, unix.AF_PACKET, unix.SOCK_RAW), eperm},
			probe{"socket AF_PACKET|1<<32", call(unix.SYS_SOCKET, true, unix.AF_PACKET|1<<32, unix.SOCK_RAW), eperm},
			probe{"socket AF_NETLINK", call(unix.SYS_SOCKET, true, unix.AF_NETLINK, unix.SOCK_RAW), eperm},
			probe{"socket AF_VSOCK", call(unix.SYS_SOCKET, true, unix.AF_VSOCK, unix.SOCK_STREAM), eperm},
			probe{"socket AF_ALG", call(unix.SYS_SOCKET, true, unix.AF_ALG, unix.SOCK_SEQPACKET), eperm},
			probe{"socketpair AF_INET", call(unix.SYS_SOCKETPAIR, false, unix.AF_INET, unix.SOCK_STREAM, 0, all), eperm},
			probe{"socketpair AF_UNIX bad type", call(unix.SYS_SOCKETPAIR, false, unix.AF_UNIX, 0xffff, 0, all), []unix.Errno{unix.EINVAL}},
			probe{"mknodat S_IFCHR", mknod(unix.SYS_MKNODAT, unix.S_IFCHR|0o600), eperm},
			probe{"mknodat S_IFBLK", mknod(unix.SYS_MKNODAT, unix.S_IFBLK|0o600), eperm},
			probe{"mknodat S_IFIFO reaches the kernel", mknod(unix.SYS_MKNODAT, unix.S_IFIFO|0o600), []unix.Errno{unix.ENOENT}},
			probe{"personality query", call(unix.SYS_PERSONALITY, false, 0xffffffff), ok},
			probe{"personality READ_IMPLIES_EXEC", call(unix.SYS_PERSONALITY, false, 0x0400000), eperm},
			probe{"prlimit64 of another process", call(unix.SYS_PRLIMIT64, false, 1, unix.RLIMIT_CPU, 0, 0), eperm},
			probe{"prlimit64 of itself", call(unix.SYS_PRLIMIT64, false, 0, unix.RLIMIT_CPU, 0, 0), ok},
			probe{"io_setup (unlisted)", call(unix.SYS_IO_SETUP, false, 0, 0), enosys},
			probe{"syscall 1000 (unknown)", call(1000, false), enosys},
			// TCP and UDP only, whatever the flags on the type.
			probe{"socket TCP by number", call(unix.SYS_SOCKET, true, unix.AF_INET, unix.SOCK_STREAM, unix.IPPROTO_TCP), ok},
			probe{"socket UDP by number", call(unix.SYS_SOCKET, true, unix.AF_INET, unix.SOCK_DGRAM, unix.IPPROTO_UDP), ok},
			probe{"socket TCP nonblocking close-on-exec", call(unix.SYS_SOCKET, true, unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0), ok},
			probe{"socket MPTCP", call(unix.SYS_SOCKET, true, unix.AF_INET, unix.SOCK_STREAM, unix.IPPROTO_MPTCP), eperm},
			probe{"socket MPTCP over IPv6", call(unix.SYS_SOCKET, true, unix.AF_INET6, unix.SOCK_STREAM, unix.IPPROTO_MPTCP), eperm},
			probe{"socket UDP-Lite", call(unix.SYS_SOCKET, true, unix.AF_INET, unix.SOCK_DGRAM, unix.IPPROTO_UDPLITE), eperm},
			probe{"socket SCTP", call(unix.SYS_SOCKET, true, unix.AF_INET6, unix.SOCK_STREAM, unix.IPPROTO_SCTP), eperm},
			probe{"socket ICMP (ping)", call(unix.SYS_SOCKET, true, unix.AF_INET, unix.SOCK_DGRAM, unix.IPPROTO_ICMP), eperm},
			probe{"socket raw", call(unix.SYS_SOCKET, true, unix.AF_INET, unix.SOCK_RAW, unix.IPPROTO_RAW), eperm},
			probe{"socket TCP with the protocol's upper bits", call(unix.SYS_SOCKET, true, unix.AF_INET, unix.SOCK_STREAM, unix.IPPROTO_TCP|1<<16), eperm},
			probe{"socket SOCK_SEQPACKET over IPv4", call(unix.SYS_SOCKET, true, unix.AF_INET, unix.SOCK_SEQPACKET, 0), eperm},
			// Socket options that load code or protocols into the kernel.
			probe{"setsockopt SO_ATTACH_FILTER", call(unix.SYS_SETSOCKOPT, false, all, unix.SOL_SOCKET, unix.SO_ATTACH_FILTER, 0, 0), eperm},
			probe{"setsockopt SO_ATTACH_BPF", call(unix.SYS_SETSOCKOPT, false, all, unix.SOL_SOCKET, unix.SO_ATTACH_BPF, 0, 0), eperm},
			probe{"setsockopt SO_ATTACH_REUSEPORT_CBPF", call(unix.SYS_SETSOCKOPT, false, all, unix.SOL_SOCKET, unix.SO_ATTACH_REUSEPORT_CBPF, 0, 0), eperm},
			probe{"setsockopt SO_ATTACH_REUSEPORT_EBPF", call(unix.SYS_SETSOCKOPT, false, all, unix.SOL_SOCKET, unix.SO_ATTACH_REUSEPORT_EBPF, 0, 0), eperm},
			probe{"setsockopt TCP_ULP", call(unix.SYS_SETSOCKOPT, false, all, unix.IPPROTO_TCP, unix.TCP_ULP, 0, 0), eperm},
			probe{"setsockopt SO_REUSEADDR reaches the kernel", call(unix.SYS_SETSOCKOPT, false, all, unix.SOL_SOCKET, unix.SO_REUSEADDR, 0, 0), []unix.Errno{unix.EBADF}},
			probe{"setsockopt TCP_NODELAY reaches the kernel", call(unix.SYS_SETSOCKOPT, false, all, unix.IPPROTO_TCP, unix.TCP_NODELAY, 0, 0), []unix.Errno{unix.EBADF}},
			probe{"setsockopt IP_TOS reaches the kernel", call(unix.SYS_SETSOCKOPT, false, all, unix.IPPROTO_IP, unix.IP_TOS, 0, 0), []unix.Errno{unix.EBADF}},
			// The host's page cache and directories shared with it.
			probe{"fcntl F_NOTIFY", call(unix.SYS_FCNTL, false, all, unix.F_NOTIFY, 0), eperm},
			probe{"fcntl F_GETFD reaches the kernel", call(unix.SYS_FCNTL, false, all, unix.F_GETFD, 0), []unix.Errno{unix.EBADF}},
			probe{"preadv2 RWF_NOWAIT", call(unix.SYS_PREADV2, false, all, 0, 0, 0, 0, unix.RWF_NOWAIT), eperm},
			probe{"preadv2 reaches the kernel", call(unix.SYS_PREADV2, false, all, 0, 0, 0, 0, 0), []unix.Errno{unix.EBADF}},
			// Write-back of host file systems succeeds without effect: a
			// bad descriptor is not even looked at.
			probe{"sync", call(unix.SYS_SYNC, false), ok},
			probe{"syncfs of a bad descriptor", call(unix.SYS_SYNCFS, false, all), ok},
			probe{"sync_file_range of a bad descriptor", call(unix.SYS_SYNC_FILE_RANGE, false, all, 0, 0, 0), ok},
		)
		if n, err := libseccomp.GetSyscallFromName("mknod"); err == nil && n >= 0 { // not on arm64
			ps = append(ps, probe{"mknod S_IFCHR", mknod(uintptr(n), unix.S_IFCHR|0o600), eperm})
		}
		for _, f := range []uintptr{unix.CLONE_NEWUSER, unix.CLONE_NEWNS, unix.CLONE_NEWPID, unix.CLONE_NEWNET,
			unix.CLONE_NEWIPC, unix.CLONE_NEWUTS, unix.CLONE_NEWCGROUP, unix.CLONE_NEWTIME} {
			// CLONE_THREAD without CLONE_SIGHAND: EINVAL if it got through.
			ps = append(ps, probe{fmt.Sprintf("clone %#x|CLONE_THREAD", f), call(unix.SYS_CLONE, false, f|unix.CLONE_THREAD), eperm})
		}
		// Every explicitly refused call, all arguments -1, which every one
		// of them rejects (EINVAL, EBADF, EFAULT, ESRCH) if it gets through.
		for _, name := range groupNames(refused()) {
			if n, err := libseccomp.GetSyscallFromName(name); err == nil && n >= 0 {
				ps = append(ps, probe{name, call(uintptr(n), false, all, all, all, all, all, all), eperm})
			}
		}
		return ps
	case "log": // refusals reach the kernel
		return append(common,
			probe{"clone3", call(nr("clone3"), false, 0, 0), []unix.Errno{unix.EINVAL}},
			probe{"unshare", call(unix.SYS_UNSHARE, false, all), []unix.Errno{unix.EINVAL}},
			probe{"io_setup (unlisted)", call(unix.SYS_IO_SETUP, false, 0, 0), []unix.Errno{unix.EINVAL, unix.EFAULT}},
			probe{"ioctl TIOCSTI", call(unix.SYS_IOCTL, false, all, unix.TIOCSTI), []unix.Errno{unix.EBADF}},
		)
	case "deny-getpid":
		return []probe{
			{"getpid", call(unix.SYS_GETPID, false), eperm},
			{"gettid", call(unix.SYS_GETTID, false), ok},
			{"fork+exec /bin/true", execTrue, ok},
		}
	case "docker-style": // testdata/docker-style.json; EPERM is its default
		ps := append(common,
			probe{"clone3 (ERRNO 38 rule)", call(nr("clone3"), false, 0, 0), enosys},
			probe{"clone CLONE_NEWUSER (masked rule)", call(unix.SYS_CLONE, false, unix.CLONE_NEWUSER|unix.CLONE_THREAD), eperm},
			probe{"clone CLONE_THREAD reaches the kernel (excludes CAP_SYS_ADMIN does not skip)", call(unix.SYS_CLONE, false, unix.CLONE_THREAD), []unix.Errno{unix.EINVAL}},
			probe{"unshare (includes CAP_SYS_ADMIN)", call(unix.SYS_UNSHARE, false, all), eperm},
			probe{"setns (includes CAP_SYS_ADMIN)", call(unix.SYS_SETNS, false, all, all), eperm},
			probe{"mount (includes CAP_SYS_ADMIN)", call(unix.SYS_MOUNT, false, all, all, all, all, all), eperm},
			probe{"chroot (includes CAP_SYS_CHROOT)", call(unix.SYS_CHROOT, false, all), eperm},
			probe{"socket AF_INET (EQ)", call(unix.SYS_SOCKET, true, unix.AF_INET, unix.SOCK_STREAM), ok},
			probe{"socket AF_UNIX (EQ)", call(unix.SYS_SOCKET, true, unix.AF_UNIX, unix.SOCK_DGRAM), ok},
			probe{"socket AF_INET6 (EQ)", call(unix.SYS_SOCKET, true, unix.AF_INET6, unix.SOCK_DGRAM), []unix.Errno{0, unix.EAFNOSUPPORT}},
			probe{"socket AF_PACKET", call(unix.SYS_SOCKET, true, unix.AF_PACKET, unix.SOCK_RAW), eperm},
			probe{"socket AF_NETLINK", call(unix.SYS_SOCKET, true, unix.AF_NETLINK, unix.SOCK_RAW), eperm},
			probe{"socket AF_VSOCK", call(unix.SYS_SOCKET, true, unix.AF_VSOCK, unix.SOCK_STREAM), eperm},
			probe{"socketpair AF_INET", call(unix.SYS_SOCKETPAIR, false, unix.AF_INET, unix.SOCK_STREAM, 0, all), eperm},
			probe{"ioctl TCGETS (MASKED_EQ)", call(unix.SYS_IOCTL, false, all, unix.TCGETS), []unix.Errno{unix.EBADF}},
			probe{"ioctl TCGETS|1<<32", call(unix.SYS_IOCTL, false, all, unix.TCGETS|1<<32), []unix.Errno{unix.EBADF}},
			probe{"ioctl FIOCLEX (0x5451)", call(unix.SYS_IOCTL, false, all, 0x5451), []unix.Errno{unix.EBADF}},
			probe{"ioctl TIOCSTI", call(unix.SYS_IOCTL, false, all, unix.TIOCSTI), eperm},
			probe{"ioctl TIOCSTI|1<<32", call(unix.SYS_IOCTL, false, all, unix.TIOCSTI|1<<32), eperm},
			probe{"mknodat S_IFIFO reaches the kernel", mknod(unix.SYS_MKNODAT, unix.S_IFIFO|0o600), []unix.Errno{unix.ENOENT}},
			probe{"mknodat S_IFCHR", mknod(unix.SYS_MKNODAT, unix.S_IFCHR|0o600), eperm},
			probe{"personality query", call(unix.SYS_PERSONALITY, false, 0xffffffff), ok},
			probe{"personality READ_IMPLIES_EXEC", call(unix.SYS_PERSONALITY, false, 0x0400000), eperm},
			probe{"getrandom flags 1 (LT 8) reaches the kernel", call(unix.SYS_GETRANDOM, false, 0, 1, 1), []unix.Errno{unix.EFAULT}},
			probe{"getrandom flags 8", call(unix.SYS_GETRANDOM, false, 0, 1, 8), eperm},
			probe{"waitid P_PID (LE 3) reaches the kernel", call(unix.SYS_WAITID, false, unix.P_PID, 1<<30, 0, unix.WEXITED), []unix.Errno{unix.ECHILD}},
			probe{"waitid idtype 4", call(unix.SYS_WAITID, false, 4, 0, 0, unix.WEXITED), eperm},
			probe{"close_range from 4 (GT 2) reaches the kernel", call(unix.SYS_CLOSE_RANGE, false, 4, 3, 0), []unix.Errno{unix.EINVAL}},
			probe{"close_range from 1", call(unix.SYS_CLOSE_RANGE, false, 1, 0, 0), eperm},
			probe{"prctl bad option (NE 35) reaches the kernel", call(unix.SYS_PRCTL, false, all), []unix.Errno{unix.EINVAL}},
			probe{"prctl PR_SET_MM", call(unix.SYS_PRCTL, false, unix.PR_SET_MM, 0, 0, 0, 1), eperm},
			probe{"mlock2 flags 2 (LE 1)", call(nr("mlock2"), false, 0, 0, 2), eperm},
			probe{"pidfd_open (minKernel 5.3) reaches the kernel", call(nr("pidfd_open"), false, all, all), []unix.Errno{unix.EINVAL}},
			probe{"userfaultfd (includes minKernel 99.0)", call(nr("userfaultfd"), false, all), eperm},
			probe{"uselib (excludes minKernel 3.0)", call(nr("uselib"), false, all), eperm},
			probe{"ptrace (ERRNO 1, as the default)", call(unix.SYS_PTRACE, false, all, all, all, all), eperm},
			probe{"bpf", call(nr("bpf"), false, all, all, all), eperm},
			probe{"io_setup (unlisted: the default)", call(unix.SYS_IO_SETUP, false, 0, 0), eperm},
			probe{"syscall 1000 (unknown: the default)", call(1000, false), eperm},
		)
		if n, err := libseccomp.GetSyscallFromName("epoll_create"); err == nil && n >= 0 { // not on arm64
			ps = append(ps,
				probe{"epoll_create 1 (GE 1)", call(uintptr(n), true, 1), ok},
				probe{"epoll_create 0", call(uintptr(n), true, 0), eperm})
		}
		if runtime.GOARCH == "amd64" {
			ps = append(ps,
				probe{"arch_prctl (includes amd64) reaches the kernel", call(nr("arch_prctl"), false, all, 0), []unix.Errno{unix.EINVAL}},
				probe{"modify_ldt (excludes amd64)", call(nr("modify_ldt"), false, all, all, all), eperm})
		}
		return ps
	}
	panic("unknown probe set " + set)
}

// checkProbes runs probe set under p and compares the child's results.
func checkProbes(t *testing.T, p *Policy, set string) {
	t.Helper()
	prog, err := p.Compile()
	if err != nil {
		t.Fatal(err)
	}
	checkProbesProgram(t, prog, set)
}

// checkProbesProgram is checkProbes for a compiled program.
func checkProbesProgram(t *testing.T, prog []byte, set string) {
	t.Helper()
	out, err := runHelperProgram(t, prog, "probe", set)
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	got := map[string]unix.Errno{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var name string
		var errno int
		if _, err := fmt.Sscanf(line, "probe %q %d", &name, &errno); err == nil {
			got[name] = unix.Errno(errno)
		}
	}
	for _, pr := range probes(set) {
		e, ran := got[pr.name]
		switch {
		case !ran:
			t.Errorf("%s: no result\n%s", pr.name, out)
		case !contains(pr.want, e):
			t.Errorf("%s: got %s (%d), want one of %v", pr.name, errName(e), int(e), pr.want)
		}
	}
	t.Logf("%d probes", len(got))
}

func contains(es []unix.Errno, e unix.Errno) bool {
	for _, x := range es {
		if x == e {
			return true
		}
	}
	return false
}

func errName(e unix.Errno) string {
	if e == 0 {
		return "success"
	}
	return unix.ErrnoName(e)
}

// TestFilterDefault probes the default filter as shipped: Program's, which
// is the precompiled one on x86_64.
func TestFilterDefault(t *testing.T) {
	prog, err := Program(ModeDefault, "")
	if err != nil {
		t.Fatal(err)
	}
	checkProbesProgram(t, prog, "default")
}

func TestFilterLog(t *testing.T) { checkProbes(t, Default().Log(), "log") }

func TestFilterProfileDenyGetpid(t *testing.T) {
	p, err := LoadProfile("testdata/deny-getpid.json")
	if err != nil {
		t.Fatal(err)
	}
	checkProbes(t, p, "deny-getpid")
}

func TestFilterDockerStyle(t *testing.T) {
	p, err := LoadProfile(dockerStyle)
	if err != nil {
		t.Fatal(err)
	}
	checkProbes(t, p, "docker-style")
}

// wantSIGSYS checks that the child was killed by SIGSYS, the mark of
// SECCOMP_RET_KILL_PROCESS.
func wantSIGSYS(t *testing.T, out string, err error) {
	t.Helper()
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		t.Fatalf("child was not killed: %v\n%s", err, out)
	}
	ws := exit.Sys().(syscall.WaitStatus)
	if !ws.Signaled() || ws.Signal() != syscall.SIGSYS {
		t.Fatalf("child ended with %v, want killed by SIGSYS\n%s", exit, out)
	}
}

func TestFilterX32Killed(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skip("x32 exists on amd64 only")
	}
	out, err := runHelper(t, Default(), "x32")
	wantSIGSYS(t, out, err)
}

// TestFilterInt80Killed makes an i386 system call (int 0x80) from a small C
// program, if a C compiler is at hand and the kernel runs i386 code at all.
func TestFilterInt80Killed(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skip("int 0x80 is x86")
	}
	cc, err := exec.LookPath("cc")
	if err != nil {
		t.Skip("no C compiler to build the int 0x80 program")
	}
	dir := t.TempDir()
	src, bin := filepath.Join(dir, "int80.c"), filepath.Join(dir, "int80")
	const prog = `int main(void) {
	long ret;
	/* i386 getpid is 20 */
	__asm__ volatile ("int $0x80" : "=a"(ret) : "a"(20L) : "memory", "r8", "r9", "r10", "r11");
	return ret > 0 ? 0 : 3;
}
`
	if err := os.WriteFile(src, []byte(prog), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(cc, "-O0", "-o", bin, src).CombinedOutput(); err != nil {
		t.Skipf("cannot build the int 0x80 program: %v\n%s", err, out)
	}
	if err := exec.Command(bin).Run(); err != nil {
		t.Skipf("int 0x80 does not work here even unfiltered (no IA32 emulation?): %v", err)
	}
	out, err := runHelper(t, Default(), "exec", bin)
	wantSIGSYS(t, out, err)
}

// python3 is Debian's interpreter, not the first python3 on PATH (which may
// be a pyenv shim, itself a shell script).
const python3 = "/usr/bin/python3"

func needPython(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(python3); err != nil {
		t.Skipf("%s not installed", python3)
	}
}

// TestPythonWorkloads runs testdata/python/*.py under the default policy;
// each prints "ok" at the end.
func TestPythonWorkloads(t *testing.T) { pythonWorkloads(t, Default()) }

// TestPythonWorkloadsDockerStyle runs the workloads testdata/docker-style.json
// is written for (print, imports, threads, subprocess, and more) under it.
func TestPythonWorkloadsDockerStyle(t *testing.T) {
	p, err := LoadProfile(dockerStyle)
	if err != nil {
		t.Fatal(err)
	}
	pythonWorkloads(t, p)
}

func pythonWorkloads(t *testing.T, p *Policy) {
	needPython(t)
	scripts, err := filepath.Glob("testdata/python/*.py")
	if err != nil || len(scripts) == 0 {
		t.Fatalf("no scripts: %v", err)
	}
	for _, script := range scripts {
		t.Run(strings.TrimSuffix(filepath.Base(script), ".py"), func(t *testing.T) {
			t.Parallel()
			if strings.Contains(script, "numpy") {
				if err := exec.Command(python3, "-c", "import numpy").Run(); err != nil {
					t.Skipf("numpy is not installed for %s (Debian: python3-numpy)", python3)
				}
			}
			abs, err := filepath.Abs(script)
			if err != nil {
				t.Fatal(err)
			}
			out, err := runHelper(t, p, "exec", python3, abs)
			if err != nil || !strings.HasSuffix(strings.TrimSpace(out), "ok") {
				t.Fatalf("%s under %s: %v\n%s", script, p.Name, err, out)
			}
		})
	}
}

// TestPythonOneLiners covers single calls, and what refusing netlink and
// AF_PACKET looks like from Python.
func TestPythonOneLiners(t *testing.T) {
	needPython(t)
	for i, code := range []string{
		"import os; os.getpid()",
		"import os, sys; print(os.getpid(), os.getppid(), os.getuid(), os.uname().sysname, sys.version_info[:2])",
		"import socket\ntry:\n    socket.if_nameindex()\nexcept PermissionError:\n    pass\nelse:\n    raise SystemExit('netlink was allowed')",
		"import socket\ntry:\n    socket.socket(socket.AF_PACKET, socket.SOCK_RAW)\nexcept PermissionError:\n    pass\nelse:\n    raise SystemExit('AF_PACKET was allowed')",
		"import os\ntry:\n    os.unshare(os.CLONE_NEWUSER) if hasattr(os, 'unshare') else os.chroot('/')\nexcept PermissionError:\n    pass\nelse:\n    raise SystemExit('unshare/chroot was allowed')",
	} {
		t.Run(strconv.Itoa(i), func(t *testing.T) {
			out, err := runHelper(t, Default(), "exec", python3, "-c", code)
			if err != nil {
				t.Fatalf("%s\n%v\n%s", code, err, out)
			}
		})
	}
}
