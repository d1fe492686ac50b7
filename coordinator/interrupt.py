"""Ctrl-C before the campaign loop runs: remember it, stop at the next safe point, quietly.

Until the event loop installs its own handlers (which turn a signal into a drain), SIGINT and
SIGTERM only set a flag: a KeyboardInterrupt in the middle of ``MPI_Init``, an import or the
journal's recovery would print a traceback and leave the other ranks waiting. Rank 0 and
``symfence run`` call ``check()`` at the points where stopping is safe; it raises
``Interrupted``, which they turn into one line and exit status 130.

Once the campaign loop has returned, rank 0 ignores SIGINT and SIGTERM (``ignore()``): the run
has stopped, and a Ctrl-C while the job closes (journal, summary, ``MPI_Finalize``, owed queue
files, the interpreter's own exit) must change nothing. mpiexec's second Ctrl-C still aborts.
"""

from __future__ import annotations

import signal
from typing import Any

EXIT_INTERRUPTED = 130  # the shell's convention for "ended by SIGINT"

_requested: str | None = None


class Interrupted(Exception):
    """A SIGINT/SIGTERM arrived during start-up."""


def _remember(signum: int, frame: Any) -> None:
    global _requested
    _requested = _requested or signal.Signals(signum).name


def install() -> None:
    """From now until the campaign loop takes over, SIGINT/SIGTERM only set the flag."""
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, _remember)


def ignore() -> None:
    """SIGINT/SIGTERM ignored from now on. Not a Python handler that does nothing: the
    interpreter resets Python handlers to the default action when it finalizes (a Ctrl-C in
    the last milliseconds of the exit then kills the process), but leaves SIG_IGN in place."""
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_IGN)


def requested() -> str | None:
    """The name of the first signal received during start-up, or None."""
    return _requested


def check() -> None:
    if _requested is not None:
        raise Interrupted(_requested)
