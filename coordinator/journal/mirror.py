"""The Journal: the coordinator's durable state, as an in-memory mirror group-committed to SQLite.

It holds work leases, the corpus, findings, the coverage snapshot, counters and runs.

Every mutation applies at once to the in-memory mirror, so compare-and-set decisions and id
assignment never wait on disk. `flush()` writes everything buffered since the last flush in ONE
SQLite transaction (store.py) and returns the corpus entries and findings that just became
durable: only those may be announced (`queue/`, `crashes/`, `hangs/` files). After a SIGKILL
everything unflushed is lost and simply redone; everything flushed is exact, and queue and
finding ids continue from the durable maximum + 1 (unflushed ids were never shown).

The work items' states move only through the lease table (leases.py); opening a journal checks
its content (recovery.py) and voids the leases of the run before.

Why this module is over 500 lines: it is the journal's whole public interface (about 45 short
methods: open/close, runs, reads, leases and commits, group commit), each a few lines over
leases.py, store.py and batch.py; splitting the class would split its one interface.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import replace
from pathlib import Path
from typing import BinaryIO, cast

from symfence.coordinator.journal import recovery, store
from symfence.coordinator.journal.batch import GroupCommit
from symfence.coordinator.journal.errors import JournalError, JournalReadOnlyError
from symfence.coordinator.journal.records import (
    RECOVERED_WORK_ID,
    CommitReceipt,
    CorpusEntry,
    Finding,
    FindingKind,
    FlushBatch,
    FlushReceipt,
    JournalSnapshot,
    NewEntry,
    NewFinding,
    RecoveryReport,
    RunRecord,
    WorkLease,
    WorkState,
    WorkView,
)
from symfence.coordinator.journal.store import Durability
from symfence.protocol.ids import DispatchToken, WorkId
from symfence.protocol.messages import Status


class Journal:
    """The coordinator's durable state. Only the event loop thread mutates it; one other thread
    may `write` a batch the loop `prepare`d (the coordinator's writer thread, writer.py).

    `batch_ops` counts buffered records: work-state changes, new entries and findings, snapshots.
    """

    def __init__(
        self,
        conn: sqlite3.Connection,
        path: Path,
        *,
        readonly: bool,
        lock: BinaryIO | None,
        batch_ops: int,
        batch_ms: float,
        clock: Callable[[], float],
    ) -> None:
        if batch_ops < 1 or batch_ms < 0:
            raise ValueError("batch_ops must be >= 1 and batch_ms >= 0")
        self.path = path
        self.recovery: RecoveryReport | None = None
        self._conn: sqlite3.Connection | None = conn
        self._readonly = readonly
        self._lock = lock
        # The mirror, the current truth, durable or not: filled from one checked read.
        loaded = recovery.load(conn, path, readonly=readonly)
        self._leases = loaded.leases
        self._inputs = loaded.inputs  # (target, sha256) of every corpus entry
        self._next_queue_id = loaded.next_queue_id
        self._finding_inputs = loaded.finding_inputs
        self._next_finding_id = loaded.next_finding_id
        self._runs: list[RunRecord] = loaded.runs
        self._current_run: int | None = None
        self._coverage = loaded.coverage
        self._counters = loaded.counters
        # The content digest of what is durable (integrity.py): only writes change it.
        self._digests = loaded.digests
        # What the next flush writes (besides the lease rows changed since the last one).
        self._group = GroupCommit(batch_ops, batch_ms / 1000.0, clock)
        self._note = self._group.note
        self._synchronous = Durability.NORMAL.value
        self._extra_conns: list[sqlite3.Connection] = []

    # --- opening and closing ---------------------------------------------------------------

    @classmethod
    def open(
        cls,
        path: Path | str,
        *,
        resume: bool,
        batch_ops: int = 256,
        batch_ms: float = 50.0,
        clock: Callable[[], float] = time.monotonic,
        synchronous: Durability | str = Durability.NORMAL,
    ) -> Journal:
        """Create a journal at `path`, or resume an existing one (requeueing its leased work).

        A flush is due once `batch_ops` records are buffered or the oldest is `batch_ms` old.
        The report of what recovery found is `journal.recovery`. Resuming refuses (with
        `JournalDamagedError`) an empty file, a file without the schema, and any damage that
        integrity_check, the schema comparison or the content digest finds.
        """
        path = Path(path)
        durability = Durability(synchronous)
        with store.open_writable(path, resume=resume, durability=durability) as (conn, lock):
            journal = cls(
                conn, path, readonly=False, lock=lock,
                batch_ops=batch_ops, batch_ms=batch_ms, clock=clock,
            )
            journal._synchronous = durability.value
            journal.recovery = journal._recover()
        return journal

    @classmethod
    def read_only(cls, path: Path | str) -> Journal:
        """Open for inspection (`symfence status`): no recovery, no lock, every mutation refused.

        Safe while a coordinator is writing. Every read sees one snapshot (the last flush before
        this call) until close(); SQLite may create the -wal/-shm side files, never the database.
        The same checks as `open` apply: a damaged journal raises `JournalDamagedError`.
        """
        path = Path(path)
        with store.open_read_only(path) as conn:
            return cls(
                conn, path, readonly=True, lock=None,
                batch_ops=1, batch_ms=0.0, clock=time.monotonic,
            )

    def close(self) -> FlushReceipt:
        """Flush, close and release the lock. Returns the final flush: write its files too."""
        if self._conn is None:
            return FlushReceipt()
        try:
            return FlushReceipt() if self._readonly else self.flush()
        finally:
            for extra in self._extra_conns:
                extra.close()
            self._extra_conns = []
            self._conn.close()
            self._conn = None
            if self._lock is not None:
                self._lock.close()
                self._lock = None

    @property
    def closed(self) -> bool:
        return self._conn is None

    # --- runs ------------------------------------------------------------------------------

    def begin_run(self, epoch_hex: str) -> RunRecord:
        """Record the start of this coordinator run (durable at once, not batched)."""
        conn = self._writable()
        if self._current_run is not None:
            raise JournalError("begin_run called twice in one process")
        if self._group.writing is not None:
            raise JournalError("begin_run while a flush is being written")
        number = self._runs[-1].run + 1 if self._runs else 1
        record = RunRecord(number, epoch_hex, time.time(), None, False)
        store.insert_run(conn, self.path, record, self._digests)
        self._runs.append(record)
        self._current_run = number
        return record

    def end_run(self, clean: bool) -> None:
        """Mark this run ended, durable with the next flush: a clean end implies a durable state."""
        self._writable()
        if self._current_run is None:
            raise JournalError("end_run without begin_run")
        self._runs[-1] = replace(self._runs[-1], ended=time.time(), clean=clean)
        self._group.run_end_dirty = True
        self._note()

    # --- reading ---------------------------------------------------------------------------

    def snapshot(self) -> JournalSnapshot:
        count = self._leases.count
        return JournalSnapshot(
            pending=count(WorkState.PENDING),
            leased=count(WorkState.LEASED),
            done=count(WorkState.DONE),
            failed=count(WorkState.FAILED),
            corpus=self._next_queue_id,
            crashes=self._next_finding_id[FindingKind.CRASH],
            hangs=self._next_finding_id[FindingKind.HANG],
            runs=len(self._runs),
            last_run=self._runs[-1] if self._runs else None,
            unflushed_ops=self.unflushed_ops,
        )

    @property
    def next_queue_id(self) -> int:
        return self._next_queue_id

    def corpus_count(self) -> int:
        return self._next_queue_id

    def runs(self) -> tuple[RunRecord, ...]:
        return tuple(self._runs)

    def work_item(self, work_id: str) -> WorkLease | None:
        row = self._leases.get(work_id)
        if row is None:
            return None
        token = DispatchToken(row.token) if row.token is not None else None
        return WorkLease(
            WorkId(work_id), row.queue_id, row.state, token, row.attempts, row.reason, row.status
        )

    def has_work(self, work_id: str) -> bool:
        return work_id in self._leases

    def has_input(self, target: str, sha256: str) -> bool:
        """Whether the corpus already holds this input for this target."""
        return (target, sha256) in self._inputs

    def known_work_ids(self) -> frozenset[WorkId]:
        return cast("frozenset[WorkId]", frozenset(self._leases))  # the lease table's keys: work ids

    def known_inputs(self) -> frozenset[tuple[str, str]]:
        """(target, sha256) of every corpus entry."""
        return frozenset(self._inputs)

    def pending_work(self) -> list[WorkView]:
        """Every pending item with its input, in queue order: what the scheduler loads on resume."""
        pending = {
            row.queue_id: (work_id, row.attempts)
            for work_id, row in self._leases.items()
            if row.state is WorkState.PENDING
        }
        inputs = {entry.queue_id: entry for entry in self._group.entries}
        # Besides the unflushed ones, mirror-pending items are durable as pending, leased or
        # failed (retried).
        for entry in store.select_corpus(self._db(), "WHERE w.state IN ('pending', 'leased', 'failed')"):
            if entry.queue_id in pending:
                inputs[entry.queue_id] = entry
        views = []
        for queue_id in sorted(pending):
            work_id, attempts = pending[queue_id]
            e = inputs[queue_id]
            views.append(
                WorkView(
                    WorkId(work_id), queue_id, e.sha256, e.data, e.target, e.bound, e.new_bits,
                    e.origin, attempts,
                )
            )
        return views

    def iter_corpus(self, start: int = 0) -> Iterator[CorpusEntry]:
        """Durable corpus entries from queue id `start` on (to rewrite missing queue/ files)."""
        return store.select_corpus(self._db(), "WHERE c.queue_id >= ?", (start,))

    def iter_findings(self) -> Iterator[Finding]:
        """Durable findings, crashes then hangs, in id order."""
        return store.iter_findings(self._db())

    def coverage(self) -> bytes | None:
        return self._coverage

    def counters(self) -> dict[str, int]:
        return dict(self._counters)

    def triage(self) -> dict[tuple[str, int], tuple[str, str, bytes | None, float | None]]:
        """Durable triage rows: (kind, finding id) -> (identity key, stage, minimized input, when)."""
        return store.triage_rows(self._db())

    def provenance(self) -> dict[tuple[str, int], tuple[int, int | None]]:
        """Durable provenance records: (kind, id) -> (source rank, confirming rank)."""
        return store.provenance_rows(self._db())

    # --- leases and commits ------------------------------------------------------------------

    def add_seeds(self, seeds: Iterable[NewEntry]) -> list[CorpusEntry]:
        """Add inputs as corpus entries with pending work; already-known ones are skipped."""
        self._writable()
        added, _ = self._add_entries(list(seeds))
        return added

    def lease(self, work_id: str, token: str) -> int:
        """pending -> leased(token). Returns this dispatch's attempt number (charged attempts + 1)."""
        self._writable()
        attempt = self._leases.lease(work_id, token)
        self._note()
        return attempt

    def requeue(self, work_id: str, token: str, reason: str, *, charge: bool = False) -> bool:
        """leased(token) -> pending, only if `token` holds the lease (compare-and-set).

        `charge`: the work itself caused the revocation (deadline, worker lost running it), so
        it counts as an attempt; a cancel or a lost message does not."""
        self._writable()
        return self._noted(self._leases.requeue(work_id, token, reason, charge=charge))

    def fail(self, work_id: str, token: str, reason: str) -> bool:
        """leased(token) -> failed, only if `token` holds the lease (compare-and-set); charged."""
        self._writable()
        return self._noted(self._leases.fail(work_id, token, reason))

    def retry_failed(self) -> int:
        """failed -> pending with no attempts charged (`--retry-failed`); durable at once."""
        self._writable()
        retried = self._leases.retry_failed()
        if retried:
            self._note(retried)
            self.flush()
        return retried

    def add_recovered(self, findings: Iterable[NewFinding]) -> list[Finding]:
        """Record findings whose finder is unknown (re-admitted from crashes/ or hangs/)."""
        self._writable()
        return self._add_findings(RECOVERED_WORK_ID, list(findings))

    def commit(
        self,
        work_id: str,
        token: str,
        *,
        status: Status | str,
        new_entries: Iterable[NewEntry] = (),
    ) -> CommitReceipt | None:
        """The journal-level fence: record a result only if `token` holds the work's lease.

        Returns None and changes nothing otherwise. On success the work is done(status) and new
        entries get the next queue ids and pending work items; entries already known (same
        target and sha256, or same work_id) are skipped and counted. A result's findings are
        recorded once a re-run confirmed them (`add_findings`).
        """
        self._writable()
        if not self._leases.holds(work_id, token):
            return None
        if type(status) is not Status:  # (a Status already: no enum call on the hot path)
            status = Status(status)
        entries = list(new_entries)
        for entry in entries:
            if entry.parent is not None and not 0 <= entry.parent < self._next_queue_id:
                raise ValueError(f"parent {entry.parent} is not a queue id")
        added, skipped = self._add_entries(entries) if entries else ([], 0)
        self._leases.commit(work_id, token, status)
        self._note()
        return CommitReceipt(WorkId(work_id), status, tuple(added), skipped)

    def record_transient(
        self,
        work_id: str,
        *,
        new_entries: Iterable[NewEntry] = (),
    ) -> CommitReceipt:
        """Record what a transient work item found (a fuzz slice: fenced by its dispatch token,
        never leased here because it is not redone after a restart). Same skipping as `commit`."""
        self._writable()
        added, skipped = self._add_entries(list(new_entries))
        return CommitReceipt(WorkId(work_id), Status.OK, tuple(added), skipped)

    def add_findings(self, work_id: str, findings: Iterable[NewFinding]) -> list[Finding]:
        """Record findings of a work item after its commit (a crash confirmed by a re-run on
        another rank). Already-known inputs are skipped; durable with the next flush."""
        self._writable()
        return self._add_findings(WorkId(work_id), list(findings))

    def note_provenance(
        self, kind: str, ident: int, source_rank: int, confirmed_by: int | None = None
    ) -> None:
        """Remember which rank a corpus entry ('queue') or finding ('crash'/'hang') came from."""
        self._writable()
        self._group.provenance.append((str(kind), int(ident), int(source_rank), confirmed_by))
        self._note()

    def note_triage(self, kind: str, ident: int, *, identity: str = "", stage: str = "",
                    min_data: bytes | None = None, min_s: float | None = None) -> None:
        """Record a finding's crash identity (key) and stage, or its minimized input (store.TRIAGE_SCHEMA)."""
        self._writable()
        self._group.triage.append((str(kind), int(ident), str(identity), str(stage),
                                 bytes(min_data) if min_data is not None else None, min_s))
        self._note()

    def save_coverage(self, blob: bytes) -> None:
        """Replace the coverage snapshot; durable with the next flush."""
        self._writable()
        self._coverage = bytes(blob)
        self._group.coverage_dirty = True
        self._note()

    def save_counters(self, counters: Mapping[str, int]) -> None:
        """Replace the saved counters; durable with the next flush."""
        self._writable()
        for name, value in counters.items():
            if not isinstance(name, str) or not isinstance(value, int):
                raise ValueError(f"counters map str to int, got {name!r}: {value!r}")
        self._counters = dict(counters)
        self._group.counters_dirty = True
        self._note()

    # --- group commit ------------------------------------------------------------------------

    @property
    def unflushed_ops(self) -> int:
        """Records not durable yet: buffered, plus a failed batch kept for the next flush."""
        return self._group.unflushed_ops

    def needs_flush(self) -> bool:
        """True once the batch is big enough (batch_ops) or its oldest op old enough (batch_ms)."""
        delay = self.flush_delay_s()
        return delay is not None and delay <= 0.0

    def flush_due(self) -> bool:
        """No batch is out and a flush is due (`needs_flush`): the group commit to start now."""
        group = self._group
        if group.writing is not None:
            return False
        delay = group.delay_s()
        return delay is not None and delay <= 0.0

    def flush_delay_s(self) -> float | None:
        """Seconds until a flush is due (0.0 = now); None when nothing is buffered."""
        return self._group.delay_s()

    def flush(self) -> FlushReceipt:
        """Write everything buffered in ONE transaction; return what just became durable.

        On a write error the buffer is kept: the error propagates and a later flush retries.
        The same as `prepare` + `write` + `finish` on the calling thread (see `FlushBatch`).
        """
        self._writable()
        if self._group.writing is not None:
            raise JournalError("flush() while a flush is being written by another thread")
        batch = self.prepare()
        if batch is None:
            return FlushReceipt()
        try:
            receipt = self.write(batch)
        except BaseException:
            self.finish(batch, ok=False)
            raise
        self.finish(batch, ok=True)
        return receipt

    def prepare(self) -> FlushBatch | None:
        """Take everything buffered as one batch to write (cheap: it copies field tuples).

        Called on the thread that mutates the journal. The batch may then be written by one
        other thread (`write`, with `writer_connection()`) while mutations go on; at most one
        batch is out at a time, and `finish` must be called before the next `prepare`. A batch
        whose write failed is kept and written with the next one."""
        self._writable()
        return self._group.take(self._leases, self._runs, self._coverage, self._counters)

    def finish(self, batch: FlushBatch, *, ok: bool) -> None:
        """The batch's write ended (on the mutating thread): a failed one is written next time."""
        self._group.finish(batch, ok=ok)

    @property
    def writing(self) -> bool:
        """A prepared batch is out (being written) and not finished yet."""
        return self._group.writing is not None

    def writer_connection(self) -> sqlite3.Connection:
        """A second connection for the writer thread (same file and durability), used by one
        thread at a time; the journal's own connection stays with the mutating thread."""
        self._writable()
        conn = store.writer_connection(self.path, self._synchronous)
        self._extra_conns.append(conn)
        return conn

    def write(self, batch: FlushBatch, conn: sqlite3.Connection | None = None) -> FlushReceipt:
        """Write a prepared batch in ONE transaction (row hashes and the content digest too).

        Safe on another thread while the mirror is mutated: it reads only the batch and the
        digest state, which only writes touch (one at a time). On error nothing changes."""
        conn = conn if conn is not None else self._writable()
        return store.write_batch(conn, self.path, batch, self._digests)

    # --- internals ---------------------------------------------------------------------------

    def _db(self) -> sqlite3.Connection:
        if self._conn is None:
            raise JournalReadOnlyError(f"{self.path}: journal is closed")
        return self._conn

    def _writable(self) -> sqlite3.Connection:
        conn = self._conn  # (`_db` inlined: every commit and lease asks)
        if conn is None:
            raise JournalReadOnlyError(f"{self.path}: journal is closed")
        if self._readonly:
            raise JournalReadOnlyError(f"{self.path} was opened read-only")
        return conn

    def _noted(self, moved: bool) -> bool:
        """One op buffered if a lease moved."""
        if moved:
            self._note()
        return moved

    def _add_entries(self, entries: list[NewEntry]) -> tuple[list[CorpusEntry], int]:
        # Runs once per seed when a campaign starts: locals, and one _note for the lot.
        added: list[CorpusEntry] = []
        inputs, leases = self._inputs, self._leases
        queue_id = self._next_queue_id
        for e in entries:
            key = (e.target, e.sha256)
            if key in inputs or e.work_id in leases:
                continue
            added.append(
                CorpusEntry(
                    queue_id, e.sha256, e.data, e.target, e.bound, e.parent, e.origin,
                    e.new_bits, e.found_s, e.work_id,
                )
            )
            inputs.add(key)
            leases.add(e.work_id, queue_id)
            queue_id += 1
        if added:
            self._next_queue_id = queue_id
            self._note(len(added))
        self._group.entries.extend(added)
        return added, len(entries) - len(added)

    def _add_findings(self, work_id: WorkId, findings: list[NewFinding]) -> list[Finding]:
        recorded: list[Finding] = []
        for f in findings:
            key = (f.target, f.sha256)
            if key in self._finding_inputs[f.kind]:
                continue
            recorded.append(
                Finding(
                    f.kind, self._next_finding_id[f.kind], f.sha256, f.data, f.target, f.detail,
                    work_id, f.found_s,
                )
            )
            self._finding_inputs[f.kind].add(key)
            self._next_finding_id[f.kind] += 1
        self._group.findings.extend(recorded)
        if recorded:
            self._note(len(recorded))
        return recorded

    def _recover(self) -> RecoveryReport:
        """Void the previous run's leases (their tokens died with it) and make that durable."""
        previous = self._runs[-1] if self._runs else None
        requeued = self._leases.void_leases()
        if requeued:
            self._note(requeued)
        self.flush()
        count = self._leases.count
        return RecoveryReport(
            requeued=requeued,
            pending=count(WorkState.PENDING),
            done=count(WorkState.DONE),
            failed=count(WorkState.FAILED),
            corpus=self._next_queue_id,
            next_queue_id=self._next_queue_id,
            previous_run=previous,
        )
