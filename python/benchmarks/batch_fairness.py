"""Does a hog take CPU from its neighbours in a batch?

One task forks into 8 processes that spin until their 10 s timeout; beside
it, small CPU-bound tasks run one after another on the other worker
(--jobs 2, on a 2-CPU host). For each small task, wall time / CPU time
says how long it waited for a CPU (1.0: never). Conditions, interleaved
round by round so that all see the same background load:

- no hog: the small tasks alone (both workers);
- hog, --cpus 1: the default per-run bandwidth of one core (CFS quota);
- hog, --cpus 2: the hog may use both CPUs (no effective quota);
- hog, --cpus 1 --pin: as the default, each worker's runs pinned to a CPU.

Usage (as root, from the repository root, after `make`):

    python3 python/benchmarks/batch_fairness.py --microbox bin/microbox --rounds 3
"""

import argparse
import json
import os
import statistics
import subprocess

HOG = "import os\nfor _ in range(3):\n    os.fork()\nwhile True:\n    pass\n"
SMALL = "s = 0\nfor i in range(2_000_000):\n    s += i\n"
CONDITIONS = [
    ("no hog", None, []),
    ("hog, --cpus 1 (default)", 1, []),
    ("hog, --cpus 2", 2, []),
    ("hog, --cpus 1, --pin", 1, ["--pin"]),
]


def run(microbox, hog_cpus, flags, n):
    """The small tasks' wall/CPU ratios in one batch."""
    tasks = []
    if hog_cpus is not None:
        tasks.append({"id": "hog", "code": HOG, "timeout": "10s", "cpus": hog_cpus})
    tasks += [{"id": i, "code": SMALL, "timeout": "30s"} for i in range(n)]
    # The tasks' own limits are over batch's defaults, which are ceilings.
    ceilings = ["--max-timeout", "30s", "--max-cpus", "2"]
    out = subprocess.run([microbox, "batch", "--jobs", "2", "--order", "completed"] + ceilings + flags,
                         input="".join(json.dumps(t) + "\n" for t in tasks).encode(),
                         stdout=subprocess.PIPE, check=True, timeout=600).stdout
    results = [json.loads(l) for l in out.splitlines()]
    return [r["wall_time_ms"] / r["cpu_time_ms"] for r in results if r["id"] != "hog"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--microbox", default="bin/microbox")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("-n", type=int, default=30, help="small tasks per batch")
    args = ap.parse_args()
    microbox = os.path.abspath(args.microbox)
    ratios = {name: [] for name, _, _ in CONDITIONS}
    before = os.getloadavg()
    for _ in range(args.rounds):
        for name, cpus, flags in CONDITIONS:
            ratios[name] += run(microbox, cpus, flags, args.n)
    after = os.getloadavg()
    print("load average before/after: %.2f %.2f %.2f / %.2f %.2f %.2f" % (before + after))
    print("%d rounds x %d small tasks per condition" % (args.rounds, args.n))
    print("| condition | small tasks' wall/CPU, median | p90 | max |")
    print("|---|--:|--:|--:|")
    for name, _, _ in CONDITIONS:
        r = ratios[name]
        print("| %s | %.2f | %.2f | %.2f |" % (name, statistics.median(r), statistics.quantiles(r, n=10)[-1], max(r)))


if __name__ == "__main__":
    main()
