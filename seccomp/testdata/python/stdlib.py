# sqlite3 in memory, ctypes (libc.getpid), mmap, hashlib, zlib, select.
import ctypes, ctypes.util, hashlib, mmap, os, select, signal, sqlite3, tempfile, zlib

db = sqlite3.connect(":memory:")
db.execute("create table t (x)"); db.executemany("insert into t values (?)", [(i,) for i in range(100)])
assert db.execute("select sum(x) from t").fetchone()[0] == 4950
libc = ctypes.CDLL(ctypes.util.find_library("c"))
assert libc.getpid() == os.getpid()
m = mmap.mmap(-1, 4096); m[:5] = b"hello"; assert m[:5] == b"hello"; m.close()
with tempfile.TemporaryFile() as f:
    f.write(b"\0" * 8192); f.flush()
    m = mmap.mmap(f.fileno(), 8192); m[0:1] = b"x"; m.flush(); m.close()
hashlib.sha256(b"x").hexdigest(); zlib.compress(b"x" * 100)
r, w = os.pipe(); os.write(w, b"p"); select.select([r], [], [], 1); os.read(r, 1)
signal.signal(signal.SIGALRM, lambda *a: None); signal.setitimer(signal.ITIMER_REAL, 0.01); signal.pause()
print("ok")
