# threading: thread creation (clone), locks (futex), a thread pool.
import threading
from concurrent.futures import ThreadPoolExecutor

lock = threading.Lock()
total = [0]
def work(n):
    for _ in range(1000):
        with lock:
            total[0] += 1
    return n * n

ts = [threading.Thread(target=work, args=(i,)) for i in range(8)]
for t in ts: t.start()
for t in ts: t.join()
with ThreadPoolExecutor(4) as ex:
    assert sum(ex.map(work, range(10))) == 285
assert total[0] == 18000
print("ok")
