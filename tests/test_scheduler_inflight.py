"""Scheduler order and uniqueness; the in-flight map, its windows, deadlines and the slots revoked
dispatches still hold (no MPI)."""

import mpi4py

from symfence.coordinator.inflight import ARRIVED, InFlight, Revocation, SlotRelease
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


def test_a_revoked_dispatch_holds_its_slot_until_the_worker_lets_go():
    f = InFlight()
    a, b, c, d = (derive_token(E, 1, s) for s in range(4))
    for i, t in enumerate((a, b, c)):
        f.add(t, 1, f"{i:064x}", 0.0, 1.0)
    f.revoke(a, Revocation.EXPIRED)  # the worker may still run it
    f.revoke(b, Revocation.CANCELLED)  # or still have it queued
    f.revoke(c, Revocation.LOST)  # the worker said it does not hold it: no slot
    assert f.in_flight_count(1) == 0 and f.occupied(1) == 2 and f.held_count(1) == 2
    assert classify_result(Result(a, "0" * 64, Status.OK), 1, f).reason is Reason.EXPIRED  # the fence is unchanged
    assert not f.release(a, 2, SlotRelease.RESULT)  # another rank naming the token frees nothing
    assert f.release(a, 1, SlotRelease.RESULT) and not f.release(a, 1, SlotRelease.RESULT)
    assert f.occupied(1) == 1
    # b was the 2nd WORK sent to rank 1 (send index 1): a heartbeat frees it only once the worker
    # counts that WORK as received and does not list it.
    assert f.release_unheld(1, set(), work_received=1) == 0  # its WORK has not arrived yet
    assert f.release_unheld(1, {b}, work_received=3) == 0  # arrived, still held
    assert f.release_unheld(2, set(), work_received=3) == 0  # another rank's heartbeat
    assert f.release_unheld(1, set(), work_received=2) == 1 and f.occupied(1) == 0
    f.add(d, 1, "d" * 64, 0.0, None)
    f.revoke(d, Revocation.EXPIRED)
    assert f.hold(b, 1)  # a returning worker lists a token revoked from it while it was lost (ARRIVED)
    assert not f.hold(b, 2) and not f.hold(derive_token(E, 9, 9), 1)  # not revoked from that rank
    assert f.occupied(1) == 2 and f.occupied(2) == 0 and f.release_rank(1) == 2 and f.occupied(1) == 0  # lost: nothing held
    assert f.released == {SlotRelease.RESULT: 1, SlotRelease.HEARTBEAT: 1, SlotRelease.LOST: 2}
    assert f.stats_items() == {"slots_held_revoked": 0, "slots_freed_by_result": 1,
                               "slots_freed_by_heartbeat": 1, "slots_freed_by_lost": 2}
    assert ARRIVED < 0


class _Comm:
    def Get_size(self):
        return 3


class _Pump:
    def __init__(self):
        self.sent = []

    def send(self, rank, tag, frame):
        self.sent.append((rank, tag, frame))

    def take(self, tag):
        out = [(r, f) for r, t, f in self.sent if t == tag]
        self.sent = [m for m in self.sent if m[1] != tag]
        return out


def test_the_coordinator_dispatches_nothing_into_a_slot_an_expired_dispatch_holds(tmp_path):
    """depth 1: after an expiry the rank gets no new WORK (whose deadline would run while the
    revoked task still occupies the worker) until its late result or a heartbeat frees the slot."""
    mpi4py.rc.initialize = mpi4py.rc.finalize = False  # campaign imports MPI; nothing here uses it
    from symfence.coordinator.campaign import Campaign
    from symfence.coordinator.config import parse
    from symfence.coordinator.journal import Journal
    from symfence.coordinator.outputs import OutputDir
    from symfence.protocol.codec import decode_work, encode
    from symfence.protocol.messages import Control, ControlKind, Tag
    from symfence.worker.sender import ResultSender

    now = [0.0]
    cfg = parse({"campaign": {"executor": "synthetic"}, "synthetic": {"seeds": 4},
                 "dispatch": {"depth": 1, "deadline_s": 0.25, "max_attempts": 3}})
    journal = Journal.open(tmp_path / "journal.sqlite", resume=False, clock=lambda: now[0])
    coord = Campaign(cfg, _Comm(), OutputDir(tmp_path / "out"), journal, clock=lambda: now[0])
    coord.pump = pump = _Pump()
    for r in (1, 2):
        coord.members.hello(r)
    coord._seed()
    coord.dispatching = True
    coord._fill()
    first = {r: decode_work(f) for r, f in pump.take(Tag.WORK)}
    assert sorted(first) == [1, 2]

    now[0] = 0.3
    coord._expire(now[0])  # both expire: CANCEL sent, work requeued, both slots still held
    assert sorted(r for r, _ in pump.take(Tag.CONTROL)) == [1, 2]
    assert pump.take(Tag.WORK) == [] and len(coord.inflight) == 0
    assert coord.stats.expired == 2 and coord.inflight.occupied(1) == coord.inflight.occupied(2) == 1

    def turn_fill():  # what a turn of received frames fills: the ranks that may have a free slot
        coord._fill(coord._maybe_free)

    def heartbeat(rank, held, received):
        coord._on_control(rank, encode(Control(ControlKind.HEARTBEAT, tuple(held), {"work_received": received})))
        turn_fill()
        return pump.take(Tag.WORK)

    assert heartbeat(1, [first[1].token], 1) == []  # still running the revoked task
    assert heartbeat(2, [], 0) == []  # its WORK not even received yet (a heartbeat that crossed it)
    late = ResultSender(lambda frame: None).seal(first[2].token, Result(first[2].token, first[2].work_id, Status.OK))
    coord._on_result(1, late)  # rank 1 sending rank 2's token frees nothing
    coord._fill()  # not even on a full fill
    assert pump.take(Tag.WORK) == [] and coord.stats.quarantine.total == 1
    (retry,) = heartbeat(1, [], 1)  # rank 1 let go: one new dispatch, the item that expired on rank 2
    assert retry[0] == 1 and decode_work(retry[1]).work_id == first[2].work_id
    assert decode_work(retry[1]).attempt == 2
    coord._on_result(2, late)  # the late result: quarantined as expired, and rank 2 is free
    turn_fill()
    (retry,) = pump.take(Tag.WORK)
    assert retry[0] == 2 and decode_work(retry[1]).work_id == first[1].work_id
    assert coord.inflight.released == {SlotRelease.RESULT: 1, SlotRelease.HEARTBEAT: 1, SlotRelease.LOST: 0}
    assert coord.stats.quarantine.snapshot()["expired"] == 2  # the fence judged both late frames as before

    now[0] = 0.7
    coord._expire(now[0])  # the retry on rank 1 expires too; then rank 1 is lost
    coord._lose_worker(1, "test")
    assert coord.inflight.occupied(1) == 0 and coord.inflight.released[SlotRelease.LOST] == 1
    journal.close()
