"""The journal's SQLite store: the schema, opening and locking the file, and writing one batch.

`open_writable` and `open_read_only` take the file lock, check the schema (`integrity.py`) and
turn SQLite's errors into one-line `JournalError`s; `write_batch` writes a `FlushBatch` in ONE
transaction (WAL; synchronous NORMAL or FULL, see `Durability`) with its row hashes and the
content digest (`Digests`). The reads of durable rows the mirror does not keep (corpus data,
findings, triage and provenance records) are here too.
"""

from __future__ import annotations

import contextlib
import enum
import fcntl
import os
import sqlite3
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from symfence.coordinator import integrity
from symfence.coordinator.journal.errors import (
    JournalDamagedError,
    JournalError,
    JournalExistsError,
    JournalLockedError,
    JournalNotFoundError,
)
from symfence.coordinator.journal.records import (
    CorpusEntry,
    Finding,
    FindingKind,
    FlushBatch,
    FlushReceipt,
    RunRecord,
)
from symfence.protocol.ids import WorkId

JOURNAL_NAME = "journal.sqlite"
SCHEMA_VERSION = 1


class Durability(str, enum.Enum):
    """`journal.synchronous`: when SQLite syncs the write-ahead log (docs/recovery.md, what survives)."""

    NORMAL = "normal"  # a commit survives a process kill; a power loss may lose the last ones
    FULL = "full"  # a commit survives a power loss too (one fsync per group commit)


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


def schema_of(conn: sqlite3.Connection) -> str:
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

@dataclass(slots=True)
class Digests:
    """The content digest of what is durable (integrity.py), with the per-row hashes of the rows
    a flush may replace. Only writes change it, one at a time."""

    digest: int = 0
    work: dict[str, int] = field(default_factory=dict)  # work_id -> hash of its work row
    runs: dict[int, int] = field(default_factory=dict)  # run -> hash of its runs row
    coverage: int = 0
    counters: int = 0


# --- opening ------------------------------------------------------------------------------


@contextlib.contextmanager
def open_writable(
    path: Path, *, resume: bool, durability: Durability
) -> Iterator[tuple[sqlite3.Connection, BinaryIO]]:
    """Lock `path`, create its schema or check the existing one, and yield (connection, lock).

    The body builds the journal from them; if it raises, both are closed and SQLite's errors
    become `JournalError` (`JournalDamagedError` for damage, one line naming the recovery)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = take_lock(path)
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
            version = schema_version(conn, path)
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
            integrity.verify_database(conn, path, schema_of(conn))
            conn.execute(PROVENANCE_SCHEMA)  # journals from before the table get it now
            conn.execute(TRIAGE_SCHEMA)
            yield conn, lock
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


@contextlib.contextmanager
def open_read_only(path: Path) -> Iterator[sqlite3.Connection]:
    """A read-only connection to `path` after the same checks as `open_writable` (no lock).

    The body builds the journal on it; if it raises, the connection is closed and SQLite's
    errors become `JournalError`s as above."""
    if not path.is_file():
        raise JournalNotFoundError(f"no journal at {path}")
    if path.stat().st_size == 0:
        raise JournalDamagedError(path, "the file is empty (0 bytes)")
    uri = path.resolve().as_uri() + "?mode=ro"
    try:
        conn = sqlite3.connect(uri, uri=True, isolation_level=None)
        try:
            version = schema_version(conn, path)
            if version != SCHEMA_VERSION:
                raise JournalError(
                    f"{path} is not a symfence journal "
                    f"(schema {version}, expected {SCHEMA_VERSION})"
                )
            integrity.verify_database(conn, path, schema_of(conn))
            yield conn
        except BaseException:
            conn.close()
            raise
    except sqlite3.DatabaseError as exc:
        if integrity.is_damage(exc):
            raise JournalDamagedError(path, str(exc)) from exc
        raise JournalError(f"{path} is not a readable symfence journal: {exc}") from exc
    except UnicodeDecodeError as exc:
        raise JournalDamagedError(path, f"text that is not UTF-8 ({exc.reason})") from exc


def writer_connection(path: Path, durability: str) -> sqlite3.Connection:
    """A second connection to the same file with the same durability (for the writer thread)."""
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.execute(f"PRAGMA synchronous={durability.upper()}")
    return conn


# --- writing ------------------------------------------------------------------------------


def write_batch(conn: sqlite3.Connection, path: Path, batch: FlushBatch, digests: Digests) -> FlushReceipt:
    """Write a prepared batch in ONE transaction (row hashes and the content digest too).

    Safe on another thread while the mirror is mutated: it reads only the batch and the
    digest state, which only writes touch (one at a time). On error nothing changes."""
    started = time.perf_counter()
    digest = digests.digest
    row_hash = integrity.row_hash
    work_hashes: dict[str, int] = {}
    old = digests.work
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
    coverage_hash = digests.coverage
    if batch.coverage is not None:
        coverage_hash = integrity.blob_hash("coverage", batch.coverage)
        digest ^= digests.coverage ^ coverage_hash
    counters_hash = digests.counters
    if batch.counters is not None:
        counters_hash = integrity.counters_hash(batch.counters) if batch.counters else 0
        digest ^= digests.counters ^ counters_hash
    run_hash: tuple[int, int] | None = None
    if batch.run_end is not None:
        h = row_hash("runs", batch.run_end)
        digest ^= digests.runs.get(batch.run_end[0], 0) ^ h
        run_hash = (batch.run_end[0], h)
    with transaction(conn, path):
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
        write_digest(conn, digest)
    # Durable: the in-memory digest state follows.
    digests.digest = digest
    digests.work.update(work_hashes)
    digests.coverage = coverage_hash
    digests.counters = counters_hash
    if run_hash is not None:
        digests.runs[run_hash[0]] = run_hash[1]
    return FlushReceipt(batch.entries, batch.findings, batch.ops, time.perf_counter() - started)



class transaction:
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


def write_digest(conn: sqlite3.Connection, digest: int) -> None:
    conn.execute(
        "INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)",
        (integrity.DIGEST_KEY, integrity.digest_hex(digest)),
    )


def schema_version(conn: sqlite3.Connection, path: Path) -> int | None:
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


def take_lock(path: Path) -> BinaryIO:
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


# --- reading what the mirror does not keep -------------------------------------------------


def select_corpus(conn: sqlite3.Connection, where: str, params: tuple = ()) -> Iterator[CorpusEntry]:
    """Durable corpus entries with their work ids, in queue order (`where` filters c/w rows)."""
    rows = conn.execute(
        "SELECT c.queue_id, c.sha256, c.data, c.target, c.bound, c.parent, c.origin, "
        "c.new_bits, c.found_s, w.work_id FROM corpus AS c "
        f"JOIN work AS w ON w.queue_id = c.queue_id {where} ORDER BY c.queue_id",
        params,
    )
    for queue_id, sha256, data, target, bound, parent, origin, new_bits, found_s, work_id in rows:
        yield CorpusEntry(queue_id, sha256, data, target, bound, parent, origin, new_bits, found_s,
                          WorkId(work_id))


def iter_findings(conn: sqlite3.Connection) -> Iterator[Finding]:
    """Durable findings, crashes then hangs, in id order."""
    rows = conn.execute(
        "SELECT kind, finding_id, sha256, data, target, detail, work_id, found_s "
        "FROM findings ORDER BY kind, finding_id"
    )
    for kind, finding_id, sha256, data, target, detail, work_id, found_s in rows:
        yield Finding(
            FindingKind(kind), finding_id, sha256, data, target, detail, WorkId(work_id),
            found_s,
        )


TriageRows = dict[tuple[str, int], tuple[str, str, bytes | None, float | None]]


def triage_rows(conn: sqlite3.Connection) -> TriageRows:
    """Durable triage rows: (kind, finding id) -> (identity key, stage, minimized input, when)."""
    try:
        rows = conn.execute(
            "SELECT kind, finding_id, identity, stage, min_data, min_s FROM triage").fetchall()
    except sqlite3.OperationalError:  # a journal from before the table existed
        return {}
    return {(k, i): (ident, st, bytes(m) if m is not None else None, t) for k, i, ident, st, m, t in rows}


def provenance_rows(conn: sqlite3.Connection) -> dict[tuple[str, int], tuple[int, int | None]]:
    """Durable provenance records: (kind, id) -> (source rank, confirming rank)."""
    try:
        rows = conn.execute("SELECT kind, id, source_rank, confirmed_by FROM provenance").fetchall()
    except sqlite3.OperationalError:  # a journal from before the table existed
        return {}
    return {(k, i): (r, c) for k, i, r, c in rows}


def insert_run(conn: sqlite3.Connection, path: Path, record: RunRecord, digests: Digests) -> None:
    """Record a run's start at once, in its own transaction (not batched)."""
    h = integrity.row_hash("runs", (record.run, record.epoch, record.started, None, 0))
    with transaction(conn, path):
        conn.execute(
            "INSERT INTO runs (run, epoch, started, ended, clean) VALUES (?, ?, ?, NULL, 0)",
            (record.run, record.epoch, record.started),
        )
        write_digest(conn, digests.digest ^ h)
    digests.digest ^= h
    digests.runs[record.run] = h
