"""Wraps an executor so every input it reports carries the real control-flow trace (one yardstick).

When the inner executor (concolic engine or fuzz slice) finishes a task, the task's own input
(if ``trace_input``) and every OK candidate are replayed plainly in the tracer child
(``worker.realtrace``) and their traces replaced by the real ones. A candidate whose plain replay
crashes or hangs becomes a CRASH or HANG candidate (the engine's proxies or a flaky target may
hide what plain execution does). With ``keep_inner`` the inner executor's own edges are kept
beside the real ones: the concolic engine's branch sites split a multi-byte comparison into one
decision per byte (as laf-intel does for AFL++), so an input one byte closer to a magic value
still counts as new, which the engine's generational search needs. Options read from the task: ``cov_include`` (comma-separated
module names or paths, "" = the default include list) and ``exec_timeout_s``; the tracer allows
``TRACE_SLACK`` times the execution time-out because tracing slows the target down.
"""

from __future__ import annotations

import time
from dataclasses import replace

from symfence.worker.engine_api import CandidateOut, Executor, ExitKind, Outcome, Task, Turns
from symfence.worker.memory_limit import limit_of
from symfence.worker.realtrace.client import TraceClient

TRACE_SLACK = 3.0


def include_list(options: dict) -> list[str]:
    return [s.strip() for s in str(options.get("cov_include", "")).split(",") if s.strip()]


class TracedExecutor:
    def __init__(self, inner: Executor, *, trace_input: bool, keep_inner: bool = False,
                 client: TraceClient | None = None):
        self.inner = inner
        self.trace_input = trace_input
        self.keep_inner = keep_inner
        self.client = client or TraceClient()
        self._task: Task | None = None
        self._pending: Outcome | None = None  # the inner outcome whose inputs are being traced
        self._traced_at = 0.0
        self._with_input = False

    def start(self, task: Task) -> None:
        self._task, self._pending = task, None
        self.inner.start(task)

    def wait(self, timeout_s: float) -> Outcome | None:
        if self._task is None:
            return None
        if self._pending is None:
            outcome = self.inner.wait(timeout_s)
            if outcome is None:
                return None
            if not self._submit(outcome):
                self._task = None
                return outcome
            timeout_s = 0.0
        try:
            traced = self.client.poll(timeout_s)
        except RuntimeError as exc:
            outcome, self._pending, self._task = self._pending, None, None
            return replace(outcome, status=ExitKind.ERROR, error=str(exc), candidates=())
        if traced is None:
            return None
        return self._merge(traced)

    def end_turn(self) -> bool:
        """The inner task ends early if it can (``engine_api.Turns``); its inputs being traced
        already: nothing to end, it answers soon."""
        inner = self.inner
        return self._pending is None and isinstance(inner, Turns) and inner.end_turn()

    def _submit(self, outcome: Outcome) -> bool:
        task = self._task
        assert task is not None
        self._with_input = self.trace_input and outcome.status is ExitKind.OK
        inputs = [task.data] if self._with_input else []
        inputs += [c.data for c in outcome.candidates if c.kind is ExitKind.OK]
        if not inputs:
            return False
        timeout = float(task.options.get("exec_timeout_s", 1.0)) * TRACE_SLACK
        self.client.submit(task.target, include_list(dict(task.options)), timeout, inputs,
                           memory_limit_mb=limit_of(task.options))
        self._pending, self._traced_at = outcome, time.perf_counter()
        return True

    def _merge(self, traced: list) -> Outcome:
        outcome, self._pending, self._task = self._pending, None, None
        assert outcome is not None
        it = iter(traced)
        trace = self._combine(outcome.trace, next(it).trace) if self._with_input else {}
        candidates: list[CandidateOut] = []
        diverged = 0
        for c in outcome.candidates:
            if c.kind is not ExitKind.OK:
                candidates.append(c)
                continue
            t = next(it)
            if t.status == "ok":
                candidates.append(replace(c, trace=self._combine(c.trace, t.trace)))
            else:
                diverged += 1
                candidates.append(replace(c, trace=t.trace, kind=ExitKind(t.status), detail=t.detail))
        stats = dict(outcome.stats)
        stats["trace_execs"] = stats.get("trace_execs", 0) + len(traced)
        traced_s = time.perf_counter() - self._traced_at
        stats["trace_us"] = stats.get("trace_us", 0) + int(traced_s * 1e6)
        if diverged:
            stats["trace_plain_findings"] = diverged
        # The task's wall time includes its tracing: busy shares and cost figures count it.
        return replace(outcome, trace=trace, candidates=tuple(candidates), stats=stats,
                       wall_s=outcome.wall_s + traced_s)

    def _combine(self, inner: dict, real: dict) -> dict:
        if not self.keep_inner:
            return dict(real)
        merged = dict(inner)
        for index, count in real.items():
            merged[index] = max(count, merged.get(index, 0))
        return merged

    def abort(self) -> None:
        if self._pending is not None:
            self.client.abort()
        else:
            self.inner.abort()
        self._task, self._pending = None, None

    def close(self) -> None:
        self.inner.close()
        self.client.close()
