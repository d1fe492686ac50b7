"""Campaign statistics kept in one place: counters, conservation equations, fuzzer_stats, plot_data.

`Stats` is the mutable record the loop thread counts into; reports never read it directly but a
frozen `StatsSnapshot` of it (`Stats.snapshot()`), which also owns the conservation equations
and the `fuzzer_stats` rows.
"""

from __future__ import annotations

import collections
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Mapping, Sequence

from symfence.coordinator.engine_report import EngineCounters
from symfence.protocol.coverage import MAP_SIZE
from symfence.protocol.reasons import QuarantineCounters, Reason


@dataclass
class Stats:
    started_wall: float = field(default_factory=time.time)
    dispatched: int = 0
    results_received: int = 0
    committed: int = 0
    expired: int = 0  # dispatches revoked at their deadline
    cancelled: int = 0  # dispatches revoked because the campaign stopped
    lost: int = 0  # dispatches revoked because their worker was lost / did not hold them
    voided: int = 0  # dispatches in flight when a previous run was killed (requeued on resume)
    refused: int = 0  # dispatches whose result the shared campaign store refused (stale_lease)
    carried_committed: int = 0  # `committed` carried over from earlier runs (rates count this run)
    quarantine: QuarantineCounters = field(default_factory=QuarantineCounters)
    status_counts: collections.Counter[str] = field(default_factory=collections.Counter)  # ok/crash/...
    triage_rejected: collections.Counter[str] = field(default_factory=collections.Counter)
    execs: int = 0
    solver_s: float = 0.0
    busy_s: dict[int, float] = field(default_factory=dict)  # per rank: sum of task wall time
    budget_busy_s: dict[int, float] = field(default_factory=dict)  # per rank: of it inside the budget
    corpus: int = 0
    crashes: int = 0  # unique (saved) crashes
    crashes_total: int = 0
    ooms: int = 0  # unique crashes that were out-of-memory (MemoryError); included in `crashes`
    hangs: int = 0
    edges: int = 0
    work_failed: int = 0
    control_rejected: int = 0
    journal_fence_rejected: int = 0  # a `current` result whose lease the journal did not hold
    continued: int = 0  # results cut short whose item was handed back to run on (workkinds.continuation)
    continuations_dropped: int = 0  # results cut short whose rest was not run (shared store, cap)
    engine: EngineCounters = field(default_factory=EngineCounters)  # concolic engine counters
    first_error: str = ""  # the first task error's message (shown in the summary)

    @property
    def task_errors(self) -> int:
        """Committed results whose task ended in ERROR (the executor could not run it)."""
        return self.status_counts["error"]

    def all_tasks_errored(self) -> bool:
        return self.committed > 0 and self.task_errors == self.committed

    def record_result(self, rank: int, wall_s: float, execs: int, solver_s: float) -> None:
        self.busy_s[rank] = self.busy_s.get(rank, 0.0) + wall_s
        self.execs += execs
        self.solver_s += solver_s

    def record_in_budget(self, rank: int, start_s: float, end_s: float, budget_s: float) -> None:
        """A committed task ran over ``[start_s, end_s]`` (campaign seconds; end = its commit):
        the part inside ``[0, budget_s]`` counts toward the rank's busy share of the budget."""
        inside = min(end_s, budget_s) - max(start_s, 0.0)
        if inside > 0:
            self.budget_busy_s[rank] = self.budget_busy_s.get(rank, 0.0) + inside

    def quarantined(self, reason: Reason) -> None:
        self.quarantine.add(reason)

    def snapshot(self) -> StatsSnapshot:
        """The statistics now, frozen (mappings read-only, copies of the counters)."""
        q = self.quarantine
        return StatsSnapshot(
            self.started_wall, self.dispatched, self.results_received, self.committed, self.expired,
            self.cancelled, self.lost, self.voided, self.carried_committed, q.total,
            MappingProxyType(q.snapshot()), q.render(), tuple(q.stats_items()),
            MappingProxyType(dict(self.status_counts)), MappingProxyType(dict(self.triage_rejected)),
            self.execs, self.solver_s, MappingProxyType(dict(self.busy_s)), self.corpus, self.crashes,
            self.crashes_total, self.ooms, self.hangs, self.edges, self.work_failed, self.control_rejected,
            self.journal_fence_rejected, tuple(self.engine.items()), tuple(self.engine.plot_values()),
            self.first_error, MappingProxyType(dict(self.budget_busy_s)), self.refused)

    def conservation(self, in_flight: int) -> list[tuple[str, bool]]:
        return self.snapshot().conservation(in_flight)


@dataclass(frozen=True)
class StatsSnapshot:
    """`Stats` at one moment, for reports: nothing here changes, nothing here is shared."""

    started_wall: float
    dispatched: int
    results_received: int
    committed: int
    expired: int
    cancelled: int
    lost: int
    voided: int
    carried_committed: int
    quarantined_total: int
    quarantined: Mapping[str, int]  # per reason
    quarantine_text: str  # QuarantineCounters.render()
    quarantine_rows: tuple[tuple[str, int], ...]  # QuarantineCounters.stats_items()
    status_counts: Mapping[str, int]
    triage_rejected: Mapping[str, int]
    execs: int
    solver_s: float
    busy_s: Mapping[int, float]
    corpus: int
    crashes: int
    crashes_total: int
    ooms: int
    hangs: int
    edges: int
    work_failed: int
    control_rejected: int
    journal_fence_rejected: int
    engine_rows: tuple[tuple[str, object], ...]
    engine_plot: tuple[object, ...]
    first_error: str
    budget_busy_s: Mapping[int, float]  # per rank: committed task time inside the campaign's duration
    refused: int = 0  # dispatches whose result the shared campaign store refused (stale_lease)

    @property
    def task_errors(self) -> int:
        """Committed results whose task ended in ERROR (the executor could not run it)."""
        return self.status_counts.get("error", 0)

    def all_tasks_errored(self) -> bool:
        return self.committed > 0 and self.task_errors == self.committed

    # --- conservation (docs/design.md, "Conservation") ----------------------------------------------

    def conservation(self, in_flight: int) -> list[tuple[str, bool]]:
        q = self.quarantined_total
        revoked = self.expired + self.cancelled + self.lost + self.voided + self.refused
        return [
            (
                f"results_received {self.results_received} = committed {self.committed}"
                f" + quarantined {q}",
                self.results_received == self.committed + q,
            ),
            (
                f"dispatched {self.dispatched} = committed {self.committed} + expired {self.expired}"
                f" + cancelled {self.cancelled} + lost {self.lost}"
                + (f" + voided {self.voided}" if self.voided else "")
                + (f" + refused {self.refused}" if self.refused else "") + f" + in_flight {in_flight}",
                self.dispatched == self.committed + revoked + in_flight,
            ),
        ]

    # --- files ------------------------------------------------------------------------------------

    def items(self, *, now: float, in_flight: int, pending: int, ranks: Sequence[int],
              extra: dict[str, object] | None = None) -> list[tuple[str, object]]:
        elapsed = max(now - self.started_wall, 1e-9)
        rows: list[tuple[str, object]] = [
            ("start_time", int(self.started_wall)),
            ("last_update", int(now)),
            ("run_time", int(elapsed)),
            ("fuzzer_pid", os.getpid()),
            ("execs_done", self.execs),
            ("execs_per_sec", round(self.execs / elapsed, 2)),
            ("corpus_count", self.corpus),
            ("pending_total", pending),
            ("edges_found", self.edges),
            ("bitmap_cvg", f"{100.0 * self.edges / MAP_SIZE:.2f}%"),
            ("saved_crashes", self.crashes),
            ("total_crashes", self.crashes_total),
            ("saved_hangs", self.hangs),
            ("saved_oom", self.ooms),
            ("solver_time_s", round(self.solver_s, 3)),
            ("dispatched", self.dispatched),
            ("results_received", self.results_received),
            ("committed", self.committed),
            ("in_flight", in_flight),
            ("expired", self.expired),
            ("cancelled", self.cancelled),
            ("lost", self.lost),
            ("voided", self.voided),
            ("refused", self.refused),
            ("work_failed", self.work_failed),
            ("results_per_sec", round((self.committed - self.carried_committed) / elapsed, 2)),
        ]
        rows += self.quarantine_rows
        rows += [(f"triage_rejected_{k}", v) for k, v in sorted(self.triage_rejected.items())]
        rows += [(f"status_{k}", v) for k, v in sorted(self.status_counts.items())]
        rows += [("control_rejected", self.control_rejected),
                 ("journal_fence_rejected", self.journal_fence_rejected)]
        for rank in ranks:
            rows.append((f"utilisation_rank_{rank}", round(self.busy_s.get(rank, 0.0) / elapsed, 4)))
            rows.append((f"busy_s_rank_{rank}", round(self.busy_s.get(rank, 0.0), 3)))  # committed wall
            if self.budget_busy_s:  # campaigns with a duration: of that, inside the budget
                rows.append((f"budget_busy_s_rank_{rank}", round(self.budget_busy_s.get(rank, 0.0), 3)))
        rows += self.engine_rows
        rows += list((extra or {}).items())
        return rows


def write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def render_stats(rows: list[tuple[str, object]]) -> str:
    width = max(len(k) for k, _ in rows)
    return "".join(f"{k:<{width}} : {v}\n" for k, v in rows)


def read_stats(path: Path) -> dict[str, str]:
    """Parse an AFL-style `key : value` file (used by `symfence status` and tests)."""
    out: dict[str, str] = {}
    for line in path.read_text().splitlines():
        key, sep, value = line.partition(":")
        if sep:
            out[key.strip()] = value.strip()
    return out
