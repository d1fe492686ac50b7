"""Issue 10, without MPI: per-rank turns, garbage bans, expiry suspensions, work caps, retries elsewhere."""

from __future__ import annotations

from symfence.coordinator.peers import PeerPolicy, Peers, PeerState
from symfence.coordinator.scheduler import Scheduler, WorkItem


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def peers(**kw) -> tuple[Peers, Clock]:
    clock = Clock()
    return Peers(PeerPolicy(**kw), clock), clock


def test_a_flooding_rank_delays_an_honest_one_by_one_turn_at_most():
    p, _ = peers(frames_per_turn=4)
    for i in range(1000):
        assert p.enqueue(3, b"x")
    p.enqueue(1, b"honest")
    first_turn = list(p.turn(len))
    assert (1, b"honest") in first_turn
    assert sum(1 for r, _ in first_turn if r == 3) == 4
    assert p.pending()


def test_a_backlog_beyond_what_an_honest_rank_can_have_is_flooding():
    p, _ = peers(backlog_frames=16)
    assert all(p.enqueue(2, b"x") for _ in range(16))
    assert not p.enqueue(2, b"x")


def test_a_banned_ranks_frames_are_all_taken_at_once():
    p, _ = peers(frames_per_turn=2)
    for _ in range(50):
        p.enqueue(3, b"x")
    p.ban(3)
    assert sum(1 for r, _ in p.turn(len) if r == 3) == 50 and not p.pending()


def test_garbage_score_leaks_and_bans_past_the_threshold():
    p, clock = peers(ban_garbage=10, garbage_leak_per_s=1.0)
    assert not any(p.garbage(3) for _ in range(10))
    clock.now += 5  # leaks 5 points
    assert not any(p.garbage(3) for _ in range(5))
    assert p.garbage(3)  # 11 > 10
    assert p.ban(3) and not p.ban(3) and p.banned_total == 1
    assert p.state(3) is PeerState.BANNED and p.capacity(3, 4) == 0


def test_big_frames_weigh_more_but_not_beyond_the_cap():
    p, _ = peers(ban_garbage=100, garbage_frame_bytes=1000, garbage_cap_bytes=50_000)
    assert not p.garbage(1, 49_000)  # 1 + 49
    assert p.garbage(1, 10**12)  # 50 + 1 + 50 > 100: a huge drained frame counts like a capped one


def test_zero_ban_threshold_never_bans():
    p, _ = peers(ban_garbage=0)
    assert not any(p.garbage(1, 10**9) for _ in range(10_000))


def test_expiries_in_a_row_suspend_then_probation_then_back():
    p, clock = peers(expiry_strikes=3, suspend_s=10)
    assert not p.expired(2) and not p.expired(2)
    assert not p.expired(2, others=False)  # the only rank left: slow beats idle
    p.committed(2)
    assert not p.expired(2) and not p.expired(2)
    assert p.expired(2)
    assert p.capacity(2, 4) == 0
    clock.now += 10.5
    assert p.capacity(2, 4) == 1  # probation: one dispatch
    assert p.expired(2)  # fails again: suspended twice as long
    clock.now += 15
    assert p.capacity(2, 4) == 0
    clock.now += 6
    assert p.capacity(2, 4) == 1
    p.committed(2)
    assert p.capacity(2, 4) == 4 and p.suspended_total == 2


def test_claims_are_believed_only_as_far_as_the_time_allows():
    p, clock = peers(max_execs_per_s=1000, new_edges_per_exec=10, max_new_edges_per_result=100,
                     new_edges_per_s=10, new_edges_burst=150)
    assert p.plausible_execs(2**32 - 1, 0.0) == 1
    assert p.plausible_execs(50, 1.0) == 50 and p.plausible_execs(10**6, 1.0) == 1001
    assert p.new_edge_allowance(1, 3) == 30
    assert p.new_edge_allowance(1, 1000) == 100  # per-result cap
    p.spend_edges(1, 140)
    assert p.new_edge_allowance(1, 1000) == 10  # the rank's budget is nearly spent
    clock.now += 5
    assert p.new_edge_allowance(1, 1000) == 60  # refilled at 10/s
    assert p.new_edge_allowance(2, 1000) == 100  # another rank's budget is its own


def test_pending_claims_per_rank_are_bounded():
    p, _ = peers(max_pending_claims=2)
    assert p.claim(1) and p.claim(1) and not p.claim(1) and p.claim(2)
    p.claim_done(1)
    assert p.claim(1)


def _item(n: int, **kw) -> WorkItem:
    return WorkItem(work_id=f"{n:064x}", data=b"x", sha256="0" * 64, target="t", **kw)


def test_a_retry_prefers_another_rank():
    s = Scheduler()
    retry = _item(1, attempts=1, avoid=frozenset({3}))
    fresh = _item(2)
    s.add(retry)
    s.add(fresh)
    assert s.pop_for(3, lambda it: True) == fresh  # rank 3 let the retry expire: it gets other work
    assert s.pop_for(3, lambda it: True) is None  # only the retry is left, and rank 1 could take it
    assert s.pop_for(3, lambda it: False) == retry  # nobody else could: rank 3 runs it after all
    s.requeue(retry)
    assert s.for_rank(1, lambda it: True).pop() == retry
