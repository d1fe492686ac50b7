"""`symfence.testing.fuzz(target, budget_s=..., seed=...)`: a short campaign inside a test, without MPI.

The worker's real executors, driven from the calling process instead of by rank 0: the concolic
engine (``concolic``, with the real tracer as the campaign's yardstick) explores from the seed
inputs, new coverage is kept in an AFL map (``protocol.coverage``), and the first crash or hang
ends the run. That input is re-run plainly in a fresh interpreter (its traceback and crash
identity), minimized by the campaign's own minimization task (``minimize``: the smallest input
with the same identity), and ``fuzz`` raises ``FuzzFailure`` (an ``AssertionError``, so pytest
reports it as a failed test) naming the minimized input and its traceback.

Deterministic: the engine has no randomness of its own; which pending input runs next is drawn
from ``random.Random(seed)``, so one seed gives one order of executions (``FuzzReport.executed``)
and, with solver queries that finish within their limit, one result. ``budget_s`` bounds the
search (the engine's child start-up included), not the minimization (``minimize_s``).
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from symfence.protocol.coverage import CoverageMap
from symfence.protocol.crashid import identity_from_detail
from symfence.protocol.ids import sha256_hex

_TOKEN = "0" * 64  # no coordinator: one task at a time, nothing to fence
_POLL_S = 0.05


class FuzzFailure(AssertionError):
    """The target crashed or hung; the message names the minimized input and its traceback."""

    def __init__(self, report: FuzzReport) -> None:
        super().__init__(report.describe())
        self.report = report


@dataclass(frozen=True)
class Finding:
    kind: str  # "crash" or "hang"
    data: bytes  # the input the search found
    minimized: bytes  # the smallest input with the same identity
    identity: str  # crash identity (type + top 3 frames) or "hang"
    traceback: str  # the plain run of the minimized input (a hang: why it counts as one)


@dataclass
class FuzzReport:
    target: str
    seed: int
    executed: list[str] = field(default_factory=list)  # sha256 of each task's input, in order
    execs: int = 0
    corpus: int = 0
    edges: int = 0
    elapsed_s: float = 0.0
    finding: Finding | None = None

    def describe(self) -> str:
        f = self.finding
        if f is None:
            return f"{self.target}: no crash or hang in {self.elapsed_s:.1f} s ({len(self.executed)} tasks)"
        what = "crashes" if f.kind == "crash" else "hangs"
        return (f"{self.target} {what} ({f.identity}), found after {len(self.executed)} tasks"
                f" (seed {self.seed})\n"
                f"minimized input ({len(f.minimized)} bytes, from {len(f.data)}): {f.minimized!r}\n"
                f"{f.traceback.rstrip()}")


def target_spec(target: str | Callable[[bytes], Any]) -> str:
    """``module:function`` for a spec or a module-level function (the executors import it by name)."""
    if isinstance(target, str):
        return target
    module, name = getattr(target, "__module__", None), getattr(target, "__qualname__", "")
    if not module or module == "__main__" or not name.isidentifier():
        raise ValueError(f"{target!r} is not a module-level function of an importable module:"
                         " pass 'module:function'")
    return f"{module}:{name}"


def fuzz(target: str | Callable[[bytes], Any], *, budget_s: float = 10.0, seed: int = 0,
         seeds: Iterable[bytes] = (b"\0",), exec_timeout_s: float = 1.0, minimize_s: float = 20.0,
         raise_on_finding: bool = True, options: dict[str, Any] | None = None) -> FuzzReport:
    """Fuzz ``target`` for up to ``budget_s``; see the module docstring. Raises FuzzFailure on a
    crash or hang (``raise_on_finding``), else returns the report."""
    from symfence.worker.executors import make_executor
    from symfence.worker.engine_api import ExitKind, Task

    spec = target_spec(target)
    opts = {"exec_timeout_s": float(exec_timeout_s), "solver_timeout_ms": 1000, "cov_include": "",
            **(options or {})}
    report = FuzzReport(spec, seed)
    rng = random.Random(seed)
    coverage = CoverageMap()
    pending: list[tuple[int, bytes]] = []
    seen: set[str] = set()
    for data in seeds:
        if sha256_hex(data) not in seen:
            seen.add(sha256_hex(data))
            pending.append((0, bytes(data)))
    start = time.monotonic()
    deadline = start + budget_s
    found: tuple[str, bytes] | None = None
    executor = make_executor("concolic")
    try:
        while pending and found is None and time.monotonic() < deadline:
            bound, data = pending.pop(rng.randrange(len(pending)))
            sha = sha256_hex(data)
            report.executed.append(sha)
            executor.start(Task(_TOKEN, sha, data, spec, bound, opts))
            outcome = None
            while outcome is None and time.monotonic() < deadline:
                outcome = executor.wait(min(_POLL_S, max(0.0, deadline - time.monotonic())))
            if outcome is None:  # out of budget mid-task
                executor.abort()
                break
            report.execs += outcome.execs
            if outcome.status is ExitKind.ERROR:
                last = (outcome.error.strip().splitlines() or ["?"])[-1]
                raise RuntimeError(f"symfence.testing.fuzz: {spec}: {last}")
            if outcome.status in (ExitKind.CRASH, ExitKind.HANG):
                found = (outcome.status.value, data)
                break
            coverage.merge(outcome.trace)
            for c in outcome.candidates:
                if c.kind in (ExitKind.CRASH, ExitKind.HANG):
                    found = found or (c.kind.value, c.data)
                    continue
                h = sha256_hex(c.data)
                if h not in seen and coverage.has_new_bits(c.trace):
                    coverage.merge(c.trace)
                    seen.add(h)
                    pending.append((c.bound, c.data))
    finally:
        executor.close()
    report.corpus, report.edges = len(seen), len(coverage.edges_found())
    report.elapsed_s = time.monotonic() - start
    if found is not None:
        report.finding = _triage(spec, found[0], found[1], opts, minimize_s)
        if raise_on_finding:
            raise FuzzFailure(report)
    return report


def _triage(spec: str, kind: str, data: bytes, opts: dict[str, Any], minimize_s: float) -> Finding:
    """The plain run's identity, the campaign's minimization task, the minimized input's traceback."""
    from symfence.worker.concolic.replay import Verdict, replay_plain
    from symfence.worker.executors import make_executor
    from symfence.worker.engine_api import ExitKind, Task

    timeout = float(opts["exec_timeout_s"])
    first = replay_plain(spec, data, timeout)
    if first.verdict is Verdict.CRASHED:
        kind, identity = "crash", identity_from_detail(first.detail, spec).key
    elif first.verdict is Verdict.HUNG:
        kind, identity = "hang", "hang"
    else:  # the engine saw it, the plain target does not: report what was found, unminimized
        return Finding(kind, data, data, kind, f"(not reproduced by a plain run: {first.verdict.value})")
    minimizer = make_executor("minimize")
    minimized = data
    try:
        task_opts = {**opts, "minimize_executor": "concolic", "minimize_kind": kind,
                     "minimize_identity": identity, "minimize_budget_s": float(minimize_s)}
        minimizer.start(Task(_TOKEN, sha256_hex(data), data, spec, 0, task_opts))
        outcome = None
        while outcome is None:
            outcome = minimizer.wait(_POLL_S)
        if outcome.status is not ExitKind.ERROR and outcome.candidates:
            minimized = outcome.candidates[0].data
    finally:
        minimizer.close()
    last = replay_plain(spec, minimized, timeout)
    text = last.detail if last.verdict is Verdict.CRASHED else first.detail
    return Finding(kind, data, minimized, identity, text)
