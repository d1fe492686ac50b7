"""Child side of the concolic executor: the embedded engine as a ``childserve`` handler.

Run as ``python -m symfence.worker.childserve symfence.worker.concolic.runner ...`` by
``worker.executors.concolic``. The engine's progress (``engine.Progress``) becomes the seam's
events: ``Entered`` INPUT or CANDIDATE before each concrete execution, ``InputTraced`` once the
input itself ran fine, ``Found`` after each child's replay, ``Entered`` ENGINE before crashes and
hangs are replayed on the plain target in a fresh process. This process owns SIGALRM (the
per-execution time limit) and SIGUSR1 (``cut``: end the task early), and limits its address
space to the task's ``memory_limit_mb``.
"""

from __future__ import annotations

from collections.abc import Mapping

from symfence.protocol.options import EngineOptions
from symfence.worker.memory_limit import apply_memory_limit
from symfence.worker.childserve import Events
from symfence.worker.childwire import RunTask
from symfence.worker.concolic import cut
from symfence.worker.concolic.engine import ConcolicEngine
from symfence.worker.concolic.execution import own_alarm_signal
from symfence.worker.engine_api import Candidate, Outcome, Phase


class _Progress:
    """The engine's Progress observer, streamed to the parent."""

    def __init__(self, events: Events) -> None:
        self._events = events

    def executing(self, data: bytes, bound: int, is_input: bool) -> None:
        self._events.entered(Phase.INPUT if is_input else Phase.CANDIDATE, data, bound)

    def input_done(self, trace: Mapping[int, int]) -> None:
        self._events.input_traced(trace)

    def candidate(self, candidate: Candidate) -> None:
        self._events.found(candidate)

    def confirming(self) -> None:
        self._events.entered(Phase.ENGINE)


class ConcolicHandler:
    def __init__(self) -> None:
        own_alarm_signal()
        cut.install()
        self._engine = ConcolicEngine()

    def run(self, request: RunTask, events: Events) -> Outcome:
        try:
            apply_memory_limit(EngineOptions.from_mapping(request.task.options).memory_limit_mb)
        except ValueError:
            pass  # the engine reports bad options as the task's error
        return self._engine.run_task(request.task, _Progress(events))

    def close(self) -> None:
        pass


def handler(scratch_dir: str) -> ConcolicHandler:
    return ConcolicHandler()
