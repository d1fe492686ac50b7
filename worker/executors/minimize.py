"""The minimization Executor: the minimize engine's adapter over the child-process seam.

Each task runs in a fresh child (``worker.triage.minimize_child`` under ``worker.childserve``,
``one_task_per_child``: a target's state never carries over from one finding to the next). The
parent (``worker.childproc.ChildExecutor``) gives the task its ``minimize_budget_s`` plus a
grace for start-up (the target's import) and the last runs; past it the child's process group
is SIGKILLed and the task is an ERROR, as is a child that dies on its own.
"""

from __future__ import annotations

import time

from symfence.worker.childproc import DISCARD, ChildExecutor, ChildProcess, Running
from symfence.worker.engine_api import ExitKind, Outcome, Task
from symfence.worker.triage.minimize_child import PREFIX, MinimizeSpec

__all__ = ["PREFIX", "MinimizeAdapter", "MinimizeExecutor", "executor"]

_GRACE_S = 15.0  # start-up (the target's import) and the last runs after the budget


class MinimizeAdapter:
    """How the minimize engine's child is run and read (``childproc.EngineAdapter``)."""

    engine = "symfence.worker.triage.minimize_child"
    name = "minimize"
    stderr = DISCARD
    scratch = False
    eager = False
    start_timeout_s = 60.0

    def options(self, task: Task) -> MinimizeSpec:
        return MinimizeSpec.from_task(task)

    def deadline(self, run: Running[MinimizeSpec]) -> float:
        return run.started + run.options.budget_s + _GRACE_S

    def killed(self, run: Running[MinimizeSpec]) -> Outcome:
        return Outcome(ExitKind.ERROR, error=f"minimizer overran {run.options.budget_s:g} s")

    def died(self, run: Running[MinimizeSpec], how: str, child: ChildProcess) -> Outcome:
        wall = time.monotonic() - run.started
        return Outcome(ExitKind.ERROR, wall_s=wall, error=f"the minimizer died (exit {child.returncode})")


class MinimizeExecutor(ChildExecutor[MinimizeSpec]):
    """Executor for minimization tasks; see the module docstring."""

    def __init__(self, *, python: str | None = None) -> None:
        super().__init__(MinimizeAdapter(), python=python, one_task_per_child=True)


def executor() -> MinimizeExecutor:
    return MinimizeExecutor()
