"""The test function of an Atheris harness file: the one it hands to ``atheris.Setup``, read from its source.

OSS-Fuzz's convention names it ``TestOneInput``, but Atheris fuzzes whatever function
``atheris.Setup(sys.argv, f)`` is given, and harnesses in the wild name it ``test_one_input``,
``fuzz``, ``TestInput`` and more. The source is parsed, never imported: importing a harness may
run its module-level ``atheris.Setup(...)`` and ``atheris.Fuzz()``.

The rule (`entry_point`): the function named by the first ``Setup`` call of ``atheris`` whose
callback is a plain name defined at the module's top level; else ``TestOneInput`` when the module
defines it at its top level; else None (not a harness this rule can name).
"""

from __future__ import annotations

import ast

CONVENTION = "TestOneInput"


def _is_setup(func: ast.expr, names: set[str], modules: set[str]) -> bool:
    """Whether ``func`` is atheris's Setup: ``atheris.Setup`` (or an alias of the module), or a
    name ``from atheris import Setup`` bound."""
    if isinstance(func, ast.Attribute):
        return func.attr == "Setup" and isinstance(func.value, ast.Name) and func.value.id in modules
    return isinstance(func, ast.Name) and func.id in names


def entry_point(source: bytes | str) -> str | None:
    """The name of the harness's test function (the module docstring's rule), or None."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    defined = {node.name for node in tree.body if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))}
    modules: set[str] = {"atheris"}
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules.update(a.asname for a in node.names if a.name == "atheris" and a.asname)
        elif isinstance(node, ast.ImportFrom) and node.module == "atheris":
            names.update(a.asname or a.name for a in node.names if a.name == "Setup")
    calls = sorted((node for node in ast.walk(tree) if isinstance(node, ast.Call)
                    and _is_setup(node.func, names, modules)), key=lambda n: (n.lineno, n.col_offset))
    for call in calls:
        callback = call.args[1] if len(call.args) >= 2 else next(
            (k.value for k in call.keywords if k.arg == "test_one_input"), None)
        if isinstance(callback, ast.Name) and callback.id in defined:
            return callback.id
    return CONVENTION if CONVENTION in defined else None
