# microbox's zygote: a template interpreter, started once inside a jail,
# that forks each run of its shape into a sandbox of the run's own
# (nsjail/zygote_template.go and zygote_child.go hold the protocol's
# other side; docs/zygote.md the security argument).
#
# Trusted code only, in these processes:
#   the template  imports the operator's preloads, then, per request from
#                 the supervisor (control socket, fd 0), clones the run's
#                 PID 1 into fresh mount, uts, ipc, net and pid namespaces
#                 with microbox's zspawn (nsinit/zspawn.c, copied into its
#                 memory at its start), which it waits on until PID 1 execs;
#   PID 1         shares the template's memory until then (no copy of it):
#                 in zspawn's C, it joins the run's cgroup (or is moved
#                 there), forks the program, then becomes microbox's own C
#                 init (nsinit/zygote.c), exec'd from the binary's
#                 descriptor the supervisor gave the template: it mounts
#                 the run's scratch areas and /proc, lets the program go
#                 on, reports, reaps;
#   the program   pid 2, a fork of the template's memory, which returns
#                 from zspawn as from a fork: makes its cgroup namespace,
#                 drops every privilege, loads the seccomp filter,
#                 then waits for the run: its code, files, environment and
#                 descriptors. Only then does a caller's code run, here.
# The template never runs a caller's code, and each run is a fresh fork of
# it: nothing a run does reaches the template or a later run.

import _io
import _signal
import _socket
import atexit
import ctypes
import errno
import gc
import json
import os
import resource
import signal
import socket
import struct
import sys
import time
import types

# The protocol with the supervisor (nsjail/zygote.go) and the run's init
# (nsjail/nsinit: zygote.h says who says what on which descriptor, and
# status.h and spawner.h); nsjail/initc_test.go holds the sides equal.
INIT_ENV, ZYGOTE_INIT = "_MICROBOX_INIT", "zinit"
ZYGOTE_HELLO, ZYGOTE_GO, ZYGOTE_READY = b"hello\n", b"go\n", b"ready"
ZYGOTE_GO_BYTE, ZYGOTE_FAILED = b"g", b"!"
STATUS_ERROR = b"error"
MAX_JOIN = 8  # a run's v1 cgroup tasks files, one per hierarchy (nsjail/zygote_child.go)
EXIT_SANDBOX_ERROR = 125

BOOTSTRAP = os.path.abspath(__file__)
# What a run's ending calls, bound before any program runs: a program may
# replace os._exit, gc.collect or sys.__excepthook__, or delete a builtin,
# and its run must still end, and end as python3's would.
_exit, _write, _sys_dict = os._exit, os.write, sys.__dict__
_BaseException, _SystemExit, _KeyboardInterrupt = BaseException, SystemExit, KeyboardInterrupt
_RuntimeError = RuntimeError
_isinstance, _type, _str, _int, _bool, _id, _list = isinstance, type, str, int, bool, id, list
_getattr, _setattr, _callable = getattr, setattr, callable
_collect, _run_exitfuncs, _audit = gc.collect, atexit._run_exitfuncs, sys.audit
_setsig, _getsig, _raise_signal = _signal.signal, _signal.getsignal, _signal.raise_signal
_SIGINT, _SIG_DFL, _NSIG = _signal.SIGINT, _signal.SIG_DFL, _signal.NSIG
_display = sys.__excepthook__  # the interpreter's own display of an exception
_report_unraisable = sys.__unraisablehook__  # and of one it cannot raise


# _io's own bases, not io's: an ABC's isinstance writes to its caches.
_IOBase, _TextIOBase, _FunctionType = _io._IOBase, _io._TextIOBase, types.FunctionType


class _Raises:
    # An object whose end raises: the interpreter reports that with an
    # argument of the type sys.unraisablehook takes (unraisable).
    def __del__(self):
        raise RuntimeError


libc = ctypes.CDLL(None, use_errno=True)
_fflush = libc.fflush  # looked up here: a first lookup in a run would write the template's pages

CLONE_NEWNS, CLONE_NEWCGROUP, CLONE_NEWUTS = 0x00020000, 0x02000000, 0x04000000
CLONE_NEWIPC, CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x08000000, 0x10000000, 0x20000000, 0x40000000
PR_SET_DUMPABLE, PR_CAPBSET_DROP = 4, 24
PR_SET_NO_NEW_PRIVS, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 38, 47, 4
PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 22, 2
SYS_CAPSET, SYS_ARCH_PRCTL, ARCH_GET_FS = 126, 158, 0x1003  # x86_64, as the zygote is (nsjail/zygote.go)
RSEQ_LEN, RSEQ_SIG = 32, 0x53053053  # the kernel's original struct rseq; glibc's signature on x86
PROT_READ, PROT_WRITE, PROT_EXEC, MAP_PRIVATE, MAP_ANONYMOUS = 1, 2, 4, 0x02, 0x20
MAP_NORESERVE, PAGE, STACK = 0x4000, 4096, 8 << 20
MADV_COLLAPSE, HUGE = 25, 1 << 21
# What zspawn's PID 1 can fail at, in zygote.h's order (STEP_*).
STEPS = ("join the run's cgroup", "say hello", "wait for go", "make its pipes", "fork the program",
         "place the init's descriptors", "close the template's descriptors", "exec the run's init")


def check(ret, what):
    if ret < 0:
        e = ctypes.get_errno()
        raise OSError(e, "%s: %s" % (what, os.strerror(e)))
    return ret


# --- the template ----------------------------------------------------------


def template():
    # The loader read it at the start (nsjail/zygote_template.go); a run
    # starts from the base environment, which has it not.
    os.environ.pop("LD_BIND_NOW", None)
    ctl = socket.socket(fileno=0)
    msg, fds = recv_fds(ctl, 1 << 16, 1)
    cfg = parse(msg)
    init_binary = fds[0]  # microbox, for the runs' init
    for name in cfg.get("preload") or ():
        try:
            __import__(name)
        except BaseException as e:
            send(ctl, {"error": "%s: %s: %s" % (name, type(e).__name__, e)})
            os._exit(1)
    # What every child would otherwise pay for, once: the compiler's first
    # use, and the collector's walk of the preloads' objects, which would
    # copy their pages into each child. (The modules the children use are
    # imported above: an import statement in a child would walk the
    # import machinery's objects, writing their pages.)
    compile("x = 1", "<warm>", "exec")
    rules = prepare(cfg, init_binary)
    gc.collect()
    gc.freeze()
    huge_pages()
    # (The bootstrap does not import threading: its hook at each fork
    # would rebuild its state in every child, writing some 130 of the
    # template's pages; the kernel's count of threads is the one to check.)
    threads = len(os.listdir("/proc/self/task"))
    if threads != 1:
        send(ctl, {"error": "%s: the template has %d threads after them (a fork copies only one): "
                   "preload modules that start none" % (",".join(cfg.get("preload") or ()), threads)})
        os._exit(1)
    quiet()
    send(ctl, {"ready": sys.version.split()[0]})
    # Each run's PID 1 is the template's child, watched by the supervisor
    # through a pidfd; the kernel reaps it (each PID 1 sets its own
    # SIGCHLD back, before it has children).
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    while True:
        msg, fds = recv_fds(ctl, 1 << 20, 2 + MAX_JOIN)
        if not msg:
            os._exit(0)  # the supervisor closed the socket
        req = parse(msg)
        if len(fds) >= 2 and len(fds) == 2 + req["join"]:  # (recv_fds took at most MAX_JOIN)
            spawn(req, rules, fds)
        elif fds:
            os.write(fds[0], STATUS_ERROR + b" zygote: the run's cgroup files came %d, not %d\n"
                     % (len(fds) - 2, req["join"]))
        for fd in fds:
            os.close(fd)


def huge_pages():
    # The template's heap in 2 MiB pages where the kernel can (MADV_COLLAPSE,
    # Linux 6.1): a fork copies one entry per 2 MiB of it instead of 512,
    # and an exit frees as few; a child's first write to one splits it,
    # and copies only the 4 KiB page written, as before. Only areas nearly
    # all present: a collapse fills in what is missing, which would grow
    # the template by what it never used (PID 1's stack, reserved buffers).
    area = None
    for line in open("/proc/self/smaps"):
        f = line.split()
        if "-" in f[0]:
            area = f if f[1].startswith("rw") and (len(f) < 6 or f[5] == "[heap]") else None
        elif area and f[0] == "Rss:":
            lo, hi = (int(x, 16) for x in area[0].split("-"))
            if int(f[1]) * 1024 * 8 >= (hi - lo) * 7:
                lo, hi = (lo + HUGE - 1) & ~(HUGE - 1), hi & ~(HUGE - 1)
                if hi > lo:
                    libc.madvise(ctypes.c_void_p(lo), ctypes.c_size_t(hi - lo), MADV_COLLAPSE)
            area = None


def quiet():
    # What the preloads printed is the template's, and goes to its own
    # pipes now (the supervisor discards it), not into a buffer each run
    # would inherit and flush into its own output; from here on the
    # template's stdout and stderr are /dev/null.
    for f in (sys.stdout, sys.stderr):
        try:
            f.flush()
        except BaseException:
            pass
    libc.fflush(None)  # C's stdio buffers too
    null = os.open("/dev/null", os.O_WRONLY)
    os.dup2(null, 1)
    os.dup2(null, 2)
    os.close(null)


# json's own scanner, in C: json.loads's Python-level steps (the bytes'
# encoding guessed, the decoder's methods) would write, in each child, the
# pages of their code and objects. The supervisor's JSON has no space
# around it.
SCAN = json.scanner.c_make_scanner and json.scanner.c_make_scanner(json.JSONDecoder())


def parse(data):
    text = data.decode()
    return SCAN(text, 0)[0] if SCAN else json.loads(text)


def send(sock, obj):
    sock.send(json.dumps(obj).encode())


def recv_fds(sock, bufsize, maxfds, flags=0):
    # socket.recv_fds without its Python-level wrapping (an array, the
    # socket module's enums): in a child, each object it touches is a
    # page copied from the template.
    msg, anc, _, _ = sock.recvmsg(bufsize, _socket.CMSG_LEN(maxfds * 4), flags)
    fds = []
    for level, kind, data in anc:
        if level == _socket.SOL_SOCKET and kind == _socket.SCM_RIGHTS:
            fds += struct.unpack("%di" % (len(data) // 4), data[:len(data) - len(data) % 4])
    return msg, fds


# --- the run's PID 1, then its program ---------------------------------------


def spawn(req, rules, fds):
    # zspawn clones PID 1 and returns its pid here, and 0 in the program,
    # which PID 1 forked: for the interpreter, as os.fork is, with its
    # hooks before and after.
    z = rules.zspawn
    z.ctl = fds[0]
    z.njoin = req["join"]
    for i in range(z.njoin):
        z.join[i] = fds[2 + i]
    rules.before_fork()
    pid = rules.spawn(rules.zref)
    if pid == 0:
        rules.after_fork_child()
        # _signal's, not signal's: its enum wrapping would write the pages
        # of enum's machinery in every run. (PID 1 set the kernel's.)
        _signal.signal(_signal.SIGCHLD, _signal.SIG_DFL)
        program(req, rules, fds[1], z.go_r, z.start_w)
    rules.after_fork_parent()
    if pid < 0:
        os.write(fds[0], STATUS_ERROR + b" zygote: clone: %s\n" % os.strerror(-pid).encode())
    if z.in_fork:
        # PID 1 died in the C library's fork, in a preload's handler, which
        # may have left the template's memory half written: it retires, and
        # the supervisor starts another for the next run.
        os.write(fds[0], STATUS_ERROR + b" zygote: the run's PID 1 died in fork (in a preload's pthread_atfork "
                 b"handler?); the template retires\n")
        os._exit(EXIT_SANDBOX_ERROR)


def program(req, rules, run, go_r, start_w):
    run = _socket.socket(fileno=run)
    try:
        if os.read(go_r, 1) != ZYGOTE_GO_BYTE:  # the init has made the run's mounts
            raise OSError("the run's init ended before its mounts were made")
        os.close(go_r)
        sandbox(req, rules)
        run.send(ZYGOTE_READY)
        spec, fds = receive(run)
        take(spec, fds, run)
        run.detach()  # closed below, with every descriptor of microbox's
    except BaseException as e:
        os.write(start_w, ZYGOTE_FAILED + b"%s: %s" % (type(e).__name__.encode(), str(e).encode()))
        os._exit(EXIT_SANDBOX_ERROR)  # the run's init reports why
    os.write(start_w, b"%d %d" % (spec["timeout_ns"], time.monotonic_ns()))
    os.closerange(3, 1 << 16)  # nothing of microbox's stays open
    run_main(spec)


def take(spec, fds, run):
    # The run's descriptors, files and working directory. Each file's
    # bytes follow the run's JSON on the socket, and go to the file a
    # piece at a time: the run's memory holds the file, as a cold run's
    # does, and not copies of it.
    if spec["stdin_null"]:
        os.close(fds[0])
        fds[0] = os.open("/dev/null", os.O_RDONLY)
    for fd, target in zip(fds, (0, 1, 2)):
        os.dup2(fd, target)
        os.close(fd)
    buf = None  # made for the first file: 64 KiB the run writes
    for path, mode, size in spec["files"] or ():
        buf = buf or memoryview(bytearray(1 << 16))
        os.makedirs(os.path.dirname(path), 0o755, exist_ok=True)
        with open(path, "wb") as f:
            while size > 0:
                n = run.recv_into(buf, min(size, len(buf)))
                if n == 0:
                    raise OSError("the run's files came truncated")
                f.write(buf[:n])
                size -= n
        os.chmod(path, mode)
    os.chdir(spec["cwd"])


def receive(run):
    # The run: its length, with the program's three descriptors, then its
    # JSON (nsjail/zygote_child.go: zygoteRun.send); its files' bytes follow.
    head, fds = recv_fds(run, 4, 3, _socket.MSG_WAITALL)
    if len(head) != 4 or len(fds) != 3:
        raise OSError("no run came")
    n = struct.unpack("<I", head)[0]
    body = bytearray()
    while len(body) < n:
        chunk = run.recv(min(n - len(body), 1 << 20))
        if not chunk:
            raise OSError("the run came truncated")
        body += chunk
    return parse(body), fds


def prepare(cfg, init_binary):
    # What every child applies to itself alike (its sandbox's uid, rlimits
    # and filters), prepared once per template, not per run: the filters'
    # programs decoded and their sock_fprogs built, and every libc function a
    # child calls looked up (a lookup in the child would write pages it
    # shares with the template, each then copied).
    rules = types.SimpleNamespace(sandbox_uid=cfg.get("sandbox_uid"), progs=[],
                                  rlimits=[tuple(r) for r in cfg.get("rlimits") or ()])
    if cfg.get("seccomp"):
        # A stack of BPF programs (seccomp/stack.go), each loaded in turn:
        # its length in instructions, four zero bytes, its instructions.
        stack = bytes.fromhex(cfg.get("seccomp"))
        rules.filter = ctypes.create_string_buffer(stack, len(stack))  # kept alive with the structs
        at = 0
        while at < len(stack):
            n, zero = struct.unpack_from("=II", stack, at)
            at += 8
            if not n or zero or at + 8 * n > len(stack):
                raise ValueError("bad seccomp stack at byte %d" % (at - 8))
            rules.progs.append(struct.pack("HxxxxxxP", n, ctypes.addressof(rules.filter) + at))
            at += 8 * n
        if not rules.progs:
            raise ValueError("empty seccomp stack")
    for name in ("unshare", "prctl", "syscall"):
        getattr(libc, name)
    load_spawn(cfg, rules, init_binary)
    return rules


class ZSpawn(ctypes.Structure):
    # zygote.h's struct zspawn, field for field.
    _fields_ = [("flags", ctypes.c_uint64), ("stack", ctypes.c_void_p), ("fork", ctypes.c_void_p),
                ("errno_at", ctypes.c_void_p), ("argv", ctypes.c_void_p), ("envp", ctypes.c_void_p),
                ("empty", ctypes.c_char_p), ("hello", ctypes.c_char_p), ("go", ctypes.c_char_p),
                ("what", ctypes.c_void_p), ("why", ctypes.c_void_p), ("nwhy", ctypes.c_int32),
                ("null", ctypes.c_int32), ("binary", ctypes.c_int32), ("rseq", ctypes.c_uint64),
                ("rseq_len", ctypes.c_uint32), ("rseq_sig", ctypes.c_uint32), ("ctl", ctypes.c_int32),
                ("njoin", ctypes.c_int32), ("join", ctypes.c_int32 * MAX_JOIN), ("go_r", ctypes.c_int32),
                ("start_w", ctypes.c_int32), ("in_fork", ctypes.c_int32), ("mask", ctypes.c_uint64), ("resume", ctypes.c_uint64 * 14)]


def rseq_area():
    # Where the C library registered this thread's rseq area (glibc 2.35
    # and later export its offset from the thread pointer and its size),
    # with the length and signature it registered: (0, 0, 0) if it did not.
    try:
        size = ctypes.c_uint.in_dll(libc, "__rseq_size").value
        offset = ctypes.c_ssize_t.in_dll(libc, "__rseq_offset").value
    except ValueError:
        return 0, 0, 0
    if not size:
        return 0, 0, 0
    fs = ctypes.c_ulong()
    check(libc.syscall(SYS_ARCH_PRCTL, ARCH_GET_FS, ctypes.byref(fs)), "arch_prctl")
    return fs.value + offset, max(size, RSEQ_LEN), RSEQ_SIG


def load_spawn(cfg, rules, init_binary):
    # microbox's zspawn (nsinit/zspawn.c), copied into memory of the
    # template's own and made executable, and everything it is given once:
    # PID 1's stack, the init's argv and environment, the texts of its
    # errors, the C library's fork. All of it lives as long as the template.
    if ctypes.sizeof(ZSpawn) != cfg.get("spawn_size") or ZSpawn.resume.offset != cfg.get("spawn_resume"):
        raise ValueError("zygote.py's struct zspawn is %d bytes (resume at %d), microbox's %d (at %d)"
                         % (ctypes.sizeof(ZSpawn), ZSpawn.resume.offset, cfg.get("spawn_size"), cfg.get("spawn_resume")))
    code = bytes.fromhex(cfg.get("spawn"))
    size = (len(code) + 4095) & ~4095
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long)
    at = libc.mmap(None, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
    if at is None or at == ctypes.c_void_p(-1).value:
        check(-1, "map zspawn")
    ctypes.memmove(at, code, len(code))
    check(libc.mprotect(ctypes.c_void_p(at), ctypes.c_size_t(size), PROT_READ | PROT_EXEC), "protect zspawn")
    # PYFUNCTYPE: the call keeps the interpreter's lock, which the program
    # then holds, as a fork's child does.
    rules.spawn = ctypes.PYFUNCTYPE(ctypes.c_long, ctypes.POINTER(ZSpawn))(at + cfg.get("spawn_entry"))
    z = rules.zspawn = ZSpawn()
    rules.zref = ctypes.pointer(z)
    # PID 1's stack, as a thread's: 8 MiB, reserved, not committed, and a
    # guard page below, so that an overflow in a preload's fork handler
    # ends PID 1 rather than writing over the template's heap.
    at = libc.mmap(None, STACK + PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0)
    if at is None or at == ctypes.c_void_p(-1).value:
        check(-1, "map PID 1's stack")
    check(libc.mprotect(ctypes.c_void_p(at), ctypes.c_size_t(PAGE), 0), "guard PID 1's stack")
    z.stack = at + PAGE + STACK - 64
    z.flags = CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWNET | CLONE_NEWPID | _signal.SIGCHLD
    z.fork = ctypes.cast(libc.fork, ctypes.c_void_p).value
    libc.__errno_location.restype = ctypes.c_void_p
    z.errno_at = libc.__errno_location()
    rules.argv = (ctypes.c_char_p * 2)(b"microbox-zygote-init", None)
    rules.envp = (ctypes.c_char_p * 2)(("%s=%s" % (INIT_ENV, ZYGOTE_INIT)).encode(), None)
    z.argv, z.envp = ctypes.addressof(rules.argv), ctypes.addressof(rules.envp)
    z.empty, z.hello, z.go = b"", ZYGOTE_HELLO, ZYGOTE_GO
    rules.what = (ctypes.c_char_p * len(STEPS))(
        *[STATUS_ERROR + b" zygote: start the run's init: %s: " % w.encode() for w in STEPS])
    why = [b"it failed\n"] + [os.strerror(e).encode() + b"\n" for e in range(1, 134)]
    rules.why = (ctypes.c_char_p * len(why))(*why)
    z.what, z.why, z.nwhy = ctypes.addressof(rules.what), ctypes.addressof(rules.why), len(why)
    z.null = os.open("/dev/null", os.O_RDWR | os.O_CLOEXEC)
    z.binary = init_binary
    z.rseq, z.rseq_len, z.rseq_sig = rseq_area()
    rules.before_fork = ctypes.pythonapi.PyOS_BeforeFork
    rules.after_fork_parent = ctypes.pythonapi.PyOS_AfterFork_Parent
    rules.after_fork_child = ctypes.pythonapi.PyOS_AfterFork_Child
    for f in (rules.before_fork, rules.after_fork_parent, rules.after_fork_child):
        f.restype = None


def sandbox(req, rules):
    # A cgroup namespace rooted at the run's cgroup, which the program was
    # born in (PID 1's own, made after this fork, is not the program's);
    # the run's own host uid (a slot of the template's map), a user
    # namespace of its own in which it is the sandbox's uid, every
    # capability dropped, no_new_privs, the rlimits, the filter.
    check(libc.unshare(CLONE_NEWCGROUP), "unshare cgroup")
    os.setsid()
    os.setgroups([])
    os.setresgid(req["gid"], req["gid"], req["gid"])
    os.setresuid(req["uid"], req["uid"], req["uid"])
    libc.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0)  # to write its own maps
    check(libc.unshare(CLONE_NEWUSER), "unshare user")
    for name, text in (("setgroups", "deny"), ("uid_map", "%d %d 1" % (rules.sandbox_uid, req["uid"])),
                       ("gid_map", "%d %d 1" % (rules.sandbox_uid, req["gid"]))):
        fd = os.open("/proc/self/" + name, os.O_WRONLY)  # not open(): no io objects made
        try:
            os.write(fd, text.encode())
        finally:
            os.close(fd)
    # The new namespace gave every capability back, the bounding set
    # included: it can only shrink while CAP_SETPCAP is still held.
    for cap in range(64):
        if libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0:
            if ctypes.get_errno() == errno.EINVAL:  # past the kernel's last capability
                break
            check(-1, "drop capability %d from the bounding set" % cap)
    check(libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0), "clear ambient capabilities")
    hdr = struct.pack("II", 0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3
    check(libc.syscall(SYS_CAPSET, hdr, bytes(24)), "capset")
    check(libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
    for res, soft, hard in rules.rlimits:
        resource.setrlimit(res, (soft, hard))
    for prog in rules.progs:
        check(libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, prog, 0, 0), "seccomp")


def run_main(spec):
    # As `python3 FILE` or `python3 -c CODE` runs its program: a fresh
    # __main__, the run's argv, path and environment, fresh randomness,
    # the same traceback and exit status.
    # Most runs have the template's environment, to the order: then there
    # is nothing to write, nor a TZ to read again.
    env = [tuple(kv.split("=", 1)) for kv in spec["env"] or ()]
    if list(os.environ.items()) != env:
        os.environ.clear()
        os.environ.update(env)
        time.tzset()  # time.tzname and the rest, from the run's TZ
    if "tempfile" in sys.modules:  # its directory, from the run's TMPDIR
        sys.modules["tempfile"].tempdir = None
    # __main__ as the interpreter makes it: __annotations__ and
    # __builtins__ after the module's own keys, and the loader it sets,
    # the source file's or the built-in importer for -c.
    main = types.ModuleType("__main__")
    d = main.__dict__
    d["__annotations__"] = {}
    d["__builtins__"] = __builtins__
    path, code = spec["file"], spec["code"]
    if path:
        d["__loader__"] = sys.modules["_frozen_importlib_external"].SourceFileLoader("__main__", path)
        d["__file__"] = path
        d["__cached__"] = None
        name = path
    else:
        d["__loader__"] = sys.modules["_frozen_importlib"].BuiltinImporter
        name = "<string>"
    if not sys.flags.safe_path:  # -I or -P: no program's directory in the path
        sys.path[0] = os.path.dirname(path) if path else ""
    sys.modules["__main__"] = main
    sys.argv = spec["argv"]
    sys.orig_argv = spec["orig_argv"]
    reseed()
    exc = None
    try:
        if code is None:
            try:
                with open(path, "rb") as f:
                    code = f.read()
            except OSError as e:  # as python3 FILE says it
                print("%s: can't open file %r: [Errno %d] %s" % (sys.orig_argv[0], path, e.errno, e.strerror),
                      file=sys.stderr)
                _exit(finish(2))
        code = compile(code, name, "exec")
        del spec
        exec(code, d)
    except _BaseException as e:
        exc = e
    # The ending is python3's, outside any except block as there; and
    # whatever the program broke, the process ends here.
    status, interrupted = 1, False
    try:
        if path:
            flush_io()  # as python3 FILE does before reporting (not -c)
        if exc is None:
            status = 0
        elif _isinstance(exc, _SystemExit):
            status = exit_status(exc)
        else:
            status = print_exception(exc)
            # python3 ends by SIGINT after an uncaught KeyboardInterrupt
            # (exactly that type), once finalized: a shell must see the ^C.
            interrupted = status is None and _type(exc) is _KeyboardInterrupt
            status = 1 if status is None else status
        exc = None
        del main, d  # for finish to free what only the program's globals held
        status = finish(status)
        if interrupted:
            _setsig(_SIGINT, _SIG_DFL)
            _raise_signal(_SIGINT)
            status = 128 + _SIGINT  # the signal did not end it
    finally:
        _exit(status)


def print_exception(e):
    # As the interpreter reports an uncaught exception: sys.last_* set,
    # then sys.excepthook, with the traceback from the program's frames;
    # a hook that fails, or none, as PyErr_Print says it. Returns None, or
    # the exit status of a SystemExit the hook raised.
    tb = e.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename == BOOTSTRAP:
        tb = tb.tb_next
    e.__traceback__ = tb
    sys.last_type, sys.last_value, sys.last_traceback = _type(e), e, tb
    if sys.version_info >= (3, 12):
        sys.last_exc = e
    hook = _sys_dict.get("excepthook")
    try:
        _audit("sys.excepthook", hook, _type(e), e, tb)
    except _RuntimeError:
        return None  # an audit hook's RuntimeError says: no report
    except _BaseException as ae:
        unraisable(ae, None)
    if hook is None and "excepthook" not in _sys_dict:
        write_stderr("sys.excepthook is missing\n")
        display(e)
        return None
    try:
        hook(_type(e), e, tb)
    except _SystemExit as e2:
        return exit_status(e2)
    except _BaseException as e2:
        tb2 = e2.__traceback__.tb_next if e2.__traceback__ is not None else None  # from the hook's frames
        write_stderr("Error in sys.excepthook:\n")
        display(e2.with_traceback(tb2))
        write_stderr("\nOriginal exception was:\n")
        display(e)
    return None


def display(e):
    # The interpreter's own display of an exception, on sys.stderr.
    try:
        _display(_type(e), e, e.__traceback__)
    except _BaseException:
        pass


def write_stderr(text):
    # PySys_WriteStderr: to sys.stderr, or to the process's stderr when
    # there is none or it fails.
    try:
        _sys_dict["stderr"].write(text)
    except _BaseException:
        try:
            _write(2, text.encode("utf-8", "backslashreplace"))
        except _BaseException:
            pass


def flush_io():
    # What python3 FILE flushes before it reports how the program ended:
    # sys.stderr, then sys.stdout, errors dropped.
    for name in ("stderr", "stdout"):
        try:
            _sys_dict[name].flush()
        except _BaseException:
            pass


def exit_status(e):
    # SystemExit's status, as the interpreter's handle_system_exit gets
    # it: its code (or, if that cannot be read, the exception itself); an
    # int's value as C's exit takes a long (255 past a long's range);
    # anything else printed on sys.stderr, and 1.
    try:
        code = e.code
    except _BaseException:
        code = e
    if code is None:
        return 0
    if _isinstance(code, _int):
        value = _int.__int__(code)
        return value & 0xFF if -(1 << 63) <= value < (1 << 63) else 255
    # The value through sys.stderr's write, or the process's stderr when
    # there is none (not when it fails); then a newline, PySys_WriteStderr's.
    f = _sys_dict.get("stderr")
    try:
        if f is None:
            _write(2, _str(code).encode("utf-8", "backslashreplace"))
        else:
            f.write(_str(code))
    except _BaseException:
        pass
    write_stderr("\n")
    return 1


def finish(status=0):
    # What Py_FinalizeEx does that os._exit skips, in its order, and the
    # exit status it leaves: 120 when sys.stdout or sys.stderr would not
    # flush. Each step goes on whatever the program broke in the one
    # before. First: wait for non-daemon threads (as it does, only if
    # threading was imported), run atexit handlers, flush the streams,
    # and give the signals Python handles back to the kernel's default.
    modules = _sys_dict.get("modules")
    modules = modules if _isinstance(modules, dict) else {}
    threading = modules.get("threading")
    try:
        if threading is not None:
            threading._shutdown()
    except _BaseException as e:
        unraisable(e, threading)
    try:
        _run_exitfuncs()
    except _BaseException:
        pass
    status = flush_std_files(status)
    try:
        for sig in range(1, _NSIG):
            if _callable(_getsig(sig)):
                _setsig(sig, _SIG_DFL)
    except _BaseException:
        pass
    # Then the modules' end: the original streams back, sys.last_* gone,
    # the program's __main__ out of sys.modules, and what only it held
    # freed, a collection taking the cycles: __del__ methods run, and a
    # file the program left open is closed, flushed first (its_files): the
    # collector finalizes a cycle's objects in no set order, and a file's
    # descriptor may close before its buffer is written. (The interpreter
    # also frees the modules the program imported and the template's:
    # walking sys.modules would copy a page for each name in it.) Last, it
    # wipes sys, and the streams it held close: their errors are not
    # reported.
    for name in ("stdout", "stderr"):
        try:
            _setattr(sys, name, _sys_dict.get("__%s__" % name))
        except _BaseException:
            pass
    for name in ("last_type", "last_value", "last_traceback", "last_exc"):
        _sys_dict.pop(name, None)
    try:
        main = modules.pop("__main__", None)
        for f in its_files(_getattr(main, "__dict__", None)):
            try:
                if not closed(f):
                    f.flush()
            except _BaseException:
                pass
        main = f = None
        _collect()
    except _BaseException:
        pass
    streams = {}
    for name in ("stdout", "stderr", "__stdout__", "__stderr__"):
        f = _sys_dict.get(name)
        streams[_id(f)] = f
    for f in streams.values():
        try:
            if f is not None and not closed(f):
                f.flush()
        except _BaseException:
            pass
    _fflush(None)  # C's stdio, as exit() flushes it (a C extension's printf)
    return status


def its_files(d, budget=2000):
    # The files (io objects) the program's globals hold, through the
    # containers, instances, classes and functions it made (no module, no
    # object of another's: those are the template's pages), at most budget
    # objects looked at; text layers first, whose flush goes through
    # their buffers.
    found, seen = [], set()
    stack = _list(d.values()) if _isinstance(d, dict) else []
    while stack and budget > 0:
        o = stack.pop()
        budget -= 1
        if _id(o) in seen:
            continue
        seen.add(_id(o))
        try:  # the program's classes may answer anything, or raise
            t = _type(o)
            if _isinstance(o, _IOBase):
                found.append(o)
            elif t is dict:
                stack.extend(o.values())
            elif t in (list, tuple, set, frozenset):
                stack.extend(o)
            elif t is _FunctionType:
                stack.extend(o.__defaults__ or ())
                stack.extend((o.__kwdefaults__ or {}).values())
                for cell in o.__closure__ or ():
                    try:
                        stack.append(cell.cell_contents)
                    except ValueError:
                        pass
            elif _getattr(o if _isinstance(o, type) else t, "__module__", None) == "__main__":
                stack.extend(_getattr(o, "__dict__", {}).values())
        except _BaseException:
            pass
    found.sort(key=lambda f: not _isinstance(f, _TextIOBase))
    return found


def flush_std_files(status):
    # sys.stdout's and sys.stderr's flush, as the interpreter's: a stream
    # that is None, missing or closed is passed over; stdout's error is
    # reported as unraisable, stderr's is not (it has nowhere to go).
    for name in ("stdout", "stderr"):
        f = _sys_dict.get(name)
        if f is None or closed(f):
            continue
        try:
            f.flush()
        except _BaseException as e:
            if name == "stdout":
                unraisable(e, f)
            status = 120
    return status


def closed(f):
    # As the interpreter asks: a stream whose "closed" cannot be read is
    # flushed.
    try:
        return _bool(f.closed)
    except _BaseException:
        return False


def unraisable(e, obj):
    # PyErr_WriteUnraisable(obj): sys.unraisablehook(args), or the
    # interpreter's own report without one; the traceback from the
    # callee's frames (it was called from C there), no message of its
    # own. The args' type is not importable: the interpreter makes one for
    # an object whose end raises.
    try:
        tb = e.__traceback__.tb_next if e.__traceback__ is not None else None
        hook = _sys_dict.get("unraisablehook")
        if hook is None:
            hook = _report_unraisable
        got = []
        _sys_dict["unraisablehook"] = got.append
        try:
            _Raises()
        finally:
            _sys_dict["unraisablehook"] = hook
        hook(_type(got[0])((_type(e), e, tb, None, obj)))
    except _BaseException:
        pass


def reseed():
    # A fork shares its template's generators: a run must not predict a
    # sibling's random numbers, nor repeat them.
    # (OpenSSL's generator reseeds itself: the template is not pid 2, as
    # each run's program is, and OpenSSL tells a fork by its pid. The
    # bootstrap does not import random, whose hook would reseed it in
    # every child: a run that imports it seeds it afresh, and one whose
    # preload did has it reseeded by that hook and here.)
    random = sys.modules.get("random")
    if random is not None:
        random.seed()
    np = sys.modules.get("numpy")
    if np is not None:
        np.random.seed()
    mp = sys.modules.get("multiprocessing.process")
    if mp is not None:  # the key its connections authenticate with
        mp.current_process().authkey = os.urandom(32)


if __name__ == "__main__":
    template()
