"""The campaign store's logic in SQL, once for both databases: every operation as one transaction.

`SqlStore` implements `interface.CampaignStore`; a subclass gives it a connection and says how
its database differs (placeholders, the column types, row locks, the two sequences, the
transaction and its retry, how a statement is sent for many rows). The SQL is written with `%s`
placeholders (psycopg's); SQLite's `?` is swapped in.

The fence is the commit's conditional UPDATE: it changes the item's row only if it still names
this lease (state leased, same coordinator, epoch and token) and the lease has not expired, and
everything the outcome adds is written in the same transaction after it, so a refused commit
leaves nothing. A registration ends (voids) the coordinator's leases of older epochs in its own
transaction, so a lease of a dead epoch can never commit. Every change appends to `history`.
"""

from __future__ import annotations

import abc
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

from symfence.coordinator.shared.interface import StaleEpochError, StoreError, UnknownCoordinatorError
from symfence.coordinator.shared.records import (
    CommitResult,
    CoordinatorId,
    CoordinatorStatus,
    Epoch,
    EventKind,
    HistoryEvent,
    ItemRow,
    ItemState,
    Lease,
    LeaseGrant,
    LeaseToken,
    Outcome,
    RefuseReason,
    Registration,
    SharedFinding,
    WorkItem,
)

T = TypeVar("T")
Cursor = Any  # sqlite3.Cursor or psycopg.Cursor: the same DB-API calls are used on both

SCHEMA_VERSION = "1"

# The tables, once for both databases; `{serial}`, `{blob}`, `{real}` and `{int}` are the
# database's spellings. Items are picked by position (the order they were added); a done item
# keeps the lease that committed it. The history is append-only: nothing updates or deletes it.
SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (
    key    TEXT PRIMARY KEY,
    value  TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS coordinators (
    id             TEXT PRIMARY KEY,
    epoch          {int} NOT NULL,              -- its current epoch (older ones are dead)
    registrations  {int} NOT NULL,
    registered_at  {real} NOT NULL
);
CREATE TABLE IF NOT EXISTS work (
    position     {serial},
    work_id      TEXT NOT NULL UNIQUE,
    payload      {blob} NOT NULL,
    state        TEXT NOT NULL CHECK (state IN ('pending', 'leased', 'done')),
    coordinator  TEXT,                          -- the lease (leased), or the one that committed (done)
    epoch        {int},
    token        {int},
    expires      {real},
    status       TEXT,
    CHECK ((state = 'pending') = (token IS NULL)),
    CHECK ((state = 'done') = (status IS NOT NULL))
);
CREATE INDEX IF NOT EXISTS work_by_state ON work (state, position);
CREATE INDEX IF NOT EXISTS work_by_expiry ON work (state, expires);
CREATE TABLE IF NOT EXISTS findings (
    identity     TEXT PRIMARY KEY,              -- the crash identity: one finding per identity
    kind         TEXT NOT NULL,
    data         {blob} NOT NULL,
    detail       TEXT NOT NULL,
    coordinator  TEXT NOT NULL,                 -- the first to commit it
    work_id      TEXT NOT NULL,
    at           {real} NOT NULL
);
CREATE TABLE IF NOT EXISTS coverage (
    edge         {int} PRIMARY KEY,             -- the union: one row per edge ever seen
    coordinator  TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS counters (
    coordinator  TEXT NOT NULL,
    name         TEXT NOT NULL,
    value        {int} NOT NULL,
    PRIMARY KEY (coordinator, name)
);
CREATE TABLE IF NOT EXISTS history (
    seq          {serial},
    at           {real} NOT NULL,
    kind         TEXT NOT NULL,
    work_id      TEXT,
    coordinator  TEXT,
    epoch        {int},
    token        {int},
    expires      {real},
    reason       TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS history_by_kind ON history (kind, coordinator);
"""

_HISTORY = ("INSERT INTO history (at, kind, work_id, coordinator, epoch, token, expires, reason) "
            "VALUES (%s, %s, %s, %s, %s, %s, %s, %s)")

# `symfence status` for a shared campaign: one row per coordinator, with its share of commits.
# (coordinator, epoch, registrations, holding now, committed, refused, its leases that expired)
STATUS_QUERY = """
SELECT c.id, c.epoch, c.registrations,
       (SELECT COUNT(*) FROM work w WHERE w.state = 'leased' AND w.coordinator = c.id
                                      AND w.expires > %s),
       (SELECT COUNT(*) FROM history h WHERE h.kind = 'commit' AND h.coordinator = c.id),
       (SELECT COUNT(*) FROM history h WHERE h.kind = 'refuse' AND h.coordinator = c.id),
       (SELECT COUNT(*) FROM history h WHERE h.kind = 'expire' AND h.coordinator = c.id)
FROM coordinators c ORDER BY c.id
"""


class SqlStore(abc.ABC):
    """A campaign store over one DB-API connection (subclasses: SqliteStore, PostgresStore)."""

    # --- what a database says about itself --------------------------------------------------

    lock_rows = ""  # appended to the SELECT that picks items to lease (PostgreSQL: SKIP LOCKED)
    lock_member = ""  # appended to the read of a coordinator's epoch (PostgreSQL: FOR SHARE)
    lock_wait = ""  # appended to a SELECT whose rows must all be changed (PostgreSQL: FOR UPDATE)

    def __init__(self, clock: Callable[[], float] | None) -> None:
        self._clock = clock
        self._events: list[tuple] = []  # the history rows of the transaction under way

    def _create(self, cur: Cursor, now: float, spellings: Mapping[str, str]) -> None:
        """Create the tables if missing (in the caller's transaction) and check the schema version."""
        for statement in SCHEMA.format(**spellings).split(";"):
            if statement.strip():
                self._exec(cur, statement)
        self._exec(cur, "INSERT INTO meta (key, value) VALUES ('schema', %s) ON CONFLICT (key) DO NOTHING",
                   (SCHEMA_VERSION,))
        (version,) = self._exec(cur, "SELECT value FROM meta WHERE key = 'schema'").fetchone()
        if version != SCHEMA_VERSION:
            raise StoreError(f"the store has schema {version}, this symfence reads {SCHEMA_VERSION}")

    @abc.abstractmethod
    def _transact(self, body: Callable[[Cursor, float], T]) -> T:
        """Run `body(cursor, now)` in one write transaction (retried whole if the database asks)."""

    @abc.abstractmethod
    def _read(self, body: Callable[[Cursor, float], T]) -> T:
        """Run `body(cursor, now)` for reading only."""

    @abc.abstractmethod
    def _next_values(self, cur: Cursor, sequence: str, count: int) -> list[int]:
        """`count` new values of the store-side sequence `epoch` or `lease_token`, increasing."""

    @abc.abstractmethod
    def _sql(self, text: str) -> str:
        """`text` in this database's placeholder style."""

    def _free(self, cur: Cursor, positions: list[tuple[int]]) -> None:
        """Make the items at `positions` pending (their leases ended: voided, expired)."""
        if positions:
            cur.executemany(self._sql("UPDATE work SET state = 'pending', coordinator = NULL, epoch = NULL, "
                                      "token = NULL, expires = NULL WHERE position = %s"), positions)

    def _each(self, cur: Cursor, text: str, rows: list[tuple]) -> list[bool]:
        """Run the statement `text` (it ends in RETURNING) once per parameter row, in order; say
        for each whether it returned a row. (PostgreSQL sends them all at once.)"""
        sql = self._sql(text)
        return [cur.execute(sql, row).fetchone() is not None for row in rows]

    def _exec(self, cur: Cursor, text: str, params: tuple = ()) -> Cursor:
        cur.execute(self._sql(text), params)
        return cur

    def _event(self, cur: Cursor, now: float, kind: EventKind, work_id: str | None = None,
               coordinator: str | None = None, epoch: int | None = None, token: int | None = None,
               expires: float | None = None, reason: str = "") -> None:
        """Append a history row: kept until the transaction's end, then written at once (`_write`)."""
        self._events.append((now, kind.value, work_id, coordinator, epoch, token, expires, reason))

    def _write(self, body: Callable[[Cursor, float], T]) -> T:
        """Run `body` in one write transaction and append the history rows it made, in order,
        with one statement at its end (still under every lock the transaction took)."""

        def logged(cur: Cursor, now: float) -> T:
            self._events = []
            result = body(cur, now)
            if self._events:
                cur.executemany(self._sql(_HISTORY), self._events)
            return result

        return self._transact(logged)

    # --- membership -------------------------------------------------------------------------

    def register(self, coordinator: CoordinatorId) -> Registration:
        """In this order, so that the history's order agrees with the order the transactions
        took effect in (PostgreSQL's history numbers are drawn, not committed, in order): lock
        the coordinator's row, draw the epoch, end its older leases (waiting for a commit under
        one of them to finish first), and append the REGISTER last."""

        def body(cur: Cursor, now: float) -> Registration:
            self._exec(cur, "INSERT INTO coordinators (id, epoch, registrations, registered_at) "
                            "VALUES (%s, 0, 0, %s) ON CONFLICT (id) DO UPDATE "
                            "SET registrations = coordinators.registrations", (coordinator, now))
            (epoch,) = self._next_values(cur, "epoch", 1)
            self._exec(cur, "UPDATE coordinators SET epoch = %s, registrations = registrations + 1, "
                            "registered_at = %s WHERE id = %s", (epoch, now, coordinator))
            voided = self._exec(cur, "SELECT position, work_id, epoch, token, expires FROM work "
                                     "WHERE state = 'leased' AND coordinator = %s AND epoch < %s "
                                     "ORDER BY position" + self.lock_wait, (coordinator, epoch)).fetchall()
            self._free(cur, [(position,) for position, *_ in voided])
            for _, work_id, old_epoch, token, expires in voided:
                self._event(cur, now, EventKind.VOID, work_id, coordinator, old_epoch, token, expires,
                            "its coordinator registered again")
            self._event(cur, now, EventKind.REGISTER, coordinator=coordinator, epoch=epoch)
            return Registration(coordinator, Epoch(epoch), len(voided))

        return self._write(body)

    def _member_epoch(self, cur: Cursor, coordinator: str) -> int:
        row = self._exec(cur, "SELECT epoch FROM coordinators WHERE id = %s" + self.lock_member,
                         (coordinator,)).fetchone()
        if row is None:
            raise UnknownCoordinatorError(f"coordinator {coordinator!r} has not registered in this store")
        return int(row[0])

    # --- work -------------------------------------------------------------------------------

    def add_work(self, items: Iterable[WorkItem]) -> int:
        batch = list(items)

        def body(cur: Cursor, now: float) -> int:
            return sum(self._add(cur, now, batch))

        return self._write(body) if batch else 0

    def _add(self, cur: Cursor, now: float, items: Iterable[WorkItem]) -> list[bool]:
        """Insert the items (sorted: one lock order for all writers); which of them were new."""
        batch = sorted(items, key=lambda item: item.work_id)
        new = self._each(cur, "INSERT INTO work (work_id, payload, state) VALUES (%s, %s, 'pending') "
                              "ON CONFLICT (work_id) DO NOTHING RETURNING position",
                         [(item.work_id, item.payload) for item in batch])
        for item, added in zip(batch, new, strict=True):
            if added:
                self._event(cur, now, EventKind.ADD, item.work_id)
        return new

    def lease(self, coordinator: CoordinatorId, epoch: Epoch, count: int, ttl_s: float) -> LeaseGrant:
        if count <= 0 or ttl_s <= 0:
            raise ValueError(f"lease count and ttl must be positive, got {count} and {ttl_s}")

        def body(cur: Cursor, now: float) -> LeaseGrant:
            current = self._member_epoch(cur, coordinator)
            if current != epoch:
                raise StaleEpochError(f"coordinator {coordinator!r} holds epoch {current}, not {epoch}")
            expired = self._exec(cur, "SELECT position, work_id, payload, coordinator, epoch, token, expires "
                                      "FROM work WHERE state = 'leased' AND expires <= %s "
                                      "ORDER BY expires, position LIMIT %s" + self.lock_rows,
                                 (now, count)).fetchall()
            pending = self._exec(cur, "SELECT position, work_id, payload FROM work WHERE state = 'pending' "
                                      "ORDER BY position LIMIT %s" + self.lock_rows,
                                 (count - len(expired),)).fetchall() if len(expired) < count else []
            tokens = self._next_values(cur, "lease_token", len(expired) + len(pending))
            expires = now + ttl_s
            chosen = list(zip(expired + pending, tokens, strict=True))
            if chosen:
                cur.executemany(self._sql("UPDATE work SET state = 'leased', coordinator = %s, epoch = %s, "
                                          "token = %s, expires = %s WHERE position = %s"),
                                [(coordinator, epoch, token, expires, row[0]) for row, token in chosen])
            leases = []
            for (_, work_id, payload, *old), token in chosen:
                if old:
                    self._event(cur, now, EventKind.EXPIRE, work_id, old[0], old[1], old[2], old[3],
                                f"taken over by {coordinator}")
                self._event(cur, now, EventKind.LEASE, work_id, coordinator, epoch, token, expires)
                leases.append(Lease(work_id, coordinator, epoch, LeaseToken(token), expires, bytes(payload)))
            return LeaseGrant(tuple(leases), len(expired))

        return self._write(body)

    def _holds(self, cur: Cursor, leases: list[Lease], now: float, assignments: str,
               values: list[tuple]) -> list[bool]:
        """The compare-and-set, once per lease: change the item's row (`assignments`, with that
        lease's `values`) only if the lease is its current, unexpired one. Which of them held."""
        return self._each(cur, f"UPDATE work SET {assignments} WHERE work_id = %s AND state = 'leased' "
                               "AND coordinator = %s AND epoch = %s AND token = %s AND expires > %s "
                               "RETURNING work_id",
                          [(*value, lease.work_id, lease.coordinator, lease.epoch, lease.token, now)
                           for lease, value in zip(leases, values, strict=True)])

    def renew(self, leases: Iterable[Lease], ttl_s: float) -> tuple[Lease, ...]:
        batch = sorted(leases, key=lambda lease: lease.work_id)

        def body(cur: Cursor, now: float) -> tuple[Lease, ...]:
            expires = now + ttl_s
            renewed = []
            for lease, held in zip(batch, self._holds(cur, batch, now, "expires = %s", [(expires,)] * len(batch)),
                                   strict=True):
                if held:
                    self._event(cur, now, EventKind.RENEW, lease.work_id, lease.coordinator, lease.epoch,
                                lease.token, expires)
                    renewed.append(Lease(lease.work_id, lease.coordinator, lease.epoch, lease.token,
                                         expires, lease.payload))
            return tuple(renewed)

        return self._write(body) if batch else ()

    def add_findings(self, coordinator: CoordinatorId, epoch: Epoch, work_id: str,
                     findings: Iterable[SharedFinding]) -> tuple[str, ...]:
        batch = sorted({f.identity: f for f in findings}.values(), key=lambda f: f.identity)

        def body(cur: Cursor, now: float) -> tuple[str, ...]:
            current = self._member_epoch(cur, coordinator)
            if current != epoch:
                raise StaleEpochError(f"coordinator {coordinator!r} holds epoch {current}, not {epoch}")
            first = self._each(cur, "INSERT INTO findings (identity, kind, data, detail, coordinator, work_id, at) "
                                    "VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT (identity) DO NOTHING "
                                    "RETURNING identity",
                               [(f.identity, f.kind, f.data, f.detail, coordinator, work_id, now) for f in batch])
            return tuple(f.identity for f, new in zip(batch, first, strict=True) if new)

        return self._write(body) if batch else ()

    def release(self, leases: Iterable[Lease]) -> int:
        batch = sorted(leases, key=lambda lease: lease.work_id)

        def body(cur: Cursor, now: float) -> int:
            released = 0
            held = self._holds(cur, batch, now, "state = 'pending', coordinator = NULL, epoch = NULL, "
                                                "token = NULL, expires = NULL", [()] * len(batch))
            for lease, ended in zip(batch, held, strict=True):
                if ended:
                    released += 1
                    self._event(cur, now, EventKind.RELEASE, lease.work_id, lease.coordinator,
                                lease.epoch, lease.token, lease.expires)
            return released

        return self._write(body) if batch else 0

    def expire(self) -> int:
        def body(cur: Cursor, now: float) -> int:
            rows = self._exec(cur, "SELECT position, work_id, coordinator, epoch, token, expires FROM work "
                                   "WHERE state = 'leased' AND expires <= %s ORDER BY position" + self.lock_rows,
                              (now,)).fetchall()
            self._free(cur, [(position,) for position, *_ in rows])
            for _, work_id, coordinator, epoch, token, expires in rows:
                self._event(cur, now, EventKind.EXPIRE, work_id, coordinator, epoch, token, expires,
                            "reclaimed")
            return len(rows)

        return self._write(body)

    # --- the commit -------------------------------------------------------------------------

    def commit(self, lease: Lease, outcome: Outcome) -> CommitResult:
        (result,) = self.commit_batch([(lease, outcome)])
        return result

    def commit_batch(self, commits: Sequence[tuple[Lease, Outcome]]) -> tuple[CommitResult, ...]:
        """Several commits in one transaction (a group commit): each is fenced on its own, and
        what the accepted ones add is written after all the compare-and-sets, merged and in
        sorted order (new work ids, crash identities, edges, counters), so that two batches
        never wait for each other in a cycle. Results come back in the order given."""
        batch = list(commits)

        def body(cur: Cursor, now: float) -> tuple[CommitResult, ...]:
            refused: dict[int, RefuseReason] = {}
            # in work id order; the statements run one after the other, so a lease given twice
            # holds for its first commit only
            order = sorted(range(len(batch)), key=lambda index: batch[index][0].work_id)
            held = self._holds(cur, [batch[index][0] for index in order], now, "state = 'done', status = %s",
                               [(batch[index][1].status,) for index in order])
            for index, ok in zip(order, held, strict=True):
                lease, outcome = batch[index]
                if ok:
                    self._event(cur, now, EventKind.COMMIT, lease.work_id, lease.coordinator, lease.epoch,
                                lease.token, lease.expires, outcome.status)
                else:
                    refused[index] = reason = self._refusal(cur, lease, now)
                    self._event(cur, now, EventKind.REFUSE, lease.work_id, lease.coordinator, lease.epoch,
                                lease.token, lease.expires, reason.value)
            accepted = {index: pair for index, pair in enumerate(batch) if index not in refused}
            added, findings, edges = self._apply(cur, now, accepted)
            return tuple(
                CommitResult(lease.work_id, refused[index]) if index in refused else
                CommitResult(lease.work_id, None, added[index], tuple(findings[index]), edges[index])
                for index, (lease, _) in enumerate(batch)
            )

        return self._write(body) if batch else ()

    def _apply(self, cur: Cursor, now: float, accepted: Mapping[int, tuple[Lease, Outcome]]
               ) -> tuple[Counter[int], defaultdict[int, list[str]], Counter[int]]:
        """Write what the accepted commits add: new work ids, crash identities and edges each
        once, in sorted order, and the counters summed per coordinator. Each new key is credited
        to the first commit of the batch that carried it: (work added, new identities, new
        edges), by the commit's index."""
        work: dict[str, tuple[int, WorkItem]] = {}
        findings: dict[str, tuple[int, Lease, SharedFinding]] = {}
        edges: dict[int, tuple[int, Lease]] = {}
        totals: Counter[tuple[str, str]] = Counter()
        for index, (lease, outcome) in accepted.items():
            for item in outcome.new_work:
                work.setdefault(item.work_id, (index, item))
            for finding in outcome.findings:
                findings.setdefault(finding.identity, (index, lease, finding))
            for edge in outcome.coverage:
                edges.setdefault(edge, (index, lease))
            for name, value in outcome.counters.items():
                totals[(lease.coordinator, name)] += value
        added: Counter[int] = Counter()
        new_findings: defaultdict[int, list[str]] = defaultdict(list)
        new_edges: Counter[int] = Counter()
        work_ids = sorted(work)
        for work_id, fresh in zip(work_ids, self._add(cur, now, [work[key][1] for key in work_ids]), strict=True):
            added[work[work_id][0]] += fresh
        identities = sorted(findings)
        rows = []
        for identity in identities:
            _, lease, finding = findings[identity]
            rows.append((identity, finding.kind, finding.data, finding.detail, lease.coordinator, lease.work_id, now))
        first_seen = self._each(cur, "INSERT INTO findings (identity, kind, data, detail, coordinator, work_id, at) "
                                     "VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT (identity) DO NOTHING "
                                     "RETURNING identity", rows)
        for identity, first in zip(identities, first_seen, strict=True):
            if first:
                new_findings[findings[identity][0]].append(identity)
        seen = sorted(edges)
        first_seen = self._each(cur, "INSERT INTO coverage (edge, coordinator) VALUES (%s, %s) "
                                     "ON CONFLICT (edge) DO NOTHING RETURNING edge",
                                [(edge, edges[edge][1].coordinator) for edge in seen])
        for edge, first in zip(seen, first_seen, strict=True):
            new_edges[edges[edge][0]] += first
        for (coordinator, name), value in sorted(totals.items()):
            self._exec(cur, "INSERT INTO counters (coordinator, name, value) VALUES (%s, %s, %s) "
                            "ON CONFLICT (coordinator, name) DO UPDATE SET value = counters.value + excluded.value",
                       (coordinator, name, value))
        return added, new_findings, new_edges

    def _refusal(self, cur: Cursor, lease: Lease, now: float) -> RefuseReason:
        """Why the compare-and-set failed, read in the same transaction."""
        row = self._exec(cur, "SELECT state, coordinator, epoch, token FROM work WHERE work_id = %s",
                         (lease.work_id,)).fetchone()
        if row is None:
            return RefuseReason.UNKNOWN_ITEM
        state, coordinator, epoch, token = row
        if state == ItemState.DONE.value:
            return RefuseReason.ALREADY_DONE
        member = self._exec(cur, "SELECT epoch FROM coordinators WHERE id = %s", (lease.coordinator,)).fetchone()
        if member is None or int(member[0]) != lease.epoch:
            return RefuseReason.STALE_EPOCH
        if state == ItemState.PENDING.value:
            return RefuseReason.NOT_LEASED
        if (coordinator, epoch, token) == (lease.coordinator, lease.epoch, lease.token):
            return RefuseReason.LEASE_EXPIRED
        return RefuseReason.LEASE_TAKEN

    # --- reading ----------------------------------------------------------------------------

    def status(self) -> tuple[CoordinatorStatus, ...]:
        rows = self._read(lambda cur, now: self._exec(cur, STATUS_QUERY, (now,)).fetchall())
        total = sum(int(row[4]) for row in rows)
        return tuple(
            CoordinatorStatus(CoordinatorId(ident), Epoch(int(epoch)), int(registrations), int(holding),
                              int(committed), int(refused), int(taken), int(committed) / total if total else 0.0)
            for ident, epoch, registrations, holding, committed, refused, taken in rows
        )

    def counts(self) -> Mapping[ItemState, int]:
        rows = self._read(lambda cur, now: self._exec(
            cur, "SELECT state, COUNT(*) FROM work GROUP BY state").fetchall())
        found = {ItemState(state): int(count) for state, count in rows}
        return {state: found.get(state, 0) for state in ItemState}

    def findings(self) -> tuple[tuple[str, str, CoordinatorId, str], ...]:
        rows = self._read(lambda cur, now: self._exec(
            cur, "SELECT identity, kind, coordinator, work_id FROM findings ORDER BY identity").fetchall())
        return tuple((identity, kind, CoordinatorId(who), work_id) for identity, kind, who, work_id in rows)

    def coverage(self) -> frozenset[int]:
        rows = self._read(lambda cur, now: self._exec(cur, "SELECT edge FROM coverage").fetchall())
        return frozenset(int(edge) for (edge,) in rows)

    def counters(self) -> Mapping[str, int]:
        rows = self._read(lambda cur, now: self._exec(
            cur, "SELECT name, SUM(value) FROM counters GROUP BY name ORDER BY name").fetchall())
        return {name: int(value) for name, value in rows}

    def history(self) -> tuple[HistoryEvent, ...]:
        rows = self._read(lambda cur, now: self._exec(
            cur, "SELECT seq, at, kind, work_id, coordinator, epoch, token, expires, reason "
                 "FROM history ORDER BY seq").fetchall())
        return tuple(
            HistoryEvent(int(seq), float(at), EventKind(kind), work_id,
                         None if who is None else CoordinatorId(who), None if epoch is None else Epoch(int(epoch)),
                         None if token is None else LeaseToken(int(token)),
                         None if expires is None else float(expires), reason)
            for seq, at, kind, work_id, who, epoch, token, expires, reason in rows
        )

    def items(self) -> tuple[ItemRow, ...]:
        rows = self._read(lambda cur, now: self._exec(
            cur, "SELECT work_id, state, coordinator, epoch, token, expires FROM work "
                 "ORDER BY position").fetchall())
        return tuple(
            ItemRow(work_id, ItemState(state), None if who is None else CoordinatorId(who),
                    None if epoch is None else Epoch(int(epoch)),
                    None if token is None else LeaseToken(int(token)),
                    None if expires is None else float(expires))
            for work_id, state, who, epoch, token, expires in rows
        )
