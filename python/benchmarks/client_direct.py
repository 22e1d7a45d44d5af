"""The Python client's direct path (HTTP to `microbox serve --http`, no
process per run) against bare python3 and the client's subprocess path.

Each variant runs `print(1)` -n times, taking turns, serially: bare
python3 is `subprocess.run([python3, "-c", "print(1)"])` from this process
(the cost of a fresh interpreter, unsandboxed); direct is execute_code
with $MICROBOX_URL; subprocess is execute_code through a `microbox batch`
process ($MICROBOX). Then execute_code_async with 8 in flight, for
throughput. Prints Markdown. scripts/benchapi runs it against its server:

    MICROBOX=bin/microbox MICROBOX_URL=http://127.0.0.1:PORT python3 python/benchmarks/client_direct.py -n 200
"""

import argparse
import asyncio
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from microbox import execute_code, execute_code_async  # noqa: E402

PROGRAM = "print(1)"


def bare():
    out = subprocess.run(["/usr/bin/python3", "-c", PROGRAM], stdout=subprocess.PIPE, check=True).stdout
    assert out == b"1\n"


def direct():
    r = execute_code(PROGRAM, server=os.environ["MICROBOX_URL"])
    assert r.stdout == "1\n", r


def via_subprocess():
    r = execute_code(PROGRAM, microbox=os.environ["MICROBOX"])
    assert r.stdout == "1\n", r


def pct(xs, p):
    s = sorted(xs)
    return s[min(len(s) - 1, len(s) * p // 100)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=200)
    n = ap.parse_args().n
    variants = [("bare python3 (a process)", bare), ("execute_code, direct (HTTP)", direct),
                ("execute_code, subprocess (microbox batch)", via_subprocess)]
    times = {name: [] for name, _ in variants}
    for _, f in variants:
        f()  # warm-up: connections, caches
    for _ in range(n):
        for name, f in variants:
            t = time.perf_counter()
            f()
            times[name].append((time.perf_counter() - t) * 1000)
    base = pct(times[variants[0][0]], 50)
    print("### The Python client's direct path (%d calls per variant, serial, taking turns)\n" % n)
    print("| variant | p50 ms | p99 ms | × bare python3 p50 |")
    print("|---|--:|--:|--:|")
    for name, _ in variants:
        print("| %s | %.1f | %.1f | %.2f |" % (name, pct(times[name], 50), pct(times[name], 99), pct(times[name], 50) / base))

    async def many(count):
        rs = await asyncio.gather(*(execute_code_async(PROGRAM, server=os.environ["MICROBOX_URL"], concurrency=8)
                                    for _ in range(count)))
        assert all(r.stdout == "1\n" for r in rs)

    count = max(n, 64)
    t = time.perf_counter()
    asyncio.run(many(count))
    async_rate = count / (time.perf_counter() - t)

    def threads_bare(count):
        from concurrent.futures import ThreadPoolExecutor
        with ThreadPoolExecutor(8) as ex:
            list(ex.map(lambda _: bare(), range(count)))

    t = time.perf_counter()
    threads_bare(count)
    bare_rate = count / (time.perf_counter() - t)
    print("\nThroughput, 8 in flight (%d runs each): execute_code_async over HTTP %.1f runs/s; "
          "bare python3 processes from 8 threads %.1f runs/s (× %.2f).\n" % (count, async_rate, bare_rate, async_rate / bare_rate))


if __name__ == "__main__":
    main()
