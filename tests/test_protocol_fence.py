"""Every row of the classification table, in precedence order, plus codec round trips."""

from __future__ import annotations

import msgpack
import pytest

from symfence.protocol.codec import Limits, RemoteProtocolError, decode_control, decode_result, decode_work, encode, encode_map, result_to_map
from symfence.protocol.fence import classify
from symfence.protocol.ids import derive_token, sha256_hex
from symfence.protocol.messages import Candidate, Control, ControlKind, Cost, Result, Status, Work
from symfence.protocol.reasons import QUARANTINE_REASONS, QuarantineCounters, Reason

EPOCH = bytes(range(32))
T1 = derive_token(EPOCH, 1, 1)  # in flight on rank 1
T2 = derive_token(EPOCH, 2, 2)  # in flight on rank 2
DONE = derive_token(EPOCH, 1, 0)  # committed
REVOKED = derive_token(EPOCH, 1, 3)  # expired
NEVER = derive_token(bytes(32), 1, 1)  # other epoch
WID = "ab" * 32


class View:
    def __init__(self):
        self.flight = {T1: 1, T2: 2}
        self.committed = {DONE}
        self.revoked_set = {REVOKED}

    def owner(self, token):
        return self.flight.get(token)

    def recently_committed(self, token):
        return token in self.committed

    def revoked(self, token):
        return token in self.revoked_set

    def in_flight_count(self, rank):
        return sum(1 for r in self.flight.values() if r == rank)

    def work_id_of(self, token):
        return WID if token in self.flight else None

    def banned(self, rank):
        return rank == 9


def result(token=T1, **kw) -> Result:
    base = dict(
        token=token,
        work_id=WID,
        status=Status.OK,
        candidates=(Candidate(b"abc", sha256_hex(b"abc"), b"\x01\x00\x01\x00\x00\x00", Status.OK, 1, 2, ""),),
        cost=Cost(0.5, 0.25, 0.125, 3),
        cov_version=4,
        trace=b"",
        error="",
        stats={"queries": 2},
    )
    base.update(kw)
    return Result(**base)


def frame(**overrides) -> bytes:
    m = result_to_map(result())
    for k, v in overrides.items():
        if v is DELETE:
            m.pop(k)
        else:
            m[k] = v
    return encode_map(m)


DELETE = object()


def test_result_round_trip():
    r = result()
    assert decode_result(encode(r)) == r


def test_work_and_control_round_trip():
    w = Work(T1, WID, b"\x00\x01", sha256_hex(b"\x00\x01"), "concolic", "m:f", 3, {"exec_timeout_s": 1.0}, 2.5, 7, b"\x01\x02\x03", 2)
    assert decode_work(encode(w)) == w
    c = Control(ControlKind.HEARTBEAT, (T1, T2), {"executing": T1, "busy_s": 1.5})
    assert decode_control(encode(c)) == c


ROWS = [
    # (name, frame, source, expected)
    ("undecodable", b"\xc1\xc1", 1, Reason.MALFORMED),
    ("not a map", msgpack.packb([1, 2, 3]), 1, Reason.MALFORMED),
    ("oversized", frame(error="x" * 2000), 1, Reason.MALFORMED),
    ("wrong types", frame(status=5), 1, Reason.MALFORMED),
    ("malformed token", frame(token="Z" * 64), 1, Reason.MALFORMED),
    ("token is a list", frame(token=[T1]), 1, Reason.MALFORMED),
    ("wrong types and no token", frame(cost="cheap", token=DELETE), 1, Reason.MALFORMED),
    ("version", frame(v=2), 1, Reason.INCOMPATIBLE),
    ("version beats body faults", frame(v=99, status=5, token=DELETE), 1, Reason.INCOMPATIBLE),
    ("missing", frame(token=DELETE), 1, Reason.MISSING),
    ("current", frame(), 1, Reason.CURRENT),
    ("misrouted", frame(token=T2), 1, Reason.MISROUTED),
    ("duplicate", frame(token=DONE), 1, Reason.DUPLICATE),
    ("expired", frame(token=REVOKED), 1, Reason.EXPIRED),
    ("unowned", frame(token=NEVER), 3, Reason.UNOWNED),
    ("duplicate beats unowned", frame(token=DONE), 3, Reason.DUPLICATE),
    ("stale", frame(token=NEVER), 1, Reason.STALE),
    ("mismatched", frame(work_id="cd" * 32), 1, Reason.MISMATCHED),
    ("banned beats everything", frame(), 9, Reason.BANNED),
]


@pytest.mark.parametrize(("name", "data", "source", "expected"), ROWS, ids=[r[0] for r in ROWS])
def test_classification_table(name, data, source, expected):
    verdict = classify(data, source, View(), Limits(max_message_bytes=1500))
    assert verdict.reason is expected, verdict.detail
    if expected is Reason.CURRENT:
        assert verdict.result == result()
    if expected is Reason.MISROUTED:
        assert verdict.owner == 2


def test_every_reason_has_a_row():
    # STALE_LEASE is not the fence's: the shared campaign store refuses such a commit (sharedwork.py)
    assert {r[3] for r in ROWS} == set(Reason) - {Reason.STALE_LEASE}


def test_quarantine_verdict_keeps_work_id_for_logs():
    v = classify(frame(token=DELETE), 1, View())
    assert v.work_id == WID


def test_per_candidate_size_limit():
    big = result(candidates=(Candidate(b"x" * 200, sha256_hex(b"x" * 200)),))
    with pytest.raises(RemoteProtocolError) as e:
        decode_result(encode(big), Limits(max_candidate_bytes=100))
    assert e.value.reason is Reason.MALFORMED


def test_counters_render_stable_order():
    c = QuarantineCounters()
    c.add(Reason.STALE)
    c.add(Reason.MALFORMED)
    c.add(Reason.STALE)
    assert c.total == 3
    lines = c.render().splitlines()
    assert [p.strip() for p in lines[0].split(":")] == ["quarantined_results", "3"]
    assert [l.split()[0] for l in lines[1:]] == [f"quarantined_{r.value}" for r in QUARANTINE_REASONS]
    assert QuarantineCounters(c.snapshot()).snapshot() == c.snapshot()
    with pytest.raises(ValueError):
        c.add(Reason.CURRENT)
