"""The verdict on a current result (coordinator/verdict.py): pure, and every rejection has its reason."""

from __future__ import annotations

import dataclasses

import pytest

from symfence.coordinator.peers import PeerPolicy, Peers
from symfence.coordinator.verdict import Rejection, ResultVerdict, triage
from symfence.protocol.coverage import MAP_SIZE, pack_trace
from symfence.protocol.ids import Rank, sha256_hex
from symfence.protocol.messages import Candidate, Result, Status

SRC = Rank(1)
NOW = 100.0  # the clock of `_peers()`


def _cand(data: bytes, edges=(), *, kind=Status.OK, sha=None, trace=None) -> Candidate:
    packed = pack_trace({e: 1 for e in edges}) if trace is None else trace
    return Candidate(data, sha or sha256_hex(data), packed, kind, bound=1)


def _result(*cands: Candidate, status=Status.OK, edges=(), trace=None) -> Result:
    packed = pack_trace({e: 1 for e in edges}) if trace is None else trace
    return Result("a" * 64, "b" * 64, status, tuple(cands), trace=packed)


def _peers(**policy) -> Peers:
    return Peers(PeerPolicy(**policy), clock=lambda: NOW)


def _counts(v: ResultVerdict) -> dict[Rejection, int]:
    out: dict[Rejection, int] = {}
    for reason, n in v.rejected:
        out[reason] = out.get(reason, 0) + n
    return out


def test_a_plain_result_is_admitted_whole_and_the_verdict_is_frozen():
    seen = bytearray(MAP_SIZE)
    v = triage(_result(_cand(b"x", [7]), edges=[5, 6]), 10, seen, _peers(), SRC, NOW)
    assert v.task_trace == {5: 1, 6: 1} and [c.data for c, _ in v.admitted] == [b"x"]
    assert v.admitted[0][1] == {7: 1} and v.new_edges == 3 and v.capped is None
    assert v.rejected == () and v.penalties == 0 and v.claims == () and not v.claims_task
    with pytest.raises(AttributeError):  # immutable
        v.penalties = 1  # type: ignore[misc]


def test_it_changes_nothing_and_the_same_arguments_give_the_same_verdict():
    seen = bytearray(MAP_SIZE)
    seen[5] = 1
    now = [0.0]
    peers = Peers(PeerPolicy(new_edges_burst=100, new_edges_per_s=1.0), clock=lambda: now[0])
    peers.peer(SRC).edge_budget = 10.0
    now[0] = 5.0  # a refill is due: asking must not store it
    before = (bytes(seen), dataclasses.replace(peers.peer(SRC), queue=None))
    r = _result(_cand(b"x", [7, 8]), _cand(b"y", [9], sha="0" * 64), edges=[5, 6])
    first, second = (triage(r, 10, seen, peers, SRC, now[0]) for _ in range(2))
    assert first == second
    after = (bytes(seen), dataclasses.replace(peers.peer(SRC), queue=None))
    assert after == before  # the map and the rank's edge budget untouched


def test_more_candidates_than_executions_cost_the_surplus_and_a_penalty():
    cands = [_cand(bytes([i]), [10 + i]) for i in range(5)]
    v = triage(_result(*cands), 2, bytearray(MAP_SIZE), _peers(), SRC, NOW)
    assert _counts(v) == {Rejection.OVER_WORK: 3} and v.penalties == 1
    assert [c.data for c, _ in v.admitted] == [b"\x00", b"\x01"]


def test_bad_hashes_and_traces_are_rejected_by_name_and_findings_become_claims():
    bad_trace = b"\x01\x02\x03"  # not a multiple of the record size
    cands = [_cand(b"ok", [1]), _cand(b"liar", [2], sha="0" * 64), _cand(b"garbled", trace=bad_trace),
             _cand(b"boom", [3], kind=Status.CRASH), _cand(b"fake-boom", kind=Status.CRASH, sha="1" * 64),
             _cand(b"slow", kind=Status.HANG)]
    r = _result(*cands, status=Status.CRASH, trace=bad_trace)
    v = triage(r, 100, bytearray(MAP_SIZE), _peers(), SRC, NOW)
    # bad traces: the task's own and one candidate's
    assert _counts(v) == {Rejection.BAD_SHA256: 2, Rejection.BAD_TRACE: 2}
    assert [c.data for c, _ in v.admitted] == [b"ok"] and v.task_trace == {}
    assert [c.data for c in v.claims] == [b"boom", b"slow"] and v.claims_task
    assert v.penalties == 0


def test_more_never_seen_edges_than_the_work_allows_caps_the_whole_result():
    seen = bytearray(MAP_SIZE)
    seen[1] = 1  # already seen: not counted against the allowance
    cands = [_cand(b"a", [1, 2, 3]), _cand(b"b", [4]), _cand(b"c", [5], kind=Status.HANG)]
    peers = _peers(new_edges_per_exec=1)
    v = triage(_result(*cands, edges=[1, 6]), 3, seen, peers, SRC, NOW)  # 5 never-seen edges, 3 allowed
    assert v.capped == (5, 3) and v.task_trace is None and v.admitted == () and v.new_edges == 0
    assert _counts(v) == {Rejection.COVERAGE_CAP: 3} and v.penalties == 1  # the cap + each candidate
    assert [c.data for c in v.claims] == [b"c"]  # a claim is judged by its re-run, not by edges
    v = triage(_result(*cands, edges=[1, 6]), 5, seen, peers, SRC, NOW)  # 5 allowed now
    assert v.capped is None and v.new_edges == 5 and [c.data for c, _ in v.admitted] == [b"a", b"b"]


def test_the_allowance_is_not_asked_for_a_result_that_claims_nothing_new():
    class Room:  # a read-only query that must not be needed
        def edge_room(self, rank, execs, now):
            raise AssertionError("asked for an allowance")

    seen = bytearray(MAP_SIZE)
    seen[3] = seen[4] = 1
    v = triage(_result(_cand(b"x", [3]), edges=[4]), 1, seen, Room(), SRC, NOW)
    assert v.new_edges == 0 and v.task_trace == {4: 1} and len(v.admitted) == 1
    v = triage(_result(), 1, seen, Room(), SRC, NOW)
    assert v.task_trace == {} and v.rejected == ()


def test_a_large_packages_first_turn_is_not_capped_by_default():
    """An honest first fuzz turn over a big package (pygments: 16,874 never-seen edges in about
    1,000 executions, measured) fits the default caps; a claim of the whole map does not."""
    seen = bytearray(MAP_SIZE)
    cands = [_cand(bytes([i, j]), range(1000 * i + 50 * j, 1000 * i + 50 * j + 50)) for i in range(17)
             for j in range(20)]
    v = triage(_result(*cands), 1000, seen, _peers(), SRC, NOW)
    assert v.capped is None and v.new_edges == 17000 and len(v.admitted) == len(cands)
    everything = triage(_result(_cand(b"all", range(MAP_SIZE))), 1000, seen, _peers(), SRC, NOW)
    assert everything.capped is not None and everything.penalties == 1
