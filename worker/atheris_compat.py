"""Makes Atheris harnesses' libFuzzer-only calls harmless where symfence runs a target without libFuzzer.

An OSS-Fuzz-style harness calls, at import time, ``atheris.instrument_all()``, enters
``atheris.instrument_imports()`` or decorates ``TestOneInput`` with ``@atheris.instrument_func``
(and older ones ``atheris.enable_python_coverage()``, which Atheris 3 no longer has). These
rewrite bytecode for libFuzzer's coverage feedback: useless where no libFuzzer runs (the plain
replays, the coverage tracer, the import check) and harmful there (``instrument_all`` rewrites
every loaded function, ~3 s, and would distort the tracer's arcs). Some harnesses also call
``atheris.Setup(sys.argv, f)`` and ``atheris.Fuzz()`` at module level, not under ``__main__``:
importing them would start libFuzzer on symfence's own command line. ``plain()`` replaces all of
these in the real ``atheris`` module by no-ops (``Setup`` hands its arguments back, as Atheris
does when libFuzzer takes none of them); ``NO_OPS`` is the one table of what is replaced, which
the concolic engine's model of ``atheris`` (``worker.concolic.importhook``) also uses. In the
fuzz process (``worker.fuzz.live_child``) ``IN_FUZZ_SLICE`` is replaced: that process calls the
real ``Setup`` and ``Fuzz`` itself, instruments everything the target imports, and on
``instrument_all`` also what was imported before the harness (``worker.fuzz.inplace``).
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable


def _nothing(*args: Any, **kwargs: Any) -> None:
    return None


def _no_instrumentation(*args: Any, **kwargs: Any) -> contextlib.AbstractContextManager[None]:
    return contextlib.nullcontext()


def _same_function(fn: Callable[..., Any]) -> Callable[..., Any]:
    return fn


def _setup(args: Any, *rest: Any, **kwargs: Any) -> list[Any]:
    return list(args)


NO_OPS: dict[str, Callable[..., Any]] = {
    "instrument_all": _nothing,
    "enable_python_coverage": _nothing,
    "instrument_imports": _no_instrumentation,
    "instrument_func": _same_function,
    "Setup": _setup,
    "Fuzz": _nothing,
}
IN_FUZZ_SLICE = ("instrument_all", "enable_python_coverage", "Setup", "Fuzz")


def plain(names: tuple[str, ...] = tuple(NO_OPS)) -> None:
    """Replace ``names`` of the real ``atheris`` module by no-ops (nothing if it is not installed)."""
    try:
        import atheris
    except ImportError:
        return
    for name in names:
        setattr(atheris, name, NO_OPS[name])
