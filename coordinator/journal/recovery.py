"""Loading a journal back: one consistent read of the store, every row checked, into a mirror.

Opening checks the file before anything is used (`integrity.verify_database`, in store.py:
SQLite's integrity_check and the exact schema) and the content here, while loading it: every
input's data must match its sha256, ids must run 0..n-1 with one work item per corpus entry,
and the XOR of every row's hash must equal the `content_digest` that each flush writes in the
same transaction. A damaged journal is refused with one line naming the recovery command;
nothing is changed. What recovery then repairs (the previous run's leases are void) is
`Leases.void_leases`, made durable by the journal's first flush (`Journal.open`).
"""

from __future__ import annotations

import gc
import hashlib
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path

from symfence.coordinator import integrity
from symfence.coordinator.journal.errors import JournalDamagedError
from symfence.coordinator.journal.leases import LeaseRow, Leases
from symfence.coordinator.journal.records import FindingKind, RunRecord, WorkState
from symfence.coordinator.journal.store import Digests
from symfence.protocol.messages import Status


@dataclass(slots=True)
class Loaded:
    """The durable state of a journal as the mirror starts from it."""

    leases: Leases = field(default_factory=Leases)
    inputs: set[tuple[str, str]] = field(default_factory=set)  # (target, sha256) of every entry
    next_queue_id: int = 0
    finding_inputs: dict[FindingKind, set[tuple[str, str]]] = field(
        default_factory=lambda: {kind: set() for kind in FindingKind})
    next_finding_id: dict[FindingKind, int] = field(default_factory=lambda: {kind: 0 for kind in FindingKind})
    runs: list[RunRecord] = field(default_factory=list)
    coverage: bytes | None = None
    counters: dict[str, int] = field(default_factory=dict)
    digests: Digests = field(default_factory=Digests)


def load(conn: sqlite3.Connection, path: Path, *, readonly: bool) -> Loaded:
    """Read the whole journal in one transaction, checking its content (see the module doc).

    Read-only journals keep the read transaction open, so later reads see the same snapshot.
    """
    conn.execute("BEGIN")
    gc_was_on = gc.isenabled()
    gc.disable()  # a row's objects are never cyclic garbage; collections would walk them all
    try:
        loaded = _load_rows(conn, path)
    except (TypeError, ValueError, KeyError, OverflowError) as exc:
        # SQLite is dynamically typed: a flipped type byte hands back an int for a blob.
        conn.execute("ROLLBACK")
        raise JournalDamagedError(path, f"a value of the wrong type: {exc}") from exc
    except sqlite3.DatabaseError as exc:
        conn.execute("ROLLBACK")
        if integrity.is_damage(exc):
            raise JournalDamagedError(path, str(exc)) from exc
        raise
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    finally:
        if gc_was_on:
            gc.enable()
    if not readonly:
        conn.execute("COMMIT")
    return loaded


def _load_rows(conn: sqlite3.Connection, path: Path) -> Loaded:
    damaged = lambda what: JournalDamagedError(path, what)  # noqa: E731
    out = Loaded()
    leases, inputs, digests = out.leases, out.inputs, out.digests
    digest = 0
    targets: dict[int, tuple[str, str]] = {}
    corpus_rows = 0
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
        out.next_queue_id = max(out.next_queue_id, queue_id + 1)
    work_rows = 0
    for fields in conn.execute(f"SELECT {integrity.select_columns('work')} FROM work"):
        queue_id, work_id, state, token, attempts, reason, status = fields
        work_rows += 1
        try:
            lease = LeaseRow(
                queue_id, WorkState(state), token, attempts, reason,
                Status(status) if status is not None else None,
            )
        except ValueError as exc:
            raise damaged(f"work item {queue_id}: {exc}") from None
        if queue_id not in targets:
            raise damaged(f"work item {queue_id} has no corpus entry")
        h = integrity.row_hash("work", fields)
        digest ^= h
        digests.work[work_id] = h
        leases.load(work_id, lease)
        inputs.add(targets[queue_id])
    # Equal counts: ids 0..n-1 without gaps, one work item per entry, no duplicates.
    if not (len(leases) == len(inputs) == corpus_rows == work_rows == out.next_queue_id):
        raise damaged(
            f"corrupt: {corpus_rows} corpus entries with "
            f"{len(inputs)} distinct inputs, {work_rows} work items with "
            f"{len(leases)} distinct ids, next queue id {out.next_queue_id}"
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
        out.finding_inputs[kind].add((target, sha256))
        out.next_finding_id[kind] = max(out.next_finding_id[kind], finding_id + 1)
    if sum(map(len, out.finding_inputs.values())) != sum(out.next_finding_id.values()):
        raise damaged("corrupt: finding ids are not 0..n-1 per kind")
    for fields in conn.execute(
        f"SELECT {integrity.select_columns('runs')} FROM runs ORDER BY run"
    ):
        run, epoch, started, ended, clean = fields
        out.runs.append(RunRecord(run, epoch, started, ended, bool(clean)))
        digests.runs[run] = integrity.row_hash("runs", fields)
        digest ^= digests.runs[run]
    coverage = conn.execute("SELECT map FROM coverage WHERE id = 0").fetchone()
    out.coverage = coverage[0] if coverage is not None else None
    if out.coverage is not None:
        digests.coverage = integrity.blob_hash("coverage", out.coverage)
        digest ^= digests.coverage
    out.counters = dict(conn.execute("SELECT name, value FROM counters"))
    if out.counters:
        digests.counters = integrity.counters_hash(out.counters)
        digest ^= digests.counters
    stored = integrity.stored_digest(conn)
    if stored is not None and stored != digest:
        raise damaged("its content does not match its digest: a row was changed or lost")
    # A journal written before digests existed gets one with its next write.
    digests.digest = digest
    return out
