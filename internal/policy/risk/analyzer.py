# microbox's risk analyzer: the risk report (microbox check, and a run's
# MaxRisk) runs it in the sandbox (python -I -S -c THIS RULES), never on
# the host, with the program's source on stdin. It parses the source with
# Python's own ast module and prints one JSON object: the constructs named
# in RULES (a JSON object from rules in risk.go) that occur, each once
# with its first position and count, or the syntax error. Points and
# levels are the Go side's business, so this file holds no policy.

import ast
import json
import sys


def main():
    rules = json.loads(sys.argv[1])
    source = sys.stdin.buffer.read()
    try:
        tree = ast.parse(source)
    except SyntaxError as e:  # IndentationError and TabError too
        return {"findings": [], "syntax_error": {"message": e.msg, "line": e.lineno or 0, "col": e.offset or 0}}
    except ValueError as e:  # "source code string cannot contain null bytes"
        return {"findings": [], "syntax_error": {"message": str(e), "line": 0, "col": 0}}
    return {"findings": findings(tree, rules), "syntax_error": None}


def findings(tree, rules):
    imports = set(rules["import"])
    builtins = set(rules["builtin"])
    calls = set(rules["call"])
    attributes = set(rules["attribute"])
    found = {}

    def add(rule, name, node):
        key = (rule, name)
        if key in found:
            found[key]["count"] += 1
        else:
            found[key] = {"rule": rule, "name": name, "count": 1,
                          "line": getattr(node, "lineno", 0), "col": getattr(node, "col_offset", 0)}

    # ast.walk is iterative: deeply nested code cannot exhaust the stack.
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                top = alias.name.partition(".")[0]
                if top in imports:
                    add("import", top, node)
        elif isinstance(node, ast.ImportFrom):
            top = (node.module or "").partition(".")[0]
            if node.level == 0 and top in imports:
                add("import", top, node)
        elif isinstance(node, ast.Name):
            if node.id in builtins:
                add("builtin", node.id, node)  # eval(...) and f = eval alike
            elif node.id in attributes:
                add("attribute", node.id, node)  # __builtins__, __loader__
        elif isinstance(node, ast.Attribute):
            receiver = node.value.id if isinstance(node.value, ast.Name) else None
            if receiver in ("builtins", "__builtins__") and node.attr in builtins:
                add("builtin", node.attr, node)
            elif node.attr in attributes:
                add("attribute", node.attr, node)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            if node.value in attributes:  # getattr(f, "__globals__")
                add("attribute", node.value, node)
        elif isinstance(node, ast.While):
            test = node.test
            if isinstance(test, ast.Constant) and test.value and not isinstance(test.value, str):
                add("loop", "while True", node)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in calls:
            add("call", node.func.attr, node)  # importlib.import_module(...)
    return list(found.values())


json.dump(main(), sys.stdout)
