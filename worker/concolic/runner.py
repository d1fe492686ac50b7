"""Child-process side of the concolic executor: runs the tasks its parent sends over a pipe.

Started as ``python -m symfence.worker.concolic.runner FD_IN FD_OUT`` by
``worker.executors.concolic.ConcolicExecutor``. Messages are pickled tuples on
``multiprocessing.connection.Connection`` framing (both ends are our own local processes; the
MPI wire never carries pickle):

parent -> child: ``("task", Task, sys_path)``, ``("stop",)``
child -> parent: ``("ready", pid)``, then per task ``("accepted",)``,
``("exec", monotonic_s, data, bound, is_input)`` before each concrete execution,
``("input", trace)`` once the input itself ran fine, ``("candidate", CandidateOut)`` after each
child's replay, ``("confirming",)`` before crashes and hangs are replayed on the plain target
in a fresh process, and finally ``("done", Outcome)``. The stream lets the parent say what was
running if this process dies or has to be killed.
"""

from __future__ import annotations

import importlib
import os
import resource
import signal
import sys
import time
from multiprocessing.connection import Connection
from typing import Mapping

from symfence.worker.concolic.engine import ConcolicEngine
from symfence.worker.concolic.execution import own_alarm_signal
from symfence.worker.concolic.options import EngineOptions
from symfence.worker.executors.base import CandidateOut


class PipeProgress:
    """Streams a task's progress to the parent."""

    def __init__(self, conn: Connection):
        self._conn = conn

    def executing(self, data: bytes, bound: int, is_input: bool) -> None:
        self._conn.send(("exec", time.monotonic(), data, bound, is_input))

    def input_done(self, trace: Mapping[int, int]) -> None:
        self._conn.send(("input", dict(trace)))

    def candidate(self, candidate: CandidateOut) -> None:
        self._conn.send(("candidate", candidate))

    def confirming(self) -> None:
        self._conn.send(("confirming",))


def _extend_sys_path(paths: list[str]) -> None:
    missing = [p for p in paths if p not in sys.path]
    if missing:
        sys.path.extend(missing)
        importlib.invalidate_caches()


def apply_memory_limit(limit_mb: int) -> None:
    """Limit this process's address space (RLIMIT_AS, like AFL++'s -m) to ``limit_mb``; 0 = none.

    A target that allocates past it gets a MemoryError at once (an ``oom`` finding) instead of
    swapping until its time limit makes it look like a hang."""
    soft = resource.RLIM_INFINITY if limit_mb <= 0 else limit_mb << 20
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard != resource.RLIM_INFINITY and (soft == resource.RLIM_INFINITY or soft > hard):
        soft = hard
    if resource.getrlimit(resource.RLIMIT_AS)[0] != soft:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def serve(inbox: Connection, outbox: Connection) -> None:
    """Answer tasks until the parent says stop or goes away."""
    engine = ConcolicEngine()
    progress = PipeProgress(outbox)
    outbox.send(("ready", os.getpid()))
    while True:
        try:
            message = inbox.recv()
        except EOFError:
            return
        if message[0] == "stop":
            return
        _, task, sys_path = message
        _extend_sys_path(sys_path)
        try:
            apply_memory_limit(EngineOptions.from_mapping(task.options).memory_limit_mb)
        except ValueError:
            pass  # the engine reports bad options as the task's error
        outbox.send(("accepted",))
        outbox.send(("done", engine.run_task(task, progress)))


def main(argv: list[str]) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when we stop
    own_alarm_signal()
    inbox = Connection(int(argv[0]), writable=False)
    outbox = Connection(int(argv[1]), readable=False)
    try:
        serve(inbox, outbox)
    except (BrokenPipeError, ConnectionResetError):
        pass  # the parent is gone


if __name__ == "__main__":
    main(sys.argv[1:])
