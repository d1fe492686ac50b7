"""The synthetic executor: sleeps for a configured time and returns made-up candidates."""

from __future__ import annotations

import hashlib
import os
import random
import time

from symfence.worker.engine_api import CandidateOut, ExitKind, Outcome, Task

EDGE_SPACE = 4096  # candidates' fake edges fall in a small space so coverage saturates


def _fake_trace(data: bytes) -> dict[int, int]:
    h = hashlib.sha256(b"edge" + data).digest()
    return {int.from_bytes(h[i : i + 2], "big") % EDGE_SPACE: 1 for i in (0, 2)}


class SyntheticExecutor:
    """Options: task_ms (mean duration), distribution (fixed/uniform/exponential),
    candidates (per task), error_rate (probability of an ERROR outcome), and
    first_attempt_ms: if > 0, the first attempt of every work item blocks the worker for that
    long (a stuck native call that cannot be cancelled); retries take task_ms; change_after_s:
    if > 0, tasks started that long after this executor's first take task_ms_after instead."""

    def __init__(self) -> None:
        self._task: Task | None = None
        self._first_start: float | None = None
        self._t0 = 0.0
        self._end = 0.0

    def start(self, task: Task) -> None:
        mean_s = float(task.options.get("task_ms", 1.0)) / 1000
        now = time.monotonic()
        self._first_start = now if self._first_start is None else self._first_start
        change_after_s = float(task.options.get("change_after_s", 0.0))
        if change_after_s > 0 and now - self._first_start >= change_after_s:
            mean_s = float(task.options.get("task_ms_after", 0.0)) / 1000
        dist = task.options.get("distribution", "fixed")
        if dist == "uniform":
            duration = random.Random(task.work_id).uniform(0, 2 * mean_s)
        elif dist == "exponential":
            duration = random.Random(task.work_id).expovariate(1 / mean_s) if mean_s > 0 else 0.0
        else:
            duration = mean_s
        self._task = task
        self._t0 = time.monotonic()
        stuck_s = float(task.options.get("first_attempt_ms", 0)) / 1000
        if stuck_s > 0 and task.attempt == 1:
            time.sleep(stuck_s)  # blocking on purpose: the worker cannot see a CANCEL meanwhile
            duration = 0.0
        self._end = time.monotonic() + duration

    def wait(self, timeout_s: float) -> Outcome | None:
        if self._task is None:
            time.sleep(timeout_s) if timeout_s > 0 else os.sched_yield()
            return None
        remaining = self._end - time.monotonic()
        if remaining > timeout_s:
            time.sleep(timeout_s) if timeout_s > 0 else os.sched_yield()
            return None
        if remaining > 0:
            time.sleep(remaining)
        task, self._task = self._task, None
        return self._outcome(task, time.monotonic() - self._t0)

    def _outcome(self, task: Task, wall_s: float) -> Outcome:
        error_rate = float(task.options.get("error_rate", 0.0))
        if error_rate > 0 and random.Random(task.work_id + "outcome").random() < error_rate:
            return Outcome(ExitKind.ERROR, wall_s=wall_s, execs=1, error="synthetic error (error_rate)")
        candidates = []
        for i in range(int(task.options.get("candidates", 0))):
            data = hashlib.sha256(task.data + i.to_bytes(4, "big")).digest()[:8]
            candidates.append(CandidateOut(data, _fake_trace(data), ExitKind.OK, task.bound + 1))
        return Outcome(ExitKind.OK, trace=_fake_trace(task.data), candidates=tuple(candidates),
                       wall_s=wall_s, cpu_s=0.0, execs=1 + len(candidates))

    def abort(self) -> None:
        self._task = None

    def close(self) -> None:
        self._task = None


def executor() -> SyntheticExecutor:
    return SyntheticExecutor()
