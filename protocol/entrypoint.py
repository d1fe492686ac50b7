"""What an Atheris harness file hands to ``atheris.Setup`` (its test function, its mutator hooks), read from its source.

OSS-Fuzz's convention names it ``TestOneInput``, but Atheris fuzzes whatever function
``atheris.Setup(sys.argv, f)`` is given, and harnesses in the wild name it ``test_one_input``,
``fuzz``, ``TestInput`` and more. The source is parsed, never imported: importing a harness may
run its module-level ``atheris.Setup(...)`` and ``atheris.Fuzz()``.

The rule (`entry_point`): the name handed to the first ``Setup`` call of ``atheris`` whose
callback is a plain name the module binds at its top level (a ``def``, an assignment such as
``fuzz = make_fuzzer()``, an import: what ``module:name`` finds); else ``TestOneInput`` when the
module defines it at its top level (a ``def``: a test module importing a harness's function is
no harness); else None (not a harness this rule can name).

A harness may also hand ``Setup`` its own mutation (`setup_hooks`): ``custom_mutator=`` (a
function ``(data, max_size, seed) -> bytes``, e.g. one that decompresses, calls
``atheris.Mutate`` and compresses again) and ``custom_crossover=``. libFuzzer's own mutations
rarely make a valid input of such a format, so the fuzz stage must run with them as Atheris
does. Each is named as written: a name, or a dotted path from one (``adapter.mutate``), which
the fuzz process looks up in the harness module once imported.
"""

from __future__ import annotations

import ast

CONVENTION = "TestOneInput"
HOOKS = ("custom_mutator", "custom_crossover")  # Setup's keywords that replace libFuzzer's mutation


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


def _dotted(node: ast.expr) -> str | None:
    """``name`` or ``name.attr.attr`` as written; None for anything else (a call, a lambda)."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return ".".join([node.id, *reversed(parts)])


def _setup_calls(tree: ast.Module) -> list[ast.Call]:
    """The module's calls of atheris's Setup (at any depth: under ``main()`` too), in source order."""
    modules: set[str] = {"atheris"}
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules.update(a.asname for a in node.names if a.name == "atheris" and a.asname)
        elif isinstance(node, ast.ImportFrom) and node.module == "atheris":
            names.update(a.asname or a.name for a in node.names if a.name == "Setup")
    return sorted((node for node in ast.walk(tree) if isinstance(node, ast.Call)
                   and _is_setup(node.func, names, modules)), key=lambda n: (n.lineno, n.col_offset))


def _parse(source: bytes | str) -> ast.Module | None:
    try:
        return ast.parse(source)
    except (SyntaxError, ValueError):
        return None


def _entry(tree: ast.Module, calls: list[ast.Call]) -> tuple[str | None, ast.Call | None]:
    """The test function's name and the Setup call that hands it over (None: the convention)."""
    bound = _bound(tree.body)
    for call in calls:
        callback = call.args[1] if len(call.args) >= 2 else next(
            (k.value for k in call.keywords if k.arg == "test_one_input"), None)
        if isinstance(callback, ast.Name) and callback.id in bound:
            return callback.id, call
    defines = any(isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == CONVENTION
                  for node in tree.body)
    return (CONVENTION if defines else None), None


def entry_point(source: bytes | str) -> str | None:
    """The name of the harness's test function (the module docstring's rule), or None."""
    tree = _parse(source)
    return None if tree is None else _entry(tree, _setup_calls(tree))[0]


def setup_hooks(source: bytes | str) -> dict[str, str]:
    """The mutator hooks the harness hands to Setup, ``{keyword: dotted name}`` (keywords of
    `HOOKS`), from the call that hands over its test function, else from its first Setup call;
    a hook that is not a name or a dotted path from one (``lambda``, a call) is left out."""
    tree = _parse(source)
    if tree is None:
        return {}
    calls = _setup_calls(tree)
    call = _entry(tree, calls)[1] or (calls[0] if calls else None)
    if call is None:
        return {}
    hooks = {k.arg: _dotted(k.value) for k in call.keywords if k.arg in HOOKS}
    return {k: v for k, v in hooks.items() if k is not None and v is not None}
