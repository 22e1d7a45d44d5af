# microbox's zygote: a template interpreter, started once inside a jail,
# that forks each run of its shape into a sandbox of the run's own
# (nsjail/zygote.go holds the protocol's other side; docs/zygote.md the
# security argument).
#
# Trusted code only, in three processes:
#   the template   imports the operator's preloads, then forks a child per
#                  request from the supervisor (control socket, fd 0);
#   B (run's init) the child, in fresh mount, uts, ipc, net and pid
#                  namespaces (PID 1 of the last), moved by the supervisor
#                  into the run's cgroup: it mounts the run's scratch areas
#                  and /proc, starts C, reports and reaps, as init.c does;
#   C (program)    pid 2: drops every privilege, loads the seccomp filter,
#                  then waits for the run: its code, files, environment and
#                  descriptors. Only then does a caller's code run, in C.
# The template never runs a caller's code, and each run is a fresh fork of
# it: nothing a run does reaches the template or a later run.
#
# Messages on the control socket and B's are JSON; the supervisor's status
# lines from B follow init.c's ("start NS", "exit STATUS NS CPU_US RSS_KIB
# [wall]", "error MSG").

import ctypes
import gc
import json
import os
import signal
import socket
import struct
import sys
import threading
import time
import types

BOOTSTRAP = os.path.abspath(__file__)
libc = ctypes.CDLL(None, use_errno=True)

CLONE_NEWNS, CLONE_NEWCGROUP, CLONE_NEWUTS = 0x00020000, 0x02000000, 0x04000000
CLONE_NEWIPC, CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x08000000, 0x10000000, 0x20000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_CAPBSET_DROP = 1, 4, 24
PR_SET_NO_NEW_PRIVS, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 38, 47, 4
PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 22, 2
SYS_CAPSET = 126  # x86_64, as the zygote is (nsjail/zygote.go)


def check(ret, what):
    if ret < 0:
        e = ctypes.get_errno()
        raise OSError(e, "%s: %s" % (what, os.strerror(e)))
    return ret


def mount(src, dst, fstype, flags, data=None):
    enc = lambda s: s.encode() if s is not None else None
    check(libc.mount(enc(src), enc(dst), enc(fstype), ctypes.c_ulong(flags), enc(data)), "mount %s" % dst)


# --- the template ----------------------------------------------------------


def template():
    ctl = socket.socket(fileno=0)
    cfg = json.loads(ctl.recv(1 << 20))
    for name in cfg.get("preload") or ():
        try:
            __import__(name)
        except BaseException as e:
            send(ctl, {"error": "preload %s: %s: %s" % (name, type(e).__name__, e)})
            os._exit(1)
    # What every child would otherwise pay for, once: the compiler's
    # first use, and the collector's walk of the preloads' objects, which
    # would copy their pages into each child.
    compile("x = 1", "<warm>", "exec")
    gc.collect()
    gc.freeze()
    threads = len(os.listdir("/proc/self/task"))
    if threads != 1 or threading.active_count() != 1:
        send(ctl, {"error": "the template has %d threads after its preloads (a fork copies only one): "
                   "preload modules that start none" % threads})
        os._exit(1)
    send(ctl, {"ready": sys.version.split()[0]})
    while True:
        msg, fds, _, _ = socket.recv_fds(ctl, 1 << 20, 2)
        if not msg:
            os._exit(0)  # the supervisor closed the socket
        req = json.loads(msg)
        pid = os.fork()
        if pid == 0:
            ctl.close()
            child(req, fds)
        for fd in fds:
            os.close(fd)
        os.waitpid(pid, 0)  # A, which leaves at once


def send(sock, obj):
    sock.send(json.dumps(obj).encode())


# --- A and B: the run's namespaces and its init ----------------------------


def child(req, fds):
    ctl, run = (socket.socket(fileno=fd) for fd in fds)
    try:
        check(libc.unshare(CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWNET | CLONE_NEWPID), "unshare")
        if os.fork() != 0:
            os._exit(0)  # A: B, its child, is PID 1 of the new pid namespace
        init(req, ctl, run)
    except BaseException as e:
        report(ctl, "error zygote: %s" % e)
    os._exit(125)


def report(ctl, line):
    try:
        ctl.send(line.encode())
    except OSError:
        pass


def init(req, ctl, run):
    # B, as init.c's PID 1: not dumpable (nothing of it is the program's
    # to read), tied to the template's jail (which dies with the
    # supervisor), told its host pid by the kernel's credentials.
    libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    ctl.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
    ctl.sendmsg([b"hello"], [(socket.SOL_SOCKET, socket.SCM_CREDENTIALS, struct.pack("3i", os.getpid(), 0, 0))])
    if ctl.recv(16) != b"go":  # the supervisor moved B into the run's cgroup
        os._exit(125)
    check(libc.unshare(CLONE_NEWCGROUP), "unshare cgroup")
    mounts(req)
    socket.sethostname(req["hostname"])
    loopback_up()
    start_r, start_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        ctl.close()
        os.close(start_r)
        program(req, run, start_w)
    run.close()
    os.close(start_w)
    supervise(ctl, pid, start_r)


def mounts(req):
    mount(None, "/", None, MS_REC | MS_PRIVATE)
    scratch = MS_NOSUID | MS_NODEV
    size = "size=%d" % req["tmpfs_size"]
    mount("tmpfs", "/tmp", "tmpfs", scratch, size + ",mode=1777")
    workdir = req["workdir"]
    if workdir != "/tmp" and not workdir.startswith("/tmp/"):
        mount("tmpfs", workdir, "tmpfs", scratch, size + ",mode=0755")
    os.makedirs(workdir, exist_ok=True)
    os.chown(workdir, req["uid"], req["gid"])
    mount("tmpfs", "/dev/shm", "tmpfs", scratch | MS_NOEXEC, size + ",mode=1777")
    mount("proc", "/proc", "proc", scratch | MS_NOEXEC)
    for p in ("/proc/sys", "/proc/sysrq-trigger"):
        bind_ro(p, p)
    for p in req["masked"]:
        mask(req["empty"], "/proc/" + p)


def bind_ro(src, dst):
    if not os.path.exists(src):
        return
    mount(src, dst, None, MS_BIND | MS_REC)
    mount(None, dst, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC)


def mask(empty, path):
    if not os.path.lexists(path):
        return
    if os.path.isdir(path):
        mount("tmpfs", path, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=4k,mode=0555")
    else:
        bind_ro(empty, path)


def loopback_up():
    import fcntl
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    ifr = struct.pack("16sH14x", b"lo", 0)
    flags = struct.unpack("16sH14x", fcntl.ioctl(s, 0x8913, ifr))[1]  # SIOCGIFFLAGS
    fcntl.ioctl(s, 0x8914, struct.pack("16sH14x", b"lo", flags | 0x1 | 0x40))  # SIOCSIFFLAGS: UP, RUNNING
    s.close()


deadline_passed = False


def supervise(ctl, pid, start_r):
    # The program says when it starts the caller's code, and with which
    # wall-clock limit; PID 1 holds that limit itself, as init.c does.
    started = os.read(start_r, 1024)
    os.close(start_r)
    if started.startswith(b"!"):
        report(ctl, "error zygote: the run's program: %s" % started[1:].decode(errors="replace"))
        os._exit(125)
    if started:
        report(ctl, "start %d" % time.monotonic_ns())
        arm(int(started))
    killed = False
    while True:
        try:
            got, status, ru = os.wait4(-1, 0)
        except InterruptedError:
            got = 0
        except ChildProcessError:
            os._exit(125)
        if deadline_passed and not killed:
            os.kill(-1, signal.SIGKILL)
            killed = True
        if got != pid:
            continue
        cpu_us = int((ru.ru_utime + ru.ru_stime) * 1e6)
        if not started:
            report(ctl, "error zygote: the program ended before its run began (wait status %d)" % status)
            os._exit(125)
        report(ctl, "exit %d %d %d %d%s" % (status, time.monotonic_ns(), cpu_us, ru.ru_maxrss, " wall" if killed else ""))
        os._exit(0)


def arm(timeout_ns):
    def passed(sig, frame):
        global deadline_passed
        deadline_passed = True

    signal.signal(signal.SIGALRM, passed)
    signal.siginterrupt(signal.SIGALRM, True)
    signal.setitimer(signal.ITIMER_REAL, timeout_ns / 1e9 + 1e-6)


# --- C: the program --------------------------------------------------------


def program(req, run, start_w):
    try:
        sandbox(req)
        run.send(b"ready")
        spec, fds = receive(run)
        take(spec, fds)
        run.detach()  # closed below, with every descriptor of microbox's
        os.closerange(3, start_w)
    except BaseException as e:
        os.write(start_w, b"!%s: %s" % (type(e).__name__.encode(), str(e).encode()))
        os._exit(125)  # B reports why
    os.write(start_w, b"%d" % spec["timeout_ns"])
    os.closerange(start_w, 1 << 16)  # nothing of microbox's stays open
    run_main(spec)


def take(spec, fds):
    # The run's descriptors, files and working directory.
    if spec["stdin_null"]:
        os.close(fds[0])
        fds[0] = os.open("/dev/null", os.O_RDONLY)
    for fd, target in zip(fds, (0, 1, 2)):
        os.dup2(fd, target)
        os.close(fd)
    for path, mode, data in spec["files"] or ():
        with open(path, "wb") as f:
            f.write(bytes.fromhex(data))
        os.chmod(path, mode)
    os.chdir(spec["cwd"])


def receive(run):
    # The run: its length, with the program's three descriptors, then its
    # JSON (nsjail/zygote.go: zygoteRun.send).
    head, fds, _, _ = socket.recv_fds(run, 4, 3, socket.MSG_WAITALL)
    if len(head) != 4 or len(fds) != 3:
        raise OSError("no run came")
    n = struct.unpack("<I", head)[0]
    body = bytearray()
    while len(body) < n:
        chunk = run.recv(min(n - len(body), 1 << 20))
        if not chunk:
            raise OSError("the run came truncated")
        body += chunk
    return json.loads(body), fds


def sandbox(req):
    # The run's own host uid (a slot of the template's map), a user
    # namespace of its own in which it is the sandbox's uid, every
    # capability dropped, no_new_privs, the rlimits, the filter.
    os.setsid()
    for cap in range(64):
        if libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 and ctypes.get_errno() == 22:  # EINVAL: past the last
            break
    os.setgroups([])
    os.setresgid(req["gid"], req["gid"], req["gid"])
    os.setresuid(req["uid"], req["uid"], req["uid"])
    libc.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0)  # to write its own maps
    check(libc.unshare(CLONE_NEWUSER), "unshare user")
    for name, text in (("setgroups", "deny"), ("uid_map", "%d %d 1" % (req["sandbox_uid"], req["uid"])),
                       ("gid_map", "%d %d 1" % (req["sandbox_uid"], req["gid"]))):
        with open("/proc/self/" + name, "w") as f:
            f.write(text)
    hdr = struct.pack("II", 0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3
    check(libc.syscall(SYS_CAPSET, hdr, bytes(24)), "capset")
    libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    check(libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
    import resource
    for res, soft, hard in req["rlimits"]:
        resource.setrlimit(res, (soft, hard))
    if req["seccomp"]:
        bpf = bytes.fromhex(req["seccomp"])
        buf = ctypes.create_string_buffer(bpf, len(bpf))
        prog = struct.pack("HxxxxxxP", len(bpf) // 8, ctypes.addressof(buf))
        check(libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, prog, 0, 0), "seccomp")


def run_main(spec):
    # As `python3 FILE` or `python3 -c CODE` runs its program: a fresh
    # __main__, the run's argv, path and environment, fresh randomness,
    # the same traceback and exit status.
    os.environ.clear()
    os.environ.update(kv.split("=", 1) for kv in spec["env"] or ())
    main = types.ModuleType("__main__")
    main.__dict__.update({"__builtins__": __builtins__, "__spec__": None, "__loader__": None})
    path = spec["file"]
    if path:
        main.__file__ = path
        main.__cached__ = None
        sys.path[0] = os.path.dirname(path)
        name = path
    else:
        sys.path[0] = ""
        name = "<string>"
    sys.modules["__main__"] = main
    sys.argv = spec["argv"]
    sys.orig_argv = spec["orig_argv"]
    reseed()
    gc.unfreeze()
    status = 0
    try:
        code = compile(spec["code"], name, "exec")
        del spec
        exec(code, main.__dict__)
    except SystemExit as e:
        status = exit_status(e)
    except KeyboardInterrupt:
        finish()
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    except BaseException as e:
        tb = e.__traceback__
        while tb is not None and tb.tb_frame.f_code.co_filename == BOOTSTRAP:
            tb = tb.tb_next
        e.__traceback__ = tb
        sys.excepthook(type(e), e, tb)
        status = 1
    finish()
    os._exit(status)


def exit_status(e):
    code = e.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    print(code, file=sys.stderr)
    return 1


def finish():
    # What the interpreter does on its way out that os._exit skips: wait
    # for non-daemon threads, run atexit handlers, flush the streams.
    try:
        threading._shutdown()
    except BaseException:
        pass
    import atexit
    atexit._run_exitfuncs()
    for f in (sys.stdout, sys.stderr):
        try:
            f.flush()
        except BaseException:
            pass


def reseed():
    # A fork shares its template's generators: a run must not predict a
    # sibling's random numbers, nor repeat them.
    import random
    random.seed()
    np = sys.modules.get("numpy")
    if np is not None:
        np.random.seed()


if __name__ == "__main__":
    template()
