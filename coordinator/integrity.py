"""Journal integrity: SQLite's own checks, the exact schema, and a digest of every row's content.

A journal can be damaged without SQLite noticing: a flipped byte inside a row, a file truncated
at a page boundary, a write-ahead log deleted with its last commits. `verify_database` runs
`PRAGMA integrity_check` (b-trees, indexes, constraints) and compares every table's columns with the schema this symfence writes;
`ContentDigest` keeps the XOR of one 128-bit hash per row, updated incrementally by every flush
and stored (in the same transaction) as `meta.content_digest`, so that loading the journal can
recompute it from the rows it reads and refuse any difference. Each row hash covers every
column; an input's data is covered through its sha256, which loading checks against the data.
"""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Iterable

DIGEST_KEY = "content_digest_v2"  # v2: blake2b of each row's repr (an older key is ignored)

# Column types per table, in the order rows are hashed (SELECT order). Values are converted to
# these types before hashing, because SQLite hands back what it stored (an int written to a REAL
# column comes back as a float).
COLUMNS: dict[str, tuple[tuple[str, type], ...]] = {
    "corpus": (("queue_id", int), ("target", str), ("sha256", str), ("bound", int),
               ("parent", int), ("origin", str), ("new_bits", int), ("found_s", float)),
    "work": (("queue_id", int), ("work_id", str), ("state", str), ("token", str),
             ("attempts", int), ("reason", str), ("status", str)),
    "findings": (("kind", str), ("finding_id", int), ("target", str), ("sha256", str),
                 ("detail", str), ("work_id", str), ("found_s", float)),
    "runs": (("run", int), ("epoch", str), ("started", float), ("ended", float), ("clean", int)),
}


class JournalError(Exception):
    """A journal problem, phrased as one line."""


class JournalDamagedError(JournalError):
    """The journal file is damaged (or empty): refused, with the recovery command in the line."""

    def __init__(self, path: Path, what: str) -> None:
        what = " ".join(str(what).replace("*** in database main ***", "").split())[:200]
        outdir = Path(path).parent
        super().__init__(
            f"{path} is damaged ({what}); nothing was changed: "
            f"`symfence recover {outdir} --config CONFIG` rebuilds a journal from its queue/ "
            "and crashes/ (the damaged files are kept beside it)"
        )
        self.path = Path(path)
        self.what = what


_WIDTH = {t: len(cols) for t, cols in COLUMNS.items()}
_FLOATS = {t: tuple(i for i, (_, kind) in enumerate(cols) if kind is float) for t, cols in COLUMNS.items()}


def row_hash(table: str, values: Iterable[Any]) -> int:
    """A 128-bit hash of one row of `table` (values in COLUMNS order).

    The row's repr is hashed after REAL columns are made floats and booleans ints (what SQLite
    hands back), so a row hashes the same written and read. One C-level hash call per row: the
    journal hashes every row it writes."""
    row = list(values)
    if len(row) != _WIDTH[table]:
        raise ValueError(f"{table}: {len(row)} values for {len(COLUMNS[table])} columns")
    for i in _FLOATS[table]:
        if row[i] is not None:
            row[i] = float(row[i])
    if bool in map(type, row):  # rare: the list comprehension only then (this runs per row)
        row = [int(v) if v is True or v is False else v for v in row]
    digest = hashlib.blake2b(f"{table}{row!r}".encode("utf-8", "surrogatepass"), digest_size=16)
    return int.from_bytes(digest.digest(), "big")


def blob_hash(table: str, blob: bytes) -> int:
    if not isinstance(blob, bytes):
        raise TypeError(f"{table}: a {type(blob).__name__} where a blob belongs")
    return int.from_bytes(hashlib.blake2b(table.encode() + blob, digest_size=16).digest(), "big")


def counters_hash(counters: Mapping[str, int]) -> int:
    text = repr(sorted(counters.items()))  # a value of another type changes the repr
    return int.from_bytes(hashlib.blake2b(b"counters" + text.encode(), digest_size=16).digest(), "big")


def select_columns(table: str) -> str:
    return ", ".join(name for name, _ in COLUMNS[table])


def digest_hex(value: int) -> str:
    return f"{value:032x}"


def stored_digest(conn: sqlite3.Connection) -> int | None:
    row = conn.execute("SELECT value FROM meta WHERE key = ?", (DIGEST_KEY,)).fetchone()
    if row is None:
        return None
    try:
        return int(row[0], 16)
    except (TypeError, ValueError):
        return -1  # unparseable: never equal to a computed digest


def _columns(conn: sqlite3.Connection) -> dict[str, list[tuple]]:
    tables = [
        name for (name,) in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name"
        )
    ]
    return {t: [tuple(r) for r in conn.execute(f"PRAGMA table_info({t})")] for t in tables}


_EXPECTED: dict[str, dict[str, list[tuple]]] = {}


def expected_columns(schema: str) -> dict[str, list[tuple]]:
    if schema not in _EXPECTED:
        mem = sqlite3.connect(":memory:")
        mem.executescript(schema)
        _EXPECTED[schema] = _columns(mem)
        mem.close()
    return _EXPECTED[schema]


def verify_database(conn: sqlite3.Connection, path: Path, schema: str) -> None:
    """SQLite's integrity_check and the exact tables and columns of `schema`; raise if either fails."""
    try:
        problems = [row[0] for row in conn.execute("PRAGMA integrity_check(3)")]
    except sqlite3.DatabaseError as exc:
        raise JournalDamagedError(path, f"integrity_check: {exc}") from exc
    if problems != ["ok"]:
        raise JournalDamagedError(path, f"integrity_check: {problems[0][:120]}")
    try:
        found = _columns(conn)
    except sqlite3.DatabaseError as exc:
        raise JournalDamagedError(path, f"schema: {exc}") from exc
    want = expected_columns(schema)
    if found != want:
        bad = sorted(set(found) ^ set(want)) or sorted(t for t in want if found.get(t) != want[t])
        raise JournalDamagedError(path, f"schema differs from this symfence's (table {bad[0]})")


def is_damage(exc: sqlite3.Error) -> bool:
    """Whether a SQLite error means the file is damaged (not merely unwritable or locked)."""
    text = str(exc).lower()
    if "could not decode to utf-8" in text:  # Python's: stored text that is not UTF-8
        return True
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in (11, 26)  # SQLITE_CORRUPT, SQLITE_NOTADB
    return "malformed" in text or "not a database" in text
