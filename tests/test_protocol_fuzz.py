"""Property tests: the decoder only ever classifies, whatever bytes or maps a peer sends."""

from __future__ import annotations

import msgpack
from hypothesis import given, settings
from hypothesis import strategies as st

from symfence.protocol.codec import decode_control, decode_work, RemoteProtocolError
from symfence.protocol.fence import classify
from symfence.protocol.reasons import Reason

from tests.test_protocol_fence import View, frame, T1

scalars = st.one_of(st.none(), st.booleans(), st.integers(-(2**63), 2**64 - 1), st.floats(), st.text(max_size=70), st.binary(max_size=70))
values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=12), inner, max_size=4)), max_leaves=20)
keys = st.sampled_from(["v", "kind", "token", "work_id", "status", "candidates", "cost", "cov_version", "trace", "error", "stats", "x"])


@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=300))
def test_random_bytes_only_classify(data):
    verdict = classify(data, 1, View())
    assert isinstance(verdict.reason, Reason)
    for decode in (decode_work, decode_control):
        try:
            decode(data)
        except RemoteProtocolError:
            pass


@settings(max_examples=400, deadline=None)
@given(st.dictionaries(keys, values, max_size=12))
def test_random_maps_only_classify(m):
    verdict = classify(msgpack.packb(m, use_bin_type=True), 1, View())
    assert verdict.reason in (Reason.MALFORMED, Reason.INCOMPATIBLE, Reason.MISSING)


@settings(max_examples=300, deadline=None)
@given(keys, values)
def test_one_corrupted_field_of_a_valid_result(key, value):
    verdict = classify(frame(**{key: value}), 1, View())
    assert isinstance(verdict.reason, Reason)
    if verdict.reason is Reason.CURRENT:
        assert verdict.result.token == T1


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 400), st.binary(min_size=1, max_size=8))
def test_truncated_and_spliced_frames(cut, junk):
    good = frame()
    for data in (good[:cut], good[:cut] + junk, junk + good):
        assert isinstance(classify(data, 1, View()).reason, Reason)
