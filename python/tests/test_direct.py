"""The client's direct path: runs sent to a `microbox serve --http` with
no process per run, the asyncio API, retries when the server is busy, and
TCP with a token. Run as test_client.py is (make python-test)."""

import asyncio
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import unittest
from unittest import mock

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

import microbox  # noqa: E402
from microbox import MicroboxError, check_correctness, execute_code, execute_code_async  # noqa: E402
from serverutil import Server  # noqa: E402

REPO = os.path.dirname(os.path.dirname(HERE))


def setUpModule():
    default = os.path.join(REPO, "bin", "microbox")
    if "MICROBOX" not in os.environ and os.path.exists(default):
        os.environ["MICROBOX"] = default
    microbox.find_microbox()


def no_processes():
    """Patches that fail any process start."""
    def refuse(*a, **k):
        raise AssertionError("a process was started: %r" % (a,))
    return mock.patch.multiple(subprocess, Popen=refuse), mock.patch.object(asyncio, "create_subprocess_exec", refuse)


class DirectTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = Server(os.environ["MICROBOX"])

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    def test_same_results_without_a_process(self):
        programs = ["print(1 + 1)", "1 / 0", "import sys; sys.exit(3)", "while True: pass",
                    "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)"]
        want = [execute_code(p, timeout=0.5) for p in programs]  # the subprocess path
        p1, p2 = no_processes()
        with p1, p2:
            got = [execute_code(p, timeout=0.5, server=self.server.url) for p in programs]
        for w, g in zip(want, got):
            self.assertEqual((g.status, g.stdout, g.exit_code, g.signal, g.error),
                             (w.status, w.stdout, w.exit_code, w.signal, w.error))

    def test_check_correctness_direct(self):
        problem = {"task_id": "t/0", "prompt": "def f():\n", "test": "def check(c):\n    assert c() == 1\n",
                   "entry_point": "f"}
        os.environ["MICROBOX_URL"] = self.server.url
        try:
            p1, p2 = no_processes()
            with p1, p2:
                passed = check_correctness(problem, "    return 1\n", 3.0, 7)
                failed = check_correctness(problem, "    return 2\n", 3.0)
        finally:
            del os.environ["MICROBOX_URL"]
        self.assertEqual(passed, {"task_id": "t/0", "passed": True, "result": "passed", "completion_id": 7})
        self.assertFalse(failed["passed"])
        self.assertEqual(failed["result"], check_correctness(problem, "    return 2\n", 3.0)["result"])

    def test_options(self):
        r = execute_code("import os; print(os.getcwd())", server=self.server.url, workdir="/work", tmpfs_size="16M",
                         deny_modules="socket", cpus=0.5)
        self.assertEqual(r.stdout, "/work\n", r.error)
        r = execute_code("print('a@example.com')", server=self.server.url, redact=True)
        self.assertEqual(r.stdout, "[REDACTED_EMAIL]\n")
        with self.assertRaises(MicroboxError) as cm:
            execute_code("1", server=self.server.url, no_cgroup=True)
        self.assertIn("--no-cgroup", str(cm.exception))
        r = execute_code("1", server=self.server.url, mem="12Q")
        self.assertEqual(r.status, "sandbox_error")
        self.assertIn('"mem"', r.error)

    def test_zygote(self):
        # Forked from the server's warm interpreter, numpy already imported.
        r = execute_code("import sys; print('numpy' in sys.modules)", server=self.server.url, zygote=True,
                         preload="numpy")
        self.assertEqual((r.status, r.stdout, r.raw.get("start")), ("ok", "True\n", "zygote"), r.error)
        r = execute_code("print(1)", server=self.server.url, zygote=True, env={"PYTHONHASHSEED": "0"})
        self.assertEqual(r.status, "sandbox_error")
        self.assertIn("PYTHONHASHSEED", r.error)

    def test_async_bounded(self):
        code = "import time; s = time.time(); time.sleep(0.4); print(s, time.time())"

        async def main():
            return await asyncio.gather(*(execute_code_async(code, server=self.server.url, concurrency=2)
                                          for _ in range(6)))

        results = asyncio.run(main())
        spans = [tuple(map(float, r.stdout.split())) for r in results]
        self.assertTrue(all(r.success for r in results))
        most = max(sum(1 for a, b in spans if a <= t < b) for t, _ in spans)
        self.assertLessEqual(most, 2, "more than 2 runs at once: %r" % spans)
        self.assertGreaterEqual(most, 1)

    def test_async_subprocess_path(self):
        r = asyncio.run(execute_code_async("print(40 + 2)"))
        self.assertEqual((r.status, r.stdout), ("ok", "42\n"))


class BusyServerTest(unittest.TestCase):
    def test_busy_is_retried(self):
        server = Server(os.environ["MICROBOX"], args=["--http-concurrency", "1", "--http-queue", "0"])
        try:
            results = []
            threads = [threading.Thread(target=lambda: results.append(
                execute_code("import time; time.sleep(0.5); print('done')", server=server.url))) for _ in range(3)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            self.assertEqual([r.stdout for r in results], ["done\n"] * 3)
            log = "".join(server.log)
        finally:
            server.stop()
        self.assertNotIn("panic", log)


class OnlyURLTest(unittest.TestCase):
    """With only $MICROBOX_URL set (no binary: $MICROBOX unset, none on
    PATH, no process started), run_batch, check_stdio and check_mbpp
    work over HTTP and give the verdicts the binary gives."""

    @classmethod
    def setUpClass(cls):
        cls.server = Server(os.environ["MICROBOX"])

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    def only_url(self):
        env = {k: v for k, v in os.environ.items() if k != "MICROBOX"}
        env.update(MICROBOX_URL=self.server.url, PATH="/nonexistent")
        p1, p2 = no_processes()
        return mock.patch.dict(os.environ, env, clear=True), p1, p2

    def test_run_batch(self):
        with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
            f.write("print('from a file')\n")
        tasks = [{"id": 1, "code": "print(1)"}, {"id": "x", "code": "import sys; sys.exit(sys.stdin.read())", "stdin": "3"},
                 {"id": 3, "code": "while True: pass", "timeout": 0.5}, {"id": 4, "file": f.name},
                 {"id": 5, "code": "print(1)", "mem": "12Q"}]
        fields = lambda r: (r.id, r.status, r.stdout, r.exit_code)  # noqa: E731
        want = [fields(r) for r in microbox.run_batch(tasks, jobs=2, timeout=5)]
        env, p1, p2 = self.only_url()
        with env, p1, p2:
            got = [fields(r) for r in microbox.run_batch(iter(tasks), jobs=2, timeout=5)]
            unordered = sorted(r.id for r in microbox.run_batch(({"id": i, "code": "print(%d)" % i} for i in range(20)), ordered=False))
            first = next(microbox.run_batch([{"code": "print(0)"}] + [{"code": "import time; time.sleep(30)"}] * 3))
        os.remove(f.name)
        self.assertEqual(got, want)
        self.assertEqual(want[3][:3], (4, "ok", "from a file\n"))
        self.assertEqual(unordered, list(range(20)))
        self.assertEqual(first.stdout, "0\n")  # and leaving early stopped the rest

    def test_check_stdio(self):
        program = "import sys\nd = sys.stdin.read().split()\nprint(' '.join(str(float(x) * 2) for x in d))"
        cases = [("1 2", "2.0 4.0"), ("1", "2.0000001"), ("3", "7"), ("x", "0"), ("5\n", "10.0\n\n")]
        runs = [dict(compare="lines"), dict(compare="tokens", float_tolerance=1e-6), dict(compare="exact"),
                dict(compare="lines", stop_on_fail=True, jobs=1)]
        # The echo program prints its input: each case is (what it prints, what is wanted).
        echo = "import sys; sys.stdout.write(sys.stdin.read())"
        echoes = [("1 2\n", "1 2"), ("1  2\r\n\n\n", "1 2"), ("1.0000001\n", "1"), ("x" * 50, "y" * 50),
                  ("\u00e9\x01\u200b\n", "e\n"), ("a\nb\n", "a\n"), ("a\n", "a\nb\n"), ("-0.5 .5", "-.5 0.5"),
                  ("123456789012345678901234567890\n", "123456789012345678901234567891\n"), ("1e400", "2e400"),
                  ("caf\u00e9 " * 12, "caf\u00e9 " * 11)]
        modes = [dict(compare="lines"), dict(compare="tokens", float_tolerance=1e-6), dict(compare="exact"),
                 dict(compare="lines", float_tolerance=1e-6)]

        def check_all():
            out = [microbox.check_stdio(program, cases, timeout=5, **o) for o in runs]
            out += [microbox.check_stdio(echo, echoes, timeout=5, **o) for o in modes]
            out.append(microbox.check_stdio("while True: pass", [("", "")], timeout=0.5))
            out.append(microbox.check_stdio("import os; os.abort()", [("", "")]))
            return out
        want = check_all()
        env, p1, p2 = self.only_url()
        with env, p1, p2:
            got = check_all()
        strip = lambda tests: [{k: v for k, v in t.items() if k not in ("wall_time_ms", "cpu_time_ms", "peak_memory_bytes")}  # noqa: E731
                               for t in tests]
        self.assertEqual([strip(g) for g in got], [strip(w) for w in want])
        self.assertEqual([t["status"] for t in want[0]], ["passed", "wrong_answer", "wrong_answer", "nonzero", "passed"])

    def test_check_mbpp(self):
        problem = {"task_id": 1, "test_setup_code": "", "test_list": ["assert f(1) == 2", "assert f(2) == 5", "assert g(1)"],
                   "challenge_test_list": ["assert f(0) == 1"]}
        completions = ["def f(x):\n    return 2 * x", "def f(x):\n    while True: pass", "raise ValueError('no')"]
        runs = [dict(), dict(challenge_tests=True, stop_on_fail=True)]
        want = [microbox.check_mbpp(problem, c, timeout=1, **o) for c in completions for o in runs]
        env, p1, p2 = self.only_url()
        with env, p1, p2:
            got = [microbox.check_mbpp(problem, c, timeout=1, **o) for c in completions for o in runs]
        strip = lambda tests: [{k: v for k, v in t.items() if k != "wall_time_ms"} for t in tests]  # noqa: E731
        self.assertEqual([strip(g) for g in got], [strip(w) for w in want])
        self.assertEqual([t["status"] for t in want[0]], ["passed", "wrong_answer", "nonzero"])


class BusyBatchTest(unittest.TestCase):
    def test_busy_batch_is_retried(self):
        """A server with room for one batch refuses a second (429) before
        taking any of its tasks: run_batch asks again, and every task of
        the generator it was given runs once."""
        server = Server(os.environ["MICROBOX"], args=["--http-concurrency", "1", "--http-queue", "1"])
        try:
            first = microbox.run_batch([{"code": "import time; time.sleep(2); print('first')"}], server=server.url)
            started = threading.Event()
            out = []

            def run_first():
                started.set()
                out.extend(r.stdout for r in first)

            t = threading.Thread(target=run_first)
            t.start()
            started.wait()
            time.sleep(0.5)  # the first batch is streaming
            taken = []

            def tasks():
                for i in range(3):
                    taken.append(i)
                    yield {"id": i, "code": "print(%d)" % i}

            got = [(r.id, r.stdout) for r in microbox.run_batch(tasks(), server=server.url)]
            t.join()
        finally:
            server.stop()
        self.assertEqual(out, ["first\n"])
        self.assertEqual(got, [(0, "0\n"), (1, "1\n"), (2, "2\n")])
        self.assertEqual(taken, [0, 1, 2])


class IdleConnectionTest(unittest.TestCase):
    def test_connection_closed_while_idle(self):
        """The server closes a kept-alive connection idle for
        --http-idle-timeout: the next run opens a new one."""
        server = Server(os.environ["MICROBOX"], tcp=True, args=["--http-idle-timeout", "1s"])
        try:
            first = execute_code("print(1)", server=server.url)
            conn = microbox.client._connections.pool[server.url]
            conn.sock.settimeout(20)
            self.assertEqual(conn.sock.recv(1), b"")  # closed by the server
            second = execute_code("print(2)", server=server.url)
        finally:
            server.stop()
        self.assertEqual((first.stdout, second.stdout), ("1\n", "2\n"))


class TokenTest(unittest.TestCase):
    def test_tcp_with_token(self):
        token = "0123456789abcdef0123456789abcdef"
        with tempfile.NamedTemporaryFile("w", delete=False) as f:
            f.write(token)
        os.chmod(f.name, 0o600)
        server = Server(os.environ["MICROBOX"], tcp=True, args=["--http-token-file", f.name])
        try:
            with self.assertRaises(MicroboxError) as cm:
                execute_code("print(1)", server=server.url)
            self.assertIn("401", str(cm.exception))
            with mock.patch.dict(os.environ, {"MICROBOX_TOKEN": token}):
                self.assertEqual(execute_code("print(1)", server=server.url).stdout, "1\n")
                r = asyncio.run(execute_code_async("print(2)", server=server.url))
                self.assertEqual(r.stdout, "2\n")
        finally:
            server.stop()
            os.remove(f.name)


if __name__ == "__main__":
    unittest.main()
