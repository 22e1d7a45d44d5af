"""Per-run cost of `microbox batch` against bare python3 and `microbox exec`.

Each round runs the same program N times three ways, one after the other
(so that all three see the same background load), one at a time:

- bare: `/usr/bin/python3 -c PROGRAM`, N subprocesses in a row;
- exec: `microbox exec --json -c PROGRAM`, N in a row;
- batch: one `microbox batch --jobs 1` with N tasks.

It reports, per variant, the median over rounds of wall time per run, and
the CPU time per run of everything the variant ran (microbox, the jail's
init and the program: RUSAGE_CHILDREN), which is what bounds throughput
on a busy machine.

Usage (as root, from the repository root, after `make`):

    python3 python/benchmarks/batch_overhead.py --microbox bin/microbox --rounds 10 -n 50
"""

import argparse
import json
import os
import resource
import statistics
import subprocess
import time

PROGRAM = "print(1)"


def children_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def measure(fn, n):
    """(wall ms per run, CPU ms per run) of fn()."""
    cpu, began = children_cpu(), time.perf_counter()
    fn()
    return (time.perf_counter() - began) / n * 1000, (children_cpu() - cpu) / n * 1000


def bare(n):
    for _ in range(n):
        subprocess.run(["/usr/bin/python3", "-c", PROGRAM], stdout=subprocess.DEVNULL, stdin=subprocess.DEVNULL, check=True)


def exec_(microbox, n):
    for _ in range(n):
        subprocess.run([microbox, "exec", "--json", "-c", PROGRAM], stdout=subprocess.DEVNULL, stdin=subprocess.DEVNULL, check=True)


def batch(microbox, n, setups):
    tasks = "".join(json.dumps({"id": i, "code": PROGRAM}) + "\n" for i in range(n)).encode()
    out = subprocess.run([microbox, "batch", "--jobs", "1"], input=tasks, stdout=subprocess.PIPE, check=True).stdout
    results = [json.loads(line) for line in out.splitlines()]
    assert all(r["status"] == "ok" for r in results), results[:1]
    setups.extend(r["setup_time_ms"] for r in results)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--microbox", default="bin/microbox")
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("-n", type=int, default=50, help="runs per variant per round")
    args = ap.parse_args()
    microbox, n = os.path.abspath(args.microbox), args.n
    setups = []  # batch's setup_time_ms, every run
    variants = {
        "bare python3": lambda: bare(n),
        "microbox exec": lambda: exec_(microbox, n),
        "microbox batch": lambda: batch(microbox, n, setups),
    }
    figures = {name: ([], []) for name in variants}
    load_before = os.getloadavg()
    for rnd in range(args.rounds):
        for name, fn in variants.items():
            wall, cpu = measure(fn, n)
            figures[name][0].append(wall)
            figures[name][1].append(cpu)
        print("round %d: %s" % (rnd + 1, "  ".join(
            "%s %.1f ms" % (name, figures[name][0][-1]) for name in variants)), flush=True)
    load_after = os.getloadavg()
    base_wall = statistics.median(figures["bare python3"][0])
    base_cpu = statistics.median(figures["bare python3"][1])
    print("\nprogram %r, %d rounds x %d runs per variant, one at a time" % (PROGRAM, args.rounds, n))
    print("load average before/after: %.2f %.2f %.2f / %.2f %.2f %.2f" % (load_before + load_after))
    print("| variant | wall ms/run (median of rounds) | Δ wall vs bare | CPU ms/run | Δ CPU vs bare |")
    print("|---|--:|--:|--:|--:|")
    for name in variants:
        wall, cpu = statistics.median(figures[name][0]), statistics.median(figures[name][1])
        print("| %s | %.1f | %+.1f | %.1f | %+.1f |" % (name, wall, wall - base_wall, cpu, cpu - base_cpu))
    print("batch setup_time_ms (run start to the program's execve): median %.1f, p90 %.1f" % (
        statistics.median(setups), statistics.quantiles(setups, n=10)[-1]))


if __name__ == "__main__":
    main()
