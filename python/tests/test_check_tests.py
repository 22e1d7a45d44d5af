"""Tests of check_stdio and check_mbpp, the per-test verdicts of the
Python client, against the real binary (run as test_client.py is)."""

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import microbox  # noqa: E402
from microbox import MicroboxError, check_mbpp, check_stdio  # noqa: E402

REPO = os.path.dirname(os.path.dirname(HERE))
TESTDATA = os.path.join(REPO, "internal", "eval", "testdata")

ADD = "a, b = map(int, input().split())\n"
TESTS = [("1 2\n", "3\n"), {"input": "10 -4\n", "output": "6\n"}, ("2 2", "4")]


def setUpModule():
    default = os.path.join(REPO, "bin", "microbox")
    if "MICROBOX" not in os.environ and os.path.exists(default):
        os.environ["MICROBOX"] = default
    microbox.find_microbox()


def statuses(tests):
    return [t["status"] for t in tests]


class CheckStdioTest(unittest.TestCase):
    def test_a_verdict_per_test(self):
        got = check_stdio(ADD + "print(a + b if a != 10 else a / 0)", TESTS, timeout=3)
        self.assertEqual(statuses(got), ["passed", "nonzero", "passed"])
        self.assertEqual(got[1]["message"], "ZeroDivisionError: division by zero")
        self.assertGreater(got[0]["wall_time_ms"], 0)
        self.assertGreater(got[0]["cpu_time_ms"], 0)

    def test_wrong_answer_and_timeout(self):
        got = check_stdio(ADD + "while a == 10: pass\nprint(a * b)", TESTS, timeout=1, jobs=2)
        self.assertEqual(statuses(got), ["wrong_answer", "timeout", "passed"])
        self.assertEqual(got[0]["message"], 'line 1: got "2", want "3"')

    def test_comparison_rules(self):
        spaced = ADD + "print(' ', a + b)"
        self.assertEqual(statuses(check_stdio(spaced, TESTS)), ["wrong_answer"] * 3)
        self.assertEqual(statuses(check_stdio(spaced, TESTS, compare="tokens")), ["passed"] * 3)
        ratio = [("1 3", "0.333333333")]
        self.assertEqual(statuses(check_stdio(ADD + "print('%.6f' % (a / b))", ratio)), ["wrong_answer"])
        self.assertEqual(statuses(check_stdio(ADD + "print('%.6f' % (a / b))", ratio, float_tolerance=1e-6)), ["passed"])

    def test_stop_on_fail_and_limits(self):
        got = check_stdio(ADD + "print(a * b)", TESTS, stop_on_fail=True, maximum_memory_bytes=64 << 20)
        self.assertEqual(statuses(got), ["wrong_answer", "not_run", "not_run"])
        got = check_stdio(ADD + "x = b'x' * (96 << 20)", TESTS[:1], maximum_memory_bytes=64 << 20, timeout=5)
        self.assertEqual(statuses(got), ["memory"])

    def test_bad_options_raise(self):
        with self.assertRaises(MicroboxError) as e:
            check_stdio("print(1)", TESTS, compare="fuzzy")
        self.assertIn("--compare", str(e.exception))

    def test_same_with_a_server(self):
        """A listening server changes no verdict (eval runs its own
        sandboxes either way)."""
        program = ADD + "print(a + b if a != 10 else a / 0)"
        without = check_stdio(program, TESTS)
        with tempfile.TemporaryDirectory() as tmp:
            os.chmod(tmp, 0o700)
            socket = os.path.join(tmp, "exec.sock")
            server = subprocess.Popen([microbox.find_microbox(), "serve", "--socket", socket, "--warm", "0"],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            try:
                for _ in range(100):
                    if os.path.exists(socket):
                        break
                    time.sleep(0.05)
                self.assertTrue(os.path.exists(socket), "the server did not start")
                saved = os.environ.get("MICROBOX_SOCKET")
                os.environ["MICROBOX_SOCKET"] = socket
                try:
                    with_server = check_stdio(program, TESTS)
                finally:
                    if saved is None:
                        del os.environ["MICROBOX_SOCKET"]
                    else:
                        os.environ["MICROBOX_SOCKET"] = saved
            finally:
                server.send_signal(signal.SIGTERM)
                server.wait(timeout=30)
        strip = lambda tests: [(t["status"], t.get("message")) for t in tests]  # noqa: E731
        self.assertEqual(strip(without), strip(with_server))


class CheckMBPPTest(unittest.TestCase):
    def problem(self, task_id):
        with open(os.path.join(TESTDATA, "mbpp_problems.jsonl"), encoding="utf-8") as f:
            return next(p for p in map(json.loads, f) if p["task_id"] == task_id)

    def test_a_verdict_per_assert(self):
        p = self.problem(1)
        self.assertEqual(statuses(check_mbpp(p, "def add(a, b):\n    return a + b")), ["passed"] * 3)
        got = check_mbpp(p, "def add(a, b):\n    return a + b if a != 2 else 5")
        self.assertEqual(statuses(got), ["passed", "wrong_answer", "passed"])
        self.assertEqual(got[1]["message"], "AssertionError")
        hang = "import time\ndef add(a, b):\n    while a == 2:\n        time.sleep(1)\n    return a + b"
        self.assertEqual(statuses(check_mbpp(p, hang, timeout=0.5)), ["passed", "timeout", "passed"])
        self.assertEqual(statuses(check_mbpp(p, "def add(a, b):\n    return a + b", challenge_tests=True)), ["passed"] * 4)

    def test_setup_code(self):
        self.assertEqual(statuses(check_mbpp(self.problem(2), "def count():\n    return len(ITEMS)")), ["passed"] * 2)

    def test_same_as_eval(self):
        """The client's list is the results file's, sample for sample."""
        samples = os.path.join(TESTDATA, "mbpp_samples.jsonl")
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "r.jsonl")
            subprocess.run([microbox.find_microbox(), "eval", "mbpp", "--problems", os.path.join(TESTDATA, "mbpp_problems.jsonl"),
                            "--timeout", "1s", "--mem", "64M", "--progress", "never", "-o", out, samples],
                           check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            with open(out, encoding="utf-8") as f:
                rows = [json.loads(line) for line in f][:6]
        for row in rows:
            got = check_mbpp(self.problem(int(row["task_id"])), row["completion"], timeout=1, maximum_memory_bytes=64 << 20)
            self.assertEqual(statuses(got), statuses(row["tests"]), row["note"])
            self.assertEqual([t.get("message") for t in got], [t.get("message") for t in row["tests"]], row["note"])


if __name__ == "__main__":
    unittest.main()
