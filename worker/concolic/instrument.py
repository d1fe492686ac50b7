"""Loads a target named "module.path:function" with its package and listed modules rewritten so proxies stay symbolic.

The rewrite is the Python analogue of SymCC's compile-time instrumentation. It applies to the
target's whole top-level package (for a target module outside any package, such as an Atheris
harness ``fuzz_x.py``, the modules in its folder), the packages the target's module imports as
its code under test (``harness_imports``: the library an OSS-Fuzz harness fuzzes; the modules
of them imported while the target loads), plus the modules named in the ``instrument`` option (and
their parent packages, so ``import tomllib`` picks up a rewritten ``tomllib._parser``);
never to symfence, z3 or the modules the engine models itself. In those modules:
- calls ``int.from_bytes(...)``, ``int(...)``, ``type(x)`` and ``x.__class__`` go to helpers from
  ``worker.concolic.models``, ``memoryview(x)`` to ``symview.sym_memoryview``; ``x.get(k[, default])``, ``x.setdefault(k[, default])`` and
  ``x.join(parts)`` (also taken as values: ``memo_get = memo.setdefault``) to ``tables``'
  ``sym_get``/``sym_method``/``sym_join_call``; ``a in b`` / ``a not in b`` to ``sym_contains``; a
  subscript ``x[k]`` to ``sym_getitem`` (``tables``) (a symbolic index into a constant table or dict);
- ``a == b`` / ``a != b`` where neither side is a constant go to ``equality`` (dicts, lists and
  tuples holding proxies compared as one condition);
- the name ``int`` taken as a value where code picks a converter (an ``or``/``if-else``
  operand: ``parse_int or int``) is ``sym_int`` (not as an argument or default, where it may
  be a type: ``dtype=int``);
- a comparison used as a value (returned, stored, passed) rather than as a test is decided
  on the spot (``sym_truth``), so plain code receives a real ``bool``;
- the module's ``__builtins__`` has ``len``, ``ord``, ``chr``, ``isinstance`` and
  ``__import__`` replaced (``importhook.instrumented_builtins``): ``import io``/``struct``/``re``
  and C modules give the models.
A name the module rebinds itself (``def len``, ``int = ...``) is left alone. Source files are
untouched, so the target stays plain Python that runs unchanged without the engine; the
rewritten modules are private copies, imported with ``sys.modules`` swapped and restored
afterwards. Modules without Python source are imported as they are.
"""

from __future__ import annotations

import ast
import importlib
import importlib.abc
import importlib.machinery
import os
import pkgutil
import sys
import types
from typing import Any, Callable, Iterable

from symfence.worker.concolic.harness_imports import harness_imports
from symfence.worker.concolic.importhook import Rewritten, instrumented_builtins
from symfence.worker.concolic.models import (sym_bytearray, sym_bytes, sym_class, sym_from_bytes, sym_fstring, sym_int,
                                             sym_str, sym_truth, sym_type)
from symfence.worker.concolic.equality import sym_eq, sym_ne
from symfence.worker.concolic.symview import sym_memoryview
from symfence.worker.concolic.tables import sym_contains, sym_get, sym_getitem, sym_join_call, sym_method
from symfence.worker.engine_api import TargetLoadError

Target = Callable[[bytes], object]

_FROM_BYTES = "__symfence_from_bytes__"
_CALL_REWRITES = {"int": "__symfence_int__", "type": "__symfence_type__", "memoryview": "__symfence_memoryview__",
                  "bytes": "__symfence_bytes__", "bytearray": "__symfence_bytearray__", "str": "__symfence_str__"}
_IN = "__symfence_in__"
_GETITEM = "__symfence_getitem__"
_TRUTH = "__symfence_truth__"
_GET = "__symfence_get__"
_METHOD = "__symfence_method__"
_JOIN = "__symfence_join__"
_EQ = "__symfence_eq__"
_NE = "__symfence_ne__"
_CLASS = "__symfence_class__"
_FSTRING = "__symfence_fstring__"
HELPERS = {_FROM_BYTES: sym_from_bytes, "__symfence_int__": sym_int,
           "__symfence_type__": sym_type, _IN: sym_contains, _GETITEM: sym_getitem,
           _TRUTH: sym_truth, _GET: sym_get, _METHOD: sym_method, _JOIN: sym_join_call,
           _EQ: sym_eq, _NE: sym_ne, _CLASS: sym_class, "__symfence_memoryview__": sym_memoryview,
           "__symfence_bytes__": sym_bytes, "__symfence_bytearray__": sym_bytearray, "__symfence_str__": sym_str,
           _FSTRING: sym_fstring}
_LOOKUPS = ("get", "setdefault")
_METHODS = (*_LOOKUPS, "join")  # taken as values: sym_method

# Never rewritten: symfence and its solver, and what the engine models or runs on.
NEVER = ("symfence", "z3", "importlib", "encodings", "codecs", "abc", "typing", "types",
         "functools", "collections", "enum", "io", "_pyio", "struct", "re", "sre_compile",
         "sre_parse", "sre_constants", "os", "sys", "builtins", "copy", "copyreg", "weakref",
         "contextlib", "dataclasses", "traceback", "linecache", "warnings", "operator",
         "keyword", "reprlib", "inspect", "ast", "dis", "tokenize", "token")

_loaded: dict[tuple[str, tuple[str, ...], bool], Target] = {}
# spec -> why the harness's imports could not be instrumented (the target was loaded without them):
# a short name ("lark.GrammarError": the packages and the exception's type) and the whole message
FALLBACKS: dict[str, tuple[str, str]] = {}
# modules a load imported plain while its code ran (their import failed rewritten): the engine
# counts them (``late_imports_plain``) and empties the list
LATE_PLAIN: list[str] = []


def _bound_names(tree: ast.AST) -> set[str]:
    """Every name the module binds anywhere (assignments, defs, parameters, imports), but the
    builtins a module imports under their own names (``from builtins import bytes, int``: a
    Python 2 and 3 library's, asn1's; they are the builtins, and their calls are rewritten)."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            names.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            own = isinstance(node, ast.ImportFrom) and node.module == "builtins" and not node.level
            names.update(a.asname or a.name.split(".")[0] for a in node.names
                         if not (own and a.asname in (None, a.name)))
    return names


def _test_compares(tree: ast.AST) -> set[int]:
    """ids of the Compare nodes used directly as tests (if/while/assert/ternary/comprehension)."""
    found: set[int] = set()

    def mark(node: ast.AST) -> None:
        if isinstance(node, ast.Compare):
            found.add(id(node))
        elif isinstance(node, ast.BoolOp):
            for value in node.values:
                mark(value)
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            mark(node.operand)

    for node in ast.walk(tree):
        if isinstance(node, (ast.If, ast.While, ast.IfExp, ast.Assert)):
            mark(node.test)
        elif isinstance(node, ast.comprehension):
            for cond in node.ifs:
                mark(cond)
        elif isinstance(node, ast.match_case) and node.guard is not None:
            mark(node.guard)
    return found


def _call(name: str, args: list[ast.expr], like: ast.AST) -> ast.Call:
    return ast.copy_location(ast.Call(ast.Name(name, ast.Load()), args, []), like)


class _Rewriter(ast.NodeTransformer):
    def __init__(self, shadowed: set[str], tests: set[int]):
        self.shadowed = shadowed
        self.tests = tests
        self.rewrites = 0
        self.callees: set[int] = set()  # ids of the Attribute nodes called (not taken as values)

    def _converter(self, node: ast.expr) -> ast.expr:
        """The name ``int`` where code picks a converter becomes ``sym_int``."""
        if isinstance(node, ast.Name) and node.id == "int" and "int" not in self.shadowed:
            self.rewrites += 1
            return ast.copy_location(ast.Name(_CALL_REWRITES["int"], ast.Load()), node)
        return node

    def visit_JoinedStr(self, node: ast.JoinedStr) -> ast.AST:
        """``f"..."`` with fields: ``sym_fstring`` (CPython's join makes symbolic parts plain).
        A field's spec is itself an f-string (rewritten first); an f-string with no field stays."""
        self.generic_visit(node)
        if not any(isinstance(v, ast.FormattedValue) for v in node.values):
            return node
        parts: list[ast.expr] = []
        for v in node.values:
            if isinstance(v, ast.FormattedValue):
                spec = v.format_spec if v.format_spec is not None else ast.Constant("")
                parts.append(ast.Tuple([v.value, ast.Constant(v.conversion), spec], ast.Load()))
            else:
                parts.append(v)
        self.rewrites += 1
        return _call(_FSTRING, parts, node)

    def visit_BoolOp(self, node: ast.BoolOp) -> ast.AST:
        self.generic_visit(node)
        node.values = [self._converter(v) for v in node.values]
        return node

    def visit_IfExp(self, node: ast.IfExp) -> ast.AST:
        self.generic_visit(node)
        node.body, node.orelse = self._converter(node.body), self._converter(node.orelse)
        return node

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        self.generic_visit(node)
        if isinstance(node.ctx, ast.Load) and node.attr == "__class__":
            self.rewrites += 1
            return _call(_CLASS, [node.value], node)
        if (isinstance(node.ctx, ast.Load) and node.attr in _METHODS
                and id(node) not in self.callees):
            self.rewrites += 1
            return _call(_METHOD, [node.value, ast.Constant(node.attr)], node)
        return node

    def visit_Call(self, node: ast.Call) -> ast.AST:
        if isinstance(node.func, ast.Attribute):
            self.callees.add(id(node.func))
        self.generic_visit(node)
        func = node.func
        plain_args = not node.keywords and not any(isinstance(a, ast.Starred) for a in node.args)
        if (isinstance(func, ast.Attribute) and func.attr == "from_bytes"
                and isinstance(func.value, ast.Name) and func.value.id == "int"
                and "int" not in self.shadowed):
            node.func = ast.copy_location(ast.Name(_FROM_BYTES, ast.Load()), func)
            self.rewrites += 1
        elif (isinstance(func, ast.Name) and func.id in _CALL_REWRITES
                and func.id not in self.shadowed
                and (func.id != "type" or (len(node.args) == 1 and not node.keywords))):
            node.func = ast.copy_location(ast.Name(_CALL_REWRITES[func.id], ast.Load()), func)
            self.rewrites += 1
        elif (isinstance(func, ast.Attribute) and func.attr in _LOOKUPS and plain_args
                and 1 <= len(node.args) <= 2):
            self.rewrites += 1
            return _call(_GET, [func.value, ast.Constant(func.attr), *node.args], node)
        elif isinstance(func, ast.Attribute) and func.attr == "join" and plain_args and len(node.args) == 1:
            self.rewrites += 1
            return _call(_JOIN, [func.value, *node.args], node)
        return node

    def visit_Subscript(self, node: ast.Subscript) -> ast.AST:
        self.generic_visit(node)
        if isinstance(node.ctx, ast.Load) and not isinstance(node.slice, ast.Slice):
            self.rewrites += 1
            return _call(_GETITEM, [node.value, node.slice], node)
        return node

    def visit_Compare(self, node: ast.Compare) -> ast.AST:
        in_test = id(node) in self.tests
        self.generic_visit(node)
        if len(node.ops) == 1 and isinstance(node.ops[0], (ast.In, ast.NotIn)):
            self.rewrites += 1
            call = _call(_IN, [node.left, node.comparators[0]], node)
            if isinstance(node.ops[0], ast.NotIn):
                return ast.copy_location(ast.UnaryOp(ast.Not(), call), node)
            return call
        result: ast.expr = node
        if (len(node.ops) == 1 and isinstance(node.ops[0], (ast.Eq, ast.NotEq))
                and not isinstance(node.left, ast.Constant)
                and not isinstance(node.comparators[0], ast.Constant)):
            self.rewrites += 1
            helper = _EQ if isinstance(node.ops[0], ast.Eq) else _NE
            result = _call(helper, [node.left, node.comparators[0]], node)
        if not in_test:
            self.rewrites += 1
            return _call(_TRUTH, [result], node)
        return result


def instrument_source(source: str, filename: str) -> types.CodeType:
    """Compile module source with the symbolic rewrites applied."""
    tree = ast.parse(source, filename)
    tree = _Rewriter(_bound_names(tree), _test_compares(tree)).visit(tree)
    ast.fix_missing_locations(tree)
    return compile(tree, filename, "exec")


def prepare_namespace(namespace: dict[str, Any], rewritten: Rewritten) -> None:
    """Give a module namespace the helpers and builtins instrumented code expects."""
    namespace["__builtins__"] = instrumented_builtins(rewritten)
    namespace.update(HELPERS)


class _Loader(importlib.abc.Loader):
    """Executes a module's source through ``instrument_source``."""

    def __init__(self, inner: Any, rewritten: Rewritten):
        self.inner = inner
        self.rewritten = rewritten

    def create_module(self, spec: Any) -> None:
        return None

    def exec_module(self, module: types.ModuleType) -> None:
        source = self.inner.get_source(module.__name__)
        code = instrument_source(source, self.inner.get_filename(module.__name__))
        prepare_namespace(module.__dict__, self.rewritten)
        exec(code, module.__dict__)

    def get_source(self, name: str) -> Any:
        return self.inner.get_source(name)

    def __getattr__(self, name: str) -> Any:
        """The rest is the file loader's: a package's own data (``pkgutil.get_data``: lark's
        grammars, which came back None, an empty grammar and "Rule 'SIGNED_NUMBER' used but not
        defined" at the harness's import; ``importlib.resources``' reader), ``get_filename``, ..."""
        return getattr(self.inner, name)


class _Finder(importlib.abc.MetaPathFinder):
    """Finds the modules to rewrite (Python source only) and hands them to ``_Loader``."""

    def __init__(self, wanted: Callable[[str], bool], folder: str | None = None):
        self.wanted = wanted
        self.folder = folder  # a loose module's folder: its neighbours are its package
        self.loaded: list[str] = []
        self.rewritten = Rewritten()  # filled once the load is complete

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        neighbour = self.folder is not None and "." not in name and not never_instrumented(name)
        if not self.wanted(name) and not neighbour:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or not isinstance(spec.loader, importlib.machinery.SourceFileLoader):
            return None
        if not self.wanted(name) and os.path.dirname(os.path.abspath(spec.origin)) != self.folder:
            return None
        spec.loader = _Loader(spec.loader, self.rewritten)
        self.loaded.append(name)
        return spec


def never_instrumented(name: str) -> bool:
    return any(name == n or name.startswith(n + ".") for n in NEVER)


def instrumented_set(module_name: str, extra: Iterable[str],
                     implied: Iterable[str] = ()) -> Callable[[str], bool]:
    """Predicate: is this module rewritten for a target in ``module_name`` with ``extra`` listed
    and the packages ``implied`` (the harness's imports) rewritten when imported?"""
    roots = {module_name.partition(".")[0], *(n for n in implied if not never_instrumented(n))}
    exact: set[str] = set()
    for name in extra:
        roots.add(name)
        parts = name.split(".")
        exact.update(".".join(parts[:i]) for i in range(1, len(parts)))  # parent packages

    def wanted(name: str) -> bool:
        if never_instrumented(name):
            return False
        return name in exact or any(name == r or name.startswith(r + ".") for r in roots)

    return wanted


def parse_module_list(text: str) -> tuple[str, ...]:
    """``"a.b, c"`` -> ``("a.b", "c")``; raises ValueError for a name that is not a dotted identifier."""
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    for n in names:
        if not all(part.isidentifier() for part in n.split(".")):
            raise ValueError(f"option instrument: {n!r} is not a module name")
        if never_instrumented(n):
            raise ValueError(f"option instrument: {n!r} is never instrumented (symfence, z3 or a "
                             "module the engine models itself)")
    return names


def loose_module_folder(module_name: str) -> str | None:
    """The folder of a target that is a module of its own (``fuzz_x.py``, not in a package):
    the modules beside it (a harness's helpers) are rewritten with it, as a package's are."""
    if "." in module_name:
        return None
    try:
        spec = importlib.machinery.PathFinder.find_spec(module_name)
    except (ImportError, ValueError):
        return None
    if spec is None or spec.submodule_search_locations is not None or not spec.origin:
        return None
    return os.path.dirname(os.path.abspath(spec.origin))


def _import_instrumented(module_name: str, extra: tuple[str, ...],
                         implied: tuple[str, ...] = ()) -> tuple[types.ModuleType, list[str]]:
    wanted = instrumented_set(module_name, extra, implied)
    snapshot = dict(sys.modules)
    folder = loose_module_folder(module_name)
    finder = _Finder(wanted, folder)
    for name, module in list(sys.modules.items()):
        origin = getattr(module, "__file__", None)
        if wanted(name) or (folder and "." not in name and origin and not never_instrumented(name)
                            and os.path.dirname(os.path.abspath(origin)) == folder):
            del sys.modules[name]
    sys.meta_path.insert(0, finder)
    try:
        module = importlib.import_module(module_name)
        for name in extra:  # listed modules the target does not import itself
            try:
                listed = importlib.import_module(name)
            except ImportError as exc:
                raise TargetLoadError(f"cannot import instrumented module {name!r}: {exc}") from exc
            # and a listed package's submodules, which its functions may import when called
            for info in pkgutil.walk_packages(getattr(listed, "__path__", []), name + "."):
                if wanted(info.name):
                    try:
                        importlib.import_module(info.name)
                    except Exception:  # noqa: BLE001 - optional parts (a missing dependency)
                        pass
        for name in finder.loaded:
            if name in sys.modules:
                finder.rewritten[name] = sys.modules[name]
    finally:
        sys.meta_path.remove(finder)
        _restore(snapshot, lambda name: wanted(name) or name in finder.loaded)
    finder.rewritten.later = _importer(finder.rewritten, wanted, folder)
    return module, finder.loaded


def _restore(snapshot: dict[str, Any], own: Callable[[str], bool]) -> None:
    """``sys.modules`` as before a swap, plus the plain modules first imported meanwhile: only
    the load's own modules (``own``: rewritten, or of its packages) leave. A plain module dropped
    here would be imported a second time by the next plain import, with classes of its own: the
    rewritten feedparser's ``except xml.sax.SAXException`` then missed what the plain expat reader
    raised (its second copy's class), and every run ended in a crash the plain target never has."""
    for name in list(sys.modules):
        if name not in snapshot and own(name):
            del sys.modules[name]
    sys.modules.update(snapshot)


def _importer(rewritten: Rewritten, wanted: Callable[[str], bool],
              folder: str | None) -> Callable[..., types.ModuleType | None]:
    """``Rewritten.later`` of one load: a module of it (``wanted``) that its code imports after
    the load is imported then, rewritten, with the load's copies in ``sys.modules`` (so
    ``from . import plugin`` resolves against the rewritten package) and ``sys.modules`` restored
    afterwards, as at the load. A module without Python source comes back as it is, and so does
    one whose import-time code fails rewritten (imported plain then, noted in ``LATE_PLAIN``: the
    run goes on as without the engine);
    one that does not exist, with ``optional``, as None (a ``from`` name that is not a submodule);
    an ImportError is the caller's, as from a plain import."""
    plain: dict[str, types.ModuleType] = {}  # the load's modules imported as they are
    nothing: set[str] = set()  # names answered None: not the load's, or no such module

    def swapped_import(name: str, finder: _Finder | None) -> types.ModuleType:
        snapshot = dict(sys.modules)
        for n in [n for n in sys.modules if wanted(n) and n not in rewritten]:
            del sys.modules[n]  # a plain copy imported meanwhile
        sys.modules.update(rewritten)
        if finder is not None:
            sys.meta_path.insert(0, finder)
        rewritten.importing = True
        try:
            module = importlib.import_module(name)
            for n in finder.loaded if finder is not None else ():
                if n in sys.modules:
                    rewritten[n] = sys.modules[n]
            return module
        finally:
            rewritten.importing = False
            if finder is not None:
                sys.meta_path.remove(finder)
            _restore(snapshot, lambda n: wanted(n) or n in rewritten or (finder is not None and n in finder.loaded))

    def later(name: str, optional: bool = False) -> types.ModuleType | None:
        module = rewritten.get(name) or plain.get(name)
        if module is not None or name in nothing:
            return module
        if not wanted(name):  # an import of other code, run per input maybe: asked once
            nothing.add(name)
            return None
        from symfence.worker.concolic.execution import paused  # (execution imports this module)

        finder = _Finder(wanted, folder)
        finder.rewritten = rewritten
        try:
            with paused():  # the rewrite is the engine's time, not the run's
                module = swapped_import(name, finder)
        except ImportError as exc:  # the caller's, as from a plain import ...
            if optional and isinstance(exc, ModuleNotFoundError) and exc.name == name:
                nothing.add(name)  # ... but a `from` name that is no submodule is not an error
                return None
            raise
        except Exception:  # noqa: BLE001 - its import-time code, rewritten: run it plain
            LATE_PLAIN.append(name)
            with paused():
                module = swapped_import(name, None)
        if name not in rewritten:
            plain[name] = module
        return module

    return later


def load_target(spec: str, instrument: Iterable[str] = (), imports: bool = True) -> Target:
    """The instrumented target function for ``"module.path:function"`` (cached per process).

    ``imports``: also rewrite the packages the target's module imports as its code under test
    (``harness_imports``). If the import fails only with them rewritten, the target is loaded
    without them and the reason kept in ``FALLBACKS`` (the engine counts it), never an error."""
    extra = tuple(sorted(set(instrument)))
    target = _loaded.get((spec, extra, imports))
    if target is not None:
        return target
    module_name, sep, function_name = spec.partition(":")
    if not sep or not module_name or not function_name.isidentifier():
        raise TargetLoadError(f"target must look like 'module.path:function', not {spec!r}")
    if never_instrumented(module_name):
        raise TargetLoadError(f"{module_name!r} cannot be a target (never instrumented)")
    implied = harness_imports(module_name) if imports else ()
    try:
        module = _import_target(module_name, extra, implied)
    except TargetLoadError as exc:
        if not implied:
            raise
        cause = exc.__cause__ or exc
        FALLBACKS[spec] = (f"{'+'.join(implied)}.{type(cause).__name__}", f"{', '.join(implied)}: {exc}")
        module = _import_target(module_name, extra, ())
    target = getattr(module, function_name, None)
    if not callable(target):
        raise TargetLoadError(f"{module_name!r} has no callable {function_name!r}")
    _loaded[(spec, extra, imports)] = target
    return target


def _import_target(module_name: str, extra: tuple[str, ...], implied: tuple[str, ...]) -> types.ModuleType:
    try:
        module, _ = _import_instrumented(module_name, extra, implied)
    except TargetLoadError:
        raise
    except ModuleNotFoundError as exc:
        raise TargetLoadError(f"cannot find module {module_name!r}: {exc}") from exc
    except Exception as exc:  # the module's own import-time code failed
        raise TargetLoadError(f"importing {module_name!r} failed: {exc!r}") from exc
    return module


def instrumented_modules(spec: str, instrument: Iterable[str] = (), imports: bool = True) -> list[str]:
    """Names of the modules rewritten for a target (for logs, tests and benchmarks)."""
    module_name = spec.partition(":")[0]
    implied = harness_imports(module_name) if imports else ()
    _, loaded = _import_instrumented(module_name, tuple(sorted(set(instrument))), implied)
    return loaded
