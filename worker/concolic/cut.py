"""Ending the engine's work on time: a task asked to end early, and z3 calls that overrun their time-out.

The worker asks a task to end early when a short task waits that the campaign waits on (a
claimed crash's re-run) or when the campaign drains (YIELD): the parent sends SIGUSR1
(``ChildExecutor.end_turn``); the search then stops before its next branch, every further query
is unknown at once, the crashes it has pending are confirmed and it answers as usual. A request
is cleared when a task starts (the parent sends none before the child runs the task).

Both are watched by one thread of the engine's child, because Python runs signal handlers only
between bytecodes of the main thread, and the main thread can sit inside one z3 call for many
seconds: z3 ignores a query's time-out in parts of its rewriter and preprocessing (seen in
campaigns on email-validator: engine tasks of 13-25 s that a request could not stop). The
thread takes SIGUSR1 itself (``sigtimedwait``; the signal is blocked in every other thread) and
interrupts the running z3 call (``Context.interrupt``, z3's way to stop a call from another
thread: the call returns unknown) when a cut is asked for, or when a call has run
``OVERRUN_FACTOR`` times its time-out plus ``OVERRUN_GRACE_S``.
"""

from __future__ import annotations

import math
import signal
import threading
import time
from typing import Any

SIGNAL = signal.SIGUSR1
OVERRUN_FACTOR = 2.0
OVERRUN_GRACE_S = 0.5
_TICK_S = 0.02

_lock = threading.Lock()
_requested = False
_context: Any = None  # the z3 context of the call in progress (armed), else None
_deadline = math.inf
_overruns = 0  # z3 calls interrupted past their time-out, since the process started
_fired = False  # the armed call was interrupted for its overrun


def install() -> None:
    """In the engine's child process, before its first task (and before any other thread)."""
    if not hasattr(signal, "sigtimedwait"):  # not Linux: a plain handler (no interrupting z3)
        signal.signal(SIGNAL, _on_signal)
        return
    signal.pthread_sigmask(signal.SIG_BLOCK, {SIGNAL})
    threading.Thread(target=_watch, name="z3-watchdog", daemon=True).start()


def _on_signal(signum: int, frame: object) -> None:
    global _requested
    _requested = True


def _watch() -> None:
    global _requested, _overruns, _deadline, _fired
    while True:
        got = signal.sigtimedwait({SIGNAL}, _TICK_S)
        with _lock:
            if got is not None:
                _requested = True
            if _context is None:
                continue
            now = time.monotonic()
            if now > _deadline:
                _overruns += not _fired  # one call counts once (interrupted again if it goes on)
                _fired, _deadline = True, now + OVERRUN_GRACE_S
            elif not _requested:
                continue
            # After a cut, at every tick while a call runs: an interrupt that comes before z3
            # has entered the call is lost (z3 resets it when a call starts).
            _context.interrupt()


def arm(context: Any, timeout_s: float) -> None:
    """A z3 call with this time-out starts in ``context``: interrupt it if it overruns (or on a cut)."""
    global _context, _deadline, _fired
    with _lock:
        _context, _fired = context, False
        _deadline = time.monotonic() + OVERRUN_FACTOR * timeout_s + OVERRUN_GRACE_S


def disarm() -> None:
    global _context, _deadline
    with _lock:
        _context, _deadline = None, math.inf


def overruns() -> int:
    return _overruns


def requested() -> bool:
    return _requested


def clear() -> None:
    global _requested
    _requested = False
