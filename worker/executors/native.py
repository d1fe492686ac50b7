"""The native Executor: TritonDSE / SymCC tasks (engine + oracle), the adapter over the child seam.

The child (``worker.native.runner`` under ``worker.childserve``) streams the phase it is in; the
parent owns the clock: an execution (input or candidate) gets ``exec_timeout_s`` plus a grace,
an engine run ``engine_timeout_s`` plus a grace, an emulated replay (the ``engine`` oracle's
candidate) its emulation limit and one native run plus a grace (tritondse_engine.py). On
overrun the child's process group (and a SymCC run's own group) is SIGKILLed and a fresh child
is started; the input or candidate being executed becomes a HANG finding, an overrunning engine
run ends the task as an ERROR with the candidates so far. A child that dies on its own while out of memory (its stderr says so) makes
an out-of-memory finding (``MemoryError: ...``, saved as ``kind:oom``); any other death is an
ERROR of the task. Each child gets a scratch directory (the SymCC runs' files, its stderr).
"""

from __future__ import annotations

import time

from symfence.protocol.options import REPLAY_FACTOR, NativeOptions
from symfence.worker.childproc import SCRATCH, ChildExecutor, ChildProcess, Running
from symfence.worker.engine_api import Candidate, ExitKind, Outcome, Phase, Task
from symfence.worker.native.base import OOM_MARK

_OOM_SIGNS = (b"MemoryError", b"std::bad_alloc", b"Cannot allocate memory", b"out of memory")


class NativeAdapter:
    """How the native engine's child is run and read (``childproc.EngineAdapter``)."""

    engine = "symfence.worker.native.runner"
    name = "native"
    stderr = SCRATCH
    scratch = True
    eager = False

    def __init__(self, *, start_timeout_s: float = 60.0) -> None:
        self.start_timeout_s = start_timeout_s

    def options(self, task: Task) -> NativeOptions:
        return NativeOptions.from_mapping(task.options)

    def deadline(self, run: Running[NativeOptions]) -> float:
        opts = run.options
        if run.phase is Phase.LOADING:
            return run.phase_since + self.start_timeout_s
        if run.phase is Phase.ENGINE:
            return run.phase_since + opts.engine_timeout_s + max(2.0, 0.2 * opts.engine_timeout_s)
        if opts.oracle == "engine" and run.phase is Phase.CANDIDATE:  # an emulated replay, then maybe a native run
            return run.phase_since + (REPLAY_FACTOR + 1) * opts.exec_timeout_s + max(2.0, opts.exec_timeout_s)
        return run.phase_since + opts.exec_timeout_s + max(1.0, opts.exec_timeout_s)

    def killed(self, run: Running[NativeOptions]) -> Outcome:
        wall = time.monotonic() - run.started
        stats = {"child_restarts": 1, "killed_by_parent": 1}
        overran = f"execution overran {run.options.exec_timeout_s:g} s (killed by the worker)"
        if run.phase is Phase.INPUT:
            return Outcome(ExitKind.HANG, wall_s=wall, execs=run.execs, stats=stats, error=overran)
        if run.phase is Phase.CANDIDATE:
            lost = Candidate(run.data, {}, ExitKind.HANG, run.bound, overran)
            return Outcome(ExitKind.OK, candidates=(*run.candidates, lost), wall_s=wall,
                           execs=run.execs, stats=stats)
        return Outcome(ExitKind.ERROR, candidates=tuple(run.candidates), wall_s=wall, execs=run.execs,
                       stats=stats,
                       error=f"native {run.phase.value} phase overran its time-out; process group killed")

    def died(self, run: Running[NativeOptions], how: str, child: ChildProcess) -> Outcome:
        oom = any(sign in child.stderr_tail() for sign in _OOM_SIGNS)
        wall = time.monotonic() - run.started
        stats = {"child_restarts": 1, "oom": int(oom)}
        if not oom:
            return Outcome(ExitKind.ERROR, candidates=tuple(run.candidates), wall_s=wall, execs=run.execs,
                           stats=stats, error=f"native child process {how} in its {run.phase.value} phase")
        detail = (f"{OOM_MARK}: the native engine child exceeded mem_limit_mb="
                  f"{run.options.mem_limit_mb} ({run.phase.value} phase, {how})")
        if run.phase is Phase.CANDIDATE:
            lost = Candidate(run.data, {}, ExitKind.CRASH, run.bound, detail)
            return Outcome(ExitKind.OK, candidates=(*run.candidates, lost), wall_s=wall,
                           execs=run.execs, stats=stats)
        return Outcome(ExitKind.CRASH, candidates=tuple(run.candidates), wall_s=wall,
                       execs=run.execs, stats=stats, error=detail)


class NativeExecutor(ChildExecutor[NativeOptions]):
    """Executor for native targets; see the module docstring."""

    def __init__(self, *, python: str | None = None, start_timeout_s: float = 60.0) -> None:
        super().__init__(NativeAdapter(start_timeout_s=start_timeout_s), python=python)


def executor() -> NativeExecutor:
    return NativeExecutor()
