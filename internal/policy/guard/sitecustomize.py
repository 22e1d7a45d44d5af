# microbox's sitecustomize: placed read-only in /run/microbox, first on
# PYTHONPATH, only for runs with a module policy or guard. The line above
# this comment (written by microbox) is the configuration; the work is in
# _microbox_guard (guard.py), loaded from its precompiled bytecode when
# microbox has it.
try:
    import _microbox_guard

    _microbox_guard.install(_MICROBOX, __file__.rpartition("/")[0])
except BaseException as exc:
    # Fail closed: a program must not run without the policy it was given.
    import sys

    sys.stderr.write("microbox: the module policy could not be installed (%s: %s); the program was not run\n" % (type(exc).__name__, exc))
    sys.stderr.flush()
    sys.modules["os"]._exit(125)
