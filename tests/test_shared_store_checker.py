"""The shared store's checker (coordinator/shared/checker.py) on histories built by hand, and on
a real store whose history was tampered with: it must fail on each broken rule, and pass on a
clean history."""

from __future__ import annotations

import sqlite3

import pytest

from symfence.coordinator.shared import open_store
from symfence.coordinator.shared.checker import ViolationKind, check, main
from symfence.coordinator.shared.records import (
    CoordinatorId,
    Epoch,
    EventKind,
    HistoryEvent,
    ItemRow,
    ItemState,
    LeaseToken,
    Outcome,
    WorkItem,
)

A, B = CoordinatorId("a"), CoordinatorId("b")
K = EventKind


class History:
    """A history written by hand: `add(kind, ...)` appends the next row."""

    def __init__(self) -> None:
        self.events: list[HistoryEvent] = []

    def add(self, kind: EventKind, at: float, work_id: str | None = None, who: CoordinatorId | None = None,
            epoch: int | None = None, token: int | None = None, expires: float | None = None) -> History:
        self.events.append(HistoryEvent(len(self.events) + 1, at, kind, work_id, who,
                                        None if epoch is None else Epoch(epoch),
                                        None if token is None else LeaseToken(token), expires))
        return self

    def kinds(self) -> set[ViolationKind]:
        return {violation.kind for violation in check(self.events).violations}


def clean() -> History:
    """A registers (epoch 1), B (2); w1 leased by A, expires, taken over by B, committed by B;
    A's late commit refused; w2 leased and committed by A."""
    return (History().add(K.REGISTER, 0, who=A, epoch=1).add(K.REGISTER, 0, who=B, epoch=2)
            .add(K.ADD, 0, "w1").add(K.ADD, 0, "w2")
            .add(K.LEASE, 1, "w1", A, 1, 1, 2.0)
            .add(K.EXPIRE, 2.5, "w1", A, 1, 1, 2.0).add(K.LEASE, 2.5, "w1", B, 2, 2, 3.5)
            .add(K.COMMIT, 3.0, "w1", B, 2, 2, 3.5)
            .add(K.REFUSE, 3.1, "w1", A, 1, 1, 2.0)
            .add(K.LEASE, 3.2, "w2", A, 1, 3, 4.2).add(K.RENEW, 4.0, "w2", A, 1, 3, 5.0)
            .add(K.COMMIT, 4.5, "w2", A, 1, 3, 5.0))


def test_a_clean_history_passes_and_balances() -> None:
    report = check(clean().events)
    assert report.ok, report.lines()
    assert report.complete and report.done == 2 and report.items == 2
    rows = {row.coordinator: row for row in report.coordinators}
    assert (rows[A].leased, rows[A].committed, rows[A].expired, rows[A].refused) == (2, 1, 1, 1)
    assert (rows[B].leased, rows[B].committed) == (1, 1)
    assert report.total.balanced and report.total.leased == 3


def test_a_double_commit_fails() -> None:
    history = clean()  # B commits w1 a second time under the same lease
    history.add(K.COMMIT, 3.05, "w1", B, 2, 2, 3.5)
    assert ViolationKind.DOUBLE_COMMIT in history.kinds()


def test_a_double_commit_by_two_coordinators_each_under_its_lease_fails() -> None:
    history = (History().add(K.REGISTER, 0, who=A, epoch=1).add(K.REGISTER, 0, who=B, epoch=2)
               .add(K.ADD, 0, "w").add(K.LEASE, 1, "w", A, 1, 1, 2).add(K.COMMIT, 1.5, "w", A, 1, 1, 2)
               .add(K.LEASE, 1.6, "w", B, 2, 2, 3).add(K.COMMIT, 1.7, "w", B, 2, 2, 3))
    assert {ViolationKind.DOUBLE_COMMIT, ViolationKind.LEASE_WHILE_HELD} <= history.kinds()


def test_a_commit_under_a_lease_taken_over_fails() -> None:
    history = clean()
    history.events.insert(7, HistoryEvent(0, 2.8, K.COMMIT, "w1", A, Epoch(1), LeaseToken(1), 2.0))
    renumbered = [HistoryEvent(i + 1, e.at, e.kind, e.work_id, e.coordinator, e.epoch, e.token, e.expires)
                  for i, e in enumerate(history.events)]
    report = check(renumbered)
    stale = [v for v in report.violations if v.kind is ViolationKind.STALE_COMMIT]
    assert stale and "not the current one" in stale[0].detail
    assert ViolationKind.DOUBLE_COMMIT in {v.kind for v in report.violations}  # B's commit is then a second


def test_a_commit_after_the_expiry_fails_even_if_nobody_took_the_item() -> None:
    history = (History().add(K.REGISTER, 0, who=A, epoch=1).add(K.ADD, 0, "w")
               .add(K.LEASE, 1, "w", A, 1, 1, 2.0).add(K.COMMIT, 2.0, "w", A, 1, 1, 2.0))
    report = check(history.events)
    assert [v.kind for v in report.violations] == [ViolationKind.STALE_COMMIT]
    assert "after its expiry" in report.violations[0].detail


def test_a_commit_under_a_dead_epoch_fails() -> None:
    history = (History().add(K.REGISTER, 0, who=A, epoch=1).add(K.ADD, 0, "w")
               .add(K.LEASE, 1, "w", A, 1, 1, 9.0).add(K.REGISTER, 2, who=A, epoch=2)
               .add(K.COMMIT, 3, "w", A, 1, 1, 9.0))
    assert ViolationKind.STALE_COMMIT in history.kinds()


def test_early_takeover_and_order_and_unknown_items_fail() -> None:
    early = (History().add(K.REGISTER, 0, who=A, epoch=1).add(K.REGISTER, 0, who=B, epoch=2)
             .add(K.ADD, 0, "w")
             .add(K.LEASE, 1, "w", A, 1, 1, 5.0).add(K.EXPIRE, 4.0, "w", A, 1, 1, 5.0)
             .add(K.LEASE, 4.0, "w", B, 2, 2, 6.0))
    assert early.kinds() == {ViolationKind.EARLY_TAKEOVER}
    order = (History().add(K.REGISTER, 0, who=A, epoch=2).add(K.REGISTER, 0, who=B, epoch=2)
             .add(K.ADD, 0, "w")
             .add(K.ADD, 0, "v").add(K.LEASE, 1, "w", B, 2, 5, 9).add(K.LEASE, 1, "v", B, 2, 5, 9))
    assert order.kinds() == {ViolationKind.EPOCH_ORDER, ViolationKind.TOKEN_ORDER}
    # across items (and across coordinators), the order may differ from the numbers' order
    # (PostgreSQL draws them before commit); per item and per coordinator it may not
    interleaved = (History().add(K.REGISTER, 0, who=B, epoch=3).add(K.REGISTER, 0, who=A, epoch=1)
                   .add(K.ADD, 0, "w").add(K.ADD, 0, "v").add(K.LEASE, 1, "w", B, 3, 8, 9)
                   .add(K.LEASE, 1, "v", B, 3, 7, 9))
    assert interleaved.kinds() == set()
    backwards = (History().add(K.REGISTER, 0, who=A, epoch=3).add(K.REGISTER, 0, who=A, epoch=2)
                 .add(K.ADD, 0, "w").add(K.LEASE, 1, "w", A, 2, 8, 2).add(K.EXPIRE, 2, "w", A, 2, 8, 2)
                 .add(K.LEASE, 2, "w", A, 2, 7, 9))
    assert backwards.kinds() == {ViolationKind.EPOCH_ORDER, ViolationKind.TOKEN_ORDER}
    unknown = History().add(K.REGISTER, 0, who=A, epoch=1).add(K.LEASE, 1, "ghost", A, 1, 1, 9)
    assert ViolationKind.UNKNOWN_ITEM in unknown.kinds()
    stale_lease = (History().add(K.REGISTER, 0, who=A, epoch=1).add(K.REGISTER, 0, who=A, epoch=2)
                   .add(K.ADD, 0, "w").add(K.LEASE, 1, "w", A, 1, 1, 9))
    assert stale_lease.kinds() == {ViolationKind.STALE_LEASE}


def test_rows_that_disagree_with_the_history_fail_conservation() -> None:
    events = clean().add(K.ADD, 5, "w3").add(K.LEASE, 5, "w3", A, 1, 4, 9.0).events
    rows = [ItemRow("w1", ItemState.DONE, B, Epoch(2), LeaseToken(2), 3.5),
            ItemRow("w2", ItemState.DONE, A, Epoch(1), LeaseToken(3), 5.0),
            ItemRow("w3", ItemState.LEASED, A, Epoch(1), LeaseToken(4), 9.0)]
    assert check(events, rows).ok
    lost = rows[:2] + [ItemRow("w3", ItemState.PENDING, None, None, None, None)]  # a lease lost unrecorded
    kinds = {v.kind for v in check(events, lost).violations}
    assert kinds == {ViolationKind.STATE_MISMATCH, ViolationKind.CONSERVATION}
    silent = [rows[0], ItemRow("w2", ItemState.PENDING, None, None, None, None), rows[2]]
    assert ViolationKind.STATE_MISMATCH in {v.kind for v in check(events, silent).violations}


def _real_store(path: str) -> None:
    store = open_store(path)
    a = store.register(CoordinatorId("a"))
    store.add_work([WorkItem("w1"), WorkItem("w2")])
    for lease in store.lease(a.coordinator, a.epoch, 2, 30.0).leases:
        assert store.commit(lease, Outcome()).committed
    store.close()


def test_the_command_line_passes_a_real_store_and_fails_a_tampered_one(tmp_path, capsys) -> None:
    path = str(tmp_path / "campaign.sqlite")
    _real_store(path)
    assert main([path]) == 0
    assert "checker: ok" in capsys.readouterr().out
    with sqlite3.connect(path) as conn:  # a second commit of w1, as a broken store would write it
        conn.execute("INSERT INTO history (at, kind, work_id, coordinator, epoch, token, expires, reason) "
                     "SELECT at + 0.001, kind, work_id, coordinator, epoch, token, expires, reason "
                     "FROM history WHERE kind = 'commit' AND work_id = 'w1'")
    assert main([path]) == 1
    out = capsys.readouterr().out
    assert "double_commit" in out and "stale_commit" in out and "UNBALANCED" in out
    assert main([str(tmp_path / "missing.sqlite")]) == 2
    assert not (tmp_path / "missing.sqlite").exists()


@pytest.mark.parametrize("kind", [K.RELEASE, K.VOID, K.RENEW])
def test_ending_a_lease_that_is_not_current_fails(kind: EventKind) -> None:
    history = (History().add(K.REGISTER, 0, who=A, epoch=1).add(K.ADD, 0, "w")
               .add(K.LEASE, 1, "w", A, 1, 1, 5.0).add(kind, 2, "w", A, 1, 99, 5.0))
    assert ViolationKind.WRONG_END in history.kinds()
