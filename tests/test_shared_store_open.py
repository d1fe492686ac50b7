"""Coordinators that open (create) one campaign store at the same moment all get it; a lock that
stays held ends the open with one clear StoreError after the busy timeout, not at once.

SQLite: switching a new file to WAL reads its first page and then asks for the write lock; a
reader asking for the write lock while another connection holds it gets SQLITE_BUSY at once,
without the busy handler (sqlite3_busy_handler's documentation: waiting could deadlock). Before
the open retried, an opener failed at once ("database is locked") on 5 to 20% of the new stores
that 4 processes opened together; the tests that hold the new file's write lock from another
connection failed every time. PostgreSQL: concurrent `CREATE ... IF NOT EXISTS` of one table
fails on a unique index of the catalog ("duplicate key value"; most of the stores when the
advisory lock under which the store creates its tables is left out).
"""

from __future__ import annotations

import multiprocessing
import sqlite3
import threading
import time
from pathlib import Path

import pytest

from symfence.coordinator.shared import open_store
from symfence.coordinator.shared.interface import StoreError
from symfence.coordinator.shared.records import coordinator_id
from symfence.coordinator.shared.sqlite import SqliteStore
from tests.pg_support import PgUnavailable, fresh_dsn

OPENERS = 4  # processes opening each new store at once
ROUNDS = 60  # new SQLite stores, one after the other (PostgreSQL: PG_ROUNDS)
PG_ROUNDS = 8


def opener(index: int, where: str, barrier, results) -> None:
    """One coordinator process: wait for the others at the barrier, then open the store and
    register; report ("ok", epoch) or ("error", message)."""
    barrier.wait(timeout=60)
    try:
        store = open_store(where)
        epoch = store.register(coordinator_id(f"c{index}")).epoch
        store.close()
        results.put(("ok", int(epoch)))
    except StoreError as exc:
        results.put(("error", str(exc)))


def open_together(wheres: list[str]) -> dict[str, list[tuple[str, object]]]:
    """For each store of `wheres` in turn, OPENERS new processes open it at the same moment (new
    processes each time: their opens overlap more often than those of processes kept between
    rounds); the outcomes per store."""
    context = multiprocessing.get_context("fork")
    outcomes: dict[str, list[tuple[str, object]]] = {}
    for where in wheres:
        barrier, results = context.Barrier(OPENERS), context.Queue()
        processes = [context.Process(target=opener, args=(index, where, barrier, results))
                     for index in range(OPENERS)]
        for process in processes:
            process.start()
        try:
            outcomes[where] = [results.get(timeout=60) for _ in processes]
        finally:
            for process in processes:
                process.join(timeout=10)
                if process.is_alive():
                    process.kill()
    return outcomes


def assert_all_opened(outcomes: dict[str, list[tuple[str, object]]]) -> None:
    failed = {where: value for where, got in outcomes.items() for kind, value in got if kind == "error"}
    assert not failed, f"{len(failed)} of {len(outcomes)} stores: an opener failed: {failed}"
    for where, got in outcomes.items():
        assert sorted(value for _, value in got) == list(range(1, OPENERS + 1)), where  # one store each


def test_sqlite_coordinators_creating_one_store_at_once_all_open_it(tmp_path: Path) -> None:
    assert_all_opened(open_together([f"sqlite:{tmp_path / f'campaign{n}.db'}" for n in range(ROUNDS)]))


def test_postgres_coordinators_creating_one_store_at_once_all_open_it() -> None:
    try:
        wheres = [fresh_dsn() for _ in range(PG_ROUNDS)]
    except PgUnavailable as exc:
        pytest.skip(f"PostgreSQL store not tested: {exc}")
    assert_all_opened(open_together(wheres))


def hold_write_lock(path: Path, seconds: float, held: threading.Event) -> None:
    """Another connection takes the write lock of the (new) file, as a coordinator switching
    it to WAL does, and keeps it `seconds`."""
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    held.set()
    time.sleep(seconds)
    other.execute("ROLLBACK")
    other.close()


def test_sqlite_open_waits_for_another_openers_write_lock_on_the_new_file(tmp_path: Path) -> None:
    path, held = tmp_path / "campaign.db", threading.Event()
    holder = threading.Thread(target=hold_write_lock, args=(path, 0.4, held))
    holder.start()
    held.wait()
    started = time.monotonic()
    store = SqliteStore(path, busy_timeout_s=10)
    waited = time.monotonic() - started
    holder.join()
    assert waited >= 0.3  # it waited for the lock (it did not get past it)
    assert store.register(coordinator_id("alpha")).epoch == 1
    store.close()


@pytest.mark.parametrize("lock", ["new file, write lock", "new file, exclusive lock",
                                  "existing store, write lock"])
def test_sqlite_open_behind_a_lock_never_freed_fails_clearly_after_the_busy_timeout(tmp_path: Path,
                                                                                   lock: str) -> None:
    path = tmp_path / "campaign.db"
    if lock.startswith("existing"):
        SqliteStore(path).close()
    stuck = sqlite3.connect(path, isolation_level=None)
    stuck.execute("BEGIN EXCLUSIVE" if "exclusive" in lock else "BEGIN IMMEDIATE")
    started = time.monotonic()
    with pytest.raises(StoreError, match=f"campaign store {path}: database is locked"):
        SqliteStore(path, busy_timeout_s=0.5)
    waited = time.monotonic() - started
    stuck.execute("ROLLBACK")
    stuck.close()
    assert 0.49 <= waited < 3, waited  # the whole timeout, then the error: not at once, not twice
