"""Property tests: the decoder only ever classifies, whatever bytes or maps a peer sends."""

from __future__ import annotations

import msgpack
from hypothesis import given, settings
from hypothesis import strategies as st

from symfence.protocol.codec import decode_control, decode_work, RemoteProtocolError
from symfence.protocol.fence import classify
from symfence.protocol.reasons import Reason

from tests.test_protocol_fence import View, frame, T1
from tests.examples_budget import examples

scalars = st.one_of(st.none(), st.booleans(), st.integers(-(2**63), 2**64 - 1), st.floats(), st.text(max_size=70), st.binary(max_size=70))
values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=12), inner, max_size=4)), max_leaves=20)
keys = st.sampled_from(["v", "kind", "token", "work_id", "status", "candidates", "cost", "cov_version", "trace", "error", "stats", "x"])


@settings(max_examples=examples(400), deadline=None)
@given(st.binary(max_size=300))
def test_random_bytes_only_classify(data):
    verdict = classify(data, 1, View())
    assert isinstance(verdict.reason, Reason)
    for decode in (decode_work, decode_control):
        try:
            decode(data)
        except RemoteProtocolError:
            pass


@settings(max_examples=examples(400), deadline=None)
@given(st.dictionaries(keys, values, max_size=12))
def test_random_maps_only_classify(m):
    verdict = classify(msgpack.packb(m, use_bin_type=True), 1, View())
    assert verdict.reason in (Reason.MALFORMED, Reason.INCOMPATIBLE, Reason.MISSING)


@settings(max_examples=examples(300), deadline=None)
@given(keys, values)
def test_one_corrupted_field_of_a_valid_result(key, value):
    verdict = classify(frame(**{key: value}), 1, View())
    assert isinstance(verdict.reason, Reason)
    if verdict.reason is Reason.CURRENT:
        assert verdict.result.token == T1


@settings(max_examples=examples(200), deadline=None)
@given(st.integers(0, 400), st.binary(min_size=1, max_size=8))
def test_truncated_and_spliced_frames(cut, junk):
    good = frame()
    for data in (good[:cut], good[:cut] + junk, junk + good):
        assert isinstance(classify(data, 1, View()).reason, Reason)


# --- the decoder's straight path (codec._result_fast) accepts exactly what the full checks accept

cand_keys = st.sampled_from(["data", "sha256", "trace", "kind", "bound", "new_bits", "detail", "x"])
cost_keys = st.sampled_from(["wall_s", "cpu_s", "solver_s", "execs", "x"])
edge_values = st.one_of(values, st.sampled_from([
    -1, 0, 2, 3, 2**32 - 1, 2**32, 2**53 - 1, 2**53, 1e7, 1e7 + 1, float("inf"), float("nan"), -0.0, True,
    "ok", "crash", "OK", "a" * 64, "A" * 64, "ab" * 32, "ab" * 31, b"", b"x" * 129, [b"t"], [b""], {"q": 1},
    {"": 1}, {"q": -1}, {"q w": 1}]))


def _fast_vs_full(m):
    from symfence.protocol.codec import DEFAULT_LIMITS, _result_body, _result_fast

    fast = _result_fast(m, DEFAULT_LIMITS)
    try:
        full = _result_body(m, DEFAULT_LIMITS)
    except RemoteProtocolError:
        full = None
    assert fast == full, (fast, full)  # equal results, or the straight path declines what the full checks refuse
    return fast


@settings(max_examples=examples(300), deadline=None)
@given(st.one_of(keys, st.just("tokens")), edge_values, cand_keys, edge_values, cost_keys, edge_values)
def test_straight_path_agrees_with_the_full_checks(key, value, ckey, cvalue, costkey, costvalue):
    from tests.test_protocol_fence import result
    from symfence.protocol.codec import result_to_map

    m = result_to_map(result())
    assert _fast_vs_full(m) is not None  # a valid result takes the straight path
    for edit in ((m, key, value), (m["candidates"][0], ckey, cvalue), (m["cost"], costkey, costvalue)):
        copy = msgpack.unpackb(msgpack.packb(m, use_bin_type=True), raw=False)
        target = copy if edit[0] is m else copy["candidates"][0] if edit[0] is m["candidates"][0] else copy["cost"]
        target[edit[1]] = edit[2]
        _fast_vs_full(copy)
        target.pop(edit[1])
        _fast_vs_full(copy)


work_keys = st.sampled_from(["v", "kind", "token", "work_id", "data", "sha256", "executor", "target", "bound",
                             "options", "deadline_s", "cov_version", "cov_delta", "attempt", "x"])


@settings(max_examples=examples(300), deadline=None)
@given(work_keys, edge_values, st.text(max_size=8), edge_values)
def test_work_straight_path_agrees_with_the_full_checks(key, value, okey, ovalue):
    from symfence.protocol.codec import DEFAULT_LIMITS, _envelope, _work_fast, decode_work, encode
    from symfence.protocol.messages import Work
    from tests.test_protocol_fence import T1, WID

    good = encode(Work(T1, WID, b"in", "cd" * 32, "synthetic", "t", 1, {"a": 1}, 2.0, 3, b"", 1))
    assert _work_fast(msgpack.unpackb(good, raw=False), DEFAULT_LIMITS) is not None
    for edit in ("field", "option"):
        m = msgpack.unpackb(good, raw=False)
        (m if edit == "field" else m["options"])[key if edit == "field" else okey] = value if edit == "field" else ovalue
        for _ in range(2):
            try:  # the straight path runs after the envelope checks (size, map, version)
                fast = _work_fast(_envelope(msgpack.packb(m, use_bin_type=True), DEFAULT_LIMITS), DEFAULT_LIMITS)
            except RemoteProtocolError:
                fast = None
            try:
                full = decode_work(msgpack.packb(m, use_bin_type=True))
            except RemoteProtocolError:
                full = None
            assert fast is None or fast == full, (fast, full)
            (m if edit == "field" else m["options"]).pop(key if edit == "field" else okey, None)
