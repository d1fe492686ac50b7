"""The coordinator: dispatch, fence every result, commit or quarantine, stop cleanly.

All state lives on the event loop thread; the MPI pump thread only moves bytes, and the journal
writer thread (writer.py) only writes batches the loop prepared, then queue/ files. A reader
looking for the fence finds it in `_on_result` (it calls `protocol.fence.classify` before
anything else); the commit path is `_commit`, the quarantine path `_quarantine`.
"""

from __future__ import annotations

import asyncio
import collections
import gc
import os
import resource
import signal
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable

import structlog

from symfence.coordinator import carryover, failpoints, interrupt
from symfence.coordinator import log as logsetup
from symfence.coordinator.afl import AflState, plot_header
from symfence.coordinator.engine_report import PLOT_COLUMNS as ENGINE_PLOT_COLUMNS
from symfence.coordinator.aflsync import AflSide, sync_origin
from symfence.coordinator.config import PYTHON_EXECUTORS, executor_options  # noqa: F401 (re-exported)
from symfence.coordinator.config import Config
from symfence.coordinator.failure import ExitCode, Failure, describe
from symfence.coordinator.confirm import Claim, Confirmations
from symfence.coordinator.depth import DepthController, DepthTuning
from symfence.coordinator.hotpath import SAMPLE, HotPath
from symfence.coordinator.hosts import HostChecks, manifest
from symfence.coordinator.hotpath import clock_ns as _ns
from symfence.coordinator.hybrid import HybridPlan, Stage
from symfence.coordinator.inflight import InFlight, Revocation, SlotRelease
from symfence.coordinator.journal import FlushBatch, FlushReceipt, Journal, NewEntry, NewFinding
from symfence.coordinator.outputs import FindingClass, OutputDir, finding_class
from symfence.coordinator.peers import PeerPolicy, Peers, PeerState
from symfence.coordinator.pump import Inbound, Pump
from symfence.coordinator.reconcile import reconcile
from symfence.coordinator.refusals import Refusals
from symfence.coordinator.scheduler import Scheduler, WorkItem
from symfence.coordinator.stats import Stats, render_stats, write_atomic
from symfence.coordinator.status_line import Snapshot, StatusLine, TargetLine
from symfence.coordinator.targets import TargetTracker
from symfence.coordinator import triage as triage_mod
from symfence.coordinator.writer import JournalWriter
from symfence.protocol.codec import Limits, RemoteProtocolError, decode_control, encode
from symfence.protocol.coverage import MAP_SIZE, CoverageMap, unpack_trace
from symfence.protocol.fence import Verdict, classify
from symfence.protocol.ids import DispatchToken, Rank, TokenMinter, sha256_hex, work_id_for, work_id_maker
from symfence.protocol.messages import Control, ControlKind, Result, Status, Tag, Work
from symfence.protocol.reasons import Reason

log = structlog.get_logger()
_FINDING_STATUS = frozenset({Status.CRASH, Status.HANG})  # a result or candidate that claims a finding


def _read_folder(folder: Path) -> list[bytes]:
    """Every file's bytes in name order (scandir's file types and a directory fd: ~4x fewer
    system calls and objects than pathlib for a folder of 100,000 seeds)."""
    with os.scandir(folder) as it:
        names = sorted(e.name for e in it if e.is_file())
    out = []
    dir_fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for name in names:
            fd = os.open(name, os.O_RDONLY, dir_fd=dir_fd)
            try:
                chunks = []
                while chunk := os.read(fd, 1 << 20):
                    chunks.append(chunk)
            finally:
                os.close(fd)
            out.append(b"".join(chunks))
    finally:
        os.close(dir_fd)
    return out


def load_seeds(cfg: Config) -> list[bytes]:
    if cfg["campaign.seeds"]:
        folder = Path(cfg["campaign.seeds"])
        seeds = _read_folder(folder)
        if not seeds:
            raise FileNotFoundError(f"campaign.seeds: no seed files in {folder}")
        return seeds
    if cfg["campaign.executor"] == "synthetic":
        return [i.to_bytes(4, "big") for i in range(cfg["synthetic.seeds"])]
    if cfg["campaign.executor"] == "native":
        return [bytes(32)]  # AFL-style: a non-empty input (32 zero bytes)
    return [b"\x00"]


class Campaign:
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
        self.alive: set[Rank] = set()
        self.lost: set[Rank] = set()  # silent for too long; re-admitted if heard from again
        self.failed: set[Rank] = set()  # reported dead by MPI; never come back
        self.last_seen: dict[Rank, float] = {}
        self.stop_acks: dict[Rank, dict[str, Any]] = {}
        self.minter = TokenMinter(os.urandom(32))
        self.inflight = InFlight(window=cfg["stats.window_tokens"])
        self.leased: dict[DispatchToken, WorkItem] = {}
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
        self._maybe_free: set[Rank] = set()  # ranks that may have a free slot (hot path: _turn fills only these)
        self._elsewhere_fns: dict[Rank, Callable[[WorkItem], bool]] = {}
        self.deadline_s: float = cfg["dispatch.deadline_s"]
        self.executor: str = cfg["campaign.executor"]
        self.options = executor_options(cfg)
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
        self.peers = Peers(PeerPolicy.from_config(cfg), clock)
        self.claims = Confirmations(self.corpus_executor, self.options)
        budget_s = cfg["triage.minimize_budget_s"]  # within the dispatch deadline
        self.triage = triage_mod.Triage(out, journal, base_executor=self.corpus_executor, base_options=self.options,
                                        minimize=cfg["triage.minimize"],
                                        budget_s=min(budget_s, 0.75 * self.deadline_s) if self.deadline_s else budget_s)
        self.stop_sent: set[Rank] = set()
        self.confirming = False  # draining at the end: only crash/hang re-runs are dispatched
        self.control_banned = 0  # CONTROL (or unknown-tag) frames from banned ranks, not decoded
        self._turn_scheduled = False
        self.hotpath = HotPath()  # CPU per result by phase, commit latency, start-up times
        # Issue 17: results of not-banned ranks refused for reasons no honest worker causes.
        self.refusals = Refusals(cfg["limits.max_refused_share"], cfg["faults.enabled"])
        self.hosts = HostChecks(manifest(cfg))  # files every worker's host must have (hosts.py)

    # ------------------------------------------------------------------ lifecycle

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
            self._t0 = self.clock()
            self.stats.started_wall = time.time()
            self.afl.run_started = self.stats.started_wall
            log.info("campaign.started", pid=os.getpid(), workers=len(self.alive), depth=self.depth,
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
        return self.refusals.judge(self.peers.ranks_in(PeerState.BANNED), injected)

    def request_stop(self, reason: str) -> None:
        if self.stop_reason is None:
            self.stop_reason = reason
            log.info("campaign.stopping", reason=reason)
        self.dispatching = False
        self.hotpath.stopping(self.stats.committed)
        self._stop.set()

    async def _await_hellos(self) -> bool:
        deadline = self.clock() + self.cfg["dispatch.hello_timeout_s"]
        while len(self.alive) < len(self.workers) and not self._stop.is_set():
            if self.clock() > deadline:
                log.error("campaign.hello_timeout", missing=sorted(set(self.workers) - self.alive))
                return bool(self.alive)
            await self._wait_change(0.1)
        return not self._stop.is_set()

    async def _await_checks(self) -> bool:
        """Every worker's CHECKED (hosts.py) before anything is seeded or dispatched: False if a
        host lacks a file or has another version of it (exit status 2)."""
        deadline = self.clock() + self.cfg["dispatch.hello_timeout_s"]
        while self.hosts.pending(self.alive) and self.hosts.problem is None and not self._stop.is_set():
            if self.clock() > deadline:
                log.error("campaign.check_timeout", missing=sorted(self.hosts.pending(self.alive)))
                break
            await self._wait_change(0.1)
        if self.hosts.problem is not None:
            self.request_stop(f"host check failed: {self.hosts.problem}")
            return False
        return not self._stop.is_set()

    def _seed(self) -> None:
        """Journal the seeds (and resume what the journal holds). Python's cyclic GC is paused
        meanwhile and the objects made so far are frozen after (gc.freeze): with a large corpus,
        its collections would otherwise traverse every entry, at start-up and on every full
        collection of the run."""
        gc.disable()
        try:
            self._seed_all()
        finally:
            gc.freeze()
            gc.enable()

    def _seed_all(self) -> None:
        reconcile(self.journal, self.out, executor=self.corpus_executor, options=self.options,
                  targets=self.cfg["campaign.targets"])  # files a lost commit left behind
        resuming = bool(self.journal.corpus_count())
        if resuming:
            self._resume()
        # Every (target, seed) pair the journal does not know yet: all of them on a fresh
        # campaign; on a resume, those of targets or seed files added to the config since.
        # This runs once per seed before the first dispatch: per-seed work is kept to hashing
        # and the journal's mirror (queue files are written later, by the writer thread).
        seeds = load_seeds(self.cfg)
        shas = [sha256_hex(data) for data in seeds]
        entries = []
        known = self.journal.has_input  # a resume: the seeds it holds already are skipped here
        for target in self.cfg["campaign.targets"]:
            work_id = work_id_maker(self.corpus_executor, target, 0, self.options)
            entries += [NewEntry(sha256=sha, data=data, bound=0, parent=None, origin="seed", new_bits=0,
                                 found_s=0.0, work_id=work_id(sha), target=target)
                        for data, sha in zip(seeds, shas) if not known(target, sha)]
        failpoints.hit("seed")
        added = self.journal.add_seeds(entries)
        if self.plan.concolic_on:
            self.scheduler.extend(map(WorkItem.from_record, added))
        for e in added:
            self.plan.add_entry(e.target, e.data)
        self.afl.seeds(e.queue_id for e in added)
        for target, n in collections.Counter(e.target for e in added).items():
            self.targets[target].corpus += n
        self.seed_count += len(added)
        if resuming and added:
            log.info("campaign.seeds_added", seeds=len(added), targets=sorted({e.target for e in added}))
        self.stats.corpus = self.journal.corpus_count()
        # The seeds' batch goes to the writer thread now (`_start` waits for it); their queue/
        # files follow there, in slices, while dispatch runs (each once its entry is durable).
        self._flush()

    def _resume(self) -> None:
        """Continue from the journal: its coverage, its pending work, its files."""
        self.afl = AflState.from_counters(self.journal.counters())
        self.targets.restore(self.journal.counters(), (), ())
        self.plan.restore(self.journal.counters())  # per-stage figures count the whole campaign
        if self.afl_sync is not None:
            self.afl_sync.restore(self.journal.counters())  # AFL++ sessions (before any flush saves ours)
        blob = self.journal.coverage()
        if blob:
            self.coverage = CoverageMap.from_bytes(blob)
        pending = self.journal.pending_work() if self.plan.concolic_on else []
        for w in pending:
            self.scheduler.requeue(WorkItem.from_record(w))
        for e in self.journal.iter_corpus():
            self.plan.add_entry(e.target, e.data)
        self.scheduler.known |= self.journal.known_work_ids()
        self.stats.corpus = self.journal.corpus_count()
        carryover.restore(self.stats, self.journal.counters())  # counters count the whole campaign
        restored = self._restore_files()
        log.info("campaign.resumed", pending=len(pending), corpus=self.stats.corpus,
                 crashes=self.stats.crashes, hangs=self.stats.hangs, files_restored=restored,
                 requeued_leases=self.journal.recovery.requeued if self.journal.recovery else 0)

    def _restore_files(self) -> int:
        """Write queue/crash/hang files for durable journal records that have none (a kill
        between a flush and the file writes, or before the writer thread wrote a backlog, leaves
        such records). Queue files go to the writer thread's backlog; findings are written now."""
        have = {name.split(",", 1)[0] for name in self.out.existing("queue")}
        missing = []
        for e in self.journal.iter_corpus():
            self.afl.depth_of[e.queue_id] = 1 if e.parent is None else self.afl.depth_of.get(e.parent, 1) + 1
            self.seed_count += e.parent is None
            self.targets[e.target].corpus += 1
            if f"id:{e.queue_id:06d}" not in have:
                missing.append(e)
        self.writer.add_files(missing)
        restored = len(missing)
        have = {kind: {name.split(",", 1)[0] for name in self.out.existing(kind)} for kind in ("crash", "hang")}
        for f in self.journal.iter_findings():
            kind = f.kind.value
            if kind == "crash":
                self.targets[f.target].crashes += 1
                self.stats.crashes += 1
                self.stats.ooms += finding_class(kind, f.detail) is FindingClass.OOM
            else:
                self.targets[f.target].hangs += 1
                self.stats.hangs += 1
        restored += self.triage.restore(self.journal.iter_findings())  # identities, owed minimizations
        for f in self.journal.iter_findings():
            if f"id:{f.finding_id:06d}" not in have[f.kind.value]:
                key, sig = self.triage.sig_of(f.kind.value, f.finding_id)
                self.out.finding(f.kind.value, f.finding_id, f.data, detail=f.detail, target=f.target,
                                 identity=key, sig=sig)
                restored += 1
        return restored

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
        while (len(self.inflight) or (self.confirming and len(self.claims.queue))) and self.clock() < drain_until \
                and self.alive:
            await self._wait_change(0.05)
        self.confirming = False
        for rank in sorted(self.alive):
            for token in self.inflight.tokens_of(rank):
                self._revoke(token, Revocation.CANCELLED)
        for rank in self.workers:
            for token in self.inflight.tokens_of(rank):  # ranks lost meanwhile
                self._revoke(token, Revocation.LOST)
        stop = encode(Control(ControlKind.STOP))
        # Lost (silent) workers get STOP too: a hung worker that wakes up must be able to exit;
        # after a start-up failure, so do workers whose HELLO was not read yet.
        # Banned ranks get STOP too, and only now (one stopped earlier would wait in MPI_Finalize).
        banned = set(self.peers.ranks_in(PeerState.BANNED)) - self.failed
        told = set(self.workers) - self.failed if self.failure else self.alive | (self.lost - self.failed) | banned
        for rank in sorted(told):
            self.stop_sent.add(rank)
            self.pump.send(rank, Tag.CONTROL, stop)
        # Only the acks of ranks that are alive and were sent STOP count (issue 10): an ack from a
        # rogue or a returned lost rank neither ends the wait nor stands in for a real one.
        ack_until = self.clock() + self.cfg["dispatch.stop_timeout_s"]
        while not (self.alive & self.stop_sent) <= set(self.stop_acks) and self.clock() < ack_until:
            await self._wait_change(0.05)
        missing = sorted((self.alive & self.stop_sent) - set(self.stop_acks))
        if missing:
            log.warning("campaign.stop_ack_missing", ranks=missing)
        self.claims.abandoned += len(self.claims.pending)
        # Hung: alive but no STOP ack, or lost (silent) and never heard from again. MPI cannot
        # finalize with them; cli ends the job with MPI_Abort and the documented exit code 1.
        self.unstopped = sorted(set(missing) | (self.lost - self.failed))
        clean = not missing and self.pump.error is None and self.failure is None
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

    # ------------------------------------------------------------------ periodic work

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
            if self.afl_sync is not None and self.dispatching and self.afl_sync.due(now):
                self._import_afl()
            if self.journal.needs_flush():
                self._flush()
            if now >= next_stats:
                next_stats = now + interval
                self._write_stats()
                self.status.update(self._snapshot())
            self._check_finished()
            self.hotpath.ticker_ns += _ns() - t0 - (self.hotpath.flush_ns - flushed)

    def _import_afl(self) -> None:
        """New AFL++ queue entries become pending work (origin sync:<instance>:<id>)."""
        entries = []
        for imp in self.afl_sync.poll():
            sha = sha256_hex(imp.data)
            wid = work_id_for(self.corpus_executor, self.afl_sync.target, sha, 0, self.options)
            entries.append(NewEntry(sha256=sha, data=imp.data, bound=0, parent=None,
                                    origin=sync_origin(imp.instance, imp.entry_id), new_bits=2,
                                    found_s=self.clock() - self._t0, work_id=wid, target=self.afl_sync.target))
        added = self.journal.add_seeds(entries) if entries else []
        now = time.time()
        for e in added:
            self._queue_entry(e)
            self.afl.entry(e.queue_id, None, now)
            self.targets[e.target].corpus += 1
        if added:
            self.stats.corpus = self.journal.corpus_count()
            self._fill()

    def _absorb_pause(self, now: float) -> None:
        """After a pause of this process (SIGSTOP, a long GC, a swapped-out VM), the heartbeats
        and results sent meanwhile are still queued: judge silence and deadlines only once they
        had the same chance to arrive, by crediting the pause to every worker and dispatch."""
        last, self._last_tick = self._last_tick, now
        if last is None:
            return
        pause = now - last - 0.05  # beyond the ticker's own period
        if pause <= self.cfg["workers.lost_after_s"] / 2:
            return
        for rank in self.last_seen:
            self.last_seen[rank] += pause
        self.inflight.postpone(pause)
        log.warning("coordinator.paused", paused_s=round(pause, 3))

    def _expire(self, now: float) -> None:
        for d in list(self.inflight.due(now)):
            log.warning("task.expired", token=d.token[:16], worker=d.rank, work_id=d.work_id[:16],
                        after_s=round(now - d.sent_at, 3))
            self._revoke(d.token, Revocation.EXPIRED)
            others = any(r != d.rank and r in self.alive and self.peers.capacity(r, self._depth_of(r)) for r in self.workers)
            if self.peers.expired(d.rank, others=others):
                log.error("worker.suspended", worker=d.rank, strikes=self.peers.peer(d.rank).strikes,
                          until_s=round(self.peers.suspended_until(d.rank) - now, 3))
        self._fill()

    def _check_lost(self, now: float) -> None:
        limit = self.cfg["workers.lost_after_s"]
        for rank in sorted(self.alive):
            if now - self.last_seen.get(rank, now) > limit:
                self._lose_worker(rank, f"no heartbeat for {limit} s")

    def _beat(self, now: float) -> None:
        """Every heartbeat_s, a HEARTBEAT to each worker that may still run (lost ones too: a
        frozen worker that wakes finds them queued): a worker hearing nothing for
        workers.orphan_after_s takes its host to be cut off and ends itself (worker/loop.py)."""
        if now < self._next_beat:
            return
        self._next_beat = now + self.cfg["workers.heartbeat_s"]
        beat = encode(Control(ControlKind.HEARTBEAT))
        for rank in sorted((self.alive | (self.lost - self.failed)) - self.stop_sent):
            self.pump.send(rank, Tag.CONTROL, beat)

    def _lose_worker(self, rank: Rank, why: str, *, failed: bool = False) -> None:
        if failed:
            self.failed.add(rank)
        if rank not in self.alive:
            return
        self.alive.discard(rank)
        self.lost.add(rank)
        self.inflight.release_rank(rank)
        tokens = self.inflight.tokens_of(rank)
        log.error("worker.lost", worker=rank, reason=why, requeued=len(tokens))
        for token in tokens:
            self._revoke(token, Revocation.LOST, notify=False, charge=True)
        self._fill()
        if not self.alive:
            self.all_lost = True
            self.request_stop("all workers lost")

    def _check_finished(self) -> None:
        if self._stop.is_set() or not self.dispatching:
            return
        elapsed = self.clock() - self._t0
        duration, max_results = self._duration_s, self._max_results
        if duration and elapsed >= duration:
            self.request_stop("duration reached")
        elif max_results and self.stats.committed >= max_results:
            self.request_stop("max_results reached")
        elif not self.plan.fuzz_on and not len(self.scheduler) and not len(self.claims.queue) and not len(self.inflight) \
                and not len(self.triage.queue) \
                and self.afl_sync is None:
            self.request_stop("work exhausted")  # a mutation stage or AFL++ alongside never runs out

    # ------------------------------------------------------------------ dispatch

    def _fill(self, ranks: set[Rank] | None = None) -> None:
        """Dispatch to every free slot: of all workers, or (after a turn) of `ranks` only, the
        ranks that got a slot back or were left with one free (`_maybe_free`); the ticker's
        full fill catches capacity that time gives back (the end of a suspension)."""
        if not self.dispatching and not self.confirming:
            return
        self.hotpath.fills += 1
        t0 = 0 if self.hotpath.fills % SAMPLE else _ns()  # one fill in SAMPLE is timed (hotpath.py)
        maybe_free, alive, claims = self._maybe_free, self.alive, self.claims.queue
        for rank in self.workers if ranks is None else sorted(ranks):
            # Revoked dispatches the worker may still hold take slots too (inflight.py, held slots).
            free = self.peers.capacity(rank, self._depth_of(rank)) - self.inflight.occupied(rank) \
                if rank in alive else 0
            if free <= 0:
                maybe_free.discard(rank)
                continue
            view = self.scheduler.for_rank(rank, self._elsewhere_of(rank))
            while free > 0:
                item = claims.pop_for(rank, view.elsewhere) if len(claims) else None
                if item is None and self.dispatching and len(self.triage.queue):
                    item = self.triage.queue.pop_for(rank, view.elsewhere)
                if item is None and self.dispatching:
                    item = self.plan.pick(rank, view)
                if item is None:
                    if self.auto_depth is not None:
                        self.auto_depth.short(rank)  # its waiting says nothing of the round trip
                    break
                self._dispatch(rank, item)
                free -= 1
            if free > 0:
                maybe_free.add(rank)
            else:
                maybe_free.discard(rank)
        if t0:
            self.hotpath.dispatch_ns += _ns() - t0

    def _elsewhere_of(self, rank: Rank) -> Callable[[WorkItem], bool]:
        """`_elsewhere` for one rank, made once per rank (the fill asks for it on every turn)."""
        f = self._elsewhere_fns.get(rank)
        if f is None:
            f = self._elsewhere_fns[rank] = lambda it, r=rank: self._elsewhere(it, r)
        return f

    def _elsewhere(self, item: WorkItem, rank: Rank) -> bool:
        """Whether a rank other than `rank` that the item has not failed on could take it."""
        return any(r != rank and r in self.alive and r not in item.avoid and self.peers.capacity(r, self._depth_of(r))
                   for r in self.workers)

    def _depth_of(self, rank: Rank) -> int:
        return self.depth if self.auto_depth is None else self.auto_depth.depth(rank)

    def _dispatch(self, rank: Rank, item: WorkItem) -> None:
        token = self.minter.mint(rank)
        now = self.clock()
        self.inflight.add(token, rank, item.work_id, now, now + self.deadline_s if self.deadline_s else None)
        self.leased[token] = item
        self.afl.cur_item = item.queue_id or 0
        if not item.stage and not item.confirm and not item.minimize:  # the others are transient: fenced
            self.journal.lease(item.work_id, token)  # by token, not leased in the journal
        failpoints.hit("dispatch")
        version, delta = self.coverage.delta_since(self.worker_cov_version.get(rank, 0))
        self.worker_cov_version[rank] = version
        if item.stage:  # a slice ends with the budget, not after it
            duration = self.cfg["campaign.duration_s"]
            executor, options = item.stage, self.plan.slice_options(duration - (now - self._t0) if duration else None)
        elif item.minimize:
            executor, options = triage_mod.EXECUTOR, self.triage.options_for(item)
        else:
            executor, options = self.corpus_executor, self.options
        work = Work(token, item.work_id, item.data, item.sha256, executor, item.target, item.bound,
                    options, self.deadline_s, version, delta, item.attempts + 1)
        self.pump.send(rank, Tag.WORK, encode(work))
        self.stats.dispatched += 1
        if item.attempts:
            log.info("task.redispatched", work_id=item.work_id[:16], attempt=item.attempts + 1, worker=rank,
                     token=token[:16])

    def _revoke(self, token: DispatchToken, why: Revocation, *, notify: bool = True,
                charge: bool | None = None) -> None:
        """Revoke a dispatch and requeue its work. Only revocations the work caused count toward
        max_attempts (`charge`): its deadline (the default for EXPIRED) or its worker lost while
        running it; not a cancel at stop or a lost message."""
        d = self.inflight.revoke(token, why)
        item = self.leased.pop(token)
        self._maybe_free.add(d.rank)
        setattr(self.stats, why.value, getattr(self.stats, why.value) + 1)
        charge = why is Revocation.EXPIRED if charge is None else charge
        attempts = item.attempts + charge
        avoid = item.avoid if why is Revocation.CANCELLED else item.avoid | {d.rank}
        if item.stage:
            self.plan.slice_ended(item, committed=False)  # not redone: the next slice starts afresh
        elif item.confirm:
            if why is Revocation.CANCELLED or (charge and attempts >= self.cfg["dispatch.max_attempts"]):
                claim = self.claims.take(item.work_id)
                if claim is not None:
                    self.claims.abandoned += 1
                    self.peers.claim_done(claim.source)
            else:
                self.claims.queue.requeue(replace(item, attempts=attempts, avoid=avoid))
        elif item.minimize:
            self.triage.revoked(item, attempts=attempts, avoid=avoid, give_up=why is Revocation.CANCELLED
                                or (charge and attempts >= self.cfg["dispatch.max_attempts"]))
        elif charge and attempts >= self.cfg["dispatch.max_attempts"]:
            self.journal.fail(item.work_id, token, f"{why.value} after {attempts} attempts")
            self.stats.work_failed += 1
            log.error("task.failed", work_id=item.work_id[:16], attempts=attempts, reason=why.value)
        else:
            self.journal.requeue(item.work_id, token, why.value, charge=charge)
            if why is not Revocation.CANCELLED:
                self.scheduler.requeue(replace(item, attempts=attempts, avoid=avoid))
        if notify and d.rank in self.alive:
            self.pump.send(d.rank, Tag.CONTROL, encode(Control(ControlKind.CANCEL, (token,))))

    # ------------------------------------------------------------------ receive: the fence

    def _on_batch(self, batch: list[Inbound]) -> None:
        if self.pump is not None and self.pump.error is not None and not self._stop.is_set():
            log.error("pump.failed", error=repr(self.pump.error))
            self.alive.clear()
            self.request_stop("MPI pump failed")
        for m in batch:
            if not self.peers.enqueue(Rank(m.source), m):
                self._ban(Rank(m.source), f"more than {self.peers.policy.backlog_frames} frames waiting", flood=True)
        self._turn()

    def _turn(self) -> None:
        """Handle one fair turn of what the ranks sent (peers.py bounds each rank's share), then
        let the loop run other work before the next turn."""
        self._turn_scheduled = False
        for source, m in self.peers.turn(lambda m: len(m.frame)):
            if m.tag == Tag.RESULT:
                self._on_result(source, m.frame, m.oversized)
            elif m.tag == Tag.CONTROL:
                self._on_control(source, m.frame, m.oversized)
            elif self.peers.banned(source):
                self.control_banned += 1
            else:
                self.stats.control_rejected += 1
                log.warning("message.unexpected_tag", worker=source, tag=m.tag)
                self._garbage(source, len(m.frame))
        if self.peers.pending() and not self._turn_scheduled:
            self._turn_scheduled = True
            asyncio.get_running_loop().call_soon(self._turn)
        if self._maybe_free:
            self._fill(self._maybe_free)
        self._check_finished()
        self._changed.set()

    def _garbage(self, source: Rank, size: int = 0) -> None:
        if self.peers.garbage(source, size):
            self._ban(source, f"kept sending garbage (score over {self.peers.policy.ban_garbage:g})")

    def _ban(self, rank: Rank, why: str, *, flood: bool = False) -> None:
        """Stop dispatching to and decoding from a rank for good and requeue its work. It gets
        STOP with the others at the end (a rank that stops early would wait in MPI_Finalize)."""
        if rank not in self.workers or not self.peers.ban(rank, flood=flood):
            return
        self.inflight.banned_ranks.add(rank)
        tokens = self.inflight.tokens_of(rank)
        log.error("worker.banned", worker=rank, reason=why, requeued=len(tokens))
        self.alive.discard(rank)
        self.lost.discard(rank)
        self.inflight.release_rank(rank)
        for token in tokens:
            self._revoke(token, Revocation.LOST, notify=False)
        self._fill()
        if not self.alive:
            self.request_stop("all workers lost")


    def _on_failed(self, ranks: list[int]) -> None:
        """MPI (ULFM) reported these ranks dead."""
        for rank in ranks:
            self._lose_worker(Rank(rank), "MPI reported the process failed", failed=True)
        self._changed.set()

    def _on_result(self, source: Rank, frame: bytes, oversized: int = 0) -> None:
        self.stats.results_received += 1
        self.refusals.received(source)
        timed = not self.stats.results_received % SAMPLE  # one result in SAMPLE is timed (hotpath.py)
        t0 = _ns() if timed else 0
        if oversized and not self.inflight.banned(source):  # drained at the probe, never received
            verdict = Verdict(Reason.MALFORMED, detail=f"oversized: {oversized} > {self.limits.max_message_bytes}"
                                                       " bytes (drained unread)")
        else:
            verdict = classify(frame, source, self.inflight, self.limits)  # decide ...
        if timed:
            t1 = _ns()
            self.hotpath.decode_ns += t1 - t0
        if verdict.reason is Reason.CURRENT:
            self._commit(source, verdict.result)  # ... commit ...
            if timed:
                self.hotpath.commit_ns += _ns() - t1
        else:
            self._quarantine(source, verdict, max(len(frame), oversized))  # ... or quarantine
            if verdict.token is not None and self.inflight.release(verdict.token, source, SlotRelease.RESULT):
                self._maybe_free.add(source)  # a late answer: the worker let go of that dispatch


    def _quarantine(self, source: Rank, v: Verdict, size: int = 0) -> None:
        self.stats.quarantined(v.reason)
        if v.reason is Reason.BANNED:  # counted only: a banned rank cannot make us write logs
            return
        log.warning("result.quarantined", reason=v.reason.value, source_rank=source,
                    token=(v.token or "")[:16] or None, work_id=v.work_id, owner_rank=v.owner, detail=v.detail)
        if self.refusals.refused(source, v.reason, v.detail):  # the first of this rank and reason
            log.error("worker.results_refused", rank=source, reason=v.reason.value, detail=v.detail,
                      note="a rank that is not banned sent a result no honest worker sends: a bug in symfence"
                           + (" (or an injected fault)" if self.refusals.faults_enabled else ""))
        self._garbage(source, size)


    def _commit(self, source: Rank, result: Result) -> None:
        d = self.inflight.commit(result.token)
        item = self.leased.pop(result.token)
        self._maybe_free.add(source)
        st = self.stats
        st.committed += 1
        status = result.status
        st.status_counts[status.value] += 1
        self.peers.committed(source)
        # A result's claims are believed only as far as the time it took allows (peers.py).
        now_loop = self.clock()
        elapsed = max(now_loop - d.sent_at, 0.0)
        self.hotpath.latency.add(elapsed)  # dispatch-to-commit (hotpath.py)
        cost = result.cost
        execs = self.peers.plausible_execs(cost.execs, elapsed)
        wall_s = min(cost.wall_s, elapsed)
        if self.auto_depth is not None and (new := self.auto_depth.observe(source, d.sent_at, d.sent_at + elapsed, wall_s)):
            log.info("dispatch.depth_changed", worker=source, depth=new, **self.auto_depth.explain(source))
        st.record_result(source, wall_s, execs, min(cost.solver_s, elapsed))
        if result.stats:
            st.engine.add(item.target, result.stats, item.work_id)
        if item.confirm:
            self._confirmed(source, item, result)
            return
        if item.minimize:
            self.triage.done(item, result, source, now_loop - self._t0)
            return
        found_s = now_loop - self._t0
        progress = self.targets[item.target]
        progress.tasks += 1
        progress.execs += execs
        progress.errors += status is Status.ERROR
        if result.stats:
            self.solver_queries += int(result.stats.get("queries", 0))
            self.solver_timeouts += int(result.stats.get("unknown", 0))
        stage = self.plan.stage_of(item)
        fig = self.plan.figures[stage]
        fig.results += 1
        fig.execs += execs
        fig.busy_s += wall_s
        candidates = result.candidates
        if len(candidates) > execs:  # every candidate costs the worker one execution
            st.triage_rejected["over_work"] += len(candidates) - execs
            candidates = candidates[:execs]
            self._garbage(source)
        traces = self._claimed_coverage(source, result, candidates, execs)
        if traces is not None:
            self._merge_trace(traces[0], item.target, stage)
        if result.tokens:
            self.plan.add_tokens(item.target, result.tokens)
        for c in candidates:  # claimed crashes and hangs: saved only once a re-run agrees
            if c.kind in _FINDING_STATUS and sha256_hex(c.data) == c.sha256:
                self._claim(c.kind, c.data, c.sha256, c.detail, item, source, found_s)
        if status in _FINDING_STATUS:
            self._claim(status, item.data, item.sha256, result.error, item, source, found_s)
        elif status is Status.ERROR:
            if not st.first_error:
                st.first_error = (result.error.strip().splitlines() or ["(no message)"])[-1][:300]
            log.warning("task.error", worker=source, work_id=item.work_id[:16], error=result.error[-300:])
        entries: list[NewEntry] = []
        for i, c in enumerate(candidates):
            sha = sha256_hex(c.data)
            if sha != c.sha256:
                st.triage_rejected["bad_sha256"] += 1
            elif c.kind in (Status.CRASH, Status.HANG):
                continue
            elif traces is None:
                st.triage_rejected["coverage_cap"] += 1
            elif traces[i + 1] is None:
                st.triage_rejected["bad_trace"] += 1
            elif (bits := self._merge_trace(traces[i + 1], item.target, stage)) == 0:
                st.triage_rejected["no_new_bits"] += 1
            else:
                wid = work_id_for(self.corpus_executor, item.target, sha, c.bound, self.options)
                entries.append(NewEntry(sha256=sha, data=c.data, bound=c.bound, parent=item.queue_id,
                                        origin=stage.value, new_bits=bits, found_s=found_s,
                                        work_id=wid, target=item.target))
        if item.stage:
            self.plan.slice_ended(item, committed=True)
            receipt = self.journal.record_transient(item.work_id, new_entries=entries)
        else:
            receipt = self.journal.commit(item.work_id, result.token, status=status,
                                          new_entries=entries)
        failpoints.hit("commit")
        if receipt is None:  # the journal-level fence: cannot happen unless state diverged
            st.journal_fence_rejected += 1
            log.error("commit.journal_fenced", work_id=item.work_id[:16], token=result.token[:16])
            return
        st.triage_rejected["duplicate_input"] += receipt.skipped_entries
        if receipt.entries:
            now = time.time()
            for e in receipt.entries:
                self._queue_entry(e)
                self.afl.entry(e.queue_id, e.parent, now)
                self.journal.note_provenance("queue", e.queue_id, source)
            progress.corpus += len(receipt.entries)
            progress.last_find = now
            st.corpus += len(receipt.entries)
            fig.new_inputs += len(receipt.entries)

    def _queue_entry(self, entry: Any) -> None:
        """A new durable-to-be corpus entry: the engine's queue (if it runs) and the fuzzer's."""
        if self.plan.concolic_on:
            self.scheduler.add(WorkItem.from_record(entry))
        self.plan.add_entry(entry.target, entry.data)

    def _merge_trace(self, trace: dict[int, int], target: str, stage: Stage) -> int:
        if not trace:
            return 0
        seen = self.coverage.seen
        fresh = sum(1 for edge in trace if not seen[edge])  # edges it reached first
        self.targets[target].edges += fresh
        self.plan.figures[stage].edges_first += fresh
        return self.coverage.merge(trace)

    def _claimed_coverage(self, source: Rank, result: Result, candidates: tuple, execs: int) -> list | None:
        """Decoded traces (the task's, then each candidate's; None for an undecodable one), or
        None when together they claim more never-seen edges than the work allows (peers.py)."""
        if not result.trace and not any(c.trace for c in candidates):  # claims no coverage: nothing
            return [{} for _ in range(1 + len(candidates))]               # to decode, cap or spend
        traces: list[dict[int, int] | None] = []
        for packed in (result.trace, *(c.trace for c in candidates)):
            try:
                traces.append(unpack_trace(packed) if packed else {})
            except ValueError:
                traces.append(None)
        if traces[0] is None:
            self.stats.triage_rejected["bad_trace"] += 1
            traces[0] = {}
        seen = self.coverage.seen
        new = {i for t in traces if t for i in t if not seen[i]}
        if not new:  # nothing never-seen: nothing to cap or spend (the budget refills by time alone)
            return traces
        allowance = self.peers.new_edge_allowance(source, execs)
        if len(new) > allowance:
            self.stats.triage_rejected["coverage_cap"] += 1
            log.warning("result.coverage_capped", worker=source, token=result.token[:16], new_edges=len(new),
                        allowed=allowance, execs=execs)
            self._garbage(source)
            return None
        self.peers.spend_edges(source, len(new))
        return traces


    def _claim(self, kind: Status, data: bytes, sha: str, detail: str, item: WorkItem, source: Rank,
               found_s: float) -> None:
        """A crash/hang the result claims: saved only once a re-run agrees (confirm.py)."""
        if kind is Status.CRASH:
            self.stats.crashes_total += 1
            ident = self.triage.identity(detail, item.target)  # frameless (native): known after its re-run
            if ident.has_frames and self.triage.is_known(item.target, ident):
                self.stats.triage_rejected["known_crash"] += 1
                return
        if kind is Status.HANG:
            self.tmouts += 1
        if not self.peers.claim(source):
            self.stats.triage_rejected["claims_backlog"] += 1
            return
        claim = Claim(kind, data, sha, detail, item.target, source, item.work_id, found_s, self.plan.stage_of(item))
        task = self.claims.task_for(claim)
        if not self.claims.queue.add(task):  # the same input is already claimed (or re-run)
            self.peers.claim_done(source)
            self.stats.triage_rejected["duplicate_claim"] += 1
            return
        self.claims.add(claim, task)


    def _confirmed(self, source: Rank, item: WorkItem, result: Result) -> None:
        """The re-run of a claimed crash/hang came back: save the finding if it agrees."""
        claim = self.claims.take(item.work_id)
        if claim is None:
            return
        self.peers.claim_done(claim.source)
        if not self.claims.agrees(claim, result.status):
            self.claims.unconfirmed += 1
            log.warning("finding.unconfirmed", kind=claim.kind.value, claimed_by=claim.source, rerun_by=source,
                        rerun_status=result.status.value, target=claim.target, sha256=claim.sha256[:16])
            self._garbage(claim.source)
            return
        detail = result.error or claim.detail  # the re-running rank's own account
        ident = None
        if claim.kind is Status.CRASH:
            ident = self.triage.identity(detail, claim.target, self._trace_edges(result.trace))
            if self.triage.is_known(claim.target, ident):
                self.stats.triage_rejected["known_crash"] += 1
                return
            self.triage.remember(claim.target, ident)
        self.claims.confirmed += 1
        finding = NewFinding(kind=claim.kind.value, sha256=claim.sha256, data=claim.data, detail=detail,
                             found_s=claim.found_s, target=claim.target)
        now = time.time()
        for f in self.journal.add_findings(claim.parent_work_id, [finding]):
            self.journal.note_provenance(f.kind.value, f.finding_id, claim.source, source)
            self.triage.saved(f, ident, claim.stage.value if claim.stage is not None else "")
            progress, fig = self.targets[claim.target], self.plan.figures[claim.stage]
            if f.kind.value == "crash":
                self.afl.crash(now, self.stats.execs)
                progress.crashes += 1
                fig.crashes += 1
            else:
                self.afl.hang(now)
                progress.hangs += 1
                fig.hangs += 1
            log.warning(f"finding.{finding_class(f.kind.value, f.detail).value}", finding_id=f.finding_id,
                        target=claim.target,
                        identity=ident.key if ident is not None else "timeout",
                        found_s=round(claim.found_s, 2), worker=claim.source, confirmed_by=source)


    @staticmethod
    def _trace_edges(packed: bytes) -> list[int] | None:
        """The edges of a packed trace (a frameless crash's identity), None if it has none."""
        try:
            return list(unpack_trace(packed)) if packed else None
        except ValueError:
            return None

    def _on_control(self, source: Rank, frame: bytes, oversized: int = 0) -> None:
        if self.peers.banned(source):
            self.control_banned += 1
            return
        if oversized:
            self.stats.control_rejected += 1
            log.warning("control.rejected", worker=source, reason="malformed", detail=f"oversized: {oversized} bytes")
            self._garbage(source, oversized)
            return
        try:
            ctl = decode_control(frame, self.limits)
        except RemoteProtocolError as exc:
            self.stats.control_rejected += 1
            log.warning("control.rejected", worker=source, reason=exc.reason.value, detail=exc.detail)
            self._garbage(source, len(frame))
            return
        self.last_seen[source] = self.clock()
        if ctl.kind is ControlKind.HELLO:
            if source in self.workers and source not in self.alive:
                self.alive.add(source)
                self.pump.send(source, Tag.CONTROL, encode(Control(ControlKind.SETUP, info=self._setup_info(source))))
                self.hosts.hosts[source] = str(ctl.info.get("host", ""))
                log.info("worker.ready", worker=source, host=ctl.info.get("host"), pid=ctl.info.get("pid"))
        elif ctl.kind is ControlKind.HEARTBEAT:
            if source in self.lost and source not in self.failed and not self._stop.is_set():
                self._readmit(source, ctl.tokens)
            self._repair_from_heartbeat(source, set(ctl.tokens), ctl.info.get("work_received", 0))
            rss = ctl.info.get("rss_mb")
            if type(rss) is int:
                self.worker_rss_mb[source] = rss
        elif ctl.kind is ControlKind.CHECKED and source in self.alive:
            self.hosts.on_checked(source, ctl.info)
            self._changed.set()
        elif ctl.kind is ControlKind.LOG and source in self.workers:
            self.hosts.on_log(source, ctl.info)
        elif ctl.kind is ControlKind.STOP_ACK and source in self.stop_sent and source not in self.stop_acks:
            self.stop_acks[source] = dict(ctl.info)
            log.info("worker.stopped", worker=source, totals={k: v for k, v in ctl.info.items() if k != "faults"})
        else:
            self.stats.control_rejected += 1
            log.warning("control.unexpected", worker=source, kind=ctl.kind.value,
                        detail="no STOP was sent to this rank, or it already acknowledged"
                        if ctl.kind is ControlKind.STOP_ACK else "not a worker's message")
            self._garbage(source, len(frame))


    def _readmit(self, rank: Rank, held: tuple[DispatchToken, ...]) -> None:
        """A worker declared lost is talking again (it was hung, not dead): take it back.
        Everything it still holds was revoked when it was lost, so cancel all of it."""
        self.lost.discard(rank)
        self.alive.add(rank)
        stale = tuple(t for t in held if self.inflight.owner(t) != rank)
        for t in stale:  # revoked from it while it was lost, still held: a slot until let go
            self.inflight.hold(t, rank)
        if stale:
            self.pump.send(rank, Tag.CONTROL, encode(Control(ControlKind.CANCEL, stale)))
        log.warning("worker.returned", worker=rank, cancelled=len(stale))
        self._fill()

    def _repair_from_heartbeat(self, rank: Rank, held: set[DispatchToken], work_received: int) -> None:
        """Revoke tokens the worker should hold (their WORK arrived) but does not: lost messages."""
        if rank not in self.alive:
            return
        for token in self.inflight.tokens_of(rank):
            d = self.inflight.get(token)
            if d.send_index < work_received and token not in held:
                log.warning("task.lost", worker=rank, token=token[:16], reason="not held by worker")
                self._revoke(token, Revocation.LOST, notify=False)
        if self.inflight.release_unheld(rank, held, work_received):
            self._maybe_free.add(rank)  # it let go of revoked dispatches: their slots are free

    def _setup_info(self, rank: Rank) -> dict[str, Any]:
        faults = self.cfg.section("faults")
        return {
            "rank": rank,
            "heartbeat_s": self.cfg["workers.heartbeat_s"],
            "orphan_after_s": self.cfg["workers.orphan_after_s"],
            "poll_cap_ms": self.cfg["workers.poll_cap_ms"],
            "log_path": str(self.out.logs / f"worker-{rank}.jsonl"),
            "scratch_dir": self.cfg["workers.scratch_dir"],
            "epoch": self.minter.epoch.hex()[:16],
            "files": self.hosts.files,
            "faults": faults if faults["enabled"] else {},
            **self.limits.to_info(),  # the worker's sender fits its results to these (worker/sender.py)
            "world_size": self.comm.Get_size(),
        }

    # ------------------------------------------------------------------ outputs

    def _snapshot_state(self) -> None:
        """Buffer the coverage map (when it changed) and the counters for the next flush."""
        if self.coverage.version != self._saved_cov_version:
            self.journal.save_coverage(self.coverage.to_bytes())
            self._saved_cov_version = self.coverage.version
        self.journal.save_counters(self._counters())

    def _flush(self) -> None:
        """Hand what the journal buffered to the writer thread; its effects follow in `_durable`.
        At most one batch is out: while one is written, the next waits in the journal."""
        if self.writer is None or self.writer.busy or self.writer.stopped:
            return
        t0 = _ns()
        self._snapshot_state()
        batch = self.journal.prepare()
        if batch is not None:
            self.writer.submit(batch)
        self.hotpath.flush_ns += _ns() - t0

    async def _writer_idle(self) -> None:
        while self.writer.busy:
            await self._wait_change(0.05)

    def _write_failed(self, batch: FlushBatch | None, exc: BaseException) -> None:
        """The writer thread could not write a batch (kept for the next flush) or a queue file."""
        if batch is not None:
            self.journal.finish(batch, ok=False)
            self.writer.busy = False
        self._changed.set()
        self.fail(exc)

    def _durable(self, batch: FlushBatch, receipt: FlushReceipt) -> None:
        """A batch is durable (writer thread): finish it, then what may follow a commit."""
        t0 = _ns()
        self.journal.finish(batch, ok=True)
        self.writer.busy = False
        self._changed.set()
        try:
            self._announce(receipt)
        except Exception as exc:  # noqa: BLE001 - a failed write stops the run like any other
            self.fail(exc)
        self.hotpath.flush_ns += _ns() - t0

    def _flush_now(self) -> None:
        """The end of the run: flush on this thread, completely. The queue files still owed are
        written by `write_owed_files`, after MPI_Finalize (the workers need not wait for them)."""
        self._snapshot_state()
        failpoints.hit("flush.before", self.journal.path)
        durable = self.journal.flush()
        failpoints.hit("flush.after")
        if self.writer is not None:
            self.writer.add_files(durable.entries)
            if self.writer.files_pending:
                log.info("outputs.queue_files_owed", files=self.writer.files_pending)
        else:
            for e in durable.entries:
                failpoints.hit("queue", self.out.queue)
                self.out.queue_entry(e.queue_id, e.data, parent=e.parent, origin=e.origin, new_bits=e.new_bits)
        self._announce(durable)

    def write_owed_files(self) -> int:
        """Write the queue files of durable entries that the writer thread had not written yet
        (after the run; raises OSError like any failed write)."""
        return self.writer.drain_files() if self.writer is not None else 0

    def _announce(self, durable: FlushReceipt) -> None:
        """What a durable batch allows: AFL++ export, finding files, their counters and logs."""
        if self.afl_sync is not None:
            self.afl_sync.export(durable.entries)
        for f in durable.findings:
            key, sig = self.triage.sig_of(f.kind.value, f.finding_id)
            path = self.out.finding(f.kind.value, f.finding_id, f.data, detail=f.detail, target=f.target,
                                    identity=key, sig=sig)
            if f.kind.value == "crash":
                self.stats.crashes += 1
                self.stats.ooms += finding_class("crash", f.detail) is FindingClass.OOM
            else:
                self.stats.hangs += 1
            log.info("finding.saved", kind=f.kind.value, path=str(path))

    def _counters(self) -> dict[str, int]:
        st = self.stats
        out = carryover.saved_counters(st)
        out.update(self.afl.counters(st.execs, st.crashes_total, self.tmouts, time.time()))
        out.update(self.targets.counters())
        out.update(self.plan.counters())
        if self.afl_sync is not None:
            out.update(self.afl_sync.counters())  # its sessions and queue directories
        return out

    def _snapshot(self) -> Snapshot:
        st = self.stats
        st.edges = MAP_SIZE - self.coverage.seen.count(0)
        elapsed = max(self.clock() - self._t0, 1e-9)
        now = time.time()

        def since(unix: float) -> float | None:
            return now - unix if unix else None

        targets = tuple(TargetLine(name, p.corpus, p.edges, p.crashes, p.hangs, p.execs, p.errors, since(p.last_find))
                        for name, p in self.targets.by_target.items())
        reasons = tuple((k, v) for k, v in st.quarantine.snapshot().items() if v)
        return Snapshot(
            elapsed, st.execs / elapsed, (st.committed - st.carried_committed) / elapsed, st.edges, st.corpus, len(self.scheduler),
            st.crashes, st.hangs, len(self.inflight), st.quarantine.total, len(self.alive),
            ooms=st.ooms, task_errors=st.task_errors, since_path_s=since(self.afl.last_find),
            since_crash_s=since(self.afl.last_crash), since_hang_s=since(self.afl.last_hang),
            solver_s=st.solver_s, solver_queries=self.solver_queries, solver_timeouts=self.solver_timeouts,
            map_density=100.0 * st.edges / MAP_SIZE,
            memory_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss >> 10,
            workers_memory_mb=sum(self.worker_rss_mb.get(r, 0) for r in self.alive), targets=targets,
            quarantine_reasons=reasons, conservation_ok=all(ok for _, ok in st.conservation(len(self.inflight))),
            show_quarantine=self.status.show_quarantine, stages=self.plan.status_text(),
            refused=self.refusals.live_text())

    def _write_stats(self) -> None:
        """fuzzer_stats (AFL++'s keys first, then symfence's) and one plot_data row."""
        failpoints.hit("stats", self.out.root / "fuzzer_stats")
        st = self.stats
        st.edges = MAP_SIZE - self.coverage.seen.count(0)
        now = time.time()
        pending, in_flight = len(self.scheduler), len(self.inflight)
        cycles_done = 1 if self.stop_reason == "work exhausted" else 0  # every queued input ran once
        last_min = self.afl.sample(now, self.afl.prev_execs + st.execs)
        afl_rows = self.afl.stats_items(
            now=now, execs=st.execs, execs_last_min=last_min, corpus=st.corpus, seeds=self.seed_count,
            pending=pending, pending_favs=0, edges=st.edges, saved_crashes=st.crashes, saved_hangs=st.hangs,
            cycles_done=cycles_done, exec_timeout_ms=self._exec_timeout_ms(), banner=self.cfg["campaign.name"],
            command_line=" ".join([sys.executable, *sys.argv]), total_tmout=self.tmouts)
        own = st.items(now=now, in_flight=in_flight, pending=pending, ranks=self.workers, extra={
            "dispatch_depth": self.depth, "workers_alive": len(self.alive),
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
        values = self.afl.plot_values(now=now, execs=st.execs, eps=st.execs / elapsed, cycles_done=cycles_done,
                                      corpus=st.corpus, pending=pending, pending_favs=0, edges=st.edges,
                                      saved_crashes=st.crashes, saved_hangs=st.hangs)
        values += [st.committed, st.quarantine.total, in_flight, st.task_errors, st.ooms,
                   f"{(st.committed - st.carried_committed) / elapsed:.2f}"]
        values += self.plan.plot_values() + st.engine.plot_values()
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
        import resource

        return {"mpi_oversized_frames": self.pump.oversized_frames, "mpi_oversized_bytes": self.pump.oversized_bytes,
                "mpi_side_frames_dropped": self.pump.side_frames_dropped, "control_banned": self.control_banned,
                **self.peers.stats_items(), **self.claims.stats_items(), **self.refusals.stats_items(),
                "coordinator_max_rss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}


    def summary(self) -> str:
        st = self.stats
        lines = [
            f"campaign finished: {self.stop_reason}",
            f"  committed {st.committed}, quarantined {st.quarantine.total}, corpus {st.corpus},"
            f" edges {st.edges}, unique crashes {st.crashes}"
            + (f" ({st.ooms} out of memory)" if st.ooms else "") + f", hangs {st.hangs}, execs {st.execs},"
            f" task errors {st.task_errors}",
        ]
        if st.task_errors:
            every = "EVERY task errored" if st.all_tasks_errored() else f"{st.task_errors} of {st.committed} tasks errored"
            lines.append(f"  {every}; first error: {st.first_error}  (all: symfence logs {self.out.root} --event task.error)")
        lines += [
            "  quarantine counters:",
            *("    " + l for l in st.quarantine.render().splitlines()),
            "  conservation (docs/design.md, \"Conservation\"):",
        ]
        for text, ok in st.conservation(len(self.inflight)):
            lines.append(f"    [{'ok' if ok else 'VIOLATED'}] {text}")
        lines += self.refusals.summary_lines(self._refused(), str(self.out.root))
        lines.append(f"  outputs: {self.out.root}/ (queue/, crashes/, hangs/, fuzzer_stats, plot_data, logs/)")
        if st.crashes:
            lines.append(f"  crashing inputs: {self.out.crashes}/")
        return "\n".join(lines)
