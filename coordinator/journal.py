"""The coordinator's durable state in SQLite, group-committed from an in-memory mirror.

It holds work leases, the corpus, findings, the coverage snapshot, counters and runs.

Every mutation applies at once to an in-memory mirror, so compare-and-set decisions and id
assignment never wait on disk. `flush()` writes everything buffered since the last flush in ONE
SQLite transaction (WAL; synchronous NORMAL or FULL, see `Durability`) and returns the corpus entries and findings that
just became durable: only those may be announced (`queue/`, `crashes/`, `hangs/` files).
After a SIGKILL everything unflushed is lost and simply redone; everything flushed is exact, and
queue and finding ids continue from the durable maximum + 1 (unflushed ids were never shown).

Work item lifecycle (docs/design.md, "Leases, the journal and recovery")::

    pending --lease(token)--> leased(token) --commit(token)--> done(status)
       ^                         |  \\--fail(token)--> failed
       +------requeue(token)-----+       failed --retry_failed()--> pending
       +------open(resume=True)--+   recovery: the leases of a dead coordinator are void

`attempts` counts only the revocations the work itself caused (its deadline passed, or its
worker was lost while running it): a lease voided by a coordinator restart or cancelled by a
stop is not charged, so restarts never use up a work item's `dispatch.max_attempts`.

Opening checks the file before anything is used (`integrity.verify_database`: SQLite's
integrity_check and the exact schema) and the content while loading it: every input's data must
match its sha256, and the XOR of every row's hash must equal the `content_digest` that each
flush writes in the same transaction. A damaged journal is refused with one line naming the
recovery command; nothing is changed.
"""

from __future__ import annotations

import enum
import fcntl
import gc
import hashlib
import os
import re
import sqlite3
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import BinaryIO, Callable, Iterable, Iterator, Mapping

from symfence.coordinator import integrity
from symfence.coordinator.integrity import JournalDamagedError, JournalError
from symfence.protocol.ids import DispatchToken, WorkId
from symfence.protocol.messages import Status

JOURNAL_NAME = "journal.sqlite"
SCHEMA_VERSION = 1
RECOVERY_REASON = "requeued: coordinator restarted"
RETRY_REASON = "retry requested (--retry-failed)"
RECOVERED_WORK_ID = WorkId("0" * 64)  # the finder of a finding re-admitted from crashes/


class Durability(str, enum.Enum):
    """`journal.synchronous`: when SQLite syncs the write-ahead log (see README, what survives)."""

    NORMAL = "normal"  # a commit survives a process kill; a power loss may lose the last ones
    FULL = "full"  # a commit survives a power loss too (one fsync per group commit)

_HEX64 = re.compile(r"[0-9a-f]{64}")

# Hashes and work ids are random, so a SQLite index on them would scatter every insert across
# the whole B-tree (measured: ~5x slower group commits). Their uniqueness is kept by the mirror
# (one locked writer) and verified when a journal is loaded; rows are keyed by queue id instead.
# An input is identified by (target, sha256): the same bytes may be an input for two targets.
SCHEMA = """
CREATE TABLE meta (
    key    TEXT PRIMARY KEY,
    value  TEXT NOT NULL
);
CREATE TABLE corpus (
    queue_id  INTEGER PRIMARY KEY,            -- 0, 1, 2, ... in commit order, no gaps
    target    TEXT NOT NULL,                  -- the target it is an input for
    sha256    TEXT NOT NULL,                  -- (target, sha256) is unique (checked on load)
    data      BLOB NOT NULL,
    bound     INTEGER NOT NULL,
    parent    INTEGER,                        -- queue_id of the input it came from; NULL for seeds
    origin    TEXT NOT NULL,                  -- "seed" or the executor's name
    new_bits  INTEGER NOT NULL CHECK (new_bits IN (0, 1, 2)),
    found_s   REAL NOT NULL                   -- campaign seconds
);
CREATE TABLE work (                           -- exactly one work item per corpus entry
    queue_id  INTEGER PRIMARY KEY REFERENCES corpus (queue_id),
    work_id   TEXT NOT NULL,                  -- unique (checked on load)
    state     TEXT NOT NULL CHECK (state IN ('pending', 'leased', 'done', 'failed')),
    token     TEXT CHECK ((state = 'leased') = (token IS NOT NULL)),
    attempts  INTEGER NOT NULL,               -- revocations the work caused (deadline, worker lost)
    reason    TEXT NOT NULL,                  -- why it failed / was last requeued
    status    TEXT CHECK ((state = 'done') = (status IS NOT NULL))
);
CREATE TABLE findings (
    kind        TEXT NOT NULL CHECK (kind IN ('crash', 'hang')),
    finding_id  INTEGER NOT NULL,             -- 0, 1, 2, ... per kind
    target      TEXT NOT NULL,
    sha256      TEXT NOT NULL,
    data        BLOB NOT NULL,
    detail      TEXT NOT NULL,
    work_id     TEXT NOT NULL,                -- the task that found it
    found_s     REAL NOT NULL,
    PRIMARY KEY (kind, finding_id),
    UNIQUE (kind, target, sha256)
);
CREATE TABLE coverage (
    id   INTEGER PRIMARY KEY CHECK (id = 0),  -- latest snapshot only
    map  BLOB NOT NULL
);
CREATE TABLE counters (
    name   TEXT PRIMARY KEY,                  -- latest values only
    value  INTEGER NOT NULL
);
CREATE TABLE runs (
    run      INTEGER PRIMARY KEY,             -- 1, 2, ...
    epoch    TEXT NOT NULL,
    started  REAL NOT NULL,                   -- unix time
    ended    REAL,                            -- NULL while running or after a crash
    clean    INTEGER NOT NULL
);
"""

# Which rank sent the result each corpus entry and finding came from (issue 10), and for a
# finding the rank whose re-run confirmed it. A side table, created on open if missing, so
# journals written before it still resume.
PROVENANCE_SCHEMA = """
CREATE TABLE IF NOT EXISTS provenance (
    kind          TEXT NOT NULL CHECK (kind IN ('queue', 'crash', 'hang')),
    id            INTEGER NOT NULL,           -- queue_id or finding_id
    source_rank   INTEGER NOT NULL,
    confirmed_by  INTEGER,                    -- findings: the rank that re-ran it
    PRIMARY KEY (kind, id)
)
"""

# Each saved finding's crash identity (protocol/crashid.py) and minimized input (issue 19).
# A side table like provenance: journals written before it resume, their findings without a
# row keep their old signatures (coordinator/triage.py).
TRIAGE_SCHEMA = """
CREATE TABLE IF NOT EXISTS triage (
    kind        TEXT NOT NULL CHECK (kind IN ('crash', 'hang')),
    finding_id  INTEGER NOT NULL,
    identity    TEXT NOT NULL,                -- CrashIdentity.key; '' for a finding saved before
    stage       TEXT NOT NULL,                -- the stage whose result found it; '' if unknown
    min_data    BLOB,                         -- the minimized input; NULL until minimized
    min_s       REAL,                         -- campaign seconds when it was minimized
    PRIMARY KEY (kind, finding_id)
)
"""
_UPSERT_TRIAGE = """
INSERT INTO triage (kind, finding_id, identity, stage, min_data, min_s) VALUES (?, ?, ?, ?, ?, ?)
ON CONFLICT (kind, finding_id) DO UPDATE SET
    identity = CASE WHEN excluded.identity != '' THEN excluded.identity ELSE triage.identity END,
    stage = CASE WHEN excluded.stage != '' THEN excluded.stage ELSE triage.stage END,
    min_data = coalesce(excluded.min_data, triage.min_data), min_s = coalesce(excluded.min_s, triage.min_s)
"""


def _schema_of(conn: sqlite3.Connection) -> str:
    """The schema to verify a journal against: with the side tables it has."""
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    return SCHEMA + (PROVENANCE_SCHEMA + ";" if "provenance" in tables else "") + \
        (TRIAGE_SCHEMA + ";" if "triage" in tables else "")


_UPSERT_WORK = """
INSERT INTO work (queue_id, work_id, state, token, attempts, reason, status)
VALUES (?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (queue_id) DO UPDATE SET
    state = excluded.state, token = excluded.token, attempts = excluded.attempts,
    reason = excluded.reason, status = excluded.status
"""


# --- errors -------------------------------------------------------------------------------


class JournalExistsError(JournalError):
    """The output directory already holds a journal and resume was not asked for."""


class JournalNotFoundError(JournalError):
    """A read-only open of a journal that does not exist."""


class JournalLockedError(JournalError):
    """Another process has the journal open for writing."""


class JournalReadOnlyError(JournalError):
    """A mutation on a journal opened read-only (or closed)."""


class LeaseError(JournalError):
    """lease() of a work item that is unknown or not pending: a coordinator bug."""


# --- values -------------------------------------------------------------------------------


class WorkState(str, enum.Enum):
    PENDING = "pending"
    LEASED = "leased"
    DONE = "done"
    FAILED = "failed"


class FindingKind(str, enum.Enum):
    CRASH = "crash"
    HANG = "hang"


def _check_sha256(data: bytes, sha256: str) -> None:
    if hashlib.sha256(data).hexdigest() != sha256:
        raise ValueError(f"sha256 {sha256[:16]!r}... does not match the data")


@dataclass(frozen=True)
class NewEntry:
    """An input to add to the corpus; it also becomes a pending work item named `work_id`."""

    data: bytes
    sha256: str
    work_id: WorkId
    target: str = ""
    bound: int = 0
    parent: int | None = None  # queue id of the input it came from
    origin: str = "seed"  # "seed" or the executor's name
    new_bits: int = 0
    found_s: float = 0.0

    def __post_init__(self) -> None:
        _check_sha256(self.data, self.sha256)
        if not _HEX64.fullmatch(self.work_id):
            raise ValueError(f"work_id must be 64 lowercase hex characters, got {self.work_id!r}")
        if self.new_bits not in (0, 1, 2):
            raise ValueError(f"new_bits must be 0, 1 or 2, got {self.new_bits!r}")


@dataclass(frozen=True)
class CorpusEntry:
    """A corpus entry with the queue id the journal assigned it."""

    queue_id: int
    sha256: str
    data: bytes
    target: str
    bound: int
    parent: int | None
    origin: str
    new_bits: int
    found_s: float
    work_id: WorkId
    attempts = 0  # not a field: read like a pending `WorkView`'s (a new entry was never revoked)


@dataclass(frozen=True)
class NewFinding:
    """A crash or hang to record; its work_id is the one of the task being committed."""

    kind: FindingKind
    data: bytes
    sha256: str
    target: str = ""
    detail: str = ""  # traceback or timeout description
    found_s: float = 0.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", FindingKind(self.kind))
        _check_sha256(self.data, self.sha256)


@dataclass(frozen=True)
class Finding:
    """A crash or hang with the id the journal assigned it (ids count per kind)."""

    kind: FindingKind
    finding_id: int
    sha256: str
    data: bytes
    target: str
    detail: str
    work_id: WorkId
    found_s: float


@dataclass(frozen=True)
class WorkItem:
    """The lease state of one work item."""

    work_id: WorkId
    queue_id: int
    state: WorkState
    token: DispatchToken | None
    attempts: int
    reason: str
    status: Status | None


@dataclass(frozen=True)
class WorkView:
    """A pending work item with what the scheduler needs to dispatch it again."""

    work_id: WorkId
    queue_id: int
    sha256: str
    data: bytes
    target: str
    bound: int
    new_bits: int
    origin: str
    attempts: int


@dataclass(frozen=True)
class CommitReceipt:
    """What one successful commit added (not yet durable: see `FlushReceipt`)."""

    work_id: WorkId
    status: Status
    entries: tuple[CorpusEntry, ...]
    findings: tuple[Finding, ...]
    skipped_entries: int  # input or work_id already known
    skipped_findings: int  # input already known for that kind


@dataclass(frozen=True)
class FlushReceipt:
    """What one flush made durable: only these entries and findings may be written as files."""

    entries: tuple[CorpusEntry, ...] = ()
    findings: tuple[Finding, ...] = ()
    ops: int = 0
    duration_s: float = 0.0


@dataclass(frozen=True)
class FlushBatch:
    """Everything one flush writes, copied off the mirror (`Journal.prepare`): field tuples and
    immutable records only, so another thread can write it while the mirror changes."""

    entries: tuple[CorpusEntry, ...]
    findings: tuple[Finding, ...]
    work: Mapping[str, tuple]  # work_id -> the work row's fields (COLUMNS order)
    provenance: tuple[tuple[str, int, int, int | None], ...]
    coverage: bytes | None  # None: unchanged
    counters: Mapping[str, int] | None  # None: unchanged
    run_end: tuple | None  # the runs row's fields, when this run's end is recorded
    ops: int
    triage: tuple[tuple[str, int, str, str, bytes | None, float | None], ...] = ()  # TRIAGE_SCHEMA rows

    def merged(self, later: FlushBatch) -> FlushBatch:
        """This (failed) batch followed by a later one, as one batch: later values win."""
        return FlushBatch(
            self.entries + later.entries, self.findings + later.findings,
            {**self.work, **later.work}, self.provenance + later.provenance,
            later.coverage if later.coverage is not None else self.coverage,
            later.counters if later.counters is not None else self.counters,
            later.run_end if later.run_end is not None else self.run_end, self.ops + later.ops,
            self.triage + later.triage,
        )


@dataclass(frozen=True)
class RunRecord:
    """One coordinator run on this output directory."""

    run: int
    epoch: str
    started: float  # unix time
    ended: float | None  # None while running, or after a crash
    clean: bool


@dataclass(frozen=True)
class RecoveryReport:
    """What opening the journal found and repaired (all zero for a new journal)."""

    requeued: int  # leased items of the previous run, now pending again
    pending: int
    done: int
    failed: int
    corpus: int
    next_queue_id: int
    previous_run: RunRecord | None

    @property
    def previous_clean(self) -> bool | None:
        """Whether the previous run ended cleanly; None when there was no previous run."""
        return None if self.previous_run is None else self.previous_run.clean


@dataclass(frozen=True)
class JournalSnapshot:
    """Counts of everything in the journal (the mirror's view, including unflushed changes)."""

    pending: int
    leased: int
    done: int
    failed: int
    corpus: int
    crashes: int
    hangs: int
    runs: int
    last_run: RunRecord | None
    unflushed_ops: int


@dataclass(slots=True)
class _Row:
    """The mirror's mutable record of one work item."""

    queue_id: int
    state: WorkState
    token: str | None
    attempts: int
    reason: str
    status: Status | None


# --- the journal --------------------------------------------------------------------------


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
        self._batch_ops = batch_ops
        self._batch_s = batch_ms / 1000.0
        self._clock = clock
        # The mirror: the current truth, durable or not.
        self._work: dict[str, _Row] = {}
        self._counts: dict[WorkState, int] = {state: 0 for state in WorkState}
        self._inputs: set[tuple[str, str]] = set()  # (target, sha256) of every corpus entry
        self._next_queue_id = 0
        self._finding_inputs: dict[FindingKind, set[tuple[str, str]]] = {
            kind: set() for kind in FindingKind
        }
        self._next_finding_id: dict[FindingKind, int] = {kind: 0 for kind in FindingKind}
        self._runs: list[RunRecord] = []
        self._current_run: int | None = None
        self._coverage: bytes | None = None
        self._counters: dict[str, int] = {}
        # What the next flush writes.
        self._dirty_work: set[str] = set()
        self._new_entries: list[CorpusEntry] = []
        self._new_findings: list[Finding] = []
        self._new_provenance: list[tuple[str, int, int, int | None]] = []
        self._new_triage: list[tuple[str, int, str, str, bytes | None, float | None]] = []
        self._coverage_dirty = False
        self._counters_dirty = False
        self._run_end_dirty = False
        self._ops = 0
        self._batch_started = 0.0
        self._writing: FlushBatch | None = None  # prepared, being written (maybe by another thread)
        self._unwritten: FlushBatch | None = None  # a batch whose write failed: retried next
        self._synchronous = Durability.NORMAL.value
        self._extra_conns: list[sqlite3.Connection] = []
        # The content digest of what is durable (integrity.py): per-row hashes of mutable rows.
        self._digest = 0
        self._work_hash: dict[str, int] = {}
        self._run_hash: dict[int, int] = {}
        self._coverage_hash = 0
        self._counters_hash = 0
        self._load()

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
        path.parent.mkdir(parents=True, exist_ok=True)
        lock = _take_lock(path)
        try:
            if path.exists() and not resume:
                raise JournalExistsError(
                    f"{path} already holds a campaign journal: pass --resume to continue it "
                    "or choose another output directory"
                )
            existed = path.exists()
            if resume and existed and path.stat().st_size == 0:
                raise JournalDamagedError(path, "the file is empty (0 bytes)")
            conn = sqlite3.connect(path, isolation_level=None)
            try:
                if conn.execute("PRAGMA journal_mode=WAL").fetchone()[0] != "wal":
                    raise JournalError(f"{path}: SQLite refused WAL mode")
                conn.execute(f"PRAGMA synchronous={durability.value.upper()}")
                version = _schema_version(conn, path)
                if version is None and existed:
                    raise JournalDamagedError(path, "it holds no symfence schema")
                if version is None:  # a new file
                    conn.executescript(
                        f"BEGIN; {SCHEMA} {PROVENANCE_SCHEMA}; {TRIAGE_SCHEMA}; INSERT INTO meta VALUES "
                        f"('schema_version', '{SCHEMA_VERSION}'); COMMIT;"
                    )
                elif version != SCHEMA_VERSION:
                    raise JournalError(
                        f"{path} has journal schema {version}, this symfence needs {SCHEMA_VERSION}"
                    )
                integrity.verify_database(conn, path, _schema_of(conn))
                conn.execute(PROVENANCE_SCHEMA)  # journals from before the table get it now
                conn.execute(TRIAGE_SCHEMA)
                journal = cls(
                    conn, path, readonly=False, lock=lock,
                    batch_ops=batch_ops, batch_ms=batch_ms, clock=clock,
                )
                journal._synchronous = durability.value
                journal.recovery = journal._recover()
            except BaseException:
                conn.close()
                raise
        except sqlite3.DatabaseError as exc:
            lock.close()
            if integrity.is_damage(exc):
                raise JournalDamagedError(path, str(exc)) from exc
            raise JournalError(f"cannot open {path}: {' '.join(str(exc).split())}") from exc
        except UnicodeDecodeError as exc:  # a flipped byte inside stored text
            lock.close()
            raise JournalDamagedError(path, f"text that is not UTF-8 ({exc.reason})") from exc
        except BaseException:
            lock.close()
            raise
        return journal

    @classmethod
    def read_only(cls, path: Path | str) -> Journal:
        """Open for inspection (`symfence status`): no recovery, no lock, every mutation refused.

        Safe while a coordinator is writing. Every read sees one snapshot (the last flush before
        this call) until close(); SQLite may create the -wal/-shm side files, never the database.
        The same checks as `open` apply: a damaged journal raises `JournalDamagedError`.
        """
        path = Path(path)
        if not path.is_file():
            raise JournalNotFoundError(f"no journal at {path}")
        if path.stat().st_size == 0:
            raise JournalDamagedError(path, "the file is empty (0 bytes)")
        uri = path.resolve().as_uri() + "?mode=ro"
        try:
            conn = sqlite3.connect(uri, uri=True, isolation_level=None)
            try:
                version = _schema_version(conn, path)
                if version != SCHEMA_VERSION:
                    raise JournalError(
                        f"{path} is not a symfence journal "
                        f"(schema {version}, expected {SCHEMA_VERSION})"
                    )
                integrity.verify_database(conn, path, _schema_of(conn))
                return cls(
                    conn, path, readonly=True, lock=None,
                    batch_ops=1, batch_ms=0.0, clock=time.monotonic,
                )
            except BaseException:
                conn.close()
                raise
        except sqlite3.DatabaseError as exc:
            if integrity.is_damage(exc):
                raise JournalDamagedError(path, str(exc)) from exc
            raise JournalError(f"{path} is not a readable symfence journal: {exc}") from exc
        except UnicodeDecodeError as exc:
            raise JournalDamagedError(path, f"text that is not UTF-8 ({exc.reason})") from exc

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
        if self._writing is not None:
            raise JournalError("begin_run while a flush is being written")
        number = self._runs[-1].run + 1 if self._runs else 1
        record = RunRecord(number, epoch_hex, time.time(), None, False)
        h = integrity.row_hash("runs", (record.run, record.epoch, record.started, None, 0))
        with _transaction(conn, self.path):
            conn.execute(
                "INSERT INTO runs (run, epoch, started, ended, clean) VALUES (?, ?, ?, NULL, 0)",
                (record.run, record.epoch, record.started),
            )
            _write_digest(conn, self._digest ^ h)
        self._digest ^= h
        self._run_hash[number] = h
        self._runs.append(record)
        self._current_run = number
        return record

    def end_run(self, clean: bool) -> None:
        """Mark this run ended, durable with the next flush: a clean end implies a durable state."""
        self._writable()
        if self._current_run is None:
            raise JournalError("end_run without begin_run")
        self._runs[-1] = replace(self._runs[-1], ended=time.time(), clean=clean)
        self._run_end_dirty = True
        self._note()

    # --- reading ---------------------------------------------------------------------------

    def snapshot(self) -> JournalSnapshot:
        return JournalSnapshot(
            pending=self._counts[WorkState.PENDING],
            leased=self._counts[WorkState.LEASED],
            done=self._counts[WorkState.DONE],
            failed=self._counts[WorkState.FAILED],
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

    def finding_count(self, kind: FindingKind | str) -> int:
        return self._next_finding_id[FindingKind(kind)]

    def runs(self) -> tuple[RunRecord, ...]:
        return tuple(self._runs)

    def work_item(self, work_id: str) -> WorkItem | None:
        row = self._work.get(work_id)
        if row is None:
            return None
        token = DispatchToken(row.token) if row.token is not None else None
        return WorkItem(
            WorkId(work_id), row.queue_id, row.state, token, row.attempts, row.reason, row.status
        )

    def has_work(self, work_id: str) -> bool:
        return work_id in self._work

    def has_input(self, target: str, sha256: str) -> bool:
        """Whether the corpus already holds this input for this target."""
        return (target, sha256) in self._inputs

    def known_work_ids(self) -> frozenset[str]:
        return frozenset(self._work)

    def known_inputs(self) -> frozenset[tuple[str, str]]:
        """(target, sha256) of every corpus entry."""
        return frozenset(self._inputs)

    def pending_work(self) -> list[WorkView]:
        """Every pending item with its input, in queue order: what the scheduler loads on resume."""
        pending = {
            row.queue_id: (work_id, row.attempts)
            for work_id, row in self._work.items()
            if row.state is WorkState.PENDING
        }
        inputs = {entry.queue_id: entry for entry in self._new_entries}
        # Besides the unflushed ones, mirror-pending items are durable as pending, leased or
        # failed (retried).
        for entry in self._select_corpus("WHERE w.state IN ('pending', 'leased', 'failed')"):
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
        return self._select_corpus("WHERE c.queue_id >= ?", (start,))

    def iter_findings(self) -> Iterator[Finding]:
        """Durable findings, crashes then hangs, in id order."""
        rows = self._db().execute(
            "SELECT kind, finding_id, sha256, data, target, detail, work_id, found_s "
            "FROM findings ORDER BY kind, finding_id"
        )
        for kind, finding_id, sha256, data, target, detail, work_id, found_s in rows:
            yield Finding(
                FindingKind(kind), finding_id, sha256, data, target, detail, WorkId(work_id),
                found_s,
            )

    def coverage(self) -> bytes | None:
        return self._coverage

    def counters(self) -> dict[str, int]:
        return dict(self._counters)

    # --- leases and commits ------------------------------------------------------------------

    def add_seeds(self, seeds: Iterable[NewEntry]) -> list[CorpusEntry]:
        """Add inputs as corpus entries with pending work; already-known ones are skipped."""
        self._writable()
        added, _ = self._add_entries(list(seeds))
        return added

    def lease(self, work_id: str, token: str) -> int:
        """pending -> leased(token). Returns this dispatch's attempt number (charged attempts + 1)."""
        self._writable()
        row = self._work.get(work_id)
        if row is None:
            raise LeaseError(f"cannot lease unknown work {work_id[:16]}")
        if row.state is not WorkState.PENDING:
            raise LeaseError(f"cannot lease work {work_id[:16]}: it is {row.state.value}")
        self._move(row, WorkState.LEASED)
        row.token = token
        self._touch(work_id)
        return row.attempts + 1

    def requeue(self, work_id: str, token: str, reason: str, *, charge: bool = False) -> bool:
        """leased(token) -> pending, only if `token` holds the lease (compare-and-set).

        `charge`: the work itself caused the revocation (deadline, worker lost running it), so
        it counts as an attempt; a cancel or a lost message does not."""
        return self._release(work_id, token, WorkState.PENDING, reason, charge)

    def fail(self, work_id: str, token: str, reason: str) -> bool:
        """leased(token) -> failed, only if `token` holds the lease (compare-and-set); charged."""
        return self._release(work_id, token, WorkState.FAILED, reason, True)

    def retry_failed(self) -> int:
        """failed -> pending with no attempts charged (`--retry-failed`); durable at once."""
        self._writable()
        retried = 0
        for work_id, row in self._work.items():
            if row.state is WorkState.FAILED:
                self._move(row, WorkState.PENDING)
                row.attempts = 0
                row.reason = RETRY_REASON
                self._touch(work_id)
                retried += 1
        if retried:
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
        findings: Iterable[NewFinding] = (),
    ) -> CommitReceipt | None:
        """The journal-level fence: record a result only if `token` holds the work's lease.

        Returns None and changes nothing otherwise. On success the work is done(status), new
        entries get the next queue ids and pending work items, findings get ids; entries and
        findings already known (same target and sha256, or same work_id) are skipped and counted.
        """
        self._writable()
        row = self._work.get(work_id)
        if row is None or row.state is not WorkState.LEASED or row.token != token:
            return None
        status = Status(status)
        entries = list(new_entries)
        new_findings = list(findings)
        for entry in entries:
            if entry.parent is not None and not 0 <= entry.parent < self._next_queue_id:
                raise ValueError(f"parent {entry.parent} is not a queue id")
        added, skipped = self._add_entries(entries)
        recorded = self._add_findings(WorkId(work_id), new_findings)
        self._move(row, WorkState.DONE)
        row.token = None
        row.status = status
        self._touch(work_id)
        return CommitReceipt(
            WorkId(work_id), status, tuple(added), tuple(recorded),
            skipped, len(new_findings) - len(recorded),
        )

    def record_transient(
        self,
        work_id: str,
        *,
        new_entries: Iterable[NewEntry] = (),
        findings: Iterable[NewFinding] = (),
    ) -> CommitReceipt:
        """Record what a transient work item found (a fuzz slice: fenced by its dispatch token,
        never leased here because it is not redone after a restart). Same skipping as `commit`."""
        self._writable()
        entries = list(new_entries)
        new_findings = list(findings)
        added, skipped = self._add_entries(entries)
        recorded = self._add_findings(WorkId(work_id), new_findings)
        return CommitReceipt(
            WorkId(work_id), Status.OK, tuple(added), tuple(recorded),
            skipped, len(new_findings) - len(recorded),
        )

    def add_findings(self, work_id: str, findings: Iterable[NewFinding]) -> list[Finding]:
        """Record findings of a work item after its commit (a crash confirmed by a re-run on
        another rank). Already-known inputs are skipped; durable with the next flush."""
        self._writable()
        return self._add_findings(WorkId(work_id), list(findings))

    def note_provenance(self, kind: str, ident: int, source_rank: int, confirmed_by: int | None = None) -> None:
        """Remember which rank a corpus entry ('queue') or finding ('crash'/'hang') came from."""
        self._writable()
        self._new_provenance.append((str(kind), int(ident), int(source_rank), confirmed_by))
        self._note()

    def note_triage(self, kind: str, ident: int, *, identity: str = "", stage: str = "",
                    min_data: bytes | None = None, min_s: float | None = None) -> None:
        """Record a finding's crash identity (key) and stage, or its minimized input (TRIAGE_SCHEMA)."""
        self._writable()
        self._new_triage.append((str(kind), int(ident), str(identity), str(stage),
                                 bytes(min_data) if min_data is not None else None, min_s))
        self._note()

    def triage(self) -> dict[tuple[str, int], tuple[str, str, bytes | None, float | None]]:
        """Durable triage rows: (kind, finding id) -> (identity key, stage, minimized input, when)."""
        try:
            rows = self._db().execute(
                "SELECT kind, finding_id, identity, stage, min_data, min_s FROM triage").fetchall()
        except sqlite3.OperationalError:  # a journal from before the table existed
            return {}
        return {(k, i): (ident, st, bytes(m) if m is not None else None, t) for k, i, ident, st, m, t in rows}

    def provenance(self) -> dict[tuple[str, int], tuple[int, int | None]]:
        """Durable provenance records: (kind, id) -> (source rank, confirming rank)."""
        try:
            rows = self._db().execute("SELECT kind, id, source_rank, confirmed_by FROM provenance").fetchall()
        except sqlite3.OperationalError:  # a journal from before the table existed
            return {}
        return {(k, i): (r, c) for k, i, r, c in rows}

    def save_coverage(self, blob: bytes) -> None:
        """Replace the coverage snapshot; durable with the next flush."""
        self._writable()
        self._coverage = bytes(blob)
        self._coverage_dirty = True
        self._note()

    def save_counters(self, counters: Mapping[str, int]) -> None:
        """Replace the saved counters; durable with the next flush."""
        self._writable()
        for name, value in counters.items():
            if not isinstance(name, str) or not isinstance(value, int):
                raise ValueError(f"counters map str to int, got {name!r}: {value!r}")
        self._counters = dict(counters)
        self._counters_dirty = True
        self._note()

    # --- group commit ------------------------------------------------------------------------

    @property
    def unflushed_ops(self) -> int:
        """Records not durable yet: buffered, plus a failed batch kept for the next flush."""
        return self._ops + (self._unwritten.ops if self._unwritten is not None else 0)

    def needs_flush(self) -> bool:
        """True once the batch is big enough (batch_ops) or its oldest op old enough (batch_ms)."""
        delay = self.flush_delay_s()
        return delay is not None and delay <= 0.0

    def flush_delay_s(self) -> float | None:
        """Seconds until a flush is due (0.0 = now); None when nothing is buffered."""
        if self._unwritten is not None:
            return 0.0
        if self._ops == 0:
            return None
        if self._ops >= self._batch_ops:
            return 0.0
        return max(0.0, self._batch_started + self._batch_s - self._clock())

    def flush(self) -> FlushReceipt:
        """Write everything buffered in ONE transaction; return what just became durable.

        On a write error the buffer is kept: the error propagates and a later flush retries.
        The same as `prepare` + `write` + `finish` on the calling thread (see `FlushBatch`).
        """
        self._writable()
        if self._writing is not None:
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
        if self._writing is not None:
            raise JournalError("prepare() while the previous batch is not finished")
        retry, self._unwritten = self._unwritten, None
        if self._ops == 0:
            if retry is not None:
                self._writing = retry
            return retry
        work: dict[str, tuple] = {}
        for work_id in self._dirty_work:
            row = self._work[work_id]
            work[work_id] = (row.queue_id, work_id, row.state.value, row.token, row.attempts, row.reason,
                             row.status.value if row.status is not None else None)
        run_end = None
        if self._run_end_dirty:
            run = self._runs[-1]
            run_end = (run.run, run.epoch, run.started, run.ended, run.clean)
        batch = FlushBatch(
            entries=tuple(self._new_entries), findings=tuple(self._new_findings), work=work,
            provenance=tuple(self._new_provenance), triage=tuple(self._new_triage),
            coverage=self._coverage if self._coverage_dirty else None,
            counters=dict(self._counters) if self._counters_dirty else None,
            run_end=run_end, ops=self._ops,
        )
        if retry is not None:
            batch = retry.merged(batch)
        self._dirty_work = set()
        self._new_entries = []
        self._new_findings = []
        self._new_provenance = []
        self._new_triage = []
        self._coverage_dirty = self._counters_dirty = self._run_end_dirty = False
        self._ops = 0
        self._writing = batch
        return batch

    def finish(self, batch: FlushBatch, *, ok: bool) -> None:
        """The batch's write ended (on the mutating thread): a failed one is written next time."""
        if self._writing is not batch:
            raise JournalError("finish() of a batch that is not the one being written")
        self._writing = None
        if not ok:
            self._unwritten = batch

    @property
    def writing(self) -> bool:
        """A prepared batch is out (being written) and not finished yet."""
        return self._writing is not None

    def writer_connection(self) -> sqlite3.Connection:
        """A second connection for the writer thread (same file and durability), used by one
        thread at a time; the journal's own connection stays with the mutating thread."""
        self._writable()
        conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        conn.execute(f"PRAGMA synchronous={self._synchronous.upper()}")
        self._extra_conns.append(conn)
        return conn

    def write(self, batch: FlushBatch, conn: sqlite3.Connection | None = None) -> FlushReceipt:
        """Write a prepared batch in ONE transaction (row hashes and the content digest too).

        Safe on another thread while the mirror is mutated: it reads only the batch and the
        digest state, which only writes touch (one at a time). On error nothing changes."""
        conn = conn if conn is not None else self._writable()
        started = time.perf_counter()
        digest = self._digest
        row_hash = integrity.row_hash
        work_hashes: dict[str, int] = {}
        old = self._work_hash
        for work_id, fields in batch.work.items():
            h = row_hash("work", fields)
            digest ^= old.get(work_id, 0) ^ h
            work_hashes[work_id] = h
        corpus_rows = [
            (e.queue_id, e.target, e.sha256, e.bound, e.parent, e.origin, e.new_bits, e.found_s)
            for e in batch.entries
        ]
        for fields in corpus_rows:
            digest ^= row_hash("corpus", fields)
        finding_rows = [
            (f.kind.value, f.finding_id, f.target, f.sha256, f.detail, f.work_id, f.found_s)
            for f in batch.findings
        ]
        for fields in finding_rows:
            digest ^= row_hash("findings", fields)
        coverage_hash = self._coverage_hash
        if batch.coverage is not None:
            coverage_hash = integrity.blob_hash("coverage", batch.coverage)
            digest ^= self._coverage_hash ^ coverage_hash
        counters_hash = self._counters_hash
        if batch.counters is not None:
            counters_hash = integrity.counters_hash(batch.counters) if batch.counters else 0
            digest ^= self._counters_hash ^ counters_hash
        run_hash: tuple[int, int] | None = None
        if batch.run_end is not None:
            h = row_hash("runs", batch.run_end)
            digest ^= self._run_hash.get(batch.run_end[0], 0) ^ h
            run_hash = (batch.run_end[0], h)
        with _transaction(conn, self.path):
            conn.executemany(
                "INSERT INTO corpus (queue_id, target, sha256, bound, parent, origin, "
                "new_bits, found_s, data) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [fields + (e.data,) for fields, e in zip(corpus_rows, batch.entries)],
            )
            conn.executemany(_UPSERT_WORK, list(batch.work.values()))
            conn.executemany(
                "INSERT INTO findings (kind, finding_id, target, sha256, detail, work_id, "
                "found_s, data) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                [fields + (f.data,) for fields, f in zip(finding_rows, batch.findings)],
            )
            if batch.provenance:
                conn.executemany("INSERT OR REPLACE INTO provenance VALUES (?, ?, ?, ?)", batch.provenance)
            if batch.triage:
                conn.executemany(_UPSERT_TRIAGE, batch.triage)
            if batch.coverage is not None:
                conn.execute("INSERT OR REPLACE INTO coverage (id, map) VALUES (0, ?)", (batch.coverage,))
            if batch.counters is not None:
                conn.execute("DELETE FROM counters")
                conn.executemany("INSERT INTO counters (name, value) VALUES (?, ?)", batch.counters.items())
            if batch.run_end is not None:
                run, _, _, ended, clean = batch.run_end
                conn.execute("UPDATE runs SET ended = ?, clean = ? WHERE run = ?", (ended, clean, run))
            _write_digest(conn, digest)
        # Durable: the in-memory digest state follows.
        self._digest = digest
        self._work_hash.update(work_hashes)
        self._coverage_hash = coverage_hash
        self._counters_hash = counters_hash
        if run_hash is not None:
            self._run_hash[run_hash[0]] = run_hash[1]
        return FlushReceipt(batch.entries, batch.findings, batch.ops, time.perf_counter() - started)

    # --- internals ---------------------------------------------------------------------------

    def _db(self) -> sqlite3.Connection:
        if self._conn is None:
            raise JournalReadOnlyError(f"{self.path}: journal is closed")
        return self._conn

    def _writable(self) -> sqlite3.Connection:
        conn = self._db()
        if self._readonly:
            raise JournalReadOnlyError(f"{self.path} was opened read-only")
        return conn

    def _note(self, ops: int = 1) -> None:
        if self._ops == 0:
            self._batch_started = self._clock()
        self._ops += ops

    def _touch(self, work_id: str) -> None:
        self._dirty_work.add(work_id)
        self._note()

    def _move(self, row: _Row, state: WorkState) -> None:
        self._counts[row.state] -= 1
        self._counts[state] += 1
        row.state = state

    def _release(
        self, work_id: str, token: str, state: WorkState, reason: str, charge: bool
    ) -> bool:
        self._writable()
        row = self._work.get(work_id)
        if row is None or row.state is not WorkState.LEASED or row.token != token:
            return False
        self._move(row, state)
        row.token = None
        row.reason = reason
        if charge:
            row.attempts += 1
        self._touch(work_id)
        return True

    def _add_entries(self, entries: list[NewEntry]) -> tuple[list[CorpusEntry], int]:
        # Runs once per seed when a campaign starts: locals, and one _note for the lot.
        added: list[CorpusEntry] = []
        inputs, work, dirty, pending = self._inputs, self._work, self._dirty_work, WorkState.PENDING
        queue_id = self._next_queue_id
        for e in entries:
            key = (e.target, e.sha256)
            if key in inputs or e.work_id in work:
                continue
            added.append(
                CorpusEntry(
                    queue_id, e.sha256, e.data, e.target, e.bound, e.parent, e.origin,
                    e.new_bits, e.found_s, e.work_id,
                )
            )
            inputs.add(key)
            work[e.work_id] = _Row(queue_id, pending, None, 0, "", None)
            dirty.add(e.work_id)
            queue_id += 1
        if added:
            self._next_queue_id = queue_id
            self._counts[pending] += len(added)
            self._note(len(added))
        self._new_entries.extend(added)
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
        self._new_findings.extend(recorded)
        if recorded:
            self._note(len(recorded))
        return recorded

    def _select_corpus(self, where: str, params: tuple = ()) -> Iterator[CorpusEntry]:
        rows = self._db().execute(
            "SELECT c.queue_id, c.sha256, c.data, c.target, c.bound, c.parent, c.origin, "
            "c.new_bits, c.found_s, w.work_id FROM corpus AS c "
            f"JOIN work AS w ON w.queue_id = c.queue_id {where} ORDER BY c.queue_id",
            params,
        )
        for *fields, work_id in rows:
            yield CorpusEntry(*fields, WorkId(work_id))

    def _load(self) -> None:
        """Fill the mirror from one consistent read of the database, checking its content.

        Every input's data must match its sha256 and the digest of all rows must equal the
        stored one. Read-only journals keep the read transaction open, so later reads see the
        same snapshot.
        """
        conn = self._db()
        conn.execute("BEGIN")
        gc_was_on = gc.isenabled()
        gc.disable()  # a row's objects are never cyclic garbage; collections would walk them all
        try:
            self._load_rows(conn)
        except (TypeError, ValueError, KeyError, OverflowError) as exc:
            # SQLite is dynamically typed: a flipped type byte hands back an int for a blob.
            conn.execute("ROLLBACK")
            raise JournalDamagedError(self.path, f"a value of the wrong type: {exc}") from exc
        except sqlite3.DatabaseError as exc:
            conn.execute("ROLLBACK")
            if integrity.is_damage(exc):
                raise JournalDamagedError(self.path, str(exc)) from exc
            raise
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        finally:
            if gc_was_on:
                gc.enable()
        if not self._readonly:
            conn.execute("COMMIT")

    def _load_rows(self, conn: sqlite3.Connection) -> None:
        damaged = lambda what: JournalDamagedError(self.path, what)  # noqa: E731
        digest = 0
        targets: dict[int, tuple[str, str]] = {}
        corpus_rows = 0
        self._next_queue_id = 0
        for row in conn.execute(
            f"SELECT {integrity.select_columns('corpus')}, data FROM corpus ORDER BY queue_id"
        ):
            *fields, data = row
            queue_id, target, sha256 = fields[0], fields[1], fields[2]
            if not isinstance(data, bytes) or hashlib.sha256(data).hexdigest() != sha256:
                raise damaged(f"corpus entry {queue_id}: its data does not match its sha256")
            digest ^= integrity.row_hash("corpus", fields)
            targets[queue_id] = (target, sha256)
            corpus_rows += 1
            self._next_queue_id = max(self._next_queue_id, queue_id + 1)
        work_rows = 0
        for fields in conn.execute(f"SELECT {integrity.select_columns('work')} FROM work"):
            queue_id, work_id, state, token, attempts, reason, status = fields
            work_rows += 1
            try:
                row = _Row(
                    queue_id, WorkState(state), token, attempts, reason,
                    Status(status) if status is not None else None,
                )
            except ValueError as exc:
                raise damaged(f"work item {queue_id}: {exc}") from None
            if queue_id not in targets:
                raise damaged(f"work item {queue_id} has no corpus entry")
            h = integrity.row_hash("work", fields)
            digest ^= h
            self._work_hash[work_id] = h
            self._work[work_id] = row
            self._counts[row.state] += 1
            self._inputs.add(targets[queue_id])
        # Equal counts: ids 0..n-1 without gaps, one work item per entry, no duplicates.
        if not (
            len(self._work) == len(self._inputs) == corpus_rows == work_rows
            == self._next_queue_id
        ):
            raise damaged(
                f"corrupt: {corpus_rows} corpus entries with "
                f"{len(self._inputs)} distinct inputs, {work_rows} work items with "
                f"{len(self._work)} distinct ids, next queue id {self._next_queue_id}"
            )
        for row in conn.execute(
            f"SELECT {integrity.select_columns('findings')}, data FROM findings"
        ):
            *fields, data = row
            kind, finding_id, target, sha256 = fields[0], fields[1], fields[2], fields[3]
            if not isinstance(data, bytes) or hashlib.sha256(data).hexdigest() != sha256:
                raise damaged(f"{kind} {finding_id}: its data does not match its sha256")
            digest ^= integrity.row_hash("findings", fields)
            kind = FindingKind(kind)
            self._finding_inputs[kind].add((target, sha256))
            self._next_finding_id[kind] = max(self._next_finding_id[kind], finding_id + 1)
        if sum(map(len, self._finding_inputs.values())) != sum(self._next_finding_id.values()):
            raise damaged("corrupt: finding ids are not 0..n-1 per kind")
        self._runs = []
        for fields in conn.execute(
            f"SELECT {integrity.select_columns('runs')} FROM runs ORDER BY run"
        ):
            run, epoch, started, ended, clean = fields
            self._runs.append(RunRecord(run, epoch, started, ended, bool(clean)))
            self._run_hash[run] = integrity.row_hash("runs", fields)
            digest ^= self._run_hash[run]
        coverage = conn.execute("SELECT map FROM coverage WHERE id = 0").fetchone()
        self._coverage = coverage[0] if coverage is not None else None
        if self._coverage is not None:
            self._coverage_hash = integrity.blob_hash("coverage", self._coverage)
            digest ^= self._coverage_hash
        self._counters = dict(conn.execute("SELECT name, value FROM counters"))
        if self._counters:
            self._counters_hash = integrity.counters_hash(self._counters)
            digest ^= self._counters_hash
        stored = integrity.stored_digest(conn)
        if stored is not None and stored != digest:
            raise damaged("its content does not match its digest: a row was changed or lost")
        # A journal written before digests existed gets one with its next write.
        self._digest = digest

    def _recover(self) -> RecoveryReport:
        """Void the previous run's leases (their tokens died with it) and make that durable."""
        previous = self._runs[-1] if self._runs else None
        requeued = 0
        for work_id, row in self._work.items():
            if row.state is WorkState.LEASED:
                self._move(row, WorkState.PENDING)
                row.token = None
                row.reason = RECOVERY_REASON
                self._touch(work_id)
                requeued += 1
        self.flush()
        return RecoveryReport(
            requeued=requeued,
            pending=self._counts[WorkState.PENDING],
            done=self._counts[WorkState.DONE],
            failed=self._counts[WorkState.FAILED],
            corpus=self._next_queue_id,
            next_queue_id=self._next_queue_id,
            previous_run=previous,
        )


class _transaction:
    """BEGIN IMMEDIATE ... COMMIT, rolled back on any error; SQLite errors become JournalError."""

    def __init__(self, conn: sqlite3.Connection, path: Path) -> None:
        self._conn = conn
        self._path = path

    def __enter__(self) -> None:
        try:
            self._conn.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            raise JournalError(f"cannot write {self._path}: {exc}") from exc

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: object
    ) -> None:
        if exc_type is None:
            try:
                self._conn.execute("COMMIT")
                return
            except sqlite3.Error as commit_exc:
                exc = commit_exc
        if self._conn.in_transaction:
            self._conn.execute("ROLLBACK")
        if isinstance(exc, sqlite3.Error):
            raise JournalError(f"cannot write {self._path}: {exc}") from exc


def _write_digest(conn: sqlite3.Connection, digest: int) -> None:
    conn.execute(
        "INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)",
        (integrity.DIGEST_KEY, integrity.digest_hex(digest)),
    )


def _schema_version(conn: sqlite3.Connection, path: Path) -> int | None:
    """The journal schema version, or None for a file with no schema yet."""
    has_meta = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'meta'"
    ).fetchone()
    if has_meta is None:
        return None
    row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    if row is None:
        return None
    try:
        return int(row[0])
    except (TypeError, ValueError):
        raise JournalDamagedError(path, f"schema version {row[0]!r} is not a number") from None


def _take_lock(path: Path) -> BinaryIO:
    """An exclusive lock on `path`.lock for as long as the journal is open for writing.

    The kernel drops it when the process dies, so a SIGKILLed coordinator never blocks a resume.
    """
    lock = open(path.with_name(path.name + ".lock"), "ab")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        lock.close()
        raise JournalLockedError(f"{path} is in use by another symfence coordinator") from None
    try:  # who holds it, for `symfence status` (the lock itself is what proves it is alive)
        lock.truncate(0)
        lock.write(f"{os.getpid()}\n".encode())
        lock.flush()
    except OSError:
        pass  # a full disk must not stop a resume that would free nothing anyway
    return lock


def lock_holder(path: Path | str) -> int | None:
    """The pid of the live coordinator holding this journal's lock, 0 if its pid is unknown, or
    None when no process holds it (no coordinator runs: the last one ended or was killed)."""
    lock_path = Path(path).with_name(Path(path).name + ".lock")
    try:
        fh = open(lock_path, "rb")
    except FileNotFoundError:
        return None
    with fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            try:
                return int(fh.read().decode().strip() or 0)
            except ValueError:
                return 0
        fcntl.flock(fh, fcntl.LOCK_UN)
        return None
