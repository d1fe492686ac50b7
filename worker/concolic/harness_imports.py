"""Names the package under test of a harness file: what it imports under ``atheris.instrument_imports()`` and its other non-stdlib imports.

An OSS-Fuzz harness is a loose module (``fuzz_x.py``) that imports the library it fuzzes, most
often inside ``with atheris.instrument_imports():``. The concolic engine rewrites these modules
too (``instrument``), as Atheris instruments them for coverage, so the input stays symbolic past
the harness into the library. Read from the harness's source (never executed here):
- every module imported inside a ``with atheris.instrument_imports(...)`` block (the standard
  library too: a harness that wraps ``import tomllib`` asks for it);
- every module imported at the top of the module (also inside ``try``/``if``) that is not the
  standard library, symfence, atheris or z3.
Each comes back as its top-level package (``from dns import message`` -> ``dns``), since the
library's own submodules are imported through it. The option ``instrument_imports = false``
turns this off; ``concolic.instrument`` adds modules by name.
"""

from __future__ import annotations

import ast
import functools
import importlib.machinery
import importlib.util
import sys

_NOT_UNDER_TEST = ("symfence", "atheris", "z3", "pytest", "_pytest")


def _is_instrument_block(item: ast.withitem) -> bool:
    """``atheris.instrument_imports(...)`` (or a bare ``instrument_imports(...)``)."""
    call = item.context_expr
    if not isinstance(call, ast.Call):
        return False
    func = call.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    return name == "instrument_imports"


def _imported(node: ast.stmt) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if isinstance(node, ast.ImportFrom) and node.module and not node.level:
        return [node.module]
    return []


def _statements(body: list[ast.stmt], in_block: bool) -> list[tuple[str, bool]]:
    """``(module, inside an instrument_imports block)`` of the module-level imports in ``body``
    (function and class bodies are not module level and are skipped)."""
    found: list[tuple[str, bool]] = []
    for node in body:
        found.extend((name, in_block) for name in _imported(node))
        if isinstance(node, ast.With):
            block = in_block or any(_is_instrument_block(item) for item in node.items)
            found.extend(_statements(node.body, block))
        elif isinstance(node, ast.Try):
            for part in (node.body, node.orelse, node.finalbody, *(h.body for h in node.handlers)):
                found.extend(_statements(part, in_block))
        elif isinstance(node, ast.If):
            found.extend(_statements(node.body, in_block))
            found.extend(_statements(node.orelse, in_block))
    return found


def imports_under_test(source: str, own_package: str = "") -> tuple[str, ...]:
    """The top-level packages a harness's ``source`` imports as its code under test, sorted."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return ()
    roots: set[str] = set()
    for name, in_block in _statements(tree.body, False):
        root = name.partition(".")[0]
        if root in _NOT_UNDER_TEST or root == own_package or root == "__future__":
            continue
        if in_block or root not in sys.stdlib_module_names:
            roots.add(root)
    return tuple(sorted(roots))


@functools.lru_cache(maxsize=64)
def harness_imports(module_name: str) -> tuple[str, ...]:
    """``imports_under_test`` of the target module's source file (``()`` if it has none)."""
    try:
        spec = (importlib.util.find_spec(module_name) if "." in module_name
                else importlib.machinery.PathFinder.find_spec(module_name))
    except (ImportError, ValueError, AttributeError):
        return ()
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        return ()
    try:
        with open(spec.origin, encoding="utf-8") as fh:
            source = fh.read()
    except (OSError, UnicodeDecodeError):
        return ()
    return imports_under_test(source, module_name.partition(".")[0])
