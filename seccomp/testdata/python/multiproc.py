# multiprocessing: Pool(2) with fork, semaphores in /dev/shm, a Queue.
import multiprocessing as mp

def sq(x):
    return x * x

if __name__ == "__main__":
    for method in ("fork", "spawn", "forkserver"):
        ctx = mp.get_context(method)
        with ctx.Pool(2) as pool:
            assert pool.map(sq, range(10)) == [x * x for x in range(10)]
    q = mp.Queue()
    pr = mp.Process(target=q.put, args=(7,))
    pr.start(); assert q.get(timeout=10) == 7; pr.join()
    from multiprocessing import shared_memory
    shm = shared_memory.SharedMemory(create=True, size=64)
    shm.buf[0] = 1; shm.close(); shm.unlink()
    print("ok")
