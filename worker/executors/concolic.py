"""The concolic Executor: the embedded engine's adapter over the child-process seam.

One child per executor (``worker.concolic.runner`` under ``worker.childserve``) keeps the engine,
its solved-query memo and the instrumented targets warm, so an execution costs a function call,
not an interpreter. The child limits each execution itself (``setitimer``) and streams what it
is doing; the parent (``worker.childproc.ChildExecutor``) kills and replaces the child when an
execution or the whole task overruns its budget, or notices when it died. Then the outcome is
built from the stream: dying or being killed while running the task's own input is that
input's CRASH or HANG; while replaying a child input, that child becomes a CRASH/HANG candidate
and the task ends OK with the candidates so far; anywhere else it is an ERROR.
``abort`` kills the child and starts a fresh one (replacement costs ~0.2 s, off the hot path).
"""

from __future__ import annotations

import time

from symfence.protocol.options import EngineOptions
from symfence.worker.childproc import DISCARD, INHERIT, ChildExecutor, ChildProcess, Running
from symfence.worker.engine_api import Candidate, Executor, ExitKind, Outcome, Phase, Task

_Phase = Phase  # the name the tests and older callers use


class ConcolicAdapter:
    """How the concolic engine's child is run and read (``childproc.EngineAdapter``)."""

    engine = "symfence.worker.concolic.runner"
    name = "concolic"
    scratch = False
    eager = True
    cuttable = True  # the child ends a task early on SIGUSR1 (worker.concolic.cut)

    def __init__(self, *, quiet: bool = True, start_timeout_s: float = 60.0) -> None:
        self.stderr = DISCARD if quiet else INHERIT
        self.start_timeout_s = start_timeout_s

    def options(self, task: Task) -> EngineOptions:
        return EngineOptions.from_mapping(task.options)

    def deadline(self, run: Running[EngineOptions]) -> float:
        opts = run.options
        deadline = run.accepted_at + opts.task_budget_s()
        if run.phase in (Phase.INPUT, Phase.CANDIDATE):
            grace = max(1.0, opts.exec_timeout_s)
            deadline = min(deadline, run.phase_since + opts.exec_timeout_s + grace)
        return deadline

    def killed(self, run: Running[EngineOptions]) -> Outcome:
        if run.cut_at:  # asked to end early and did not in time: what it streamed is its answer
            return Outcome(ExitKind.OK, trace=run.input_trace, candidates=tuple(run.candidates),
                           wall_s=time.monotonic() - run.started, execs=run.execs,
                           stats={"cut_short": 1, "cut_killed": 1, "child_restarts": 1},
                           resume_at=run.task.bound)  # how far it got is not known: again from its bound
        if run.phase in (Phase.INPUT, Phase.CANDIDATE):
            reason = f"execution overran {run.options.exec_timeout_s:g} s"
        else:
            reason = f"task overran its {run.phase.value} budget"
        return _cut_short(run, f"was killed: {reason}", ExitKind.HANG)

    def died(self, run: Running[EngineOptions], how: str, child: ChildProcess) -> Outcome:
        return _cut_short(run, f"died ({how})", ExitKind.CRASH, child.fatal_report())


def _cut_short(run: Running[EngineOptions], how: str, exit_kind: ExitKind, fatal: str = "") -> Outcome:
    """The outcome of a task whose child process died or was killed, from what it streamed;
    `fatal`: faulthandler's dump of a fatal signal (the Python stack the input died in, which
    gives the crash its identity: without it every native crash of a target was one)."""
    stats = {"child_restarts": 1}
    wall = time.monotonic() - run.started
    fatal = f"\n{fatal}" if fatal else ""
    if run.phase is Phase.INPUT:
        return Outcome(exit_kind, wall_s=wall, execs=run.execs, stats=stats,
                       error=f"target process {how} while executing the input{fatal}")
    if run.phase is Phase.CANDIDATE:
        detail = f"target process {how} while executing this input{fatal}"
        lost = Candidate(run.data, {}, exit_kind, run.bound, detail)
        return Outcome(ExitKind.OK, trace=run.input_trace, candidates=(*run.candidates, lost),
                       wall_s=wall, execs=run.execs, stats=stats)
    return Outcome(ExitKind.ERROR, trace=run.input_trace, candidates=tuple(run.candidates),
                   wall_s=wall, execs=run.execs, stats=stats,
                   error=f"concolic child process {how} ({run.phase.value} phase)")


class ConcolicExecutor(ChildExecutor[EngineOptions]):
    """Executor for the embedded concolic engine; see the module docstring."""

    def __init__(self, *, python: str | None = None, quiet: bool = True,
                 start_timeout_s: float = 60.0) -> None:
        super().__init__(ConcolicAdapter(quiet=quiet, start_timeout_s=start_timeout_s), python=python)


def executor() -> Executor:
    """The WORK executor "concolic": the engine, its inputs measured by the real tracer too."""
    from symfence.worker.executors.traced import TracedExecutor

    return TracedExecutor(ConcolicExecutor(), trace_input=True, keep_inner=True)
