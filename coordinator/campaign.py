"""The coordinator's IO shell (rank 0): the lifecycle, and carrying out what the core decides.

Where to look (docs/design.md, "The coordinator", has the picture): the decisions live in the
sans-IO core (coordinator/core.py: the fence, the commit, dispatch; confirm.py and
membership.py are its parts for claims and control frames). This shell owns what does IO: the
MPI pump thread (pump.py) feeds the core what it drained (`_on_batch`), the ticker feeds it
time, the journal writer thread (writer.py) reports durable batches (durability.py), and
`_apply` carries out the effects the core returns (coordinator/effects.py): sends, the group
commit, finding files, logs. Seeding (seeding.py) and reporting (report.py) read and seed the
core's state at start-up and for fuzzer_stats and the live view.

All state lives on the event loop thread; the MPI pump thread only moves bytes, and the journal
writer thread only writes batches the loop prepared, then queue/ files.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

import structlog

from symfence.coordinator import interrupt
from symfence.coordinator import log as logsetup
from symfence.coordinator import triage as triage_mod
from symfence.coordinator.afl import AflState
from symfence.coordinator.aflsync import AflSide
from symfence.coordinator.config import (
    Config,
    executor_options,  # noqa: F401 (re-exported)
)
from symfence.coordinator.confirm import Confirmations
from symfence.coordinator.core import Core
from symfence.coordinator.depth import DepthController
from symfence.coordinator.durability import DurabilityMixin
from symfence.coordinator.effects import (Effect, ExportAfl, Flush, HostReport, Log, Minimized, Quarantined,
                                          SaveFinding, SaveUnconfirmed, Send, Stop)
from symfence.coordinator.failure import ExitCode, Failure, describe
from symfence.coordinator.hosts import HostChecks, manifest
from symfence.coordinator.hotpath import HotPath
from symfence.coordinator.hotpath import clock_ns as _ns
from symfence.coordinator.hybrid import HybridPlan
from symfence.coordinator.inflight import InFlight
from symfence.coordinator.journal import Journal
from symfence.coordinator.members import Members, MemberState
from symfence.coordinator.outputs import OutputDir
from symfence.coordinator.peers import Peers
from symfence.coordinator.pump import Inbound, Pump
from symfence.coordinator.refusals import Judged, Refusals
from symfence.coordinator.report import ReportMixin
from symfence.coordinator.scheduler import Scheduler
from symfence.coordinator.seeding import SeedingMixin, load_seeds  # noqa: F401 (re-exported)
from symfence.coordinator.stats import Stats
from symfence.coordinator.status_line import StatusLine
from symfence.coordinator.targets import TargetTracker
from symfence.coordinator.writer import JournalWriter
from symfence.protocol.codec import Limits, checked_options, encode
from symfence.protocol.coverage import CoverageMap
from symfence.protocol.ids import Rank, TokenMinter
from symfence.protocol.messages import Control, ControlKind, Tag

if TYPE_CHECKING:
    from symfence.coordinator.sharedwork import SharedWork

log = structlog.get_logger()


def _core_state(name: str, doc: str) -> Any:
    """A property of the shell that reads (and, for start-up and tests, sets) the core's state."""
    return property(lambda self: getattr(self.core, name), lambda self, v: setattr(self.core, name, v), doc=doc)


class Campaign(SeedingMixin, DurabilityMixin, ReportMixin):
    """Rank 0 of a campaign: the IO shell around the core (`self.core`), and the lifecycle."""

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
        self.hosts = HostChecks(manifest(cfg))  # files every worker's host must have (hosts.py)
        self.afl_sync = AflSide.from_config(cfg, out)  # AFL++ side by side, or None
        plan = HybridPlan.from_config(cfg)
        deadline_s = cfg["dispatch.deadline_s"]
        budget_s = cfg["triage.minimize_budget_s"]  # within the dispatch deadline
        if deadline_s:
            budget_s = min(budget_s, 0.75 * deadline_s)
        self.triage = triage_mod.Triage(out, journal, base_executor=plan.corpus_stage.value,
                                        base_options=checked_options(executor_options(cfg)),
                                        minimize=cfg["triage.minimize"], budget_s=budget_s)
        self.core = Core(cfg, journal, self.triage, world_size=comm.Get_size(), clock=clock,
                         token_key=os.urandom(32), wall=time.time,
                         setup={"log_dir": str(out.logs), "files": self.hosts.files},
                         afl_sync=self.afl_sync is not None)
        self.seed_count = 0
        self.imported_count = 0  # corpus entries imported from AFL++ (fuzzer_stats' corpus_imported)
        # (target, data, sha256) of the seeds not journaled yet, oldest last (seeding.py)
        self._seeds_left: list[tuple[str, bytes, str]] = []
        self._seeds_total = 0
        self._seeding: asyncio.Task[None] | None = None
        self.stop_reason: str | None = None
        self.failure: Failure | None = None  # what stopped the campaign abnormally (failure.py)
        self.unstopped: list[Rank] = []  # workers that never acknowledged STOP (hung)
        self._changed = asyncio.Event()
        self._stop = asyncio.Event()
        self._turn_scheduled = False
        self.pump: Pump | None = None
        self.writer: JournalWriter | None = None  # the journal writer thread (writer.py), while running
        self._saved_cov_version = -1  # the coverage version the journal's snapshot holds

    # The core's state, read by seeding, reports and tests (one owner: the core).
    workers: list[Rank] = _core_state("workers", "the worker ranks")
    members: Members = _core_state("members", "the member table")
    inflight: InFlight = _core_state("inflight", "the dispatch table")
    peers: Peers = _core_state("peers", "per-rank health")
    scheduler: Scheduler = _core_state("scheduler", "the corpus entries' queue")
    plan: HybridPlan = _core_state("plan", "the stage plan")
    claims: Confirmations = _core_state("claims", "crash/hang claims")
    coverage: CoverageMap = _core_state("coverage", "the coverage map")
    stats: Stats = _core_state("stats", "the statistics")
    targets: TargetTracker = _core_state("targets", "per-target figures")
    afl: AflState = _core_state("afl", "AFL++ bookkeeping")
    hotpath: HotPath = _core_state("hotpath", "CPU per result by phase")
    refusals: Refusals = _core_state("refusals", "refused results")
    minter: TokenMinter = _core_state("minter", "the token minter")
    limits: Limits = _core_state("limits", "the wire limits")
    options: dict[str, Any] = _core_state("options", "the executor's checked options")
    corpus_executor: str = _core_state("corpus_executor", "the corpus stage's executor")
    executor: str = _core_state("executor", "campaign.executor")
    depth: int | str = _core_state("depth", "dispatch.depth")
    auto_depth: DepthController | None = _core_state("auto_depth", "auto depth, or None")
    batch_of: dict[Rank, int] = _core_state("batch_of", "frame size per rank")
    dispatching: bool = _core_state("dispatching", "dispatching new work")
    confirming: bool = _core_state("confirming", "draining: re-runs only")
    all_lost: bool = _core_state("all_lost", "every worker was lost")
    stop_acks: dict[Rank, dict[str, Any]] = _core_state("stop_acks", "STOP acknowledgements")
    stop_sent: set[Rank] = _core_state("stop_sent", "ranks sent STOP")
    tmouts: int = _core_state("tmouts", "timed-out executions")
    solver_queries: int = _core_state("solver_queries", "solver queries")
    solver_timeouts: int = _core_state("solver_timeouts", "solver time-outs")
    worker_rss_mb: dict[Rank, int] = _core_state("worker_rss_mb", "workers' memory")
    control_banned: int = _core_state("control_banned", "frames of banned ranks")
    _maybe_free: set[Rank] = _core_state("_maybe_free", "ranks that may have a free slot")
    shared: SharedWork | None = _core_state("shared", "issue 29: the shared campaign store's side "
                                                      "(sharedwork.py), or None")
    _t0: float = _core_state("_t0", "when dispatching started")
    _duration_s: float = _core_state("_duration_s", "campaign.duration_s")

    # --- carrying out the core's effects ---------------------------------------------------------

    def _apply(self, effects: Iterable[Effect]) -> None:
        """Carry out the core's effects, in order (the shell decides nothing)."""
        for e in effects:
            t = type(e)
            if t is Send:
                self.pump.send(e.rank, e.tag, e.frame)  # type: ignore[union-attr]
            elif t is Flush:
                self._flush()
            elif t is Quarantined:
                log.warning("result.quarantined", reason=e.reason.value, source_rank=e.source,  # type: ignore[union-attr]
                            token=(e.token or "")[:16] or None, work_id=e.work_id, owner_rank=e.owner,  # type: ignore[union-attr]
                            detail=e.detail)  # type: ignore[union-attr]
            elif t is Log:
                getattr(log, e.level)(e.event, **e.fields)  # type: ignore[union-attr]
            elif t is Stop:
                self.request_stop(e.reason)  # type: ignore[union-attr]
            else:
                self._apply_rare(e)

    def _apply_rare(self, e: Effect) -> None:
        if isinstance(e, SaveFinding):
            path = self.out.finding(e.kind, e.finding_id, e.data, detail=e.detail, target=e.target,
                                    identity=e.identity, sig=e.sig)
            log.info("finding.saved", kind=e.kind, path=str(path))
        elif isinstance(e, SaveUnconfirmed):
            account = (f"claimed: {e.kind} by rank {e.claimed_by}; re-run by rank {e.rerun_by}: {e.rerun_status}"
                       " (not a finding: it did not happen again alone)")
            path = self.out.unconfirmed(e.number, e.kind, e.data, detail=e.detail, target=e.target, account=account)
            log.info("finding.kept_unconfirmed", kind=e.kind, path=str(path))
        elif isinstance(e, ExportAfl):
            if self.afl_sync is not None:
                self.afl_sync.export(list(e.entries))
        elif isinstance(e, Minimized):
            self.triage.done(e.item, e.result, e.source, e.found_s)
        elif isinstance(e, HostReport):
            if e.kind == "hello":
                self.hosts.hosts[e.rank] = str(e.info.get("host", ""))
            elif e.kind == "checked":
                self.hosts.on_checked(e.rank, e.info)
                self._changed.set()
            else:
                self.hosts.on_log(e.rank, e.info)
        else:
            raise TypeError(f"not an effect: {e!r}")  # our bug: loud

    def _on_batch(self, batch: list[Inbound]) -> None:
        """The pump's hand-over: feed the core what it drained, carry out what follows."""
        if self.pump is not None and self.pump.error is not None and not self._stop.is_set():
            log.error("pump.failed", error=repr(self.pump.error))
            for rank in sorted(self.core.members.alive):  # unreachable from now on
                self.core.members.fail(rank)
            self.request_stop("MPI pump failed")
        self._after_turn(self.core.receive(batch))  # Inbound is the (source, tag, frame, oversized) tuple

    def _turn(self) -> None:
        """One more fair turn of what the ranks sent (scheduled while frames wait)."""
        self._turn_scheduled = False
        self._after_turn(self.core.turn())

    def _after_turn(self, effects: list[Effect]) -> None:
        self._apply(effects)
        if self.core.pending() and not self._turn_scheduled:  # let the loop run other work first
            self._turn_scheduled = True
            asyncio.get_running_loop().call_soon(self._turn)
        self._changed.set()

    # Seams into the core for tests and tools: each call carries out the effects it makes.
    def _on_result(self, source: Rank, frame: bytes, oversized: int = 0) -> None:
        self.core._on_result(Rank(source), frame, oversized)
        self._apply(self.core._take())

    def _on_control(self, source: Rank, frame: bytes, oversized: int = 0) -> None:
        self.core._on_control(Rank(source), frame, oversized)
        self._apply(self.core._take())

    def _fill(self, ranks: set[Rank] | None = None) -> None:
        self.core._fill(ranks)
        self._apply(self.core._take())

    def _expire(self, now: float) -> None:
        self.core._expire(now)
        self._apply(self.core._take())

    def _lose_worker(self, rank: Rank, why: str, *, failed: bool = False) -> None:
        self.core._lose_worker(Rank(rank), why, failed=failed)
        self._apply(self.core._take())

    def _queue_entry(self, entry: Any) -> None:
        self.core._queue_entry(entry)

    def _commit(self, source: Rank, result: Any) -> int:
        """Commit a result the shared store accepted (sharedwork.py); returns its penalty points."""
        penalties = self.core._commit(Rank(source), result)
        self._apply(self.core._take())
        return penalties

    def _check_finished(self) -> None:
        self.core._check_finished()
        self._apply(self.core._take())

    def _garbage(self, source: Rank, size: int = 0) -> None:
        self.core._garbage(Rank(source), size)
        self._apply(self.core._take())

    def _on_failed(self, ranks: list[int]) -> None:
        """MPI (ULFM) reported these ranks dead."""
        self._apply(self.core.failed(ranks))
        self._changed.set()

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
        writer = self.writer
        self.hotpath.files_cpu = lambda: writer.files_cpu_s
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
            if self._seeding is not None:
                await self._seeding  # ends at its next step once the stop is set
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
            if self.shared is not None:  # issue 29: register, the seeds to the store, the first leases
                self.core.dispatching = True  # (its first leases are dispatched at once)
                self.shared.start()
            self.stats.started_wall = time.time()
            self.afl.run_started = self.stats.started_wall
            log.info("campaign.started", pid=os.getpid(), workers=len(self.members.alive), depth=self.depth,
                     executor=self.executor, queued=len(self.scheduler), epoch=self.minter.epoch.hex()[:16])
            self.hotpath.begin(self.stats.committed)
            self._apply(self.core.start())
            if self._seeds_left:  # the rest of the seeds, while dispatch runs (seeding.py)
                self._seeding = asyncio.create_task(self._guarded(self.seed_rest()))

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

    def _refused(self) -> list[Judged]:
        """Not-banned ranks whose results were refused for reasons no honest worker causes (refusals.py)."""
        injected = {rank: ack.get("faults") or {} for rank, ack in self.stop_acks.items()}
        return self.refusals.judge(self.members.ranks_in(MemberState.BANNED), injected)

    def request_stop(self, reason: str) -> None:
        if self.stop_reason is None:
            self.stop_reason = reason
            log.info("campaign.stopping", reason=reason)
        self.core.halt()
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
        assert self.pump is not None and self.writer is not None  # both made by `run` before `_start`
        self.core.halt()
        # After a failure nothing new can be made durable: stop at once instead of draining.
        drain_until = self.clock() + (0.0 if self.failure else self.cfg["dispatch.drain_timeout_s"])
        # While draining, claimed crashes/hangs are still re-run (confirm.py): a bug found just
        # before the end is saved, not dropped unconfirmed.
        self.confirming = self.failure is None
        self._apply(self.core.drain())
        alive, members = self.members.alive, self.members
        while (len(self.inflight) or (self.confirming and len(self.claims.queue))) \
                and self.clock() < drain_until and alive:
            await self._wait_change(0.05)
        self.confirming = False
        self._apply(self.core.cancel_all())
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
        self.stats.engine.finish()
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
            self._apply(self.core.tick(now))  # deadlines, silence, heartbeats, the group commit, the end
            if self.shared is not None:
                self.shared.tick(now)
            if self.afl_sync is not None and self.dispatching and self.afl_sync.due(now):
                self._import_afl()
            if now >= next_stats:
                next_stats = now + interval
                snap = self._stats_snapshot()  # one frozen snapshot: fuzzer_stats and the live view
                self._write_stats(snap)
                self.status.update(self._snapshot(snap))
            self.hotpath.ticker_ns += _ns() - t0 - (self.hotpath.flush_ns - flushed)
