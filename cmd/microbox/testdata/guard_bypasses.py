# Bypass attempts against the module policy, run by TestModulePolicyBypasses
# under --deny-modules socket,subprocess,os. Each prints "blocked" or
# "possible"; README's table ("Policy layers (not the boundary)") lists the
# same outcomes, and the test keeps the two in step.
import sys, json as _json
results = {}
def attempt(name, fn):
    try:
        fn()
        results[name] = "possible"
    except ImportError as e:
        results[name] = "blocked" if "blocked by policy" in str(e) else "error: %s" % e
    except Exception as e:
        results[name] = "error: %s: %s" % (type(e).__name__, e)

def imp_socket(): import socket
def from_socket(): from socket import socket
def os_path(): import os.path
def posix(): import posix
def c_socket(): import _socket
def builtins_import():
    import builtins
    builtins.__import__("socket")
def import_module(name):
    import importlib
    return lambda: importlib.import_module(name)
def importlib_import():
    import importlib
    importlib.__import__("socket")
def gcd_import():
    import importlib
    importlib._bootstrap._gcd_import("socket")
def find_spec():
    import importlib.util
    importlib.util.find_spec("socket")
def readd_os():
    del sys.modules["os"]
    import os
def pickle_global():
    import pickle
    pickle.loads(b"csocket\nsocket\n.")
def own_module():
    with open("/tmp/mymod.py", "w") as f:
        f.write("import socket\n")
    sys.path.insert(0, "/tmp")
    import mymod
def sys_modules(): sys.modules["os"].getpid
def reach_through():
    import random
    random._os.getpid
def resolve_name():
    import pkgutil
    pkgutil.resolve_name("socket:socket")
def forged_filename():
    import json
    exec(compile("import socket", json.__file__, "exec"), {})
def subclasses():
    for c in ().__class__.__base__.__subclasses__():
        if c.__name__ == "BuiltinImporter":
            c.load_module("_socket")
            return
    raise RuntimeError("no BuiltinImporter")
def restore_import():
    import builtins
    builtins.__import__ = sys.modules["_frozen_importlib"].__import__
    import socket
def remove_finder():
    import importlib
    sys.meta_path[:] = [f for f in sys.meta_path if type(f).__module__ != "_microbox_guard"]
    importlib._bootstrap._gcd_import("socket")

attempt("import socket", imp_socket)
attempt("from socket import socket", from_socket)
attempt("import os.path", os_path)
attempt("import posix", posix)
attempt("import _socket", c_socket)
attempt("__import__", lambda: __import__("socket"))
attempt("__builtins__.__import__", lambda: __builtins__.__import__("socket"))
attempt("builtins.__import__", builtins_import)
attempt("importlib.import_module", import_module("socket"))
attempt("importlib.import_module(loaded)", import_module("os"))
attempt("importlib.__import__", importlib_import)
attempt("_gcd_import", gcd_import)
attempt("importlib.util.find_spec", find_spec)
attempt("exec", lambda: exec("import socket"))
attempt("pickle", pickle_global)
attempt("own module", own_module)
attempt("sys.modules", sys_modules)
attempt("del sys.modules", readd_os)
attempt("module attribute", reach_through)
attempt("pkgutil.resolve_name", resolve_name)
attempt("forged file name", forged_filename)
attempt("__subclasses__", subclasses)
attempt("restore __import__", restore_import)
attempt("remove finder", remove_finder)
print(_json.dumps(results))
