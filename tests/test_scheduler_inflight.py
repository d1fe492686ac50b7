"""Scheduler order and uniqueness; the in-flight map, its windows and deadlines (no MPI)."""

from symfence.coordinator.inflight import InFlight, Revocation
from symfence.coordinator.scheduler import Scheduler, WorkItem
from symfence.protocol.fence import classify_result
from symfence.protocol.ids import derive_token
from symfence.protocol.messages import Result, Status
from symfence.protocol.reasons import Reason

E = bytes(32)


def item(n, **kw):
    return WorkItem(work_id=f"{n:064x}", data=b"x" * kw.pop("size", 1), sha256="0" * 64, target="t", **kw)


def test_scheduler_order_and_once_only():
    s = Scheduler()
    child_deep = item(1, bound=5, new_bits=2)
    child_shallow = item(2, bound=1, new_bits=2)
    child_counts = item(3, bound=0, new_bits=1)
    seed = item(4, seed=True, size=100)
    for it in (child_deep, child_shallow, child_counts, seed):
        assert s.add(it)
    assert not s.add(item(2))  # same work_id again: refused
    assert [s.pop() for _ in range(4)] == [seed, child_shallow, child_deep, child_counts]
    assert s.pop() is None
    s.requeue(child_deep)
    assert s.pop() == child_deep
    retry = item(5, bound=9, attempts=1)
    s.add(seed)
    s.requeue(retry)
    assert s.pop() == retry  # a retried item goes before everything else


def test_inflight_is_keyed_by_token_and_fences():
    f = InFlight(window=4)
    t1, t2, t3 = (derive_token(E, r, s) for r, s in ((1, 0), (1, 1), (2, 2)))
    f.add(t1, 1, "a" * 64, 0.0, 5.0)
    f.add(t2, 1, "b" * 64, 0.0, None)
    f.add(t3, 2, "c" * 64, 0.0, 1.0)
    assert f.in_flight_count(1) == 2 and f.tokens_of(1) == [t1, t2]
    res = lambda t: Result(t, "a" * 64, Status.OK)
    assert classify_result(res(t1), 1, f).reason is Reason.CURRENT
    assert classify_result(res(t1), 2, f).reason is Reason.MISROUTED
    f.commit(t1)
    assert classify_result(res(t1), 1, f).reason is Reason.DUPLICATE
    assert [d.token for d in f.due(2.0)] == [t3]
    f.revoke(t3, Revocation.EXPIRED)
    assert classify_result(res(t3), 2, f).reason is Reason.EXPIRED
    assert classify_result(res(derive_token(E, 9, 9)), 2, f).reason is Reason.UNOWNED
    assert classify_result(res(derive_token(E, 9, 9)), 1, f).reason is Reason.STALE
    assert list(f.due(10.0)) == []  # t1 had a deadline but is already committed
    assert len(f) == 1 and f.sent_to(1) == 2
