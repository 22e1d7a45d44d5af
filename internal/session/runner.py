# A session's interpreter (internal/session): it runs cells in one
# namespace of globals and does the session's file operations in its
# scratch area, at its supervisor's request. It runs as any program of a
# run does (uid 1000, no capabilities, the seccomp filter, the run's
# cgroup): nothing here is trusted by the supervisor, which checks what it
# says, and the cells' code may change anything in this process.
#
# The wire (wire.go declares it for Go; the names below are the same):
# fd 0 is a stream socket to the supervisor; each message is a frame, a
# 4-byte big-endian length then that many bytes of one JSON object. The
# supervisor sends a config first, the runner answers ready (or error),
# then each request gets exactly one answer, in order, with its "seq".
import ast
import base64
import errno
import io
import json
import linecache
import os
import signal
import stat
import struct
import sys
import threading
import traceback
import types

OP_CELL, OP_PUT, OP_GET, OP_DELETE, OP_LIST = "cell", "put", "get", "delete", "list"
MAX_LISTED = 10000
DRAIN_WAIT = 0.5  # seconds a cell's output pipes may stay open after it (a child process still holds them)

CTL = os.dup(0)  # the supervisor; fd 0 becomes each cell's stdin
NULL = os.open("/dev/null", os.O_RDWR)
os.dup2(NULL, 0)
os.dup2(NULL, 1)
os.dup2(NULL, 2)
WORKDIR = os.getcwd()


def read_exactly(n):
    buf = bytearray()
    while len(buf) < n:
        b = os.read(CTL, n - len(buf))
        if not b:
            return None
        buf += b
    return bytes(buf)


def recv():
    head = read_exactly(4)
    if head is None:
        return None
    body = read_exactly(struct.unpack(">I", head)[0])
    return None if body is None else json.loads(body)


def send(msg):
    if isinstance(msg.get("data"), bytes):
        return send_file(msg["seq"], msg["data"])
    data = json.dumps(msg).encode()
    write_all(struct.pack(">I", len(data)) + data)


def write_all(data):
    view = memoryview(data)
    while view:
        view = view[os.write(CTL, view):]


FILE_CHUNK = 3 << 16  # a multiple of 3: its base64 has no padding


def send_file(seq, data):
    """A get's reply, {"data": base64}, its base64 written as it is made:
    made whole, then as JSON, it took four copies of the file besides the
    file itself in the scratch area, and a file at the server's cap ended
    a session of the default memory."""
    head, tail = b'{"seq":%d,"data":"' % seq, b'"}'
    write_all(struct.pack(">I", len(head) + 4 * ((len(data) + 2) // 3) + len(tail)) + head)
    view = memoryview(data)
    for i in range(0, len(data), FILE_CHUNK):
        write_all(base64.b64encode(view[i:i + FILE_CHUNK]))
    write_all(tail)


class Capture:
    """Everything written to fd (1 or 2) during a cell, by this process or
    its children, up to limit bytes."""

    def __init__(self, fd, limit):
        self.fd, self.limit, self.buf, self.truncated = fd, limit, bytearray(), False
        r, w = os.pipe()
        os.dup2(w, fd)
        os.close(w)
        self.thread = threading.Thread(target=self.drain, args=(r,), daemon=True)
        self.thread.start()

    def drain(self, r):
        while True:
            b = os.read(r, 65536)
            if not b:
                break
            room = self.limit - len(self.buf)
            if len(b) > room:
                self.truncated = True
            self.buf += b[:max(room, 0)]
        os.close(r)

    def finish(self):
        os.dup2(NULL, self.fd)
        self.thread.join(DRAIN_WAIT)
        return bytes(self.buf).decode("utf-8", "replace"), self.truncated


def feed_stdin(data):
    """fd 0 for a cell: its stdin through a pipe, or /dev/null."""
    if data is None:
        return
    r, w = os.pipe()
    os.dup2(r, 0)
    os.close(r)

    def write():
        b = data.encode()
        try:
            while b:  # blocks while the pipe is full; a cell that stops reading leaves it blocked
                b = b[os.write(w, b):]
        except OSError:
            pass
        finally:
            os.close(w)

    threading.Thread(target=write, daemon=True).start()


def flush_std():
    for f in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        try:
            f.flush()
        except Exception:
            pass


def cell_traceback(e, name):
    """The exception's traceback from the cell's first frame on: the
    runner's own frames are not the caller's business."""
    tb = e.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename != name:
        tb = tb.tb_next
    if isinstance(e, SyntaxError):
        tb = None
    return "".join(traceback.format_exception(type(e), e, tb))


def figures():
    """Matplotlib's open figures as PNG, then closed, as a notebook shows
    them after a cell."""
    plt = sys.modules.get("matplotlib.pyplot")
    if plt is None:
        return []
    out = []
    try:
        for num in plt.get_fignums():
            fig = plt.figure(num)
            buf = io.BytesIO()
            fig.savefig(buf, format="png", bbox_inches="tight")
            out.append({"image/png": base64.b64encode(buf.getvalue()).decode(), "text/plain": repr(fig)})
        plt.close("all")
    except Exception as e:
        out.append({"text/plain": "microbox: figure not rendered: %s: %s" % (type(e).__name__, e)})
    return out


cells = 0


def cells_main():
    """The cells' globals: those of a fresh module that takes __main__'s
    place in sys.modules, as a notebook's namespace does, so that what a
    cell defines is found by name (pickle, and so multiprocessing's pools,
    look functions up in sys.modules["__main__"]). The runner's own
    functions keep its module's globals."""
    global RUNNER
    RUNNER = sys.modules["__main__"]  # kept alive: its functions' globals
    main = types.ModuleType("__main__")
    main.__builtins__ = __builtins__
    sys.modules["__main__"] = main
    return main.__dict__


def run_cell(req, g):
    global cells
    cells += 1
    name = "<cell-%d>" % cells
    code = req["code"]
    linecache.cache[name] = (len(code), None, code.splitlines(True), name)
    flush_std()
    feed_stdin(req.get("stdin"))
    sys.stdin = open(0, "r", closefd=False)
    limit = req["output_limit"]
    out, err = Capture(1, limit), Capture(2, limit)
    value, error = None, None
    try:
        # SIGINT (the cell's timeout) interrupts the cell, and nothing
        # else: it is ignored between cells.
        signal.signal(signal.SIGINT, signal.default_int_handler)
        tree = ast.parse(code, name, "exec")
        last = None
        if tree.body and isinstance(tree.body[-1], ast.Expr):
            last = ast.Expression(tree.body.pop().value)
        exec(compile(tree, name, "exec"), g)
        if last is not None:
            v = eval(compile(last, name, "eval"), g)
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            if v is not None:
                g["_"] = v
                value = repr(v)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    except BaseException as e:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        error = {"name": type(e).__name__, "value": str(e), "traceback": cell_traceback(e, name)}
    flush_std()
    display = figures()
    flush_std()
    os.dup2(NULL, 0)
    stdout, stdout_trunc = out.finish()
    stderr, stderr_trunc = err.finish()
    return {"stdout": stdout, "stderr": stderr, "stdout_truncated": stdout_trunc, "stderr_truncated": stderr_trunc,
            "value": value, "display": display, "error": error}


def open_dir(path, create):
    """The directory of path's last part, as a descriptor, and that part:
    every step inside the working directory, no symbolic link followed."""
    parts = path.split("/")
    fd = os.open(WORKDIR, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        for p in parts[:-1]:
            if create:
                try:
                    os.mkdir(p, 0o755, dir_fd=fd)
                except FileExistsError:
                    pass
            if stat.S_ISLNK(os.lstat(p, dir_fd=fd).st_mode):
                raise OSError(errno.ELOOP, "a symbolic link")
            nfd = os.open(p, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            os.close(fd)
            fd = nfd
    except BaseException:
        os.close(fd)
        raise
    return fd, parts[-1]


def put(req):
    dfd, name = open_dir(req["path"], True)
    try:
        fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644, dir_fd=dfd)
    finally:
        os.close(dfd)
    with os.fdopen(fd, "wb") as f:
        f.write(base64.b64decode(req["data"]))
    return {}


def get(req):
    dfd, name = open_dir(req["path"], False)
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=dfd)
    finally:
        os.close(dfd)
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            return {"error": "not a regular file"}
        data = f.read(req["limit"] + 1)
    if len(data) > req["limit"]:
        return {"error": "too_large", "size": st.st_size}
    return {"data": data}  # send_file writes it


def delete(req):
    dfd, name = open_dir(req["path"], False)
    try:
        os.unlink(name, dir_fd=dfd)
    finally:
        os.close(dfd)
    return {}


def listing(req):
    files = []
    for root, dirs, names in os.walk(WORKDIR):
        dirs.sort()
        for n in sorted(names):
            p = os.path.join(root, n)
            try:
                st = os.lstat(p)
            except OSError:
                continue
            kind = "file" if stat.S_ISREG(st.st_mode) else "symlink" if stat.S_ISLNK(st.st_mode) else "other"
            files.append({"path": os.path.relpath(p, WORKDIR), "size": st.st_size, "type": kind})
            if len(files) >= MAX_LISTED:
                return {"files": files, "truncated": True}
    return {"files": files}


def file_op(fn, req):
    try:
        return fn(req)
    except FileNotFoundError:
        return {"error": "not_found"}
    except OSError as e:
        if e.errno == errno.ELOOP:
            return {"error": "symlink"}
        return {"error": "%s" % (os.strerror(e.errno) if e.errno else e)}


def main():
    config = recv()
    if config is None:
        return
    os.environ.setdefault("MPLBACKEND", "Agg")
    os.environ.setdefault("MPLCONFIGDIR", "/dev/shm/.matplotlib")
    # Debian's matplotlib reads its defaults from /etc/matplotlibrc only,
    # which a root's synthesized /etc has not: its data copy instead.
    debian_rc = "/usr/share/matplotlib/mpl-data/matplotlibrc"
    if not os.path.exists("/etc/matplotlibrc") and os.path.exists(debian_rc):
        os.environ.setdefault("MATPLOTLIBRC", debian_rc)
    for m in config.get("preload") or []:
        try:
            __import__(m)
        except BaseException as e:
            send({"error": "preload %s: %s: %s" % (m, type(e).__name__, e)})
            return
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    send({"ready": sys.version.split()[0]})
    g = cells_main()
    ops = {OP_PUT: put, OP_GET: get, OP_DELETE: delete, OP_LIST: listing}
    while True:
        req = recv()
        if req is None:
            return
        try:
            op = req.get("op")
            if op == OP_CELL:
                reply = run_cell(req, g)
            elif op in ops:
                reply = file_op(ops[op], req)
            else:
                reply = {"error": "unknown op %r" % op}
        except KeyboardInterrupt:  # SIGINT just as the cell ended
            reply = {"error": {"name": "KeyboardInterrupt", "value": "", "traceback": "KeyboardInterrupt\n"}}
        reply["seq"] = req.get("seq")
        send(reply)


main()
