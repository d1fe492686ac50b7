"""The shared campaign store: several coordinators of one campaign, fenced leases, and its checker.

Issue 29's foundation (docs/design.md, "Beyond one coordinator"): `interface.CampaignStore`,
its two implementations (`sqlite.SqliteStore`, embedded; `postgres.PostgresStore`, a server),
and `checker`, which verifies a store's history. Not yet wired into the coordinator.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from symfence.coordinator.shared.interface import CampaignStore, StoreError


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
