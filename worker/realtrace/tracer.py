"""Real control-flow traces of one plain execution: coverage.py's C arc tracer folded into the AFL map.

The yardstick both stages are measured by. The target runs unmodified (plain ``bytes``, no proxies,
no Atheris instrumentation) under coverage.py's ``CTracer`` in arc mode, limited to an include
list of files; every arc (from line, to line) of an included file is hashed with that file's
stable key into an AFL edge index (``0..MAP_SIZE-1``). coverage.py records each arc once per run,
so every edge has hit count 1: the map keeps AFL's buckets, but loop counts are not told apart.

Include list: explicit entries are module names (``tomllib``, ``examples.tlv``) or paths (a file,
or a directory: every file below it). The default (empty list) is the target's top-level package
(or its module file) plus every module the target module references (imported modules, and the
modules of imported functions and classes), excluding symfence's own files.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import signal
import sys
import threading
import traceback
import types
import zlib
from dataclasses import dataclass
from typing import Any, Callable

from coverage.disposition import disposition_init
from coverage.tracer import CFileDisposition, CTracer

from symfence.protocol.coverage import MAP_SIZE
from symfence.worker import atheris_compat
from symfence.worker.engine_api import ExecTimeout, TargetLoadError

_SYMFENCE_DIRS = tuple(
    os.path.dirname(os.path.abspath(p)) + os.sep
    for p in (
        importlib.util.find_spec("symfence").origin,  # type: ignore[union-attr]
        importlib.util.find_spec("symfence.protocol").origin,  # type: ignore[union-attr]
        importlib.util.find_spec("symfence.coordinator").origin,  # type: ignore[union-attr]
        importlib.util.find_spec("symfence.worker").origin,  # type: ignore[union-attr]
    )
)


def load_callable(spec: str) -> tuple[types.ModuleType, Callable[[bytes], Any]]:
    """Import ``module:function`` plainly and return the module and the function."""
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise TargetLoadError(f"target {spec!r} is not module:function")
    atheris_compat.plain()  # a harness's instrument_all() & co. are libFuzzer's business
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # noqa: BLE001 - any import failure is the target's
        raise TargetLoadError(f"cannot import {module_name}: {type(exc).__name__}: {exc}") from None
    fn = getattr(module, attr, None)
    if not callable(fn):
        raise TargetLoadError(f"{module_name} has no callable {attr!r}")
    return module, fn


def _origin(module: types.ModuleType) -> str | None:
    """A module's file; for a package, its directory (with a trailing separator)."""
    path = getattr(module, "__file__", None)
    if not path:
        return None
    path = os.path.abspath(path)
    if getattr(module, "__path__", None) is not None:
        return os.path.dirname(path) + os.sep
    return path


def _own(path: str) -> bool:
    return path.startswith(_SYMFENCE_DIRS)


def default_include(module: types.ModuleType) -> list[str]:
    """The target's top-level package (or module file) plus the packages of what it references:
    ``from markdown_it import MarkdownIt`` or ``from pyasn1.codec.ber import decoder`` stands
    for the whole ``markdown_it`` / ``pyasn1`` package (the defining module alone would hide
    every other module of the library the input reaches, and the fuzz stage's inputs that
    reach only those would count as nothing new)."""
    roots: list[str] = []
    top = sys.modules.get(module.__name__.split(".")[0], module)
    for mod in (top, module):
        origin = _origin(mod)
        if origin:
            roots.append(origin)
    for name, value in vars(module).items():
        if name.startswith("__"):  # __loader__, __spec__, __builtins__: the import system's
            continue
        ref = value if isinstance(value, types.ModuleType) else sys.modules.get(getattr(value, "__module__", "") or "")
        if not isinstance(ref, types.ModuleType):
            continue
        for mod in (ref, sys.modules.get(ref.__name__.split(".")[0])):
            if isinstance(mod, types.ModuleType) and (origin := _origin(mod)):
                roots.append(origin)
    return sorted({r for r in roots if not _own(r)})


def resolve_include(entries: list[str], module: types.ModuleType) -> list[str]:
    """Turn config entries (module names or paths) into file and directory prefixes."""
    if not entries:
        return default_include(module)
    roots = []
    for entry in entries:
        if os.sep in entry or entry.endswith(".py") or os.path.exists(entry):
            path = os.path.abspath(entry)
            roots.append(path + os.sep if os.path.isdir(path) else path)
            continue
        try:
            mod = importlib.import_module(entry)
        except Exception as exc:  # noqa: BLE001
            raise TargetLoadError(f"coverage include {entry!r}: cannot import: {exc}") from None
        if (origin := _origin(mod)) is not None:
            roots.append(origin)
    return sorted(set(roots))


def _file_key(filename: str) -> int:
    """A per-file hash seed that is the same in every process: the path below its sys.path root."""
    best = ""
    for entry in sys.path:
        root = os.path.abspath(entry or ".") + os.sep
        if filename.startswith(root) and len(root) > len(best):
            best = root
    return zlib.crc32(filename[len(best):].encode())


def _on_alarm(signum: int, frame: Any) -> None:
    raise ExecTimeout()


@dataclass(frozen=True)
class Traced:
    """One traced execution: ok / crash / hang, the AFL trace, and the crash traceback."""

    status: str
    trace: dict[int, int]
    detail: str = ""


class ArcTracer:
    """Runs a callable under coverage.py's CTracer restricted to ``roots`` and returns AFL edges."""

    def __init__(self, roots: list[str]):
        self.roots = tuple(roots)
        self._files = tuple(r for r in self.roots if not r.endswith(os.sep))
        self._dirs = tuple(r for r in self.roots if r.endswith(os.sep))
        self._data: dict[str, set[int]] = {}
        self._cache: dict[str, Any] = {}
        self._keys: dict[str, int] = {}

    def _should_trace(self, filename: str, frame: Any) -> Any:
        disp = disposition_init(CFileDisposition, filename)
        path = os.path.abspath(filename)
        if path in self._files or path.startswith(self._dirs):
            disp.trace = True
            disp.source_filename = path
            self._keys[path] = _file_key(path)
        else:
            disp.reason = "not in the coverage include list"
        return disp

    def _tracer(self) -> CTracer:
        t = CTracer()
        t.data = self._data
        t.trace_arcs = True
        t.should_trace = self._should_trace
        t.should_trace_cache = self._cache
        t.warn = lambda *args, **kwargs: None
        t.lock_data = t.unlock_data = lambda: None
        t.should_start_context = None
        t.switch_context = None
        t.file_tracers = {}
        t.disable_plugin = None
        t.concur_id_func = None
        return t

    def run(self, fn: Callable[[bytes], Any], data: bytes, timeout_s: float) -> Traced:
        """Execute ``fn(data)`` traced, limited to ``timeout_s`` of CPU time (main thread only)."""
        for arcs in self._data.values():
            arcs.clear()
        tracer = self._tracer()
        timed = timeout_s > 0 and threading.current_thread() is threading.main_thread()
        if timed:
            previous = signal.signal(signal.SIGVTALRM, _on_alarm)
            signal.setitimer(signal.ITIMER_VIRTUAL, timeout_s, 0.1)
        status, detail = "ok", ""
        tracer.start()
        try:
            fn(data)
        except ExecTimeout:
            status, detail = "hang", f"execution exceeded {timeout_s:g} s of CPU time"
        except BaseException as exc:  # noqa: BLE001 - anything the target raises is a crash
            exc.__traceback__ = exc.__traceback__.tb_next if exc.__traceback__ else None  # our frame
            status, detail = "crash", "".join(traceback.format_exception(exc))[-8000:]
        finally:
            tracer.stop()
            if timed:
                signal.setitimer(signal.ITIMER_VIRTUAL, 0)
                signal.signal(signal.SIGVTALRM, previous)
        return Traced(status, self._edges(), detail)

    def _edges(self) -> dict[int, int]:
        trace: dict[int, int] = {}
        for filename, arcs in self._data.items():
            key = self._keys.get(filename)
            if key is None:
                key = self._keys[filename] = _file_key(filename)
            for packed in arcs:
                trace[zlib.crc32(packed.to_bytes(8, "little", signed=True), key) % MAP_SIZE] = 1
        return trace
