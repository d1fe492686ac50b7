"""Loads a target named "module.path:function", rewriting its module's AST so the proxies stay symbolic.

The rewrite is the Python analogue of SymCC's compile-time instrumentation: in the target's
own module (not in modules it imports), calls ``int.from_bytes(...)``, ``len(...)`` and
``int(...)`` become calls to helpers from ``worker.concolic.symbolic`` that behave exactly like
the builtins on ordinary values. A name the module rebinds itself (``def len``, ``len = ...``,
``import ... as int``) is left alone. The source file is untouched, so the target stays plain
Python and runs unchanged without the engine; the instrumented module is a private copy that
is not left in ``sys.modules``. Modules without Python source are imported as they are.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import sys
import types
from typing import Callable

from symfence.worker.concolic.symbolic import sym_from_bytes, sym_int, sym_len

Target = Callable[[bytes], object]

_FROM_BYTES = "__symfence_from_bytes__"
_CALL_REWRITES = {"len": "__symfence_len__", "int": "__symfence_int__"}
HELPERS = {_FROM_BYTES: sym_from_bytes, "__symfence_len__": sym_len, "__symfence_int__": sym_int}

_loaded: dict[str, Target] = {}


class TargetLoadError(Exception):
    """The target spec is malformed, or its module cannot be imported or lacks the function."""


def _bound_names(tree: ast.AST) -> set[str]:
    """Every name the module binds anywhere (assignments, defs, parameters, imports)."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            names.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, ast.alias):
            names.add(node.asname or node.name.split(".")[0])
    return names


class _Rewriter(ast.NodeTransformer):
    def __init__(self, shadowed: set[str]):
        self.shadowed = shadowed
        self.rewrites = 0

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        func = node.func
        if (isinstance(func, ast.Attribute) and func.attr == "from_bytes"
                and isinstance(func.value, ast.Name) and func.value.id == "int"
                and "int" not in self.shadowed):
            node.func = ast.copy_location(ast.Name(_FROM_BYTES, ast.Load()), func)
            self.rewrites += 1
        elif (isinstance(func, ast.Name) and func.id in _CALL_REWRITES
                and func.id not in self.shadowed):
            node.func = ast.copy_location(ast.Name(_CALL_REWRITES[func.id], ast.Load()), func)
            self.rewrites += 1
        return node


def instrument_source(source: str, filename: str) -> types.CodeType:
    """Compile module source with the symbolic rewrites applied."""
    tree = ast.parse(source, filename)
    tree = _Rewriter(_bound_names(tree)).visit(tree)
    ast.fix_missing_locations(tree)
    return compile(tree, filename, "exec")


def _instrumented_module(name: str) -> types.ModuleType:
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError) as exc:
        raise TargetLoadError(f"cannot find module {name!r}: {exc}") from exc
    if spec is None:
        raise TargetLoadError(f"no module named {name!r}")
    source = None
    if spec.loader is not None and hasattr(spec.loader, "get_source"):
        source = spec.loader.get_source(name)
    if source is None or spec.origin is None:
        return importlib.import_module(name)
    code = instrument_source(source, spec.origin)
    module = types.ModuleType(name)
    module.__file__ = spec.origin
    module.__spec__ = spec
    module.__loader__ = spec.loader
    module.__package__ = spec.parent
    if spec.submodule_search_locations is not None:
        module.__path__ = list(spec.submodule_search_locations)
    module.__dict__.update(HELPERS)
    previous = sys.modules.get(name)
    sys.modules[name] = module  # visible while it executes (dataclasses, pickle look it up)
    try:
        exec(code, module.__dict__)
    finally:
        if previous is None:
            sys.modules.pop(name, None)
        else:
            sys.modules[name] = previous
    return module


def load_target(spec: str) -> Target:
    """The instrumented target function for ``"module.path:function"`` (cached per process)."""
    target = _loaded.get(spec)
    if target is not None:
        return target
    module_name, sep, function_name = spec.partition(":")
    if not sep or not module_name or not function_name.isidentifier():
        raise TargetLoadError(f"target must look like 'module.path:function', not {spec!r}")
    try:
        module = _instrumented_module(module_name)
    except TargetLoadError:
        raise
    except Exception as exc:  # the module's own import-time code failed
        raise TargetLoadError(f"importing {module_name!r} failed: {exc!r}") from exc
    target = getattr(module, function_name, None)
    if not callable(target):
        raise TargetLoadError(f"{module_name!r} has no callable {function_name!r}")
    _loaded[spec] = target
    return target
