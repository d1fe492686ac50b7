"""The campaign store on a PostgreSQL server (psycopg 3), for coordinators on several hosts.

The fence is one conditional `UPDATE work ... WHERE work_id AND state = 'leased' AND coordinator
AND epoch AND token AND expires > now RETURNING` (sqlcore.SqlStore._holds); PostgreSQL's row lock
orders it against any other change of that item. Items to lease are picked `FOR UPDATE SKIP
LOCKED`, so coordinators leasing at once take different items without waiting for each other;
epochs and lease tokens are PostgreSQL sequences. A transaction that the server aborts for a
deadlock or a serialization failure is run again whole. The store clock defaults to the
server's (`clock_timestamp()`, read once per transaction), so coordinators on hosts whose clocks
differ still judge expiry by one clock. A session left idle inside a transaction (its process
frozen or cut off mid-transaction) is ended by the server after `idle_in_transaction_s`, which
frees the rows it held.
"""

from __future__ import annotations

from collections.abc import Callable

from symfence.coordinator.shared.interface import StoreError
from symfence.coordinator.shared.sqlcore import Cursor, SqlStore, T

SPELLINGS = {"serial": "BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY", "blob": "BYTEA",
             "real": "DOUBLE PRECISION", "int": "BIGINT"}
CREATE_LOCK = 0x73796D66  # the advisory lock that serializes creating the tables ("symf")
RETRIES = 8  # runs of one transaction the server aborted (deadlock, serialization) before giving up


class PostgresStore(SqlStore):
    """The campaign store in a PostgreSQL database (`dsn`: a libpq connection string or URL)."""

    lock_rows = " FOR UPDATE SKIP LOCKED"
    lock_member = " FOR SHARE"
    lock_wait = " FOR UPDATE"

    def __init__(self, dsn: str, *, clock: Callable[[], float] | None = None,
                 idle_in_transaction_s: float = 5.0, connect_timeout_s: float = 10.0,
                 synchronous_commit: bool = True) -> None:
        """`synchronous_commit` False: a commit returns before its WAL is flushed (a server crash
        may lose the last ones; the data stays consistent), like SQLite's synchronous NORMAL."""
        super().__init__(clock)
        try:
            import psycopg
        except ImportError as exc:
            raise StoreError("the PostgreSQL store needs psycopg: pip install 'symfence[postgres]'") from exc
        self._errors = (psycopg.errors.DeadlockDetected, psycopg.errors.SerializationFailure)
        self._failure = psycopg.Error
        self._dsn = dsn
        try:
            self._conn = psycopg.connect(dsn, autocommit=True, connect_timeout=int(connect_timeout_s))
            self._conn.execute(f"SET idle_in_transaction_session_timeout = {int(idle_in_transaction_s * 1000)}")
            if not synchronous_commit:
                self._conn.execute("SET synchronous_commit = off")
            self._transact(self._create_all)
        except psycopg.Error as exc:
            raise StoreError(f"campaign store {dsn!r}: {str(exc).strip().splitlines()[0]}") from exc

    def _create_all(self, cur: Cursor, now: float) -> None:
        cur.execute("SELECT pg_advisory_xact_lock(%s)", (CREATE_LOCK,))
        cur.execute("CREATE SEQUENCE IF NOT EXISTS epoch_seq")
        cur.execute("CREATE SEQUENCE IF NOT EXISTS lease_token_seq")
        self._create(cur, now, SPELLINGS)

    def _sql(self, text: str) -> str:
        return text

    def _now(self, cur: Cursor) -> float:
        if self._clock is not None:
            return self._clock()
        (now,) = cur.execute("SELECT extract(epoch FROM clock_timestamp())::float8").fetchone()
        return float(now)

    def _transact(self, body: Callable[[Cursor, float], T]) -> T:
        for _ in range(RETRIES):
            try:
                with self._conn.transaction(), self._conn.cursor() as cur:
                    return body(cur, self._now(cur))
            except self._errors as exc:  # rolled back whole: run it again
                last = exc
            except self._failure as exc:  # the server gone, our session ended, ...
                raise self._error(exc) from exc
        raise self._error(last, f"gave up after {RETRIES} runs: ")

    def _read(self, body: Callable[[Cursor, float], T]) -> T:
        try:
            with self._conn.transaction(), self._conn.cursor() as cur:
                return body(cur, self._now(cur))
        except self._failure as exc:
            raise self._error(exc) from exc

    def _error(self, exc: Exception, prefix: str = "") -> StoreError:
        lines = str(exc).strip().splitlines() or [type(exc).__name__]
        return StoreError(f"campaign store {self._dsn!r}: {prefix}{lines[0]}")

    def _each(self, cur: Cursor, text: str, rows: list[tuple]) -> list[bool]:
        """All the statements in one round trip (psycopg's pipelined executemany), their results
        read back in order."""
        if not rows:
            return []
        cur.executemany(text, rows, returning=True)
        returned = []
        while True:
            returned.append(cur.fetchone() is not None)
            if not cur.nextset():
                return returned

    def _next_values(self, cur: Cursor, sequence: str, count: int) -> list[int]:
        if count == 0:
            return []
        rows = cur.execute(f"SELECT nextval('{sequence}_seq') FROM generate_series(1, %s)", (count,)).fetchall()
        return sorted(int(value) for (value,) in rows)

    def close(self) -> None:
        self._conn.close()
