"""How tests share the cores when `make test` runs them side by side (pytest-xdist, `-n 3`).

Two marks, enforced with file locks between the xdist workers of one run (no-ops in a serial run):

- ``@pytest.mark.alone``: no other test runs meanwhile (tests whose assertions depend on having
  the cores: busy shares, auto depth judged on round trips, CPU budgets).
- ``@pytest.mark.heavy``: the test keeps both cores busy (a campaign whose workers fuzz or solve
  for seconds); it runs beside light tests, never beside another heavy or alone test.

Unmarked tests run beside anything. The lock is held from the first fixture set up for a test to
its last teardown, so a module-scoped campaign fixture set up by a marked test is covered too.

Where each test runs (`make test` passes ``--dist loadgroup``): every ``heavy`` and ``alone`` test
goes to one xdist group, so one worker runs them one after another (the biggest group: it starts
first) while the others take the light tests; the locks then never leave a worker waiting for
another's heavy test. The tests of a module with a module-scoped fixture form a group of their own,
so that fixture (a campaign, a build) is set up once per run, not once per worker.

When the run is root's (CI here), a light test runs at nice ``LIGHT_NICE`` (5) and a heavy or
alone one at 0: the heavy chain is the critical path, and light tests take the CPU it leaves.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import IO, Any

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
        folder = _run_folder(run)
        folder.mkdir(exist_ok=True)
        _LOCKS = _Locks(folder)
    return _LOCKS


HEAVY_GROUP = "heavy"


def _group(item: pytest.Item) -> str:
    """The work unit of a test for ``--dist loadgroup`` (see the module's docstring): "heavy", its
    ``xdist_group`` mark's name, its module's path when the module has a module-scoped fixture, or
    the test's own id."""
    if item.get_closest_marker("heavy") is not None or item.get_closest_marker("alone") is not None:
        return HEAVY_GROUP
    mark = item.get_closest_marker("xdist_group")
    if mark is not None:
        return str(mark.args[0] if mark.args else mark.kwargs.get("name", "default"))
    info = getattr(item, "_fixtureinfo", None)
    shared = info is not None and any(defs[-1].scope == "module" for defs in info.name2fixturedefs.values())
    return item.nodeid.split("::")[0] if shared else item.nodeid


def _run_folder(run: str) -> Path:
    """The folder of one xdist run (its locks, its tests' groups)."""
    return Path(tempfile.gettempdir()) / f"symfence-pytest-{run}"


def pytest_configure(config: pytest.Config) -> None:
    # The controller names the run (xdist would, later) so that it knows where its workers write
    # the groups of the tests they collect.
    if getattr(config.option, "numprocesses", None) and not hasattr(config, "workerinput") \
            and config.getoption("testrunuid") is None:
        config.option.testrunuid = uuid.uuid4().hex


def pytest_unconfigure(config: pytest.Config) -> None:
    """The controller removes the run's folder (locks, groups) once every worker is done."""
    run = config.getoption("testrunuid", None)
    if run and not hasattr(config, "workerinput"):
        shutil.rmtree(_run_folder(run), ignore_errors=True)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """An xdist worker writes each test's group for the controller's scheduler (below)."""
    workerinput = getattr(config, "workerinput", None)
    if workerinput is None or not getattr(config.option, "loadgroup", False):  # xdist sets it in a worker
        return
    folder = _run_folder(workerinput["testrunuid"])
    folder.mkdir(exist_ok=True)
    part = folder / f"groups-{workerinput['workerid']}.json.part"
    part.write_text(json.dumps({item.nodeid: _group(item) for item in items}))
    part.rename(part.with_suffix(""))


@pytest.hookimpl(optionalhook=True)  # pytest without xdist (-p no:xdist) runs too
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``--dist loadgroup`` with our groups: xdist's own reads ``xdist_group`` marks through a
    node-id suffix that pytest 9.2 no longer keeps, so every test there went anywhere."""
    if config.getoption("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    folder = _run_folder(config.getoption("testrunuid"))

    class GroupScheduling(LoadScopeScheduling):
        """xdist's scope scheduling (the biggest unit first: the heavy group) over our groups."""

        groups: dict[str, str] | None = None

        def _split_scope(self, nodeid: str) -> str:
            if self.groups is None:  # every worker has written its file before it reports its collection
                self.groups = {}
                for path in sorted(folder.glob("groups-*.json")):
                    self.groups.update(json.loads(path.read_text()))
            return self.groups.get(nodeid, nodeid)

    return GroupScheduling(config, log)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    locks = _locks()
    if locks is None:
        yield
        return
    alone = item.get_closest_marker("alone") is not None
    heavy = item.get_closest_marker("heavy") is not None
    _prioritise(heavy or alone)
    with locks.hold(alone, heavy):
        yield


# The nice value of light tests (SYMFENCE_TEST_LIGHT_NICE; 0: none). Clean clones of one head,
# 2026-12-07 on the 2-core VM: pytest 382.8 s with 0, 366.5 s with 5 (docs/benchmarks.md).
LIGHT_NICE = int(os.environ.get("SYMFENCE_TEST_LIGHT_NICE", "5"))


def _prioritise(heavy: bool) -> None:
    """Under xdist, as root: a light test (and what it starts) runs at `LIGHT_NICE`, a heavy or
    alone one at 0, so the heavy chain (one worker's, one after another: the suite's critical
    path) gets the CPU first and light tests fill what it leaves. Only root can lower a nice
    value again, so other users' runs keep 0."""
    if LIGHT_NICE and os.geteuid() == 0 and os.environ.get("PYTEST_XDIST_WORKER"):
        os.setpriority(os.PRIO_PROCESS, 0, 0 if heavy else LIGHT_NICE)


@pytest.fixture(autouse=True)
def _fresh_structlog():
    """Each test starts from structlog's defaults: a test that configured a campaign's log file and
    closed it (the end sequence does) must not leave the next test in the same process writing to it."""
    import structlog

    yield
    structlog.reset_defaults()
