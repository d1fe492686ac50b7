"""The embedded campaign store: one SQLite file in WAL mode, shared by coordinators on one host.

Every write is a `BEGIN IMMEDIATE` transaction: it takes SQLite's one write lock first, so the
reads that decide a lease or a commit and the writes that follow see no other writer between
them (the compare-and-set needs nothing more). The store clock defaults to `time.time()`: every
process of one host reads the same clock. Readers never wait (WAL). A process frozen while it
holds the write lock (SIGSTOP inside a transaction, for milliseconds at most) stalls every
other writer until it runs again: no server can take the lock away from it (docs/design.md,
"Beyond one coordinator").

Opening is retried whole while another opener holds a lock it needs, up to the busy timeout:
switching a new file to WAL reads its first page (a shared lock) and then asks for the write
lock, and SQLite refuses a reader that wants to become a writer while another connection holds
the write lock at once, with SQLITE_BUSY and without waiting in the busy handler (waiting could
deadlock; sqlite3_busy_handler's documentation). So two coordinators that create one store at
the same moment could see "database is locked" at once, whatever the busy timeout. After the
open, every write starts with `BEGIN IMMEDIATE` holding no lock, and every read takes a WAL
snapshot: both always wait in the busy handler.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from pathlib import Path

from symfence.coordinator.shared.interface import StoreError
from symfence.coordinator.shared.sqlcore import Cursor, SqlStore, T

SPELLINGS = {"serial": "INTEGER PRIMARY KEY AUTOINCREMENT", "blob": "BLOB", "real": "REAL", "int": "INTEGER"}
BUSY_TIMEOUT_S = 30.0  # how long a writer waits for the write lock before the store gives up (default)


class SqliteStore(SqlStore):
    """The campaign store in one SQLite file (created if missing)."""

    def __init__(self, path: str | Path, *, clock: Callable[[], float] | None = None,
                 synchronous: str = "NORMAL", busy_timeout_s: float = BUSY_TIMEOUT_S) -> None:
        super().__init__(clock)
        self._wall = clock or time.time
        self.path = Path(path)
        self._placeholders: dict[str, str] = {}
        try:
            self._conn = sqlite3.connect(self.path, timeout=busy_timeout_s, isolation_level=None)
            self._open(synchronous, busy_timeout_s)
        except sqlite3.Error as exc:
            raise StoreError(f"campaign store {self.path}: {exc}") from exc

    def _open(self, synchronous: str, busy_timeout_s: float) -> None:
        """Switch the file to WAL, set `synchronous` and create the tables: all of it run again
        while another opener holds a lock it needs and SQLite said busy without waiting, each run
        waiting in the busy handler only for what is left of `busy_timeout_s`; a lock still
        held then is the busy error, as from any transaction."""
        deadline = time.monotonic() + busy_timeout_s
        pause = 0.001
        while True:
            self._wait_at_most(deadline - time.monotonic())
            try:
                self._conn.execute("PRAGMA journal_mode=WAL")
                self._conn.execute(f"PRAGMA synchronous={synchronous}")
                self._transaction(self._create_all)
                break
            except sqlite3.OperationalError as exc:
                if exc.sqlite_errorcode & 0xFF != sqlite3.SQLITE_BUSY or time.monotonic() >= deadline:
                    raise
                if self._conn.in_transaction:
                    self._conn.execute("ROLLBACK")
            time.sleep(max(0.0, min(pause, deadline - time.monotonic())))
            pause = min(2 * pause, 0.05)
        self._wait_at_most(busy_timeout_s)

    def _wait_at_most(self, seconds: float) -> None:
        """The busy handler's timeout for this connection's next statements."""
        self._conn.execute(f"PRAGMA busy_timeout = {max(0, round(seconds * 1000))}")

    def _create_all(self, cur: Cursor, now: float) -> None:
        self._create(cur, now, SPELLINGS)
        cur.execute("CREATE TABLE IF NOT EXISTS sequences (name TEXT PRIMARY KEY, value INTEGER NOT NULL)")
        for name in ("epoch", "lease_token"):
            cur.execute("INSERT INTO sequences (name, value) VALUES (?, 0) ON CONFLICT (name) DO NOTHING",
                        (name,))

    def _sql(self, text: str) -> str:
        translated = self._placeholders.get(text)
        if translated is None:
            translated = self._placeholders[text] = text.replace("%s", "?")
        return translated

    def _transact(self, body: Callable[[Cursor, float], T]) -> T:
        try:
            return self._transaction(body)
        except sqlite3.Error as exc:  # e.g. the write lock not free within the busy timeout
            raise StoreError(f"campaign store {self.path}: {exc}") from exc

    def _transaction(self, body: Callable[[Cursor, float], T]) -> T:
        cur = self._conn.cursor()
        cur.execute("BEGIN IMMEDIATE")  # the write lock first: `now` is read while holding it
        try:
            result = body(cur, self._wall())
        except BaseException:
            if self._conn.in_transaction:
                cur.execute("ROLLBACK")
            raise
        cur.execute("COMMIT")
        return result

    def _read(self, body: Callable[[Cursor, float], T]) -> T:
        cur = self._conn.cursor()
        try:
            cur.execute("BEGIN")
            try:
                return body(cur, self._wall())
            finally:
                cur.execute("COMMIT")
        except sqlite3.Error as exc:
            raise StoreError(f"campaign store {self.path}: {exc}") from exc

    def _next_values(self, cur: Cursor, sequence: str, count: int) -> list[int]:
        if count == 0:
            return []
        (last,) = cur.execute("UPDATE sequences SET value = value + ? WHERE name = ? RETURNING value",
                              (count, sequence)).fetchone()
        return list(range(last - count + 1, last + 1))

    def close(self) -> None:
        self._conn.close()
