"""The shared campaign store (coordinator/shared/): one suite, run against SQLite and PostgreSQL.

Each test opens one store object per coordinator (separate connections, as separate processes
would) on a fresh store, with an injected clock; the checker runs over the history at the end of
every test that changes something. PostgreSQL tests use a throw-away server (tests/pg_support.py)
and skip, saying why, when it cannot start.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from symfence.coordinator.shared import open_store
from symfence.coordinator.shared.checker import check
from symfence.coordinator.shared.interface import CampaignStore, StaleEpochError, UnknownCoordinatorError
from symfence.coordinator.shared.records import (
    CoordinatorId,
    EventKind,
    ItemState,
    Outcome,
    RefuseReason,
    Registration,
    SharedFinding,
    WorkItem,
    coordinator_id,
)
from tests.pg_support import PgUnavailable, fresh_dsn

A, B, C = coordinator_id("alpha"), coordinator_id("beta"), coordinator_id("gamma")


class Clock:
    """The injected store clock: starts at 1000 s, moves only when told."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture(params=["sqlite", "postgres"])
def stores(request: pytest.FixtureRequest, tmp_path) -> Iterator[tuple[Clock, Callable[[], CampaignStore]]]:
    """(clock, open): `open()` gives one more connection to the same fresh store."""
    if request.param == "sqlite":
        where = str(tmp_path / "campaign.sqlite")
    else:
        try:
            where = fresh_dsn()
        except PgUnavailable as exc:
            pytest.skip(f"PostgreSQL store not tested: {exc}")
    clock = Clock()
    opened: list[CampaignStore] = []

    def connect() -> CampaignStore:
        store = open_store(where, clock=clock)
        opened.append(store)
        return store

    yield clock, connect
    for store in opened:
        store.close()


def items(count: int, prefix: str = "w") -> list[WorkItem]:
    return [WorkItem(f"{prefix}{i:03d}", f"input {i}".encode()) for i in range(count)]


def members(stores) -> tuple[Clock, CampaignStore, CampaignStore, Registration, Registration]:
    """(clock, A's store, B's store, A's registration, B's registration): two coordinators."""
    clock, connect = stores
    one, two = connect(), connect()
    return clock, one, two, one.register(A), two.register(B)


def assert_checked(store: CampaignStore) -> None:
    report = check(store.history(), store.items())
    assert report.ok, "\n".join(report.lines())


def test_epochs_strictly_increase_over_every_coordinator_and_restart(stores) -> None:
    clock, connect = stores
    one, two = connect(), connect()
    epochs = [one.register(A).epoch, two.register(B).epoch, one.register(A).epoch, two.register(C).epoch]
    assert epochs == sorted(set(epochs)) and len(epochs) == 4
    status = {row.coordinator: row for row in one.status()}
    assert status[A].epoch == epochs[2] and status[A].registrations == 2
    assert status[B].epoch == epochs[1]
    assert_checked(one)


def test_add_work_is_idempotent_by_work_id(stores) -> None:
    _, connect = stores
    one, two = connect(), connect()
    assert one.add_work(items(5)) == 5
    assert two.add_work(items(7)) == 2  # w000..w004 known already
    assert one.add_work([]) == 0
    assert one.counts()[ItemState.PENDING] == 7
    assert sum(1 for event in one.history() if event.kind is EventKind.ADD) == 7


def test_two_coordinators_never_lease_the_same_item(stores) -> None:
    _, one, two, a, b = members(stores)
    one.add_work(items(10))
    first = one.lease(A, a.epoch, 4, 5.0)
    second = two.lease(B, b.epoch, 10, 5.0)
    assert [lease.work_id for lease in first.leases] == ["w000", "w001", "w002", "w003"]  # in added order
    assert len(second.leases) == 6 and first.taken_over == second.taken_over == 0
    assert not {lease.work_id for lease in first.leases} & {lease.work_id for lease in second.leases}
    assert two.lease(B, b.epoch, 3, 5.0).leases == ()  # nothing left
    tokens = [lease.token for lease in first.leases + second.leases]
    assert tokens == sorted(set(tokens))
    assert first.leases[0].payload == b"input 0"
    assert_checked(one)


def test_lease_needs_a_registration_and_a_live_epoch(stores) -> None:
    _, connect = stores
    one, two = connect(), connect()
    one.add_work(items(3))
    with pytest.raises(UnknownCoordinatorError):
        one.lease(A, 1, 1, 1.0)  # type: ignore[arg-type]
    old = one.register(A)
    two.register(A)  # A restarted: the old epoch is dead
    with pytest.raises(StaleEpochError):
        one.lease(A, old.epoch, 1, 1.0)
    with pytest.raises(ValueError):
        one.lease(A, old.epoch, 0, 1.0)


def test_commit_applies_its_whole_outcome(stores) -> None:
    _, one, two, a, b = members(stores)
    one.add_work(items(2))
    (la,) = one.lease(A, a.epoch, 1, 5.0).leases
    (lb,) = two.lease(B, b.epoch, 1, 5.0).leases
    crash = SharedFinding("crash:abc", "crash", b"boom", "ZeroDivisionError")
    ra = one.commit(la, Outcome("ok", (WorkItem("child1"), WorkItem("w001")), (crash,), frozenset({1, 2, 3}),
                                {"execs": 10, "paths": 1}))
    assert ra.committed and ra.added_work == 1 and ra.new_findings == ("crash:abc",) and ra.new_edges == 3
    # the same crash identity and overlapping edges from the other coordinator: deduplicated, unioned
    rb = two.commit(lb, Outcome("ok", (), (crash, SharedFinding("hang:x", "hang")), frozenset({3, 4}),
                                {"execs": 5}))
    assert rb.committed and rb.new_findings == ("hang:x",) and rb.new_edges == 1
    assert one.coverage() == frozenset({1, 2, 3, 4})
    assert one.counters() == {"execs": 15, "paths": 1}
    assert [(identity, who) for identity, _, who, _ in two.findings()] == [("crash:abc", A), ("hang:x", B)]
    assert one.counts() == {ItemState.PENDING: 1, ItemState.LEASED: 0, ItemState.DONE: 2}
    assert_checked(one)


def test_a_group_commit_fences_each_commit_and_applies_only_the_accepted(stores) -> None:
    clock, one, two, a, b = members(stores)
    one.add_work(items(4))
    mine = one.lease(A, a.epoch, 2, 1.0).leases
    clock.now += 1.0
    theirs = two.lease(B, b.epoch, 4, 1.0).leases  # takes over both of A's and the two pending
    assert len(theirs) == 4
    shared = SharedFinding("crash:same", "crash")
    results = two.commit_batch([
        (theirs[0], Outcome(new_work=(WorkItem("n1"), WorkItem("n2")), findings=(shared,),
                            coverage=frozenset({1, 2}), counters={"execs": 1})),
        (mine[0], Outcome(new_work=(WorkItem("n9"),), coverage=frozenset({9}), counters={"execs": 100})),
        (theirs[1], Outcome(new_work=(WorkItem("n2"), WorkItem("n3")), findings=(shared,),
                            coverage=frozenset({2, 3}), counters={"execs": 2})),
        (theirs[1], Outcome(counters={"execs": 1000})),  # the same lease twice: once only
    ])
    assert [r.reason for r in results] == [None, RefuseReason.ALREADY_DONE, None, RefuseReason.ALREADY_DONE]
    assert [(r.added_work, r.new_findings, r.new_edges) for r in results] == [
        (2, ("crash:same",), 2), (0, (), 0), (1, (), 1), (0, (), 0)]
    assert two.counters() == {"execs": 3} and two.coverage() == frozenset({1, 2, 3})
    assert one.counts() == {ItemState.PENDING: 3, ItemState.LEASED: 2, ItemState.DONE: 2}
    assert two.commit_batch([]) == ()
    assert_checked(one)


def _store_contents(store: CampaignStore) -> tuple:
    return (store.counts(), store.coverage(), store.counters(), store.findings(),
            sorted(row.work_id for row in store.items()))


def test_every_refusal_has_its_reason_and_applies_nothing(stores) -> None:
    clock, one, two, a, b = members(stores)
    one.add_work(items(5))
    leases = one.lease(A, a.epoch, 5, 1.0).leases
    poisoned = Outcome("ok", (WorkItem("never"),), (SharedFinding("crash:never", "crash"),),
                       frozenset({999}), {"execs": 1000})

    done = leases[0]
    assert one.commit(done, Outcome()).committed
    refusals: dict[RefuseReason, object] = {}
    before = _store_contents(one)
    refusals[RefuseReason.ALREADY_DONE] = one.commit(done, poisoned).reason
    forged = type(done)("nope", A, a.epoch, done.token, done.expires)
    refusals[RefuseReason.UNKNOWN_ITEM] = one.commit(forged, poisoned).reason
    clock.now += 1.0  # every lease of A has expired (expires == now is expired)
    refusals[RefuseReason.LEASE_EXPIRED] = one.commit(leases[1], poisoned).reason
    taken = two.lease(B, b.epoch, 1, 1.0)
    assert taken.taken_over == 1 and taken.leases[0].work_id == leases[1].work_id
    refusals[RefuseReason.LEASE_TAKEN] = one.commit(leases[1], poisoned).reason
    assert two.expire() == 3  # leases[2], [3] and [4]: pending again
    refusals[RefuseReason.NOT_LEASED] = one.commit(leases[2], poisoned).reason
    one.register(A)  # A restarts: its old epoch is dead
    refusals[RefuseReason.STALE_EPOCH] = one.commit(leases[3], poisoned).reason
    assert refusals == {reason: reason for reason in refusals} and len(refusals) == len(RefuseReason)
    after = _store_contents(one)
    # nothing of the poisoned outcome anywhere; only lease states moved
    assert after[1:] == before[1:]
    refused = [event.reason for event in one.history() if event.kind is EventKind.REFUSE]
    assert sorted(refused) == sorted(reason.value for reason in RefuseReason)
    assert {row.coordinator: row.refused for row in one.status()}[A] == len(RefuseReason)
    assert_checked(one)


def test_renew_keeps_a_lease_only_while_it_is_current(stores) -> None:
    clock, one, two, a, b = members(stores)
    one.add_work(items(2))
    first, second = one.lease(A, a.epoch, 2, 1.0).leases
    clock.now += 0.8
    (renewed,) = one.renew([first], 1.0)
    assert renewed.expires == pytest.approx(clock.now + 1.0)
    clock.now += 0.5  # `second` expired, `first` (renewed) did not
    assert one.renew([second], 1.0) == ()
    grant = two.lease(B, b.epoch, 5, 1.0)
    assert [lease.work_id for lease in grant.leases] == [second.work_id] and grant.taken_over == 1
    assert one.commit(renewed, Outcome()).committed
    assert one.commit(second, Outcome()).reason is RefuseReason.LEASE_TAKEN
    assert two.commit(grant.leases[0], Outcome()).committed
    assert_checked(one)


def test_release_gives_an_item_back_to_anyone(stores) -> None:
    _, one, two, a, b = members(stores)
    one.add_work(items(3))
    leases = one.lease(A, a.epoch, 3, 10.0).leases
    assert one.release(leases[:2]) == 2
    assert one.release(leases[:1]) == 0  # not held any more
    grant = two.lease(B, b.epoch, 3, 10.0)
    assert sorted(lease.work_id for lease in grant.leases) == ["w000", "w001"] and grant.taken_over == 0
    assert one.commit(leases[0], Outcome()).reason is RefuseReason.LEASE_TAKEN
    assert_checked(one)


def test_takeover_waits_for_the_expiry_and_a_restart_voids_old_leases(stores) -> None:
    clock, one, two, a, b = members(stores)
    one.add_work(items(4))
    held = one.lease(A, a.epoch, 2, 2.0).leases
    clock.now += 1.9
    grant = two.lease(B, b.epoch, 4, 2.0)
    assert sorted(lease.work_id for lease in grant.leases) == ["w002", "w003"]  # A's are not expired
    clock.now += 0.1
    grant = two.lease(B, b.epoch, 4, 2.0)
    assert grant.taken_over == 2
    # A restarts while holding new leases: the registration ends them, at once
    one.add_work(items(2, "x"))
    new_a = one.lease(A, a.epoch, 2, 60.0).leases
    again = one.register(A)
    assert again.voided == 2
    assert one.counts()[ItemState.PENDING] == 2
    assert one.commit(new_a[0], Outcome()).reason is RefuseReason.STALE_EPOCH
    relet = one.lease(A, again.epoch, 5, 1.0).leases
    assert sorted(lease.work_id for lease in relet) == ["x000", "x001"]
    kinds = [event.kind for event in one.history()]
    assert kinds.count(EventKind.VOID) == 2 and kinds.count(EventKind.EXPIRE) == 2
    assert len(held) == 2
    assert_checked(one)


def test_status_shows_every_coordinator_and_its_share(stores) -> None:
    clock, connect = stores
    one, two, three = connect(), connect(), connect()
    regs = {who: store.register(who) for who, store in ((A, one), (B, two), (C, three))}
    one.add_work(items(8))
    for who, store, count in ((A, one, 6), (B, two, 2)):
        for lease in store.lease(who, regs[who].epoch, count, 5.0).leases:
            store.commit(lease, Outcome())
    one.add_work(items(1, "y"))
    three.lease(C, regs[C].epoch, 1, 5.0)
    rows = {row.coordinator: row for row in three.status()}
    assert [rows[who].committed for who in (A, B, C)] == [6, 2, 0]
    assert rows[A].share == pytest.approx(0.75) and rows[B].share == pytest.approx(0.25)
    assert rows[C].holding == 1 and rows[C].share == 0.0
    clock.now += 10
    assert {row.coordinator: row.holding for row in one.status()}[C] == 0  # expired: not held
    assert_checked(one)


def test_a_store_reopened_keeps_everything(stores) -> None:
    _, connect = stores
    one = connect()
    a = one.register(A)
    one.add_work(items(3))
    lease = one.lease(A, a.epoch, 1, 5.0).leases[0]
    one.commit(lease, Outcome(coverage=frozenset({7}), counters={"execs": 2}))
    one.close()
    again = connect()
    assert again.coverage() == frozenset({7}) and again.counters() == {"execs": 2}
    assert again.register(A).epoch > a.epoch
    assert_checked(again)


def test_coordinator_ids_are_checked() -> None:
    assert coordinator_id("host-1.rank0_a") == CoordinatorId("host-1.rank0_a")
    for bad in ("", "-x", "a b", "x" * 65, "a/b"):
        with pytest.raises(ValueError):
            coordinator_id(bad)


def test_sqlite_a_writer_stuck_behind_a_held_lock_gets_one_clear_error(tmp_path) -> None:
    """A process frozen inside a transaction keeps SQLite's write lock: the others wait for it up
    to their busy timeout, then get a StoreError (not a hang, not a raw sqlite3 error)."""
    import sqlite3
    import time

    from symfence.coordinator.shared.interface import StoreError
    from symfence.coordinator.shared.sqlite import SqliteStore

    path = tmp_path / "campaign.sqlite"
    store = SqliteStore(path, busy_timeout_s=0.2)
    frozen = sqlite3.connect(path, isolation_level=None)
    frozen.execute("BEGIN IMMEDIATE")  # as a coordinator SIGSTOPped mid-transaction holds it
    started = time.monotonic()
    with pytest.raises(StoreError, match="locked"):
        store.register(A)
    assert time.monotonic() - started < 5
    frozen.execute("ROLLBACK")
    assert store.register(A).epoch == 1  # and works again once the lock is free
    store.close()


def test_postgres_a_session_ended_by_the_server_is_one_clear_error() -> None:
    import psycopg

    from symfence.coordinator.shared.interface import StoreError

    try:
        dsn = fresh_dsn()
    except PgUnavailable as exc:
        pytest.skip(f"PostgreSQL store not tested: {exc}")
    store = open_store(dsn)
    store.register(A)
    with psycopg.connect(dsn, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                      "WHERE pid <> pg_backend_pid() AND datname = current_database() "
                      "AND query NOT LIKE '%%pg_terminate_backend%%'")
    with pytest.raises(StoreError) as caught:
        store.add_work(items(1))
    assert "\n" not in str(caught.value)
    store.close()


def test_sqlite_a_file_that_is_not_a_store_is_one_clear_error(tmp_path) -> None:
    import sqlite3

    from symfence.coordinator.shared.interface import StoreError

    garbage = tmp_path / "garbage.sqlite"
    garbage.write_bytes(b"not a database at all" * 100)
    with pytest.raises(StoreError, match="garbage.sqlite") as caught:
        open_store(str(garbage))
    assert "\n" not in str(caught.value)
    newer = tmp_path / "newer.sqlite"
    open_store(str(newer)).close()
    with sqlite3.connect(newer) as conn:
        conn.execute("UPDATE meta SET value = '99' WHERE key = 'schema'")
    with pytest.raises(StoreError, match="schema 99"):
        open_store(str(newer))
    with pytest.raises(StoreError):
        open_store(str(tmp_path / "no" / "such" / "folder.sqlite"))
