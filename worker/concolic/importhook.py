"""The import hook and builtins of instrumented code: models for io, struct, re, atheris and C modules.

``instrumented_builtins`` is the ``__builtins__`` of an instrumented module (``instrument``):
``len``, ``ord``, ``chr`` and ``isinstance`` that keep proxies symbolic, and an ``__import__``
(``make_import``) that finds the load's rewritten modules and hands out the models:
``io`` with ``SymBytesIO``/``SymStringIO`` (``streams``), ``struct`` (``structs``), ``re``
(``relib``), ``atheris`` with the Python ``FuzzedDataProvider`` (``fdp``), and for C modules
copies whose functions count a concretisation when called with a proxy (``c_<module>.<function>``).
"""

from __future__ import annotations

import builtins
import importlib
import importlib.metadata as importlib_metadata
import importlib.util
import struct as _struct
import sys
import types
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from symfence.worker.concolic.models import PROXY_TYPES, sym_isinstance, sym_len
from symfence.worker.concolic.streams import SymBytesIO, SymStringIO
from symfence.worker.concolic.structs import Struct, iter_unpack, unpack, unpack_from
from symfence.worker.concolic.symbolic import note_concretised
from symfence.worker.concolic.symseq import sym_chr, sym_ord
from symfence.worker.concolic.subclass import sym_build_class


def _counting(fn: Callable[..., Any], kind: str) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if any(isinstance(a, PROXY_TYPES) for a in args) or any(
                isinstance(v, PROXY_TYPES) for v in kwargs.values()):
            note_concretised(kind)
        return fn(*args, **kwargs)

    wrapper.__name__ = getattr(fn, "__name__", kind)
    wrapper.__qualname__ = wrapper.__name__
    wrapper.__doc__ = getattr(fn, "__doc__", None)
    wrapper.__wrapped__ = fn  # type: ignore[attr-defined]
    return wrapper if hasattr(type(fn), "__get__") else _Unbound(wrapper)


class _Unbound:
    """A counting wrapper of what does not bind as a class attribute (a C function, a bound
    method): neither does this. cssutils keeps ``unicodesub = re.compile(...).sub`` in a class
    and calls ``self.unicodesub(repl, text)``; a plain function there became a method, the text
    went in as ``count``, and every run ended in a TypeError the plain target never has."""

    __slots__ = ("_fn",)

    def __init__(self, fn: Callable[..., Any]) -> None:
        self._fn = fn

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._fn(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:  # __name__, __doc__, __wrapped__, ...
        return getattr(self._fn, name)

    def __repr__(self) -> str:
        return repr(self._fn.__wrapped__)  # type: ignore[attr-defined]


_NEVER_MODEL = {"sys", "builtins", "gc", "_imp", "marshal", "_thread", "_weakref", "_io",
                "itertools", "_functools", "_collections", "_abc", "posix", "nt", "_signal",
                "faulthandler", "_warnings", "atexit", "errno", "time", "_operator"}
_models: dict[str, types.ModuleType | None] = {}
# C accelerators of pure-Python stdlib code: an instrumented module importing them gets a model
# without these names, so ``from _json import scanstring`` fails and it runs (and the engine
# follows) its Python fallback, as it does on an interpreter without the C module.
_ACCELERATORS = {"_json": ("scanstring", "make_scanner")}


def _copy_module(module: types.ModuleType) -> types.ModuleType:
    copy = types.ModuleType(module.__name__, module.__doc__)
    copy.__dict__.update(module.__dict__)
    return copy


def _is_c_module(name: str, module: types.ModuleType) -> bool:
    if name in _NEVER_MODEL or name.startswith("symfence"):
        return False
    path = getattr(module, "__file__", None)
    return path is None or str(path).endswith((".so", ".pyd"))


def model_module(name: str) -> types.ModuleType | None:
    """The model an instrumented module gets for ``import name`` (None: the real module)."""
    if name in _models:
        return _models[name]
    model: types.ModuleType | None = None
    module = sys.modules.get(name)
    if name in ("io", "six") and module is not None:  # six: Python 2/3 libraries' io (vobject's six.StringIO)
        model = _copy_module(module)
        model.BytesIO, model.StringIO = SymBytesIO, SymStringIO  # type: ignore[attr-defined]
    elif name == "struct" and module is not None:
        model = _copy_module(module)
        model.unpack, model.unpack_from = unpack, unpack_from  # type: ignore[attr-defined]
        model.iter_unpack, model.Struct = iter_unpack, Struct  # type: ignore[attr-defined]
        model.pack = _counting(_struct.pack, "c_struct.pack")  # type: ignore[attr-defined]
    elif name == "re" and module is not None:
        from symfence.worker.concolic.relib import re_model  # relib uses this module's helpers

        model = re_model(module, _copy_module)
    elif name == "atheris" and module is not None:
        model = _atheris_model(module)
    elif name in _ACCELERATORS and module is not None:
        model = _copy_module(module)  # without its C fast paths: the module falls back to its Python code
        for attr in _ACCELERATORS[name]:
            model.__dict__.pop(attr, None)
    elif module is not None and _is_c_module(name, module):
        model = _copy_module(module)
        for attr, value in module.__dict__.items():
            if isinstance(value, types.BuiltinFunctionType) and not attr.startswith("_"):
                setattr(model, attr, _counting(value, f"c_{name}.{attr}"))
    _models[name] = model
    return model


def _atheris_model(module: types.ModuleType) -> types.ModuleType:
    """``atheris`` as the engine runs a harness: the Python FuzzedDataProvider (``fdp``), and
    the libFuzzer-only calls as no-ops (``atheris_compat``)."""
    from symfence.worker.atheris_compat import NO_OPS
    from symfence.worker.concolic.fdp import FuzzedDataProvider

    model = _copy_module(module)
    model.FuzzedDataProvider = FuzzedDataProvider  # type: ignore[attr-defined]
    for attr, fn in NO_OPS.items():
        setattr(model, attr, fn)
    return model


_real_import = builtins.__import__


def _absolute(name: str, globals: Any, level: int) -> str | None:
    if level == 0:
        return name
    package = (globals or {}).get("__package__") or ""
    parts = package.rsplit(".", level - 1)
    if len(parts) < level:
        return None
    base = parts[0]
    return f"{base}.{name}" if name else base


class Rewritten(dict[str, types.ModuleType]):
    """The rewritten modules of one instrumented load, by name (filled by ``instrument``), and
    ``later``: rewrites one more of the load's modules when its code imports it while it runs (a
    plugin, an import inside a function), or returns None for a module that is not the load's;
    ``optional=True``: None also when no such module exists (``from pkg import name``).
    ``importing``: such an import is under way (``sys.modules`` holds the load's copies and the
    finder is in place), so the imports its module code runs go the plain way, as at the load."""

    later: Callable[..., types.ModuleType | None] | None = None
    importing = False


_real_import_module = importlib.import_module
# The load whose target is running (``routing``), innermost last, with what ``sys.modules`` held
# before under each name of it that ``routing`` put there.
_routing: list[tuple[Rewritten, dict[str, types.ModuleType | None]]] = []


def _install(load: Rewritten, saved: dict[str, types.ModuleType | None]) -> None:
    for name, module in list(load.items()):
        if name not in saved:
            saved[name] = sys.modules.get(name)
        sys.modules[name] = module


def _late(load: Rewritten, name: str, optional: bool = False) -> types.ModuleType | None:
    """``load.later(name)``; a module it rewrote while the load's target runs goes into
    ``sys.modules`` too, as ``routing`` put the others there."""
    assert load.later is not None
    module = load.later(name, optional)
    if _routing and _routing[-1][0] is load:
        _install(*_routing[-1])
    return module


def _import_module(name: str, package: str | None = None) -> types.ModuleType:
    """``importlib.import_module`` in the engine's process: while a target runs (``routing``), a
    module of its load comes back as the load's rewritten copy, by whatever library asks for it.
    A library that loads its plugins by name (sqlglot's dialects, Markdown's extensions through
    their entry points, Pygments' lexers) got the plain copy, which registered itself in the plain
    registry or subclassed the plain base class, and the rewritten code refused it: every engine run
    of sqlglot ended "Unknown dialect 'postgres'", of Markdown "TableExtension must be of type
    Extension" (false findings, no children). Otherwise, and outside runs, the real function."""
    load = _routing[-1][0] if _routing else None
    if load is not None and not load.importing:
        absolute = importlib.util.resolve_name(name, package) if name.startswith(".") else name
        copy = load.get(absolute)
        if copy is None and load.later is not None:
            copy = _late(load, absolute)
        if copy is not None:
            return copy
    return _real_import_module(name, package)


# Installed once, when the engine's process first imports this module: code that bound the
# function before (``from importlib import import_module``) is patched where it is known to be.
importlib.import_module = _import_module
importlib_metadata.import_module = _import_module  # type: ignore[attr-defined]  # EntryPoint.load


@contextmanager
def routing(target: Callable[..., Any]) -> Iterator[None]:
    """While ``target`` (an instrumented target function) runs, its load's rewritten copies are
    the modules of their names: ``import_module`` routes to them, and ``sys.modules`` holds them
    (restored afterwards). What looks a module up by name there found the plain copy, or none:
    ``pickle`` finding a class (babel's locale data: ``KeyError: 'babel.plural'`` on every run,
    a false finding), ``sys.modules[__name__]``, ``dataclasses`` and ``typing`` resolving names."""
    table = getattr(target, "__globals__", {}).get("__builtins__")
    sym_import = table.get("__import__") if isinstance(table, dict) else getattr(table, "__import__", None)
    load = getattr(sym_import, "rewritten", None)
    if load is None:
        yield
        return
    saved: dict[str, types.ModuleType | None] = {}
    _routing.append((load, saved))
    _install(load, saved)
    try:
        yield
    finally:
        _routing.pop()
        for name, before in saved.items():
            if sys.modules.get(name) is load.get(name):
                if before is None:
                    del sys.modules[name]
                else:
                    sys.modules[name] = before


def make_import(rewritten: Rewritten) -> Callable[..., Any]:
    """The ``__import__`` of the modules of one instrumented load: its rewritten copies (``rewritten``,
    name -> module, filled by ``instrument``), so an import run later inside a function finds the
    rewritten module rather than the plain one back in sys.modules, and a module of the load not
    imported yet is rewritten then (``Rewritten.later``: Pillow imports its format plugins on the
    first ``Image.open``); models for io, struct, re and C modules."""

    def sym_import(name: str, globals: Any = None, locals: Any = None, fromlist: Any = (),
                   level: int = 0) -> Any:
        if rewritten and not rewritten.importing:
            absolute = _absolute(name, globals, level)
            copy = rewritten.get(absolute) if absolute else None
            later = rewritten.later
            if copy is None and absolute and later is not None:
                copy = _late(rewritten, absolute)
            if copy is not None:
                if fromlist:
                    if later is not None and hasattr(copy, "__path__"):  # a package: its submodules
                        for attr in fromlist:
                            if attr != "*" and not hasattr(copy, attr):
                                _late(rewritten, f"{absolute}.{attr}", optional=True)
                    return copy
                top = rewritten.get(absolute.partition(".")[0]) if level == 0 else copy
                if top is not None:
                    return top
        module = _real_import(name, globals, locals, fromlist, level)
        if level != 0 or (not fromlist and "." in name):
            return module
        model = model_module(name)
        return module if model is None else model

    sym_import.rewritten = rewritten  # type: ignore[attr-defined]  # for ``routing``
    return sym_import


def _counting_builtin(name: str) -> Callable[..., Any]:
    return _counting(getattr(builtins, name), f"builtin.{name}")


def instrumented_builtins(rewritten: Rewritten) -> dict[str, Any]:
    """The ``__builtins__`` of an instrumented module of the load whose copies are ``rewritten``."""
    table = dict(builtins.__dict__)
    table.update({
        "__import__": make_import(rewritten), "len": sym_len, "ord": sym_ord, "chr": sym_chr,
        "isinstance": sym_isinstance, "__build_class__": sym_build_class,
    })
    for name in ("hex", "oct", "bin", "format", "ascii"):
        table[name] = _counting_builtin(name)
    return table
