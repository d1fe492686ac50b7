"""The wire's rules have one home (protocol/rules.py): names made valid and distinct, the encoder
refuses what the decoder refuses, the sender turns an unsendable result into a task error, and
rank 0 tells an honest rank's refused results from a hostile rank's (coordinator/refusals.py)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from structlog.testing import capture_logs

from symfence.coordinator.config import ConfigError, parse
from symfence.coordinator.refusals import Refusals
from symfence.protocol.codec import (LocalProtocolError, RemoteProtocolError, decode_result, encode,
                                     encode_map, result_to_map)
from symfence.protocol.ids import Rank
from symfence.protocol.messages import Result, Status
from symfence.protocol.reasons import Reason
from symfence.protocol.rules import (COUNT_MAX, FOLDED_KEY, KEY_MAX_CHARS, MAX_INFO_KEYS, Limits,
                                     fit_counters, fit_text, is_key, wire_key)
from symfence.worker.sender import ResultSender

TOKEN, WORK_ID = "a" * 64, "b" * 64


@settings(max_examples=300)
@given(a=st.text(max_size=220), b=st.text(max_size=220))
def test_wire_key_is_valid_deterministic_distinct_and_idempotent(a, b):
    assert is_key(wire_key(a)) and wire_key(a) == wire_key(a) and wire_key(wire_key(a)) == wire_key(a)
    if a != b:
        assert wire_key(a) != wire_key(b)


def test_wire_key_keeps_plain_names_and_makes_the_rest_readable():
    assert wire_key("concretised_c.zlib.crc32") == "concretised_c.zlib.crc32"
    made = wire_key("concretised_c:längenprüfung " + "x" * 200)
    assert made.startswith("concretised_c_langenprufung_xxx") and len(made) == KEY_MAX_CHARS and "~" in made


def test_encoder_refuses_what_the_decoder_refuses_naming_field_and_value():
    key = "concretised_" + "n" * 70  # the shape: over 64 characters
    bad = Result(TOKEN, WORK_ID, Status.OK, stats={key: 1})
    with pytest.raises(LocalProtocolError) as local:
        encode(bad)
    assert local.value.field == "result.stats" and key[:40] in local.value.detail
    with pytest.raises(RemoteProtocolError) as remote:
        decode_result(encode_map(result_to_map(bad)))
    assert remote.value.detail == local.value.detail  # the same rule, in the same words


@settings(max_examples=200)
@given(stats=st.dictionaries(st.text(max_size=80), st.integers(-2, COUNT_MAX + 2), max_size=70))
def test_encode_succeeds_exactly_when_decode_would(stats):
    result = Result(TOKEN, WORK_ID, Status.OK, stats=stats)
    try:
        decode_result(encode_map(result_to_map(result)))
        remote_ok = True
    except RemoteProtocolError:
        remote_ok = False
    try:
        assert decode_result(encode(result)) == result
        local_ok = True
    except LocalProtocolError:
        local_ok = False
    assert local_ok == remote_ok


def test_fit_counters_and_fit_text():
    many = {f"name with space {i}": i for i in range(100)} | {"queries": 5}
    fitted = fit_counters(many)
    assert len(fitted) == MAX_INFO_KEYS and fitted["queries"] == 5 and FOLDED_KEY in fitted
    assert sum(fitted.values()) == sum(many.values())
    assert fit_counters({"big": COUNT_MAX * 3}) == {"big": COUNT_MAX}
    text = "Traceback (most recent call last):\n" + "  frame\n" * 20000 + "ValueError: the end\n"
    cut = fit_text(text, 1000)
    assert len(cut) <= 1000 and cut.startswith("Traceback") and cut.endswith("ValueError: the end\n")


def test_the_sender_makes_names_fit_and_sends_a_task_error_for_what_still_breaks_a_rule():
    sent: list[bytes] = []
    sender = ResultSender(sent.append, Limits(max_candidates=2))
    long_key = Result(TOKEN, WORK_ID, Status.OK, stats={"left_via.é" + "x" * 100: 1})
    assert all(is_key(k) for k in decode_result(sender.send(TOKEN, long_key)).stats)
    broken = Result(TOKEN, WORK_ID, Status.OK, stats={"queries": -1})  # a bug, not a name: not fitted
    with capture_logs() as logs:
        first = decode_result(sender.send(TOKEN, broken))
        second = decode_result(sender.send(TOKEN, broken))
    assert first.status is Status.ERROR and "result.stats.queries" in first.error and "-1" in first.error
    assert second.status is Status.ERROR and sender.unsendable == 2 and len(sent) == 3
    assert [e["event"] for e in logs] == ["result.unsendable"]  # logged once per field
    assert logs[0]["field"] == "result.stats.queries"


def test_refusals_judge_not_banned_ranks_and_subtract_injected_faults():
    r = Refusals(max_share=0.01, faults_enabled=False)
    for _ in range(100):
        r.received(Rank(1))
        r.received(Rank(2))
    assert r.refused(Rank(1), Reason.MALFORMED, "result.stats: key ...") is True
    assert r.refused(Rank(1), Reason.MALFORMED, "again") is False  # logged once per rank and reason
    assert r.refused(Rank(1), Reason.EXPIRED, "late") is False  # timing, not a bug
    r.refused(Rank(2), Reason.MALFORMED, "x")
    r.refused(Rank(2), Reason.MALFORMED, "x")
    judged = r.judge(banned=[], injected=None)
    assert [(j.rank, j.refused) for j in judged] == [(1, 2), (2, 2)]
    assert [j.rank for j in r.over_share(judged)] == [1, 2]
    assert r.judge(banned=[Rank(1), Rank(2)], injected=None) == []  # hostile: the ban handles it
    assert "rank 1" in r.live_text() and "result.stats" in r.live_text()
    lines = r.summary_lines(judged, "/out")
    assert "please send us /out/logs/" in lines[1]
    f = Refusals(max_share=0.01, faults_enabled=True)
    for _ in range(3):
        f.received(Rank(1))
        f.refused(Rank(1), Reason.MALFORMED, "x")
    assert f.judge([], {Rank(1): {"non_map": 3}}) == []  # all three were injected
    assert f.judge([], {}) == []  # no STOP_ACK: cannot tell, not judged
    assert f.judge([], {Rank(1): {"non_map": 1}})[0].refused == 2


@pytest.mark.parametrize("value", [-0.1, 1.5, "1%"])
def test_max_refused_share_is_checked_like_every_key(value):
    with pytest.raises(ConfigError) as exc:
        parse({"campaign": {"executor": "synthetic"}, "limits": {"max_refused_share": value}})
    assert str(exc.value).startswith("limits.max_refused_share: ")
