# microbox's MBPP harness. It runs an MBPP sample as the MBPP paper's
# evaluation does -- the completion, then test_setup_code, then each assert
# of test_list, in one namespace -- and reports the outcome of each assert
# as it ends, so that a run killed in a later assert (memory, a hang the
# alarm cannot stop) keeps the verdicts of the earlier ones.
#
# stdin holds, in this order: a line "NONCE TIMEOUT STOP COUNT", then
# COUNT + 2 blobs, each "LENGTH\n" and LENGTH bytes of UTF-8: the
# completion, the setup code, and the asserts. NONCE is microbox's, new for
# each run; a record is believed only if it carries it, and the program
# never sees stdin (it is read to its end first). Each record is written
# to the run's stdout as
#   MARKER NONCE " " WHAT " " STATUS " " MILLISECONDS " " LENGTH ":" MESSAGE
# where WHAT is "setup" or the assert's index from 0 and STATUS is
# passed, wrong_answer (an AssertionError), nonzero (another exception) or
# timeout (TIMEOUT seconds, by an alarm). With STOP 1 it stops after the
# first assert that does not pass.
#
# The program's own output is thrown away (sys.stdout, sys.stderr, and fd
# 1, which is /dev/null while it runs); the records go to a copy of fd 1.
# A program that reads this process's memory can find the nonce, as it can
# patch assert itself: the sandbox keeps the host safe, not the score
# honest.
#
# It imports nothing Python has not loaded at start-up but the built-in
# _signal. "microbox eval mbpp" embeds this file (internal/eval/mbpp.go) and
# runs it compiled under the name "<frozen microbox_mbpp_harness>", so that a
# module policy (--deny-modules, --allow-modules) judges the program's imports
# and not the harness's.
import _signal
import io
import os
import sys
import time

MARKER = b"@@microbox-mbpp@@"


class TestTimeout(BaseException):
    """Raised by the alarm; a BaseException, so that `except Exception`
    in the program does not swallow it."""


class Discard(io.TextIOBase):
    """The program's sys.stdout and sys.stderr: written, never kept."""

    def writable(self):
        return True

    def write(self, s):
        return len(s)


def on_alarm(signum, frame):
    raise TestTimeout()


def read_input(data):
    """The header's fields and the blobs of stdin."""
    header, _, rest = data.partition(b"\n")
    nonce, timeout, stop, count = header.split(b" ")
    blobs = []
    for _ in range(int(count) + 2):
        length, _, rest = rest.partition(b"\n")
        n = int(length)
        blobs.append(rest[:n].decode("utf-8", "surrogateescape"))
        rest = rest[n:]
    return nonce, float(timeout), stop == b"1", blobs


# What the harness calls once the program has run, taken before it runs.
monotonic, setitimer, ITIMER_REAL = time.monotonic, _signal.setitimer, _signal.ITIMER_REAL


def run(code, namespace, timeout):
    """exec code in namespace under the alarm (repeated every 0.1 s once
    due, for a program that catches it once): its status, milliseconds and
    message."""
    start = monotonic()
    try:
        try:
            setitimer(ITIMER_REAL, timeout, 0.1)
            exec(code, namespace)
        finally:
            setitimer(ITIMER_REAL, 0)
        status, message = "passed", ""
    except TestTimeout:
        status, message = "timeout", ""
    except AssertionError as e:
        status, message = "wrong_answer", describe(e)
    except BaseException as e:
        status, message = "nonzero", describe(e)
    elapsed = monotonic() - start
    if elapsed > timeout:  # the program caught the alarm and went on
        status, message = "timeout", ""
    return status, elapsed * 1000, message


def describe(e):
    try:
        text = str(e)
    except BaseException:
        text = "(the exception could not be printed)"
    name = type(e).__name__
    return name + ": " + text if text else name


def main():
    nonce, timeout, stop, blobs = read_input(sys.stdin.buffer.read())
    program, setup, tests = blobs[0], blobs[1], blobs[2:]
    out, write, exit_ = os.dup(1), os.write, os._exit
    null = os.open("/dev/null", os.O_WRONLY)
    os.dup2(null, 1)
    os.close(null)
    sys.stdin = io.StringIO()
    sys.stdout = sys.stderr = Discard()
    _signal.signal(_signal.SIGALRM, on_alarm)

    def record(what, status, ms, message):
        data = message.replace("\n", " ").encode("utf-8", "backslashreplace")
        head = b"%s%s %s %s %.3f %d:" % (MARKER, nonce, what.encode(), status.encode(), ms, len(data))
        write(out, b"\n" + head + data + b"\n")

    namespace = {}
    status, ms, message = run(program + "\n" + setup, namespace, timeout)
    record("setup", status, ms, message)
    if status == "passed":
        for i, test in enumerate(tests):
            status, ms, message = run(test, namespace, timeout)
            record(str(i), status, ms, message)
            if stop and status != "passed":
                break
    exit_(0)


if __name__ == "__main__":
    main()
