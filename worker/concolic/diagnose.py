"""Says where the input left Python when a run recorded no symbolic branch at all.

First guess: the most frequent concretisation kind the run counted (``c_zlib.crc32``,
``bytes.hex``, ...). If it counted none, the input is run once more with a profile hook: the
first C function called from an instrumented frame that holds a proxy in its locals (e.g.
``_json.scanstring``, ``pyexpat.xmlparser.Parse``) is the likely exit.
"""

from __future__ import annotations

import sys
from typing import Any

from symfence.protocol.rules import wire_key
from symfence.worker.concolic.execution import ExecTimeout, time_limit
from symfence.worker.concolic.instrument import Target
from symfence.worker.concolic.models import is_proxy, make_input
from symfence.worker.concolic.recorder import Recorder
from symfence.worker.concolic.symbolic import recording

_IGNORED = {"isinstance", "len", "getattr", "hasattr", "setattr", "iter", "next", "id", "type",
            "print", "_getframe", "__build_class__", "append", "get", "items", "keys", "values",
            "pop", "setdefault", "update", "extend", "callable", "super", "issubclass", "locals",
            "globals", "vars", "dir", "repr", "format", "min", "max", "sum", "any", "all",
            "sorted", "enumerate", "zip", "range", "__import__", "perf_counter", "monotonic",
            "setprofile", "setitimer", "signal", "sym_len"}


def stats_key(prefix: str, name: str) -> str:
    """The counter's name on the wire: valid and distinct by the wire's one key rule."""
    return wire_key(prefix + name)


def _c_name(fn: Any) -> str:
    qual = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", "?")
    owner = getattr(fn, "__self__", None)
    module = getattr(fn, "__module__", None)
    if module is None and owner is not None and not isinstance(owner, type(sys)):
        module = type(owner).__module__
    elif module is None and isinstance(owner, type(sys)):
        module = owner.__name__
    return f"{module}.{qual}" if module and module != "builtins" else qual


def left_via(target: Target, data: bytes, recorder: Recorder, timeout_s: float = 2.0) -> str:
    """The likely C function (or unmodelled method) through which the input left Python."""
    if recorder.concretisations:
        return recorder.concretisations.most_common(1)[0][0]
    found: list[str] = []

    def profile(frame: Any, event: str, arg: Any) -> None:
        if found or event != "c_call":
            return
        if "__symfence_getitem__" not in frame.f_globals:
            return
        name = getattr(arg, "__name__", "")
        if name in _IGNORED:
            return
        if any(is_proxy(v) for v in frame.f_locals.values()):
            found.append(_c_name(arg))

    root, _ = make_input(data, symbolic=False)
    probe = Recorder(symbolic=False, max_branches=1)
    previous = sys.getprofile()
    try:
        with recording(probe), time_limit(timeout_s):
            sys.setprofile(profile)
            try:
                target(root)
            finally:
                sys.setprofile(previous)
    except (ExecTimeout, Exception):  # noqa: BLE001 - only the calls before the end matter
        pass
    if found:
        return found[0]
    if not data:
        return "empty_input"
    return "input_unused"
