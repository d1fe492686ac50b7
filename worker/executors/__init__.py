"""Executors by name: what a WORK's `executor` field selects on the worker.

The executor named ``NAME`` is the module ``symfence.worker.executors.NAME`` and its
``executor()`` factory: adding an engine is adding that module (docs/design.md, "Executors").
"""

from __future__ import annotations

import importlib

from symfence.worker.engine_api import Executor

_NOT_EXECUTORS = frozenset({"base", "traced"})  # the seam's helpers in this package


def make_executor(name: str) -> Executor:
    if not name.isidentifier() or not name.islower() or name in _NOT_EXECUTORS:
        raise ValueError(f"unknown executor {name!r}")
    try:
        module = importlib.import_module(f"{__name__}.{name}")
    except ModuleNotFoundError as exc:
        if exc.name != f"{__name__}.{name}":
            raise
        raise ValueError(f"unknown executor {name!r}") from None
    factory = getattr(module, "executor", None)
    if factory is None:
        raise ValueError(f"unknown executor {name!r}")
    made: Executor = factory()
    return made
