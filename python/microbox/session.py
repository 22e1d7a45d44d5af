"""Sessions: one Python interpreter in a sandbox that keeps its state
across cells, on a `microbox serve --http` server ($MICROBOX_URL, or
server=). See microbox's docs/sessions.md.

    with Session(mem="256M") as s:
        s.run("x = 41")
        assert s.run("x + 1").value == "42"
        s.upload("data.csv", b"a,b\\n1,2\\n")
        s.download("data.csv")

Standard library only; the blocking Session, and AsyncSession for asyncio.
"""

import asyncio
import functools
import http.client
import json
import os
import threading
import urllib.parse
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Union

from .client import MicroboxError, _UnixHTTPConnection, _endpoint

__all__ = ["AsyncSession", "CellResult", "Session", "SessionEnded"]

# Create-request keys that are durations: a number is seconds here.
_DURATIONS = ("timeout", "cpu_time", "idle_ttl", "max_lifetime")

# How long past a request's own time the client waits for the server's
# answer: the server bounds every request; this only guards against one
# that hangs. Opening waits for the interpreter and its preloads (60 s).
_GRACE_SECONDS = 60.0
_OPEN_SECONDS = 90.0
# A cell without a timeout of its own has the session's, at most the
# server's --max-timeout: this waits for the longest a server allows.
_CELL_SECONDS = 600.0


class SessionEnded(MicroboxError):
    """The session has ended (410): info is its description, whose
    "reason" says why (deleted, idle, timeout, memory, ...)."""

    def __init__(self, message: str, info: Dict[str, Any]):
        super().__init__(message)
        self.info = info


@dataclass
class CellResult:
    """One cell's answer (docs/sessions.md): status is "ok", "error",
    "timeout" (interrupted; the session goes on) or "ended" (the session
    ended under it: session["reason"] says why). value is the repr of a
    trailing expression, error the exception's {"name", "value",
    "traceback"}, display the rich outputs (figures as image/png)."""

    status: str
    stdout: str
    stderr: str
    value: Optional[str]
    error: Optional[Dict[str, Any]]
    display: List[Dict[str, str]]
    wall_time_ms: float
    cpu_time_ms: Optional[float]
    session: Dict[str, Any]
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @classmethod
    def from_json(cls, obj: Dict[str, Any]) -> "CellResult":
        return cls(status=obj["status"], stdout=obj.get("stdout", ""), stderr=obj.get("stderr", ""),
                   value=obj.get("value"), error=obj.get("error"), display=obj.get("display") or [],
                   wall_time_ms=obj.get("wall_time_ms", 0.0), cpu_time_ms=obj.get("cpu_time_ms"),
                   session=obj.get("session") or {}, raw=obj)


def _seconds(value: Any) -> Any:
    """A number of seconds as the server's duration ("1.5s"); a string
    ("5m") as it is."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return "%gs" % value
    return value


class Session:
    """A live session on a server: opened at construction, ended by
    close() (or the with block's end). options are the create request's
    keys (mem, cpus, pids, cpu_time, tmpfs_size, workdir, env, files,
    timeout, output_limit, preload, idle_ttl, max_lifetime, ...);
    durations in seconds or the server's forms ("5m")."""

    def __init__(self, server: Optional[str] = None, **options: Any):
        self.url = server or os.environ.get("MICROBOX_URL") or ""
        if not self.url:
            raise MicroboxError("a session needs a server: pass server=\"http://HOST:PORT\" (or \"unix:/PATH\") "
                                "or set $MICROBOX_URL to a `microbox serve --http` address")
        self._endpoint = _endpoint(self.url)
        self._conn = None  # type: Optional[http.client.HTTPConnection]
        self._lock = threading.Lock()  # one request at a time on the connection
        self.closed = False
        body = {k: (_seconds(v) if k in _DURATIONS else v) for k, v in options.items() if v is not None}
        self.info = self._json("POST", "/v1/sessions", body, _OPEN_SECONDS, want=201)
        self.id = self.info["id"]

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return "Session(%r, %s)" % (getattr(self, "id", None), "closed" if self.closed else "open")

    def run(self, code: str, stdin: Optional[str] = None, timeout: Optional[float] = None) -> CellResult:
        """Run a cell; its answer whatever the code did (a raising cell is
        status "error"). timeout in seconds (default: the session's)."""
        body = {"code": code}  # type: Dict[str, Any]
        if stdin is not None:
            body["stdin"] = stdin
        if timeout is not None:
            body["timeout"] = _seconds(timeout)
        wait = (timeout if timeout is not None else _CELL_SECONDS) + _GRACE_SECONDS
        result = CellResult.from_json(self._json("POST", self._path("cells"), body, wait))
        self.info = result.session or self.info
        return result

    def upload(self, path: str, data: Union[bytes, str]) -> Dict[str, Any]:
        """Write a file in the session's working directory (text is
        UTF-8); its {"path", "size"}."""
        if isinstance(data, str):
            data = data.encode("utf-8")
        status, _, body = self._request("PUT", self._file(path), data, _GRACE_SECONDS, "application/octet-stream")
        return self._decode(status, body, 200)

    def download(self, path: str) -> bytes:
        """A file's bytes, exactly."""
        status, ctype, body = self._request("GET", self._file(path), None, _GRACE_SECONDS)
        if status == 200 and not ctype.startswith("application/json"):
            return body
        self._decode(status, body, 200)
        raise MicroboxError("server %s answered a download of %r as JSON" % (self.url, path))

    def delete_file(self, path: str) -> Dict[str, Any]:
        return self._json("DELETE", self._file(path), None, _GRACE_SECONDS)

    def files(self) -> List[Dict[str, Any]]:
        """The working directory, recursively: [{"path", "size", "type"}]."""
        return self._json("GET", self._path("files"), None, _GRACE_SECONDS)["files"]

    def describe(self) -> Dict[str, Any]:
        """The session's description (state, cells, limits, ...), also once
        it ended."""
        return self._json("GET", self._path(""), None, _GRACE_SECONDS)

    def close(self) -> Dict[str, Any]:
        """End the session (its jail and everything it held are gone when
        this returns); its description. Closing twice, or a session that
        already ended, is not an error."""
        if self.closed:
            return self.info
        try:
            status, _, body = self._request("DELETE", self._path(""), None, _GRACE_SECONDS)
            self.info = self._decode(status, body, 200, ended_ok=True)
            if status == 410:
                self.info = self.info.get("session", self.info)
        finally:
            self.closed = True
            if self._conn is not None:
                self._conn.close()
        return self.info

    # -- HTTP --------------------------------------------------------------

    def _path(self, rest: str) -> str:
        return "/v1/sessions/" + urllib.parse.quote(self.id, safe="") + ("/" + rest if rest else "")

    def _file(self, path: str) -> str:
        # Every byte quoted, "/" too: the server takes the path as given,
        # where an HTTP stack would clean "a/../b" into another path.
        return self._path("files/" + urllib.parse.quote(path, safe=""))

    def _json(self, method: str, target: str, body: Any, wait: float, want: int = 200) -> Dict[str, Any]:
        data = None if body is None else json.dumps(body).encode("utf-8")
        status, _, answer = self._request(method, target, data, wait, "application/json")
        return self._decode(status, answer, want)

    def _decode(self, status: int, body: bytes, want: int, ended_ok: bool = False) -> Dict[str, Any]:
        try:
            obj = json.loads(body.decode("utf-8"))
        except ValueError:
            raise MicroboxError("server %s answered %d with no JSON: %r" % (self.url, status, body[:200]))
        if status == want or (ended_ok and status == 410):
            return obj
        if status == 410:
            raise SessionEnded("session %s ended: %s" % (getattr(self, "id", "?"), obj.get("error")), obj.get("session") or {})
        raise MicroboxError("server %s refused (%d): %s" % (self.url, status, obj.get("error", obj)))

    def _request(self, method: str, target: str, body: Optional[bytes], wait: float, ctype: str = ""):
        """(status, content type, body) of one request on the session's
        kept-alive connection; sent again once on a new connection when the
        server had closed the kept one while it was idle."""
        headers = {"Content-Length": str(len(body or b""))}
        if ctype and body is not None:
            headers["Content-Type"] = ctype
        token = os.environ.get("MICROBOX_TOKEN")
        if token:
            headers["Authorization"] = "Bearer " + token
        with self._lock:
            for attempt in (0, 1):
                conn = self._connection(wait)
                kept = conn.sock is not None
                try:
                    conn.request(method, target, body, headers)
                    resp = conn.getresponse()
                    return resp.status, resp.getheader("Content-Type", ""), resp.read()
                except (ConnectionResetError, BrokenPipeError, http.client.RemoteDisconnected) as e:
                    conn.close()
                    if not kept or attempt:
                        raise MicroboxError("server %s: %s" % (self.url, e))
                except (OSError, http.client.HTTPException) as e:
                    conn.close()
                    raise MicroboxError("server %s: %s" % (self.url, e))
        raise AssertionError("unreachable")

    def _connection(self, wait: float) -> http.client.HTTPConnection:
        if self._conn is None:
            path, host, port = self._endpoint
            self._conn = _UnixHTTPConnection(path, wait) if path else http.client.HTTPConnection(host, port, timeout=wait)
        self._conn.timeout = wait
        if self._conn.sock is not None:
            self._conn.sock.settimeout(wait)
        return self._conn


async def _in_thread(fn, *args, **kwargs):
    """fn on the event loop's default executor (asyncio.to_thread is 3.9+)."""
    return await asyncio.get_running_loop().run_in_executor(None, functools.partial(fn, *args, **kwargs))


class AsyncSession:
    """Session for asyncio: the same methods as coroutines, each run on a
    worker thread (a session serves one request at a time anyway).

        async with await AsyncSession.open(mem="256M") as s:
            r = await s.run("1 + 1")
    """

    def __init__(self, session: Session):
        self.session = session
        self.id = session.id

    @classmethod
    async def open(cls, server: Optional[str] = None, **options: Any) -> "AsyncSession":
        return cls(await _in_thread(Session, server, **options))

    async def __aenter__(self) -> "AsyncSession":
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    async def run(self, code: str, stdin: Optional[str] = None, timeout: Optional[float] = None) -> CellResult:
        return await _in_thread(self.session.run, code, stdin, timeout)

    async def upload(self, path: str, data: Union[bytes, str]) -> Dict[str, Any]:
        return await _in_thread(self.session.upload, path, data)

    async def download(self, path: str) -> bytes:
        return await _in_thread(self.session.download, path)

    async def delete_file(self, path: str) -> Dict[str, Any]:
        return await _in_thread(self.session.delete_file, path)

    async def files(self) -> List[Dict[str, Any]]:
        return await _in_thread(self.session.files)

    async def close(self) -> Dict[str, Any]:
        return await _in_thread(self.session.close)
