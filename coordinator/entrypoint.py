"""The test function of an Atheris harness file: the one it hands to ``atheris.Setup``, read from its source.

OSS-Fuzz's convention names it ``TestOneInput``, but Atheris fuzzes whatever function
``atheris.Setup(sys.argv, f)`` is given, and harnesses in the wild name it ``test_one_input``,
``fuzz``, ``TestInput`` and more. The source is parsed, never imported: importing a harness may
run its module-level ``atheris.Setup(...)`` and ``atheris.Fuzz()``.

The rule (`entry_point`): the name handed to the first ``Setup`` call of ``atheris`` whose
callback is a plain name the module binds at its top level (a ``def``, an assignment such as
``fuzz = make_fuzzer()``, an import: what ``module:name`` finds); else ``TestOneInput`` when the
module defines it at its top level (a ``def``: a test module importing a harness's function is
no harness); else None (not a harness this rule can name).
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


def _bound(body: list[ast.stmt]) -> set[str]:
    """The names a module's top-level statements bind (not those inside functions or classes)."""
    names: set[str] = set()
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(t.id for t in targets if isinstance(t, ast.Name))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).partition(".")[0] for a in node.names if a.name != "*")
        elif isinstance(node, (ast.If, ast.Try, ast.With)):  # `if ...:`, `try: import x`, `with instrument_imports():`
            for part in ("body", "orelse", "finalbody"):
                names |= _bound(getattr(node, part, []))
            for handler in getattr(node, "handlers", []):
                names |= _bound(handler.body)
    return names


def entry_point(source: bytes | str) -> str | None:
    """The name of the harness's test function (the module docstring's rule), or None."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    bound = _bound(tree.body)
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
        if isinstance(callback, ast.Name) and callback.id in bound:
            return callback.id
    defines = any(isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == CONVENTION
                  for node in tree.body)
    return CONVENTION if defines else None
