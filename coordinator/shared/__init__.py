"""The shared campaign store: several coordinators of one campaign, fenced leases, and its checker.

Issue 29's foundation (docs/design.md, "Beyond one coordinator"): `interface.CampaignStore`,
its two implementations (`sqlite.SqliteStore`, embedded; `postgres.PostgresStore`, a server),
and `checker`, which verifies a store's history. The coordinator uses it through
`coordinator/sharedwork.py` when `campaign.store` (or `--store`) names one.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from symfence.coordinator.shared.interface import CampaignStore, StoreError


def store_problem(where: str) -> str | None:
    """Why `where` cannot name a campaign store (one line), or None: "" (no store),
    `sqlite:PATH`, or `postgresql://...` / `postgres://...`."""
    if where == "":
        return None
    if where.startswith(("postgresql://", "postgres://")):
        return None if len(where.split("://", 1)[1]) else "a PostgreSQL URL needs a host or database"
    if where.startswith("sqlite:"):
        path = where.removeprefix("sqlite://").removeprefix("sqlite:")
        if not path:
            return "sqlite: needs a file path, e.g. sqlite:/scratch/campaign.db"
        if Path(path).is_dir():
            return f"{path} is a directory, not a SQLite file"
        parent = Path(path).parent
        if not parent.is_dir():
            return f"the folder of {path} does not exist"
        return None
    return f"must be sqlite:PATH or postgresql://..., got {where!r}"


def open_store(where: str, *, clock: Callable[[], float] | None = None, create: bool = True) -> CampaignStore:
    """The store `where` names: `postgresql://...` / `postgres://...` (or a libpq `key=value`
    string with `host=`) for PostgreSQL, anything else a SQLite file path (`sqlite:` prefix
    optional; with `create` False a missing file is a StoreError)."""
    if where.startswith(("postgresql://", "postgres://")) or "host=" in where or "dbname=" in where:
        from symfence.coordinator.shared.postgres import PostgresStore

        return PostgresStore(where, clock=clock)
    from symfence.coordinator.shared.sqlite import SqliteStore

    path = where.removeprefix("sqlite://").removeprefix("sqlite:")
    if not path:
        raise StoreError("a SQLite campaign store needs a file path")
    if not create and not Path(path).is_file():
        raise StoreError(f"no campaign store at {path}")
    return SqliteStore(path, clock=clock)
