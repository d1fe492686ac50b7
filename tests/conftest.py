"""How tests share the cores when `make test` runs them side by side (pytest-xdist, `-n 2`).

Two marks, enforced with file locks between the xdist workers of one run (no-ops in a serial run):

- ``@pytest.mark.alone``: no other test runs meanwhile (tests whose assertions depend on having
  the cores: busy shares, auto depth judged on round trips, CPU budgets).
- ``@pytest.mark.heavy``: the test keeps both cores busy (a campaign whose workers fuzz or solve
  for seconds); it runs beside light tests, never beside another heavy or alone test.

Unmarked tests run beside anything. The lock is held from the first fixture set up for a test to
its last teardown, so a module-scoped campaign fixture set up by a marked test is covered too.
"""

from __future__ import annotations

import fcntl
import os
import tempfile
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import IO

import pytest


class _Locks:
    """A readers-writer lock (``alone`` writes, every other test reads) and a mutex for ``heavy``.

    The gate keeps an ``alone`` test from waiting for ever: it holds the gate while it waits for
    the running tests to end, and a test takes the gate (for a moment) before it may start."""

    def __init__(self, folder: Path) -> None:
        self.files = {name: open(folder / f"{name}.lock", "a+") for name in ("heavy", "gate", "main")}

    @contextmanager
    def _flock(self, name: str, mode: int) -> Iterator[None]:
        f: IO[str] = self.files[name]
        fcntl.flock(f, mode)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)

    @contextmanager
    def hold(self, alone: bool, heavy: bool) -> Iterator[None]:
        with ExitStack() as stack:
            if heavy or alone:  # always first: nothing else is held while waiting for it
                stack.enter_context(self._flock("heavy", fcntl.LOCK_EX))
            if alone:
                stack.enter_context(self._flock("gate", fcntl.LOCK_EX))
                stack.enter_context(self._flock("main", fcntl.LOCK_EX))
            else:
                with self._flock("gate", fcntl.LOCK_EX):
                    fcntl.flock(self.files["main"], fcntl.LOCK_SH)
                stack.callback(fcntl.flock, self.files["main"], fcntl.LOCK_UN)
            yield


_LOCKS: _Locks | None = None


def _locks() -> _Locks | None:
    """The locks of this run's xdist workers (one folder per run), or None outside xdist."""
    global _LOCKS
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    if run is None:
        return None
    if _LOCKS is None:
        folder = Path(tempfile.gettempdir()) / f"symfence-pytest-{run}"
        folder.mkdir(exist_ok=True)
        _LOCKS = _Locks(folder)
    return _LOCKS


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    locks = _locks()
    if locks is None:
        yield
        return
    alone = item.get_closest_marker("alone") is not None
    heavy = item.get_closest_marker("heavy") is not None
    with locks.hold(alone, heavy):
        yield


@pytest.fixture(autouse=True)
def _fresh_structlog():
    """Each test starts from structlog's defaults: a test that configured a campaign's log file and
    closed it (the end sequence does) must not leave the next test in the same process writing to it."""
    import structlog

    yield
    structlog.reset_defaults()
