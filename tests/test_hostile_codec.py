"""Issue 10: every integer and number on the wire is range-checked; CONTROL info has a schema."""

from __future__ import annotations

import msgpack
import pytest

from symfence.protocol.codec import (COUNT_MAX, INT_MAX, SECONDS_MAX, RemoteProtocolError, decode_control,
                                     encode, encode_map)
from symfence.protocol.fence import classify
from symfence.protocol.messages import PROTOCOL_VERSION, Control, ControlKind
from symfence.protocol.reasons import Reason
from tests.test_protocol_fence import T1, View, frame, result
from symfence.protocol.codec import result_to_map

HUGE = (2**63, 2**64 - 1, COUNT_MAX + 1, -1)


def _with(path: tuple, value) -> bytes:
    m = result_to_map(result())
    target = m
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return encode_map(m)


@pytest.mark.parametrize("path", [("cost", "execs"), ("candidates", 0, "bound"), ("stats", "queries")])
@pytest.mark.parametrize("value", HUGE)
def test_out_of_range_counts_are_malformed(path, value):
    assert classify(_with(path, value), 1, View()).reason is Reason.MALFORMED


@pytest.mark.parametrize("value", [INT_MAX + 1, 2**63, -1])
def test_out_of_range_cov_version_is_malformed(value):
    assert classify(frame(cov_version=value), 1, View()).reason is Reason.MALFORMED


@pytest.mark.parametrize("value", [3, 255, 2**63])
def test_new_bits_beyond_two_is_malformed(value):
    assert classify(_with(("candidates", 0, "new_bits"), value), 1, View()).reason is Reason.MALFORMED


@pytest.mark.parametrize("key", ["wall_s", "cpu_s", "solver_s"])
@pytest.mark.parametrize("value", [SECONDS_MAX * 2, 1e308, float("inf"), float("nan"), -0.5, 2**63])
def test_out_of_range_durations_are_malformed(key, value):
    assert classify(_with(("cost", key), value), 1, View()).reason is Reason.MALFORMED


@pytest.mark.parametrize("value", [*HUGE, None, "3", 1.5, True, b"\x01"])
def test_a_resume_at_that_is_not_a_count_is_malformed(value):
    assert classify(_with(("resume_at",), value), 1, View()).reason is Reason.MALFORMED


def test_resume_at_is_on_the_wire_only_when_set_and_round_trips():
    from dataclasses import replace

    from symfence.protocol.codec import decode_result, encode

    plain = result()
    assert "resume_at" not in result_to_map(plain) and decode_result(encode(plain)).resume_at is None
    for value in (0, 7, COUNT_MAX):
        assert decode_result(encode(replace(plain, resume_at=value))).resume_at == value
        assert classify(_with(("resume_at",), value), 1, View()).reason is Reason.CURRENT


def test_in_range_values_still_commit():
    m = result_to_map(result())
    m["cost"]["execs"] = COUNT_MAX
    m["candidates"][0]["bound"] = COUNT_MAX
    m["cov_version"] = INT_MAX
    assert classify(encode_map(m), 1, View()).reason is Reason.CURRENT


def test_result_work_id_must_match_the_dispatch():
    other = "cd" * 32
    v = classify(frame(work_id=other), 1, View())
    assert v.reason is Reason.MISMATCHED and v.work_id == other


def _control(kind: str, info, tokens=()) -> bytes:
    return msgpack.packb({"v": PROTOCOL_VERSION, "kind": kind, "tokens": list(tokens), "info": info},
                         use_bin_type=True)


BAD_INFO = [
    ("heartbeat", {"work_received": "x"}),
    ("heartbeat", {"work_received": 2**64 - 1}),
    ("heartbeat", {"work_received": -3}),
    ("heartbeat", {"busy_s": float("inf")}),
    ("heartbeat", {"work_received": [1, 2]}),
    ("heartbeat", {"nested": {"a": 1}}),
    ("hello", {"pid": 2**63}),
    ("hello", {"host": "h" * 10_000}),
    ("stop_ack", {"faults": {"x": 2**63}}),
    ("stop_ack", {"faults": [1]}),
    ("stop_ack", {"worker": None}),
    ("stop_ack", {"event\nforged": 1}),
    ("stop_ack", {f"k{i}": 1 for i in range(100)}),
    ("stop_ack", {"": 1}),
]


@pytest.mark.parametrize("kind,info", BAD_INFO)
def test_malformed_worker_control_info_is_rejected(kind, info):
    with pytest.raises(RemoteProtocolError) as exc:
        decode_control(_control(kind, info))
    assert exc.value.reason is Reason.MALFORMED


def test_well_formed_worker_controls_decode():
    # Keys such as `worker` or `event` are legal data; the coordinator never spreads them into
    # a log call's keyword arguments.
    ack = decode_control(_control("stop_ack", {"results_sent": 5, "busy_s": 1.5, "worker": 3, "event": "x",
                                               "faults": {"stale": 2}}))
    assert ack.info["worker"] == 3
    hb = decode_control(encode(Control(ControlKind.HEARTBEAT, (T1,), {"work_received": 4, "busy_s": 0.25})))
    assert hb.info["work_received"] == 4
    setup = decode_control(encode(Control(ControlKind.SETUP, info={"faults": {"stale": 0.5}, "rank": 1})))
    assert setup.info["faults"] == {"stale": 0.5}
