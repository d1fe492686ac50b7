"""The TritonDSE engine: emulate a dynamic x86-64 glibc ELF on one input, negate each branch
after the generational bound, and solve (Bitwuzla by default) for candidate inputs.

The target reads its input from stdin (TritonDSE's raw seed). Guards turn TritonDSE's silent
failure modes into errors: a static binary (a false crash at start-up), a C++ runtime or any
imported function TritonDSE does not model (the emulation would just stop).

The emulation's time is not the program's: emulating a real parser (libyaml) on four bytes took
1-3 s where the program runs in a millisecond. So `exec_timeout_s` is never an emulation's limit
and an emulation that runs long is no hang: the exploring run may emulate for half of
`engine_timeout_s` (the rest is left to solving), a replay (the `engine` oracle's coverage of a
candidate) for `REPLAY_FACTOR` times `exec_timeout_s`. A run cut there keeps the branches and
edges emulated so far, and its verdict (ran fine, crashed or hung past `exec_timeout_s`) comes
from running the binary natively on the input (`plain.run_plain`); `emulation_cut` counts them.

Negating branches never changes an input's length, so a campaign from a few short seeds ran out
of work (lz4's frame decoder at 8 s of a 60 s budget): when the emulated program read its whole
input, one more candidate is the input followed by as many zero bytes again (at least
`GROW_MIN`, up to `GROW_MAX` bytes in all), whose new bytes the next task's branches reach.
"""

from __future__ import annotations

import logging
import math
import os
import signal
import time
from pathlib import Path
from typing import Any, Callable

from symfence.worker.native.base import EngineRun, GeneratedInput, NativeError, NativeOptions, RunKind, RunResult, fold
from symfence.worker.native.elfcheck import check_tritondse_elf, quiet_lief
from symfence.worker.native.libc_models import MODELS
from symfence.protocol.options import REPLAY_FACTOR
from symfence.worker.concolic.replay import Verdict
from symfence.worker.native.plain import run_plain

GROW_MIN = 8  # zero bytes a grown candidate adds at least
GROW_MAX = 4096  # no candidate is grown past this length

# Imports TritonDSE need not model: weak hooks glibc's start-up code looks up and may never call.
_HARMLESS_IMPORTS = frozenset({"__cxa_finalize", "__gmon_start__", "_ITM_deregisterTMCloneTable",
                               "_ITM_registerTMCloneTable", "_Jv_RegisterClasses"})


_PAGE = os.sysconf("SC_PAGE_SIZE")
_EXECUTOR_LOG = logging.getLogger("tritondse.executor")


class _StoppedAt(logging.Handler):
    """Catches TritonDSE's one sign that it stopped at an instruction it cannot emulate: an error
    it logs (its run then ends as if the program had, with whatever exit code was left)."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.instructions: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if message.startswith("Instruction not supported: "):
            self.instructions.append(message.split(": ", 1)[1])


def _resident_pages() -> int:
    with open("/proc/self/statm", "rb") as fh:
        return int(fh.read().split()[1])


def _read_all(se: Any, size: int) -> bool:
    """Whether the emulated program read all of its `size`-byte input (stdin at its end)."""
    fds = getattr(se.pstate, "_fd_table", {})
    return any(d.is_input_fd() and d.offset >= size for d in fds.values())


def edge_index(src: int, dst: int) -> int:
    """AFL-style edge index of a branch (src -> dst) seen by the emulator."""
    return fold(((src >> 1) ^ (dst * 0x9E3779B1)) & 0xFFFFFFFF ^ (dst >> 16))


class TritonDseEngine:
    """One target binary; each ``explore`` is a fresh emulated process of the same loaded program."""

    def __init__(self, target: str, options: NativeOptions):
        try:
            import tritondse  # noqa: F401 - an optional extra
        except ImportError as exc:
            raise NativeError(f"the tritondse engine needs the optional extra: pip install "
                              f"'symfence[native]' ({exc})") from None
        import lief  # tritondse's own dependency, loaded by it already

        from tritondse import CoverageStrategy, Config, Program, SmtSolver
        quiet_lief(lief)
        logging.getLogger("tritondse").setLevel(logging.ERROR)
        path = Path(target)
        if not path.is_file():
            raise NativeError(f"target binary {target} does not exist")
        check_tritondse_elf(path)
        self.target = target
        self.options = options
        self.program = Program(str(path))

        def config(emulation_s: float) -> Any:  # TritonDSE counts whole seconds
            return Config(coverage_strategy=CoverageStrategy.EDGE,
                          smt_solver=SmtSolver.BITWUZLA if options.solver == "bitwuzla" else SmtSolver.Z3,
                          smt_timeout=options.solver_timeout_ms, execution_timeout=max(1, math.ceil(emulation_s)),
                          skip_unsupported_import=False)
        self.explore_config = config(options.engine_timeout_s / 2)
        self.replay_config = config(REPLAY_FACTOR * options.exec_timeout_s)
        self.emulation_cut = 0  # runs cut at their emulation limit since the last `take_stats`

    # -- one emulated execution ---------------------------------------------------------------

    def _execute(self, data: bytes, config: Any) -> tuple[Any, RunResult]:
        from tritondse import Seed, SeedStatus, SymbolicExecutor
        from tritondse.exception import AbortExecutionException

        se = SymbolicExecutor(config, Seed(data))
        se.load(self.program)
        unmodelled: list[str] = []

        def unsupported(executor: Any, pstate: Any) -> None:
            name, _ = executor.rtn_table[pstate.cpu.program_counter]
            unmodelled.append(name)
            raise AbortExecutionException(f"{name} is not modelled")

        def aborted(executor: Any, pstate: Any) -> None:
            name, _ = executor.rtn_table[pstate.cpu.program_counter]
            executor.seed.status = SeedStatus.CRASH
            aborts.append(name)
            try:  # report the caller (the return address), not the PLT stub
                callers.append(pstate.memory.read_ptr(pstate.cpu.stack_pointer))
            except Exception:  # noqa: BLE001
                pass
            pstate.stop = True

        aborts: list[str] = []
        callers: list[int] = []
        for addr, (name, fn) in list(se.rtn_table.items()):
            if name in ("abort", "__assert_fail"):
                se.rtn_table[addr] = (name, aborted)
            elif name in MODELS:  # strtol and kin (worker/native/libc_models.py)
                se.rtn_table[addr] = (name, MODELS[name])
            elif getattr(fn, "__name__", "") == "default_stub" and name not in _HARMLESS_IMPORTS:
                se.rtn_table[addr] = (name, unsupported)
        # AFL-style edges of every control transfer (concrete branches too, not only symbolic ones).
        edges: dict[tuple[int, int], int] = {}

        limit_pages = (self.options.mem_limit_mb << 20) // _PAGE if self.options.mem_limit_mb else 0
        steps = [0]
        over: list[int] = []

        def on_instruction(executor: Any, pstate: Any, instruction: Any) -> None:
            if instruction.isControlFlow():
                key = (instruction.getAddress(), pstate.cpu.program_counter)
                edges[key] = edges.get(key, 0) + 1
            steps[0] += 1
            if limit_pages and not steps[0] & 0xFFF and _resident_pages() > limit_pages:
                over.append(_resident_pages() * _PAGE >> 20)
                raise AbortExecutionException("over the memory limit")  # ends the emulation

        se.callback_manager.register_post_instruction_callback(on_instruction)
        started = time.monotonic()
        stopped = _StoppedAt()  # an instruction Triton has no semantics for ends the run, silently
        _EXECUTOR_LOG.addHandler(stopped)
        try:
            se.run()
        finally:
            _EXECUTOR_LOG.removeHandler(stopped)
        if stopped.instructions:
            raise NativeError(f"TritonDSE cannot emulate `{stopped.instructions[0]}` in {Path(self.target).name} "
                              "(Triton has no semantics for it: floating point and some SIMD); the emulation "
                              "would stop there silently (use the symcc engine)")
        if over:
            raise MemoryError(f"the emulation of {Path(self.target).name} reached {over[0]} MB resident, "
                              f"over mem_limit_mb={self.options.mem_limit_mb}")
        if not_followed := se.__dict__.get("_symfence_not_modelled"):  # a model's call it cannot follow
            raise NativeError(f"{Path(self.target).name}: the engine does not model {not_followed[0]} "
                              "(worker/native/libc_models.py); use the symcc engine for this program")
        if unmodelled:
            raise NativeError(f"TritonDSE does not model {unmodelled[0]}() imported by {self.target}; "
                              "the emulation would stop there silently (use the symcc engine, or "
                              "a build that avoids it)")
        trace = {}
        for (src, dst), count in edges.items():
            idx = edge_index(src, dst)
            trace[idx] = trace.get(idx, 0) + count
        status = se.seed.status
        pc = callers[0] if callers else se.current_pc  # a PIE is loaded at 0: offsets in the image
        where = f'File "{Path(self.target).name}", pc {pc:#x}'
        if status is SeedStatus.CRASH:
            if aborts:
                detail = f"{where}\nSIGABRT: {aborts[0]}() called"
                result = RunResult(RunKind.CRASH, trace, signal=6, detail=detail)
            else:
                detail = f"{where}\nSIGSEGV: memory access violation in emulation"
                result = RunResult(RunKind.CRASH, trace, signal=11, detail=detail)
        elif status is SeedStatus.HANG:  # the emulation's limit, not the program's: ask the program
            self.emulation_cut += 1
            result = self._native_verdict(data, trace, config.execution_timeout)
        elif status is SeedStatus.FAIL:
            raise NativeError(f"TritonDSE failed to emulate {self.target} at pc {pc:#x} "
                              f"(after {time.monotonic() - started:.2f} s)")
        else:
            result = RunResult(RunKind.OK, trace, exit_code=se.exitcode)
        return se, result

    def _native_verdict(self, data: bytes, trace: dict[int, int], emulated_s: int) -> RunResult:
        """An emulation cut at its limit: the edges it saw, and what the program does natively
        on the input within `exec_timeout_s`."""
        plain = run_plain(self.target, data, timeout_s=self.options.exec_timeout_s,
                          mem_limit_mb=self.options.target_mem_limit_mb)
        if plain.verdict is Verdict.HUNG:
            return RunResult(RunKind.HANG, trace, detail=f"{plain.detail} (native run; the emulation was cut "
                                                         f"at {emulated_s} s)")
        if plain.verdict is Verdict.CRASHED:
            name = plain.detail.rstrip().rsplit("killed by ", 1)[-1]
            number = getattr(signal, name, 0) if name.startswith("SIG") else 0
            return RunResult(RunKind.CRASH, trace, signal=int(number), detail=plain.detail)
        if plain.verdict is Verdict.UNKNOWN:
            raise NativeError(f"the emulation of {Path(self.target).name} was cut at {emulated_s} s and the "
                              f"native run to judge it failed: {plain.detail}")
        return RunResult(RunKind.OK, trace)

    # -- Engine -------------------------------------------------------------------------------

    def replay(self, data: bytes) -> RunResult:
        """The engine's own trace of one concrete (emulated) execution: the 'engine' oracle."""
        return self._execute(data, self.replay_config)[1]

    def take_stats(self) -> dict[str, int]:
        """Counters of the runs since the last call (the runner adds them to the task's stats)."""
        cut, self.emulation_cut = self.emulation_cut, 0
        return {"emulation_cut": cut}

    def explore(self, data: bytes, bound: int, *,
                skip_site: Callable[[int, int], bool] | None = None) -> EngineRun:
        """Run once, then negate each branch from index ``bound`` on (each branch site once);
        ``skip_site(src, dst)`` may veto a site (SymCC's coverage-map pruning)."""
        from tritondse import SolverStatus

        deadline = time.monotonic() + self.options.engine_timeout_s  # emulation and solving
        se, own = self._execute(data, self.explore_config)
        pstate = se.pstate
        actx = pstate.actx
        prefix: list[Any] = [actx.equal(actx.bvtrue(), actx.bvtrue())]  # land needs two children
        candidates: list[GeneratedInput] = []
        seen_data = {data}
        seen_sites: set[tuple[int, int]] = set()
        solver_s = 0.0
        stats = {"branches": 0, "queries": 0, "sat": 0, "unsat": 0, "solver_timeout": 0,
                 "branch_cap_hits": 0}
        index = 0
        for pc in pstate.get_path_constraints():
            if not pc.isMultipleBranches():
                prefix.append(pc.getTakenPredicate())  # routine models, concretisations
                continue
            stats["branches"] += 1
            if index >= self.options.max_branches:
                stats["branch_cap_hits"] += 1
                break
            if index >= bound and len(candidates) < self.options.max_candidates \
                    and time.monotonic() < deadline:
                for branch in pc.getBranchConstraints():
                    site = (branch["srcAddr"], branch["dstAddr"])
                    if branch["isTaken"] or site in seen_sites or (skip_site and skip_site(*site)):
                        continue
                    seen_sites.add(site)
                    t0 = time.monotonic()
                    status, model = pstate.solve(actx.land(prefix + [branch["constraint"]]), with_pp=False)
                    solver_s += time.monotonic() - t0
                    stats["queries"] += 1
                    if status == SolverStatus.SAT:
                        stats["sat"] += 1
                        new = bytes(se.mk_new_seed_from_model(model).content)
                        if new not in seen_data:
                            seen_data.add(new)
                            candidates.append(GeneratedInput(new, index + 1))
                    elif status == SolverStatus.UNSAT:
                        stats["unsat"] += 1
                    else:
                        stats["solver_timeout"] += 1
            prefix.append(pc.getTakenPredicate())
            index += 1
        if len(data) < GROW_MAX and len(candidates) < self.options.max_candidates and _read_all(se, len(data)):
            grown = data + bytes(min(max(len(data), GROW_MIN), GROW_MAX - len(data)))
            if grown not in seen_data:  # its branches up to the old end are the parent's: negate past them
                # (below max_branches: a bound at it is a confirmation's, not explored, runner.py)
                candidates.append(GeneratedInput(grown, min(index, self.options.max_branches - 1)))
                stats["grown"] = 1
        return EngineRun(tuple(candidates), own, solver_s, 1, stats)

    def close(self) -> None:
        pass
