"""Reporting: fuzzer_stats, plot_data, the live view's snapshot and the final summary, from frozen snapshots.

Statistics are kept in one place (`stats.Stats`, the collaborators' counters) and shown here;
what is shown is read from `Stats.snapshot()` (a frozen `StatsSnapshot`) where it is the
statistics' own figures.
"""

from __future__ import annotations

import os
import resource
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from symfence.coordinator import carryover, failpoints
from symfence.coordinator.afl import plot_header
from symfence.coordinator.config import PYTHON_EXECUTORS
from symfence.coordinator.engine_report import PLOT_COLUMNS as ENGINE_PLOT_COLUMNS
from symfence.coordinator.outputs import UNCONFIRMED
from symfence.coordinator.stats import StatsSnapshot, render_stats, write_atomic
from symfence.coordinator.status_line import Snapshot, TargetLine
from symfence.protocol.coverage import MAP_SIZE

if TYPE_CHECKING:
    from symfence.coordinator.afl import AflState
    from symfence.coordinator.aflsync import AflSide
    from symfence.coordinator.config import Config
    from symfence.coordinator.confirm import Confirmations
    from symfence.coordinator.depth import DepthController
    from symfence.coordinator.hotpath import HotPath
    from symfence.coordinator.hybrid import HybridPlan
    from symfence.coordinator.inflight import InFlight
    from symfence.coordinator.members import Members
    from symfence.coordinator.outputs import OutputDir
    from symfence.coordinator.peers import Peers
    from symfence.coordinator.pump import Pump
    from symfence.coordinator.refusals import Judged, Refusals
    from symfence.coordinator.scheduler import Scheduler
    from symfence.coordinator.stats import Stats
    from symfence.coordinator.status_line import StatusLine
    from symfence.coordinator.targets import TargetTracker
    from symfence.protocol.coverage import CoverageMap
    from symfence.protocol.ids import Rank


class ReportMixin:
    """The coordinator's outputs for people and tools (reads everything, changes only `stats.edges`)."""

    # What it uses of the campaign, declared: bare annotations and TYPE_CHECKING-only stubs shadow nothing.
    cfg: Config
    clock: Callable[[], float]
    out: OutputDir
    status: StatusLine
    pump: Pump | None
    afl_sync: AflSide | None
    stop_reason: str | None
    seed_count: int
    imported_count: int
    workers: list[Rank]
    members: Members
    inflight: InFlight
    peers: Peers
    scheduler: Scheduler
    plan: HybridPlan
    claims: Confirmations
    coverage: CoverageMap
    stats: Stats
    targets: TargetTracker
    afl: AflState
    hotpath: HotPath
    refusals: Refusals
    options: dict[str, Any]
    executor: str
    depth: int | str
    auto_depth: DepthController | None
    worker_rss_mb: dict[Rank, int]
    control_banned: int
    tmouts: int
    solver_queries: int
    solver_timeouts: int
    _t0: float

    if TYPE_CHECKING:
        def _refused(self) -> list[Judged]: ...

    def _counters(self) -> dict[str, int]:
        st = self.stats
        out = carryover.saved_counters(st)
        out.update(self.afl.counters(st.execs, st.crashes_total, self.tmouts, time.time()))
        out.update(self.targets.counters())
        out.update(self.plan.counters())
        if self.afl_sync is not None:
            out.update(self.afl_sync.counters())  # its sessions and queue directories
        return out

    def _stats_snapshot(self) -> StatsSnapshot:
        """The one frozen snapshot a report reads (the live view and fuzzer_stats of one tick share it)."""
        self.stats.edges = MAP_SIZE - self.coverage.seen.count(0)
        return self.stats.snapshot()

    def _snapshot(self, st: StatsSnapshot | None = None) -> Snapshot:
        """The live view's line, from `st` (taken now if not given)."""
        st = self._stats_snapshot() if st is None else st
        elapsed = max(self.clock() - self._t0, 1e-9)
        now = time.time()

        def since(unix: float) -> float | None:
            return now - unix if unix else None

        targets = tuple(TargetLine(name, p.corpus, p.edges, p.crashes, p.hangs, p.execs, p.errors,
                                   since(p.last_find)) for name, p in self.targets.by_target.items())
        reasons = tuple((k, v) for k, v in st.quarantined.items() if v)
        return Snapshot(
            elapsed, st.execs / elapsed, (st.committed - st.carried_committed) / elapsed, st.edges, st.corpus,
            len(self.scheduler),
            st.crashes, st.hangs, len(self.inflight), st.quarantined_total, len(self.members.alive),
            ooms=st.ooms, task_errors=st.task_errors, since_path_s=since(self.afl.last_find),
            since_crash_s=since(self.afl.last_crash), since_hang_s=since(self.afl.last_hang),
            solver_s=st.solver_s, solver_queries=self.solver_queries, solver_timeouts=self.solver_timeouts,
            map_density=100.0 * st.edges / MAP_SIZE,
            memory_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss >> 10,
            workers_memory_mb=sum(self.worker_rss_mb.get(r, 0) for r in self.members.alive), targets=targets,
            quarantine_reasons=reasons,
            conservation_ok=all(ok for _, ok in st.conservation(len(self.inflight))),
            show_quarantine=self.status.show_quarantine, stages=self.plan.status_text(),
            refused=self.refusals.live_text())

    def _write_stats(self, st: StatsSnapshot | None = None) -> None:
        """fuzzer_stats (AFL++'s keys first, then symfence's) and one plot_data row, from `st`
        (taken now if not given)."""
        failpoints.hit("stats", self.out.root / "fuzzer_stats")
        st = self._stats_snapshot() if st is None else st
        now = time.time()
        pending, in_flight = len(self.scheduler), len(self.inflight)
        cycles_done = 1 if self.stop_reason == "work exhausted" else 0  # every queued input ran once
        last_min = self.afl.sample(now, self.afl.prev_execs + st.execs)
        afl_rows = self.afl.stats_items(
            now=now, execs=st.execs, execs_last_min=last_min, corpus=st.corpus, seeds=self.seed_count,
            imported=self.imported_count,
            pending=pending, pending_favs=0, edges=st.edges, saved_crashes=st.crashes, saved_hangs=st.hangs,
            cycles_done=cycles_done, exec_timeout_ms=self._exec_timeout_ms(),
            banner=self.cfg["campaign.name"],
            command_line=" ".join([sys.executable, *sys.argv]), total_tmout=self.tmouts)
        assert self.pump is not None  # made by `Campaign.run` before any report
        own = st.items(now=now, in_flight=in_flight, pending=pending, ranks=self.workers, extra={
            "dispatch_depth": self.depth, "workers_alive": len(self.members.alive),
            "mpi_frames_in": self.pump.frames_in, "mpi_frames_out": self.pump.frames_out,
            "mpi_bytes_in": self.pump.bytes_in, "mpi_dropped_to_failed": self.pump.dropped_to_dead,
            **self._hostile_stats(), **self.inflight.stats_items(),
            **(self.auto_depth.stat_items(self.workers) if self.auto_depth is not None else {}),
            **self.plan.stat_items(), **self.hotpath.items(st.committed)})
        taken = {k for k, _ in afl_rows} | {"total_crashes"}
        rows = [*afl_rows, ("total_crashes", self.afl.prev_total_crashes + st.crashes_total),
                *(r for r in own if r[0] not in taken)]
        write_atomic(self.out.root / "fuzzer_stats", render_stats(rows))
        elapsed = max(now - st.started_wall, 1e-9)
        values = self.afl.plot_values(now=now, execs=st.execs, eps=st.execs / elapsed,
                                      cycles_done=cycles_done,
                                      corpus=st.corpus, pending=pending, pending_favs=0, edges=st.edges,
                                      saved_crashes=st.crashes, saved_hangs=st.hangs)
        values += [st.committed, st.quarantined_total, in_flight, st.task_errors, st.ooms,
                   f"{(st.committed - st.carried_committed) / elapsed:.2f}"]
        values += self.plan.plot_values() + list(st.engine_plot)
        self._append_plot(plot_header((*self.plan.plot_columns(), *ENGINE_PLOT_COLUMNS)),
                          ", ".join(str(v) for v in values) + "\n")
        self.targets.append_plot(self.out.root, self.afl.run_time_ms(now) / 1000)

    def _append_plot(self, header: str, row: str) -> None:
        """plot_data continues across --resume; a file with other columns is kept aside."""
        plot = self.out.root / "plot_data"
        if plot.exists():
            with plot.open() as fh:
                first = fh.readline()
            if first != header:
                os.replace(plot, plot.with_name(f"plot_data.{int(time.time())}.old"))
        if not plot.exists():
            plot.write_text(header)
        with plot.open("a") as fh:
            fh.write(row)

    def _exec_timeout_ms(self) -> int:
        if self.executor not in PYTHON_EXECUTORS:
            return 0
        from symfence.protocol.options import EngineOptions

        return int(EngineOptions.from_mapping(self.options).exec_timeout_s * 1000)

    def _hostile_stats(self) -> dict[str, int]:
        """Issue 10's counters: oversized and side-channel frames, bans, suspensions, claims."""
        assert self.pump is not None  # made by `Campaign.run` before any report
        return {"mpi_oversized_frames": self.pump.oversized_frames,
                "mpi_oversized_bytes": self.pump.oversized_bytes,
                "mpi_side_frames_dropped": self.pump.side_frames_dropped,
                "control_banned": self.control_banned,
                **self.peers.stats_items(), **self.claims.stats_items(), **self.refusals.stats_items(),
                "coordinator_max_rss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}

    def summary(self) -> str:
        st = self.stats.snapshot()
        lines = [
            f"campaign finished: {self.stop_reason}",
            f"  committed {st.committed}, quarantined {st.quarantined_total}, corpus {st.corpus},"
            f" edges {st.edges}, unique crashes {st.crashes}"
            + (f" ({st.ooms} out of memory)" if st.ooms else "") + f", hangs {st.hangs}, execs {st.execs},"
            f" task errors {st.task_errors}",
        ]
        if st.task_errors:
            every = "EVERY task errored" if st.all_tasks_errored() \
                else f"{st.task_errors} of {st.committed} tasks errored"
            lines.append(f"  {every}; first error: {st.first_error}"
                         f"  (all: symfence logs {self.out.root} --event task.error)")
        lines += [
            "  quarantine counters:",
            *("    " + line for line in st.quarantine_text.splitlines()),
            "  conservation (docs/design.md, \"Conservation\"):",
        ]
        for text, ok in st.conservation(len(self.inflight)):
            lines.append(f"    [{'ok' if ok else 'VIOLATED'}] {text}")
        lines += self.refusals.summary_lines(self._refused(), str(self.out.root))
        lines.append(f"  outputs: {self.out.root}/"
                     " (queue/, crashes/, hangs/, fuzzer_stats, plot_data, logs/)")
        if st.crashes:
            lines.append(f"  crashing inputs: {self.out.crashes}/")
        if self.claims.unconfirmed:
            lines.append(f"  {self.claims.unconfirmed} crash/hang claims did not happen again on a re-run (a bug"
                         f" that needs earlier inputs' state, or a flaky target): {self.out.root / UNCONFIRMED}/")
        return "\n".join(lines)
