"""Runs a target once on one input under a time limit, concretely traced or symbolically.

The time limit is ``setitimer(ITIMER_REAL)``: the SIGALRM handler raises ``ExecTimeout`` (a
``BaseException``, so ``except Exception`` in a target does not swallow it) and keeps firing
every 100 ms while armed, so a target that catches it anyway is interrupted again. Signals only
work on the main thread; elsewhere runs are not time-limited (the executor's parent process
kills the child as a backstop). The child process owns SIGALRM (``own_alarm_signal``), which
saves two system calls per execution. Any other exception escaping the target is a crash; its
traceback is kept without the engine's own frames.
"""

from __future__ import annotations

import os
import signal
import threading
import time
import traceback
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Iterator

from symfence.protocol.coverage import edges_from_sites
from symfence.worker.concolic.importhook import routing
from symfence.worker.concolic.instrument import Target
from symfence.worker.concolic.models import InputVariables, make_input
from symfence.worker.concolic.recorder import Recorder
from symfence.worker.concolic.symbolic import recording
from symfence.worker.engine_api import ExecTimeout, ExitKind

_REARM_S = 0.1
_ENGINE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


_armed = False
_owns_alarm = False


def _on_alarm(signum: int, frame: Any) -> None:
    if _armed:
        raise ExecTimeout()


def own_alarm_signal() -> None:
    """Install the SIGALRM handler for good (a process that uses SIGALRM for nothing else)."""
    global _owns_alarm
    signal.signal(signal.SIGALRM, _on_alarm)
    _owns_alarm = True


@contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    """Raise ``ExecTimeout`` in the block after ``seconds`` (main thread only; <= 0: no limit).

    Unless ``own_alarm_signal`` was called, the previous SIGALRM handler and any running real
    timer (e.g. pytest-timeout's) are put back afterwards.
    """
    global _armed
    if seconds <= 0 or threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = None if _owns_alarm else signal.signal(signal.SIGALRM, _on_alarm)
    outer_delay, outer_interval = signal.setitimer(signal.ITIMER_REAL, 0)  # someone else's timer
    started = time.monotonic()
    try:
        _armed = True
        signal.setitimer(signal.ITIMER_REAL, seconds, _REARM_S)
        yield
    finally:
        _armed = False  # from here on a late SIGALRM is ignored
        signal.setitimer(signal.ITIMER_REAL, 0)
        if previous is not None:
            signal.signal(signal.SIGALRM, previous)
        if outer_delay > 0:
            remaining = max(outer_delay - (time.monotonic() - started), 0.001)
            signal.setitimer(signal.ITIMER_REAL, remaining, outer_interval)


@contextmanager
def paused() -> Iterator[None]:
    """The running time limit stopped for the block and its rest re-armed after it: a library
    module rewritten on its first import is the engine's time, not the target's."""
    if not _armed:
        yield
        return
    remaining, interval = signal.setitimer(signal.ITIMER_REAL, 0)
    try:
        yield
    finally:
        if _armed and remaining > 0:
            signal.setitimer(signal.ITIMER_REAL, remaining, interval)


def format_crash(exc: BaseException) -> str:
    """The exception's traceback text without frames from the concolic engine itself."""
    report = traceback.TracebackException.from_exception(exc)
    pending = [report]
    while pending:
        item = pending.pop()
        item.stack = traceback.StackSummary.from_list(
            [f for f in item.stack if not (f.filename or "").startswith(_ENGINE_DIR)]
        )
        pending.extend(x for x in (item.__cause__, item.__context__) if x is not None)
    return "".join(report.format())


@dataclass(frozen=True)
class Run:
    """One execution: how it ended, what it recorded, and the input's variables (symbolic)."""

    kind: ExitKind
    detail: str
    recorder: Recorder
    variables: InputVariables | None

    @property
    def trace(self) -> dict[int, int]:
        return edges_from_sites(self.recorder.locations)

    def took(self, index: int, site: int, taken: bool) -> bool:
        """Whether branch ``index`` of this run is at ``site`` in direction ``taken``."""
        rec = self.recorder
        return index < len(rec.sites) and rec.sites[index] == site and rec.taken[index] == taken


def execute(target: Target, data: bytes, *, symbolic: bool, timeout_s: float,
            max_branches: int, pin_concretised: bool = False) -> Run:
    """Run ``target`` on ``data`` wrapped in proxies; never raises because of the target."""
    root, variables = make_input(data, symbolic=symbolic)
    recorder = Recorder(symbolic=symbolic, max_branches=max_branches,
                        pin_concretised=pin_concretised)
    try:
        with recording(recorder), time_limit(timeout_s), routing(target):
            target(root)
    except ExecTimeout:
        return Run(ExitKind.HANG, f"execution exceeded {timeout_s:g} s", recorder, variables)
    except BaseException as exc:  # noqa: BLE001 - anything the target raises is a crash
        return Run(ExitKind.CRASH, format_crash(exc), recorder, variables)
    return Run(ExitKind.OK, "", recorder, variables)
