"""The coordinator (rank 0): its state, its lifecycle, and the pipeline every result walks.

Where to look (docs/design.md, "The coordinator", has the picture):

    pump thread -> intake.py  `_on_batch` -> `_turn` (fair turns, peers.py)
                -> THE FENCE  intake.py `_on_result`: `protocol.fence.classify`, first of all;
                              anything but `current` is quarantined there (`_quarantine`)
                -> THE COMMIT commit.py `_commit`: ends the dispatch, believes its cost, and
                              hands it to its kind's handler (workkinds.py); a corpus entry's
                              or fuzz slice's result is judged by the pure `verdict.triage()`
                              and applied by `_commit_entries` (map, claims, corpus, journal)
                -> penalties  for the sender, after the commit (intake.py)
                -> durable    durability.py `_flush` -> writer thread -> `_durable` -> `_announce`

Beside it: dispatch.py (free slots, tokens, WORK, revocations, deadlines), membership.py (hello,
heartbeats, lost, failed and banned ranks), confirm.py (crash/hang claims and their re-runs),
seeding.py (seeds, `--resume`, AFL++ imports), report.py (fuzzer_stats, plot_data, live view,
summary). `Campaign` below holds the state they share and runs the lifecycle (start, ticker,
shutdown); the steps are its mixins, one module each.

All state lives on the event loop thread; the MPI pump thread only moves bytes, and the journal
writer thread (writer.py) only writes batches the loop prepared, then queue/ files.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Callable
from typing import Any

import structlog

from symfence.coordinator import interrupt
from symfence.coordinator import log as logsetup
from symfence.coordinator import triage as triage_mod
from symfence.coordinator.afl import AflState
from symfence.coordinator.aflsync import AflSide
from symfence.coordinator.commit import CommitMixin
from symfence.coordinator.config import (
    Config,
    executor_options,  # noqa: F401 (re-exported)
)
from symfence.coordinator.confirm import ClaimsMixin, Confirmations
from symfence.coordinator.depth import DepthController, DepthTuning
from symfence.coordinator.dispatch import DispatchMixin
from symfence.coordinator.durability import DurabilityMixin
from symfence.coordinator.failure import ExitCode, Failure, describe
from symfence.coordinator.hosts import HostChecks, manifest
from symfence.coordinator.hotpath import HotPath
from symfence.coordinator.hotpath import clock_ns as _ns
from symfence.coordinator.hybrid import HybridPlan
from symfence.coordinator.inflight import InFlight, Revocation
from symfence.coordinator.intake import IntakeMixin
from symfence.coordinator.journal import Journal
from symfence.coordinator.members import Members, MemberState
from symfence.coordinator.membership import MembershipMixin
from symfence.coordinator.outputs import OutputDir
from symfence.coordinator.peers import PeerPolicy, Peers
from symfence.coordinator.pump import Pump
from symfence.coordinator.refusals import Refusals
from symfence.coordinator.report import ReportMixin
from symfence.coordinator.scheduler import Scheduler, WorkItem
from symfence.coordinator.seeding import SeedingMixin, load_seeds  # noqa: F401 (re-exported)
from symfence.coordinator.stats import Stats
from symfence.coordinator.status_line import StatusLine
from symfence.coordinator.targets import TargetTracker
from symfence.coordinator.writer import JournalWriter
from symfence.protocol.codec import Limits, checked_options, encode
from symfence.protocol.coverage import CoverageMap
from symfence.protocol.ids import Rank, TokenMinter
from symfence.protocol.messages import Control, ControlKind, Tag

log = structlog.get_logger()


class Campaign(IntakeMixin, CommitMixin, ClaimsMixin, DispatchMixin, MembershipMixin, SeedingMixin,
                  DurabilityMixin, ReportMixin):
    """Rank 0 of a campaign: the shared state of the pipeline's steps, and the lifecycle."""

    def __init__(
        self,
        cfg: Config,
        comm: Any,
        out: OutputDir,
        journal: Journal,
        *,
        status: StatusLine | None = None,
        clock: Callable[[], float] = time.monotonic,
        peers_comm: Any = None,
    ) -> None:
        self.cfg = cfg
        self.peers_comm = peers_comm  # the fault injector's side channel: drained, never read
        self.comm = comm
        self.out = out
        self.journal = journal
        self.clock = clock
        self.status = status or StatusLine(enabled=False)
        self.workers: list[Rank] = [Rank(r) for r in range(1, comm.Get_size())]
        self.members = Members(self.workers)  # each rank's one state: alive, lost, failed, banned
        self.stop_acks: dict[Rank, dict[str, Any]] = {}
        self.minter = TokenMinter(os.urandom(32))
        self.inflight = InFlight(window=cfg["stats.window_tokens"], banned=self.members.banned)  # dispatch table
        self.scheduler = Scheduler()
        self.coverage = CoverageMap()
        self.worker_cov_version: dict[Rank, int] = {}
        self.stats = Stats()
        self.limits = Limits(
            max_message_bytes=cfg["limits.max_message_bytes"],
            max_candidate_bytes=cfg["limits.max_candidate_bytes"],
            max_candidates=cfg["limits.max_candidates"],
        )
        self.depth: int | str = cfg["dispatch.depth"]  # or "auto": per rank, from depth.py
        self.auto_depth = DepthController(DepthTuning(max_depth=cfg["dispatch.max_depth"])) \
            if self.depth == "auto" else None
        self._duration_s: float = cfg["campaign.duration_s"]
        self._max_results: int = cfg["campaign.max_results"]
        self.max_batch: int = cfg["mpi.max_batch"]  # items in one frame, both ways (dispatch.py)
        self.batch_of: dict[Rank, int] = {}  # ... per rank: at most what its HELLO said it takes
        self._maybe_free: set[Rank] = set()  # ranks that may have a free slot (_turn fills only these)
        self._elsewhere_fns: dict[Rank, Callable[[WorkItem], bool]] = {}
        self.deadline_s: float = cfg["dispatch.deadline_s"]
        self.executor: str = cfg["campaign.executor"]
        self.options = checked_options(executor_options(cfg))  # checked once, not per WORK
        self.plan = HybridPlan.from_config(cfg)  # which stage each free slot gets
        self.corpus_executor = self.plan.corpus_stage.value  # runs corpus entries' work items
        self.afl = AflState()  # AFL++'s fuzzer_stats/plot_data bookkeeping (carried over --resume)
        self.seed_count = 0
        self.tmouts = 0  # executions that timed out this run (hang findings, duplicates included)
        self.targets = TargetTracker(cfg["campaign.targets"])
        self.solver_queries = 0
        self.solver_timeouts = 0  # queries the solver gave up on ("unknown": its time-out)
        self.worker_rss_mb: dict[Rank, int] = {}
        self.dispatching = False
        self.stop_reason: str | None = None
        self.failure: Failure | None = None  # what stopped the campaign abnormally (failure.py)
        self.all_lost = False
        self.unstopped: list[Rank] = []  # workers that never acknowledged STOP (hung)
        self._last_tick: float | None = None
        self._next_beat = 0.0  # the next coordinator heartbeat to the workers (_beat)
        self._changed = asyncio.Event()
        self._stop = asyncio.Event()
        self._t0 = clock()
        self.pump: Pump | None = None
        self.writer: JournalWriter | None = None  # the journal writer thread (writer.py), while running
        self._saved_cov_version = -1  # the coverage version the journal's snapshot holds
        self.afl_sync = AflSide.from_config(cfg, out)  # AFL++ side by side, or None
        # Issue 10: per-rank health, bans and caps (peers.py), crash/hang claims (confirm.py).
        self.peers = Peers(PeerPolicy.from_config(cfg), clock, self.members)
        self.claims = Confirmations(self.corpus_executor, self.options)
        budget_s = cfg["triage.minimize_budget_s"]  # within the dispatch deadline
        if self.deadline_s:
            budget_s = min(budget_s, 0.75 * self.deadline_s)
        self.triage = triage_mod.Triage(out, journal, base_executor=self.corpus_executor,
                                        base_options=self.options, minimize=cfg["triage.minimize"],
                                        budget_s=budget_s)
        self.stop_sent: set[Rank] = set()
        self.confirming = False  # draining at the end: only crash/hang re-runs are dispatched
        self.control_banned = 0  # CONTROL (or unknown-tag) frames from banned ranks, not decoded
        self._turn_scheduled = False
        self.hotpath = HotPath()  # CPU per result by phase, commit latency, start-up times
        # Issue 17: results of not-banned ranks refused for reasons no honest worker causes.
        self.refusals = Refusals(cfg["limits.max_refused_share"], cfg["faults.enabled"])
        self.hosts = HostChecks(manifest(cfg))  # files every worker's host must have (hosts.py)
        self.shared: Any = None  # issue 29: the shared campaign store's side (sharedwork.py), or None

    async def run(self) -> int:
        loop = asyncio.get_running_loop()
        loop.set_exception_handler(self._on_loop_exception)
        self.pump = Pump(
            self.comm, loop, self._on_batch, self._on_failed,
            poll_cap_s=self.cfg["mpi.poll_cap_ms"] / 1000, batch=self.cfg["mpi.batch"],
            max_frame_bytes=self.limits.max_message_bytes,
            discard=() if self.peers_comm is None else (self.peers_comm,),
        )
        self.pump.start()
        self.writer = JournalWriter(self.journal, self.out, loop.call_soon_threadsafe, self._durable,
                                    self._write_failed)
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, self.request_stop, f"signal {signal.Signals(sig).name}")
        if interrupt.requested():  # arrived during start-up, before these handlers existed
            self.request_stop(f"signal {interrupt.requested()} during start-up")
        try:
            try:
                await self._start()
            except Exception as exc:  # noqa: BLE001 - any start-up error ends the job cleanly
                self.fail(exc)
            ticker = asyncio.create_task(self._guarded(self._ticker()))
            await self._stop.wait()
            await self._shutdown()
            ticker.cancel()
        finally:
            if self.afl_sync is not None:
                self.afl_sync.stop()
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.remove_signal_handler(sig)
            self.writer.stop()
            self.pump.stop()
        return self.exit_code()

    async def _start(self) -> None:
        """Wait for the workers, seed (or resume) and start dispatching."""
        if not await self._await_hellos():
            self.request_stop("workers did not say hello")
        else:
            self.hotpath.mark("hellos")
            if not await self._await_checks():
                return
            self._seed()
            # The seeds' batch is durable before the first dispatch. Writing it while dispatch
            # runs made the writer thread fight the loop for the GIL and the cores: 150,000
            # seeds took 5.7 s of writing instead of 2.1 s and halved the first seconds' rate.
            await self._writer_idle()
            if self.failure is not None or self._stop.is_set():
                return  # a failed write or a stop request while the seeds were written
            self.hotpath.mark("seeded")
            if self.afl_sync is not None:
                self.afl_sync.start(self.journal)  # AFL++ starts from the durable corpus
            self.dispatching = True
            if self.shared is not None:
                self.shared.start()  # register, the seeds to the store, the first leases
            self._t0 = self.clock()
            self.stats.started_wall = time.time()
            self.afl.run_started = self.stats.started_wall
            log.info("campaign.started", pid=os.getpid(), workers=len(self.members.alive), depth=self.depth,
                     executor=self.executor, queued=len(self.scheduler), epoch=self.minter.epoch.hex()[:16])
            self.hotpath.begin(self.stats.committed)
            self._fill()
            self._check_finished()

    async def _guarded(self, coro: Any) -> None:
        try:
            await coro
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - a periodic write failed: stop, never go on blind
            self.fail(exc)

    def _on_loop_exception(self, loop: Any, context: dict[str, Any]) -> None:
        exc = context.get("exception")
        self.fail(exc if exc is not None else RuntimeError(context.get("message", "event loop error")))

    def fail(self, exc: BaseException) -> None:
        """Stop at once on any exception (a failed write, a bug): dispatch nothing more, keep what
        is durable, stop the workers; the first failure is the one reported."""
        if self.failure is None:
            self.failure = describe(exc)
            log.error("campaign.failed", kind=self.failure.kind.value, error=self.failure.line,
                      exc_info=exc)
        self.dispatching = False
        self.request_stop(self.failure.line)

    def exit_code(self) -> int:
        """0 for a campaign that ran; 1 if MPI failed, every worker was lost or every task it ran
        was an error; 3 after a failed write, 4 after any other exception; 6 if it ended with lost
        or hung workers that never answered STOP; 5 for refused results (failure.ExitCode)."""
        if self.failure is not None:
            return self.failure.exit_code
        if self.hosts.problem is not None:
            return ExitCode.CONFIG
        if self.pump is not None and self.pump.error is not None:
            return ExitCode.FAILED
        if self.all_lost:
            return ExitCode.FAILED
        if self.unstopped:  # lost (cut off) or hung until the end: the job is aborted
            return ExitCode.RANKS_LOST
        if self.stats.all_tasks_errored():
            return ExitCode.FAILED
        return ExitCode.REFUSED if self.refusals.over_share(self._refused()) else ExitCode.OK

    def _refused(self) -> list:
        """Not-banned ranks whose results were refused for reasons no honest worker causes (refusals.py)."""
        injected = {rank: ack.get("faults") or {} for rank, ack in self.stop_acks.items()}
        return self.refusals.judge(self.members.ranks_in(MemberState.BANNED), injected)

    def request_stop(self, reason: str) -> None:
        if self.stop_reason is None:
            self.stop_reason = reason
            log.info("campaign.stopping", reason=reason)
        self.dispatching = False
        self.hotpath.stopping(self.stats.committed)
        self._stop.set()

    async def _await_hellos(self) -> bool:
        deadline = self.clock() + self.cfg["dispatch.hello_timeout_s"]
        alive = self.members.alive
        while len(alive) < len(self.workers) and not self._stop.is_set():
            if self.clock() > deadline:
                log.error("campaign.hello_timeout", missing=sorted(set(self.workers) - alive))
                return bool(alive)
            await self._wait_change(0.1)
        return not self._stop.is_set()

    async def _await_checks(self) -> bool:
        """Every worker's CHECKED (hosts.py) before anything is seeded or dispatched: False if a
        host lacks a file or has another version of it (exit status 2)."""
        deadline = self.clock() + self.cfg["dispatch.hello_timeout_s"]
        alive = self.members.alive
        while self.hosts.pending(alive) and self.hosts.problem is None and not self._stop.is_set():
            if self.clock() > deadline:
                log.error("campaign.check_timeout", missing=sorted(self.hosts.pending(alive)))
                break
            await self._wait_change(0.1)
        if self.hosts.problem is not None:
            self.request_stop(f"host check failed: {self.hosts.problem}")
            return False
        return not self._stop.is_set()

    async def _wait_change(self, timeout: float) -> None:
        self._changed.clear()
        try:
            await asyncio.wait_for(self._changed.wait(), timeout)
        except TimeoutError:
            pass

    async def _shutdown(self) -> None:
        self.dispatching = False
        # After a failure nothing new can be made durable: stop at once instead of draining.
        drain_until = self.clock() + (0.0 if self.failure else self.cfg["dispatch.drain_timeout_s"])
        # While draining, claimed crashes/hangs are still re-run (confirm.py): a bug found just
        # before the end is saved, not dropped unconfirmed.
        self.confirming = self.failure is None
        self._fill()
        alive, members = self.members.alive, self.members
        while (len(self.inflight) or (self.confirming and len(self.claims.queue))) \
                and self.clock() < drain_until and alive:
            await self._wait_change(0.05)
        self.confirming = False
        for rank in sorted(alive):
            for token in self.inflight.tokens_of(rank):
                self._revoke(token, Revocation.CANCELLED)
        for rank in self.workers:
            for token in self.inflight.tokens_of(rank):  # ranks lost meanwhile
                self._revoke(token, Revocation.LOST)
        stop = encode(Control(ControlKind.STOP))
        # Lost (silent) workers get STOP too: a hung worker that wakes up must be able to exit;
        # after a start-up failure, so do workers whose HELLO was not read yet.
        # Banned ranks get STOP too, and only now (one stopped earlier would wait in MPI_Finalize).
        lost = set(members.ranks_in(MemberState.LOST))
        if self.failure:
            told = set(self.workers) - set(members.ranks_in(MemberState.FAILED))
        else:
            told = alive | lost | set(members.ranks_in(MemberState.BANNED))
        for rank in sorted(told):
            self.stop_sent.add(rank)
            self.pump.send(rank, Tag.CONTROL, stop)
        # Only the acks of ranks that are alive and were sent STOP count (issue 10): an ack from a
        # rogue or a returned lost rank neither ends the wait nor stands in for a real one.
        ack_until = self.clock() + self.cfg["dispatch.stop_timeout_s"]
        while not (alive & self.stop_sent) <= set(self.stop_acks) and self.clock() < ack_until:
            await self._wait_change(0.05)
        missing = sorted((alive & self.stop_sent) - set(self.stop_acks))
        if missing:
            log.warning("campaign.stop_ack_missing", ranks=missing)
        self.claims.abandoned += len(self.claims.pending)
        if self.shared is not None:
            self.shared.stop()  # what is left of the new work to the store; every lease given back
        # Hung: alive but no STOP ack, or lost (silent) and never heard from again. MPI cannot
        # finalize with them; cli ends the job with MPI_Abort and the documented exit code 6.
        self.unstopped = sorted(set(missing) | set(members.ranks_in(MemberState.LOST)))
        # Clean: what rank 0 owns is complete and durable. A worker that never acknowledged STOP
        # does not change that (its dispatches were revoked above, their work requeued).
        clean = self.pump.error is None and self.failure is None
        await self._writer_idle()
        self.writer.stop()  # the end of the run writes the rest itself, completely
        for write in (lambda: self.journal.end_run(clean=clean), self._flush_now, self._write_stats):
            try:
                write()
            except Exception as exc:  # noqa: BLE001 - keep what is durable, report the first
                self.fail(exc)
        self.status.close(self._snapshot())
        log.info("campaign.finished", reason=self.stop_reason, committed=self.stats.committed,
                 quarantined=self.stats.quarantine.total, crashes=self.stats.crashes,
                 conservation_holds=all(ok for _, ok in self.stats.conservation(len(self.inflight))))

    async def _ticker(self) -> None:
        interval = self.cfg["stats.interval_s"]
        next_stats = self.clock()
        while True:
            await asyncio.sleep(min(0.05, interval))
            t0, flushed = _ns(), self.hotpath.flush_ns
            now = self.clock()
            logsetup.check_file()  # a failed log write stops the campaign like any other
            self._absorb_pause(now)
            self._expire(now)
            self._check_lost(now)
            self._beat(now)
            if self.shared is not None:
                self.shared.tick(now)
            if self.afl_sync is not None and self.dispatching and self.afl_sync.due(now):
                self._import_afl()
            if self.journal.needs_flush():
                self._flush()
            if now >= next_stats:
                next_stats = now + interval
                snap = self._stats_snapshot()  # one frozen snapshot: fuzzer_stats and the live view
                self._write_stats(snap)
                self.status.update(self._snapshot(snap))
            self._check_finished()
            self.hotpath.ticker_ns += _ns() - t0 - (self.hotpath.flush_ns - flushed)

    def _check_finished(self) -> None:
        if self._stop.is_set() or not self.dispatching:
            return
        elapsed = self.clock() - self._t0
        duration, max_results = self._duration_s, self._max_results
        if duration and elapsed >= duration:
            self.request_stop("duration reached")
        elif max_results and self.stats.committed >= max_results:
            self.request_stop("max_results reached")
        elif not len(self.inflight) and not self.plan.fuzz_on and not len(self.scheduler) \
                and not len(self.claims.queue) and not len(self.triage.queue) and self.afl_sync is None \
                and (self.shared is None or self.shared.exhausted()):
            self.request_stop("work exhausted")  # a mutation stage or AFL++ alongside never runs out
