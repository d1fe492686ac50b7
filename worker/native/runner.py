"""The native engine's child side: runs tasks (engine + oracle) as a ``childserve`` handler.

Run as ``python -m symfence.worker.childserve symfence.worker.native.runner ...`` by
``worker.executors.native``. It streams ``Entered`` when an execution or engine run starts
(INPUT, ENGINE, CANDIDATE), ``SubGroup`` while a SymCC run is alive (0 when it ended) and
``Found`` per candidate. The parent enforces the time-outs and kills this process group; this
process enforces its memory limit (``RLIMIT_AS``) and reports ``MemoryError`` as an
out-of-memory finding. Engines and oracles are built once per (target, relevant options).

**The engine's own view.** With an oracle (an afl-cc build), every trace this engine reports
carries its AFL edges twice: at the target's salt, the edges every stage shares (native mutation
slices, AFL++ imports), and again ``ENGINE_VIEW`` further on, indices only the engine's results
ever set. The worker's and rank 0's new-coverage filters keep a candidate that is new in either,
so the generational search keeps every child new to *the engine's own* coverage, as it would
alone, even when a slice reached those edges first (the children on the way to a deep record
are new to the engine only: docs/native-slices.md, "What kept the engine from its finds").
"""

from __future__ import annotations

import resource
import time
import traceback
import zlib
from typing import Any

from symfence.protocol.coverage import MAP_SIZE
from symfence.worker.childserve import Events
from symfence.worker.childwire import RunTask
from symfence.worker.engine_api import CandidateOut, ExitKind, Outcome, Phase
from symfence.worker.native.base import OOM_MARK, NativeError, NativeOptions, RunKind, RunResult


def target_salt(target: str) -> int:
    """Per-target offset into the campaign's one 64 KiB map: afl-cc (PCGUARD) builds number their
    edges 0, 1, 2, ... and two targets would otherwise share every index."""
    return zlib.crc32(target.encode()) & (MAP_SIZE - 1)


def salted(trace: Any, salt: int) -> dict[int, int]:
    return {(index + salt) & (MAP_SIZE - 1): count for index, count in trace.items()}


ENGINE_VIEW = MAP_SIZE // 2  # the engine's own copy of a target's edges: half the map away


def engine_trace(trace: Any, salt: int, *, own_view: bool) -> dict[int, int]:
    """A trace the engine reports: salted for its target and, with ``own_view`` (an afl-cc
    oracle, whose edges other stages share), again in the engine's own view (module docstring)."""
    out = salted(trace, salt)
    if own_view:
        for index, count in salted(trace, salt + ENGINE_VIEW).items():
            out[index] = max(count, out.get(index, 0))
    return out


def with_frames(target: str, data: bytes, opts: NativeOptions, detail: str) -> str:
    """A crash's detail with its frames (sanitizer report or gdb backtrace of the plain build,
    worker/triage/symbolize.py) for its identity; asked only by a confirmation re-run."""
    from symfence.worker.triage.symbolize import native_detail

    frames = native_detail(target, data, opts.input, timeout_s=max(opts.exec_timeout_s, 2.0))
    return f"{detail}\n{frames}" if frames else detail


def with_hang_stack(target: str, data: bytes, opts: NativeOptions, detail: str) -> str:
    """A hang's detail with the stack it hangs in (gdb, sampled past ``exec_timeout_s``;
    worker/triage/symbolize.py) for its identity; asked only by a confirmation re-run."""
    from symfence.worker.triage.symbolize import native_hang_detail

    frames = native_hang_detail(target, data, opts.input, deadline_s=opts.exec_timeout_s)
    return f"{detail}\n{frames}" if frames else detail


def exit_kind(kind: RunKind) -> ExitKind:
    return {RunKind.OK: ExitKind.OK, RunKind.CRASH: ExitKind.CRASH, RunKind.HANG: ExitKind.HANG,
            RunKind.OOM: ExitKind.CRASH}[kind]


class Runner:
    """The child-side handler: engines and oracles kept warm between tasks."""

    def __init__(self, work_dir: str):
        self.engines: dict[tuple, Any] = {}
        self.oracles: dict[tuple, Any] = {}
        self.work_dir = work_dir or None
        self.events: Events | None = None  # of the task in flight (a SymCC run reports its group)
        self.hard_as = resource.getrlimit(resource.RLIMIT_AS)[1]

    # -- components, built once per (target, relevant options) -----------------------------

    def engine(self, target: str, opts: NativeOptions) -> Any:
        key = (opts.engine, target, opts.symcc_command, opts.input, opts.solver, opts.solver_timeout_ms,
               opts.exec_timeout_s, opts.engine_timeout_s, opts.max_candidates, opts.max_branches)
        if key not in self.engines:
            if opts.engine == "tritondse":
                from symfence.worker.native.tritondse_engine import TritonDseEngine
                self.engines[key] = TritonDseEngine(target, opts)
            else:
                from symfence.worker.native.symcc_engine import SymccEngine
                self.engines[key] = SymccEngine(target, opts, work_dir=self.work_dir,
                                                on_spawn=self._spawned)
        return self.engines[key]

    def _spawned(self, pgid: int) -> None:
        if self.events is not None:
            self.events.subgroup(pgid)

    def oracle(self, target: str, opts: NativeOptions) -> Any:
        if opts.oracle == "engine":
            return None
        key = (opts.oracle, opts.afl_path(target), opts.input, opts.exec_timeout_s, opts.target_mem_limit_mb)
        if key not in self.oracles:
            if opts.oracle == "forkserver":
                from symfence.worker.native.forkserver import ForkserverOracle as cls
            else:
                from symfence.worker.native.showmap import ShowmapOracle as cls
            self.oracles[key] = cls(opts.afl_path(target), input_mode=opts.input,
                                    exec_timeout_s=opts.exec_timeout_s,
                                    mem_limit_mb=opts.target_mem_limit_mb, work_dir=self.work_dir)
        return self.oracles[key]

    # -- one task -------------------------------------------------------------------------------

    def run(self, request: RunTask, events: Events) -> Outcome:
        task = request.task
        self.events = events
        try:
            return self.run_task(task.target, task.data, task.bound, dict(task.options), events)
        except NativeError as exc:
            return Outcome(ExitKind.ERROR, error=f"native: {exc}")
        except MemoryError:
            return Outcome(ExitKind.CRASH, error=f"{OOM_MARK}: the engine child exceeded its "
                           "memory limit on this input", stats={"oom": 1})
        except Exception:  # noqa: BLE001 - an engine bug is this task's ERROR, not our death
            return Outcome(ExitKind.ERROR, error=traceback.format_exc()[-4000:])
        finally:
            self.events = None

    def run_task(self, target: str, data: bytes, bound: int, options: dict[str, Any],
                 events: Events) -> Outcome:
        t0, c0 = time.monotonic(), time.process_time()
        opts = NativeOptions.from_mapping(options)
        # mem_limit_mb bounds resident memory (the engine checks it as it emulates and raises
        # MemoryError); the address-space limit is a looser backstop against sudden growth.
        soft = (2 * opts.mem_limit_mb + 1024) << 20 if opts.mem_limit_mb else resource.RLIM_INFINITY
        if self.hard_as != resource.RLIM_INFINITY:
            soft = min(soft, self.hard_as)
        resource.setrlimit(resource.RLIMIT_AS, (soft, self.hard_as))
        engine = self.engine(target, opts)
        oracle = self.oracle(target, opts)
        execs = 0
        salt = target_salt(target)
        own_view = oracle is not None

        def traced(trace: Any) -> dict[int, int]:
            return engine_trace(trace, salt, own_view=own_view)
        own: RunResult | None = None
        if oracle is not None:
            events.entered(Phase.INPUT, data, bound)
            own = oracle.run(data)
            execs += 1
            if own.kind is RunKind.HANG or bound >= opts.max_branches:
                # Not explored, the oracle's execution is the whole task: on a hanging input the
                # engine would run into engine_timeout_s (a SymCC build runs the program itself);
                # from a bound past max_branches (a crash/hang confirmation re-run) it would
                # negate nothing.
                status = exit_kind(own.kind)
                error = own.detail if status is not ExitKind.OK else ""
                if own.kind is RunKind.CRASH and bound >= opts.max_branches:
                    events.entered(Phase.ENGINE, data, bound)  # gdb gets the engine's time-out
                    error = with_frames(target, data, opts, error)  # a confirmation: the crash's identity
                elif own.kind is RunKind.HANG and bound >= opts.max_branches:
                    events.entered(Phase.ENGINE, data, bound)
                    error = with_hang_stack(target, data, opts, error)  # a confirmation: the hang's identity
                return Outcome(status, trace=traced(own.trace), error=error,
                               wall_s=time.monotonic() - t0, cpu_s=time.process_time() - c0, execs=execs,
                               stats={"not_explored": 1})
        events.entered(Phase.ENGINE, data, bound)
        try:
            run = engine.explore(data, bound)
        except MemoryError as exc:
            run, why = None, str(exc) or f"the {opts.engine} engine exceeded mem_limit_mb={opts.mem_limit_mb}"
        if run is None:
            detail = f"{OOM_MARK}: {why}"
            return Outcome(ExitKind.CRASH, trace=traced(own.trace) if own else {}, error=detail,
                           wall_s=time.monotonic() - t0, cpu_s=time.process_time() - c0, execs=execs,
                           stats={"oom": 1})
        execs += run.execs
        if own is None:
            own = run.own
        candidates: list[CandidateOut] = []
        stats_oom = 0
        for gen in run.candidates:
            child_bound = gen.bound if gen.bound is not None else 0
            events.entered(Phase.CANDIDATE, gen.data, child_bound)
            try:
                replay = oracle.run(gen.data) if oracle is not None else engine.replay(gen.data)
            except MemoryError as exc:  # this candidate exhausts the engine: an OOM finding
                replay = RunResult(RunKind.OOM, {}, detail=f"{OOM_MARK}: {exc}")
            execs += 1
            cand = CandidateOut(gen.data, traced(replay.trace), exit_kind(replay.kind), child_bound,
                                replay.detail if replay.kind is not RunKind.OK else "")
            stats_oom = stats_oom + (replay.kind is RunKind.OOM)
            candidates.append(cand)
            events.found(cand)
        assert own is not None
        status = exit_kind(own.kind)
        error = own.detail if status is not ExitKind.OK else ""
        if own.kind is RunKind.CRASH and bound >= opts.max_branches:
            events.entered(Phase.ENGINE, data, bound)
            error = with_frames(target, data, opts, error)
        counted = engine.take_stats() if hasattr(engine, "take_stats") else {}
        return Outcome(status, trace=traced(own.trace), candidates=tuple(candidates),
                       wall_s=time.monotonic() - t0, cpu_s=time.process_time() - c0,
                       solver_s=run.solver_s, execs=execs,
                       error=error,
                       stats={**{k: int(v) for k, v in run.stats.items()}, **counted, "oom": stats_oom})

    def close(self) -> None:
        for part in (*self.engines.values(), *self.oracles.values()):
            try:
                part.close()
            except Exception:  # noqa: BLE001
                pass


def handler(scratch_dir: str) -> Runner:
    return Runner(scratch_dir)
