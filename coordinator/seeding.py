"""Seeding and resume: the seeds, what a `--resume` continues, files a kill left unwritten, AFL++ imports.

Runs on the loop thread before the first dispatch (`SeedingMixin._seed`), and for AFL++'s queue
entries from the ticker (`_import_afl`). New corpus entries enter the pipeline here as work
items of kind `WorkKind.CORPUS` (coordinator/scheduler.py).
"""

from __future__ import annotations

import asyncio
import gc
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import structlog

from symfence.coordinator.engines import MODES, TargetKind, target_of
from symfence.coordinator import carryover, failpoints
from symfence.coordinator.afl import AflState
from symfence.coordinator.aflsync import SYNC_PREFIX, sync_origin
from symfence.coordinator.config import Config
from symfence.coordinator.journal import NewEntry
from symfence.coordinator.outputs import FindingClass, finding_class
from symfence.coordinator.reconcile import reconcile
from symfence.coordinator.scheduler import WorkItem
from symfence.protocol.coverage import CoverageMap
from symfence.protocol.ids import WorkId, sha256_hex, work_id_for, work_id_maker

if TYPE_CHECKING:
    from collections.abc import Iterable

    from symfence.coordinator.aflsync import AflSide
    from symfence.coordinator.core import Core
    from symfence.coordinator.effects import Effect
    from symfence.coordinator.hotpath import HotPath
    from symfence.coordinator.hybrid import HybridPlan
    from symfence.coordinator.journal import Journal
    from symfence.coordinator.outputs import OutputDir
    from symfence.coordinator.scheduler import Scheduler
    from symfence.coordinator.sharedwork import SharedWork
    from symfence.coordinator.stats import Stats
    from symfence.coordinator.targets import TargetTracker
    from symfence.coordinator.triage import Triage
    from symfence.coordinator.writer import JournalWriter
    from symfence.protocol.ids import Rank

log = structlog.get_logger()


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
    """The campaign's seed inputs: `campaign.seeds`' files, or the executor's default seeds."""
    if cfg["campaign.seeds"]:
        folder = Path(cfg["campaign.seeds"])
        seeds = _read_folder(folder)
        if not seeds:
            raise FileNotFoundError(f"campaign.seeds: no seed files in {folder}")
        return seeds
    if MODES[cfg["campaign.executor"]].corpus.target is TargetKind.SYNTHETIC:
        return [i.to_bytes(4, "big") for i in range(cfg["synthetic.seeds"])]
    if target_of(cfg["campaign.executor"]) is TargetKind.NATIVE:
        return [bytes(32)]  # AFL-style: a non-empty input (32 zero bytes)
    return [b"\x00"]


SEED_STEP = 1024  # seeds journaled per step of the background seeding (after `campaign.seed_first`)
SEED_SHARE = 0.5  # of the event loop's time, at most, for the background seeding


class SeedingMixin:
    """The coordinator's seeding and resume (state: scheduler, journal, plan, afl, targets, seed_count,
    and the seeds not journaled yet: `_seeds_left`)."""

    # What it uses of the campaign, declared: bare annotations and TYPE_CHECKING-only stubs shadow nothing.
    cfg: Config
    clock: Callable[[], float]
    out: OutputDir
    journal: Journal
    writer: JournalWriter | None
    core: Core
    triage: Triage
    afl_sync: AflSide | None
    shared: SharedWork | None
    hotpath: HotPath
    stats: Stats
    scheduler: Scheduler
    plan: HybridPlan
    afl: AflState
    targets: TargetTracker
    coverage: CoverageMap
    corpus_executor: str
    options: dict[str, Any]
    seed_count: int
    imported_count: int
    _seeds_left: list[tuple[str, bytes, str]]
    _seeds_total: int
    _stop: asyncio.Event
    _t0: float

    if TYPE_CHECKING:
        def _apply(self, effects: Iterable[Effect]) -> None: ...
        def _fill(self, ranks: set[Rank] | None = None) -> None: ...
        def _flush(self) -> None: ...
        def _queue_entry(self, entry: Any) -> None: ...

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
        known = self.journal.has_input  # a resume: the seeds it holds already are skipped here
        left = [(target, data, sha) for target in self.cfg["campaign.targets"]
                for data, sha in zip(seeds, shas, strict=True) if not known(target, sha)]
        failpoints.hit("seed")
        # The first `campaign.seed_first` now (durable before the first dispatch: `_start` waits
        # for the writer); the rest from `seed_rest`, a step at a time while dispatch runs. 100,000
        # seeds all at once took 2.8 s before the first dispatch (a second to journal them, 1.6 s
        # to write them). All at once with AFL++ beside or a campaign store: both start from the
        # journal's whole corpus.
        first = self.cfg["campaign.seed_first"]
        if not first or self.afl_sync is not None or self.shared is not None:
            first = len(left)
        self._seeds_left = left[::-1]  # taken from the end, in seed order
        self._seeds_total = len(left)
        self.core.seeds_pending = True
        self._seed_step(first)
        if resuming and self._seeds_total:
            log.info("campaign.seeds_added", seeds=self._seeds_total,
                     targets=sorted({target for target, _, _ in left}))
        # The seeds' batch goes to the writer thread now (`_start` waits for it); their queue/
        # files follow there, in slices, while dispatch runs (each once its entry is durable).
        self._flush()

    def _seed_step(self, limit: int) -> int:
        """Journal the next `limit` seeds not journaled yet and queue them; returns how many."""
        left = self._seeds_left
        cut = len(left) - max(0, min(limit, len(left)))
        chunk = left[cut:][::-1]
        del left[cut:]
        makers: dict[str, Callable[[str], WorkId]] = {}
        entries = []
        for target, data, sha in chunk:
            work_id = makers.get(target)
            if work_id is None:
                work_id = makers[target] = work_id_maker(self.corpus_executor, target, 0, self.options)
            entries.append(NewEntry(sha256=sha, data=data, bound=0, parent=None, origin="seed", new_bits=0,
                                    found_s=0.0, work_id=work_id(sha), target=target))
        added = self.journal.add_seeds(entries)
        self.core.seeded(added)  # the core's queues
        self.seed_count += len(added)
        self.stats.corpus = self.journal.corpus_count()
        if not self._seeds_left:
            self.core.seeds_pending = False
        return len(added)

    async def seed_rest(self) -> None:
        """The seeds past the first `campaign.seed_first`, SEED_STEP at a time, into the
        journal's ordinary group commits. After each step the loop handles results for as long
        as the step took (SEED_SHARE): without that rest, steps back to back cut the results
        committed in a 4 s no-op campaign from ~36,000 to ~5,000. A stop leaves the rest out of
        the journal; `--resume` adds them then."""
        t0 = time.monotonic()
        rest = len(self._seeds_left)
        while self._seeds_left and not self._stop.is_set():
            cpu0, t = time.thread_time_ns(), time.monotonic()
            gc.disable()  # as `_seed`: no collection traverses the entries while they are made
            try:
                self._seed_step(SEED_STEP)
                failpoints.hit("seed.step")
            finally:
                gc.enable()
            self.hotpath.seeding_ns += time.thread_time_ns() - cpu0
            took = time.monotonic() - t
            self._apply(self.core.refill())  # ranks the queue had run dry on get work now
            await asyncio.sleep(took * (1 - SEED_SHARE) / SEED_SHARE)
        gc.freeze()  # the entries made, as after `_seed`: out of every later collection
        if not self._seeds_left:
            self.hotpath.mark("seeds_all")
        log.info("campaign.seeded", seeds=self._seeds_total, after_first_dispatch=rest,
                 seconds=round(time.monotonic() - t0, 3), left=len(self._seeds_left))

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
            if e.parent is None:  # a seed, or an entry imported from AFL++ (fuzzer_stats counts them apart)
                imported = e.origin.startswith(SYNC_PREFIX)
                self.imported_count += imported
                self.seed_count += not imported
            self.targets[e.target].corpus += 1
            if f"id:{e.queue_id:06d}" not in have:
                missing.append(e)
        assert self.writer is not None  # made by `Campaign.run` before it seeds (or resumes)
        self.writer.add_files(missing)
        restored = len(missing)
        saved = {kind: {name.split(",", 1)[0] for name in self.out.existing(kind)}
                 for kind in ("crash", "hang")}
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
            if f"id:{f.finding_id:06d}" not in saved[f.kind.value]:
                key, sig = self.triage.sig_of(f.kind.value, f.finding_id)
                self.out.finding(f.kind.value, f.finding_id, f.data, detail=f.detail, target=f.target,
                                 identity=key, sig=sig)
                restored += 1
        return restored

    def _import_afl(self) -> None:
        """New AFL++ queue entries become pending work (origin sync:<instance>:<id>)."""
        assert self.afl_sync is not None  # the ticker imports only with AFL++ beside
        entries = []
        for imp in self.afl_sync.poll():
            sha = sha256_hex(imp.data)
            wid = work_id_for(self.corpus_executor, self.afl_sync.target, sha, 0, self.options)
            entries.append(NewEntry(sha256=sha, data=imp.data, bound=0, parent=None,
                                    origin=sync_origin(imp.instance, imp.entry_id), new_bits=2,
                                    found_s=self.clock() - self._t0, work_id=wid,
                                    target=self.afl_sync.target))
        added = self.journal.add_seeds(entries) if entries else []
        now = time.time()
        for e in added:
            self._queue_entry(e)
            self.afl.entry(e.queue_id, None, now)
            self.targets[e.target].corpus += 1
        self.imported_count += len(added)
        if added:
            self.stats.corpus = self.journal.corpus_count()
            self._fill()
