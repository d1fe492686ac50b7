"""One z3 context per task: a task's terms, solvers and cached z3 objects live and die with the task.

Which model z3 returns for a query with many (a child of length 5 or of length 6, say) depends
on the context the query is built in, not only on the query: a context numbers its terms from a
free list of the ids that freed terms gave back (last freed, first reused), and the solver's
choices follow those ids. So in one long-lived context a task could search other paths after
other work had run in the process (seen: ``examples/constructs/bytes_methods`` not found after an
engine run over ``json``: the same query, as SMT text, with other term ids got the other
length). ``task_context()`` makes a fresh context z3py's default one (``z3.main_ctx()``, which
every z3 call of the engine uses: none passes ``ctx=``) for the task, and empties the caches of
z3 objects (registered with ``per_task``) when the task starts and ends, so a task's search
depends on the task alone (its input, target and options; and on the wall clock through the
time-outs). z3's random seeds are its defaults (nothing sets them), the same in every context.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import z3
import z3.z3 as _z3py

_clears: list[Callable[[], Any]] = []

Cache = TypeVar("Cache")


def per_task(cache: Cache) -> Cache:
    """Register a cache holding z3 objects (a ``functools`` cache or a dict): emptied at each
    task's start and end (its objects belong to that task's context)."""
    clear = getattr(cache, "cache_clear", None) or getattr(cache, "clear")
    _clears.append(clear)
    return cache


def _install(context: z3.Context | None) -> None:
    for clear in _clears:
        clear()
    _z3py._main_ctx = context  # z3py's default context; None: made anew on first use


@contextmanager
def task_context() -> Iterator[z3.Context]:
    """The block runs with a new z3 context as the default one, and per-task caches empty."""
    context = z3.Context()
    _install(context)
    try:
        yield context
    finally:
        _install(None)
