"""Child side of the real tracer: imports targets plainly and traces a batch of inputs (a handler).

Run as ``python -m symfence.worker.childserve symfence.worker.realtrace.child ...`` by
``worker.realtrace.client.TraceClient``. A request is a ``RunTask`` whose task names the target
(options ``include``: the coverage include list, ``timeout_s``: one execution's CPU limit,
``memory_limit_mb``: the process's address-space limit, ``worker.memory_limit``) and
whose ``inputs`` are the batch; per input it streams ``Entered`` (INPUT, its index) before it
runs and ``Executed`` after, then ``Done``: OK, or ERROR with the reason the target cannot be
loaded. ``Entered`` lets the parent name the input if this process dies or hangs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from symfence.worker.childserve import Events
from symfence.worker.childwire import RunTask
from symfence.worker.engine_api import ExitKind, Outcome, Phase, TargetLoadError
from symfence.worker.memory_limit import apply_memory_limit, limit_of
from symfence.worker.realtrace.tracer import ArcTracer, load_callable, resolve_include


class TraceHandler:
    def __init__(self) -> None:
        self._tracers: dict[tuple[str, tuple[str, ...]], tuple[ArcTracer, Callable[[bytes], Any]]] = {}

    def run(self, request: RunTask, events: Events) -> Outcome:
        task = request.task
        include = tuple(str(entry) for entry in task.options.get("include", ()))
        timeout_s = float(task.options.get("timeout_s", 0.0))
        apply_memory_limit(limit_of(task.options))  # as the replays that confirm its inputs
        key = (task.target, include)
        if key not in self._tracers:
            try:
                module, fn = load_callable(task.target)
                self._tracers[key] = (ArcTracer(resolve_include(list(include), module)), fn)
            except TargetLoadError as exc:
                return Outcome(ExitKind.ERROR, error=str(exc))
        tracer, fn = self._tracers[key]
        for i, data in enumerate(request.inputs):
            events.entered(Phase.INPUT, index=i)
            traced = tracer.run(fn, data, timeout_s)
            events.executed(i, ExitKind(traced.status), traced.trace, traced.detail)
        return Outcome(ExitKind.OK, execs=len(request.inputs))

    def close(self) -> None:
        pass


def handler(scratch_dir: str) -> TraceHandler:
    return TraceHandler()
