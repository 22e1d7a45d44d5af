"""Test cases per second of `microbox eval stdio` against bare python3.

Judges the same stdin/stdout tests two ways at the same parallelism and
compares test cases per second:

- microbox: `microbox eval stdio --jobs N` on each chunk of samples, every
  test in a sandbox of its own;
- bare: the usual harness, `subprocess.run([python3, "-c", program],
  input=test_input, timeout=...)` once per test, N at a time in a thread
  pool, each output compared line by line after removing trailing
  whitespace (eval stdio's default rule).

The problems and samples are this script's own, made from a fixed seed:
ten small competitive-programming tasks (sum, max, sort, reverse, gcd,
primes, ...) with ten tests each, and for each task a right program, a
wrong one and one that is right but crashes on some inputs. The samples are split into
chunks and the two variants alternate chunk by chunk (ABBA order), so that
both see the same background load; the figure to quote is the ratio of the
two rates, measured in the same run.

Usage (from the repository root, after `make`; root, or unprivileged user
namespaces, as microbox needs):

    python3 python/benchmarks/stdio_throughput.py --microbox bin/microbox --jobs 2 --rounds 4 --chunks 8
"""

import argparse
import concurrent.futures
import json
import os
import random
import statistics
import subprocess
import tempfile
import time

PYTHON = "/usr/bin/python3"

# name: (input maker, answer, right program, wrong program, crashing program)
TASKS = {
    "sum": (lambda r: [r.randint(-1000, 1000) for _ in range(r.randint(1, 50))],
            lambda xs: str(sum(xs)),
            "n = int(input())\nprint(sum(map(int, input().split())))",
            "n = int(input())\nprint(sum(map(int, input().split())) + (n > 40))",
            "n = int(input())\nxs = list(map(int, input().split()))\nprint(sum(xs) + 0 // (n % 7))"),
    "max": (lambda r: [r.randint(-10**9, 10**9) for _ in range(r.randint(1, 50))],
            lambda xs: str(max(xs)),
            "input()\nprint(max(map(int, input().split())))",
            "input()\nprint(max(map(abs, map(int, input().split()))))",
            "input()\nxs = list(map(int, input().split()))\nprint(max(xs) + 0 // (len(xs) % 5))"),
    "sort": (lambda r: [r.randint(0, 99) for _ in range(r.randint(1, 50))],
             lambda xs: " ".join(map(str, sorted(xs))),
             "input()\nprint(*sorted(map(int, input().split())))",
             "input()\nprint(*sorted(input().split()))",
             "input()\nxs = list(map(int, input().split()))\nprint(*sorted(xs))\nxs[10]"),
    "reverse": (lambda r: [r.randint(0, 9) for _ in range(r.randint(1, 50))],
                lambda xs: " ".join(map(str, reversed(xs))),
                "input()\nprint(*input().split()[::-1])",
                "input()\nprint(*sorted(input().split(), reverse=True))",
                "n = int(input())\nxs = input().split()\nprint(*xs[::-1])\nassert n % 3"),
    "gcd": (lambda r: [r.randint(1, 10**6), r.randint(1, 10**6)],
            lambda xs: str(__import__("math").gcd(xs[0], xs[1])),
            "import math\ninput()\na, b = map(int, input().split())\nprint(math.gcd(a, b))",
            "input()\na, b = map(int, input().split())\nprint(min(a, b))",
            "import math\ninput()\na, b = map(int, input().split())\nprint(math.gcd(a, b) + 0 // (a % 2))"),
    "primes": (lambda r: [r.randint(2, 20000)],
               lambda xs: str(sum(all(k % d for d in range(2, int(k ** 0.5) + 1)) for k in range(2, xs[0] + 1))),
               "input()\nn = int(input())\ns = bytearray([1]) * (n + 1)\ns[0] = s[1] = 0\n"
               "for i in range(2, int(n ** 0.5) + 1):\n    if s[i]:\n        s[i*i::i] = bytearray(len(s[i*i::i]))\nprint(sum(s))",
               "input()\nn = int(input())\nprint(sum(all(k % d for d in range(2, int(k ** 0.5))) for k in range(2, n + 1)))",
               "import sys\nsys.setrecursionlimit(50)\ninput()\nn = int(input())\n"
               "def c(k):\n    return 0 if k < 2 else c(k - 1) + all(k % d for d in range(2, int(k ** 0.5) + 1))\nprint(c(n))"),
    "evens": (lambda r: [r.randint(0, 1000) for _ in range(r.randint(1, 50))],
              lambda xs: str(sum(1 for x in xs if x % 2 == 0)),
              "input()\nprint(sum(int(x) % 2 == 0 for x in input().split()))",
              "input()\nprint(sum(int(x) % 2 for x in input().split()))",
              "input()\nxs = list(map(int, input().split()))\nprint(sum(x % 2 == 0 for x in xs) + 0 // (xs[0] % 3))"),
    "range": (lambda r: [r.randint(-100, 100) for _ in range(r.randint(1, 50))],
              lambda xs: str(max(xs) - min(xs)),
              "input()\nxs = list(map(int, input().split()))\nprint(max(xs) - min(xs))",
              "input()\nxs = list(map(int, input().split()))\nprint(max(xs) - xs[0])",
              "input()\nxs = list(map(int, input().split()))\nprint(max(xs) - min(xs) + 0 // (len(xs) % 4))"),
    "squares": (lambda r: [r.randint(0, 3000) for _ in range(r.randint(1, 50))],
                lambda xs: "\n".join(str(x * x) for x in xs),
                "input()\nfor x in input().split():\n    print(int(x) ** 2)",
                "input()\nfor x in input().split():\n    print(int(x) * 2)",
                "input()\nfor x in input().split():\n    print(int(x) ** 2 + 0 // (int(x) % 5))"),
    "distinct": (lambda r: [r.randint(0, 20) for _ in range(r.randint(1, 50))],
                 lambda xs: str(len(set(xs))),
                 "input()\nprint(len(set(input().split())))",
                 "input()\nprint(len(input().split()))",
                 "input()\nxs = input().split()\nprint(len(set(xs)) + 0 // (len(xs) - 1))"),
}
TESTS_PER_TASK = 10


def make_set(seed):
    """The problems (our layout) and the samples: every task's three
    programs."""
    r = random.Random(seed)
    problems, samples = [], []
    for name, (make, answer, right, wrong, crash) in TASKS.items():
        tests = []
        for _ in range(TESTS_PER_TASK):
            xs = make(r)
            tests.append({"input": "%d\n%s\n" % (len(xs), " ".join(map(str, xs))), "output": answer(xs) + "\n"})
        problems.append({"task_id": name, "tests": tests})
        for kind, program in (("right", right), ("wrong", wrong), ("crash", crash)):
            samples.append({"task_id": name, "completion": program, "kind": kind})
    return problems, samples


def lines(s):
    """The usual harness's rule, eval stdio's default: lines without
    trailing whitespace, blank lines at the end dropped."""
    ls = [l.rstrip() for l in s.split("\n")]
    while ls and not ls[-1]:
        ls.pop()
    return ls


def bare_test(program, test, timeout, workdir):
    """One test under bare python3: the usual subprocess.run harness."""
    try:
        p = subprocess.run([PYTHON, "-c", program], input=test["input"].encode(), capture_output=True,
                           timeout=timeout, cwd=workdir)
    except subprocess.TimeoutExpired:
        return "timeout"
    if p.returncode != 0:
        return "nonzero"
    return "passed" if lines(p.stdout.decode("utf-8", "replace")) == lines(test["output"]) else "wrong_answer"


def bare_chunk(problems, samples, jobs, timeout, workdir):
    """Judges a chunk's tests bare, jobs at a time: (seconds, statuses)."""
    work = [(s["completion"], t) for s in samples for t in problems[s["task_id"]]["tests"]]
    began = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        statuses = list(pool.map(lambda w: bare_test(w[0], w[1], timeout, workdir), work))
    return time.perf_counter() - began, statuses


def microbox_chunk(args, problems_file, samples, tmp):
    """Judges a chunk with `microbox eval stdio`: (seconds, statuses)."""
    path = os.path.join(tmp, "chunk.jsonl")
    with open(path, "w", encoding="utf-8") as f:
        for s in samples:
            f.write(json.dumps(s) + "\n")
    out = path + "_results.jsonl"
    cmd = [args.microbox, "eval", "stdio", "--problems", problems_file, "--jobs", str(args.jobs),
           "--timeout", "%gs" % args.timeout, "--progress", "never", "-k", "1", "-o", out, path]
    began = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    took = time.perf_counter() - began
    with open(out, encoding="utf-8") as f:
        return took, [t["status"] for line in f for t in json.loads(line)["tests"]]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--microbox", default="bin/microbox")
    ap.add_argument("--jobs", type=int, default=os.cpu_count())
    ap.add_argument("--rounds", type=int, default=4, help="how many times each sample is judged")
    ap.add_argument("--chunks", type=int, default=8)
    ap.add_argument("--timeout", type=float, default=6.0)
    ap.add_argument("--seed", type=int, default=26)
    ap.add_argument("--json", help="write the figures to this file too")
    args = ap.parse_args()
    problems, samples = make_set(args.seed)
    by_id = {p["task_id"]: p for p in problems}
    samples = samples * args.rounds
    size = -(-len(samples) // args.chunks)
    chunks = [samples[i:i + size] for i in range(0, len(samples), size)]
    totals = {"bare": 0.0, "microbox": 0.0}
    statuses = {"bare": [], "microbox": []}
    per_chunk = []
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="stdio-throughput-") as tmp:
        problems_file = os.path.join(tmp, "problems.jsonl")
        with open(problems_file, "w", encoding="utf-8") as f:
            for p in problems:
                f.write(json.dumps(p) + "\n")
        workdir = os.path.join(tmp, "bare")
        os.mkdir(workdir)
        for i, chunk in enumerate(chunks):
            tests = sum(len(by_id[s["task_id"]]["tests"]) for s in chunk)
            took_by = {}
            for variant in (["bare", "microbox"] if i % 2 == 0 else ["microbox", "bare"]):
                if variant == "bare":
                    took, got = bare_chunk(by_id, chunk, args.jobs, args.timeout, workdir)
                else:
                    took, got = microbox_chunk(args, problems_file, chunk, tmp)
                totals[variant] += took
                took_by[variant] = took
                statuses[variant].extend(got)
                print("chunk %d/%d %-8s %5d tests %7.1f s %6.1f tests/s" % (
                    i + 1, len(chunks), variant, tests, took, tests / took), flush=True)
            per_chunk.append(round(took_by["bare"] / took_by["microbox"], 3))
    n = len(statuses["bare"])
    figures = {"tests": n, "samples": len(samples), "jobs": args.jobs, "chunks": len(chunks),
               "load_before": load_before, "load_after": os.getloadavg()}
    for variant in ("bare", "microbox"):
        counts = {}
        for s in statuses[variant]:
            counts[s] = counts.get(s, 0) + 1
        figures[variant] = {"seconds": round(totals[variant], 1), "tests_per_s": round(n / totals[variant], 2),
                            "statuses": counts}
    figures["ratio_microbox_to_bare"] = round(totals["bare"] / totals["microbox"], 3)
    figures["chunk_ratios"] = per_chunk
    figures["median_chunk_ratio"] = round(statistics.median(per_chunk), 3)
    figures["same_status"] = sum(a == b for a, b in zip(statuses["bare"], statuses["microbox"]))
    print(json.dumps(figures, indent=1))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(figures, f, indent=1)


if __name__ == "__main__":
    main()
