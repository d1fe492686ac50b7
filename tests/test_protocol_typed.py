"""The C decoder of RESULT frames (protocol/typed.py) accepts only what the hand-written checks accept.

typed.py is the codec's straight path: for any frame it gives the very results the codec's own
checks give, or None (then those checks judge the frame and name its faults). Held here on
edited results, on frames whose msgpack is odd (duplicate keys, non-str keys in an unknown
field, trailing bytes), on batches and on random bytes.
"""

from __future__ import annotations

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from symfence.protocol import typed
from symfence.protocol.codec import (
    DEFAULT_LIMITS,
    RemoteProtocolError,
    _result_frame_checked,
    decode_result_frame,
    encode,
    encode_batch,
    result_to_map,
)
from symfence.protocol.messages import Result, Status
from symfence.protocol.reasons import Reason
from symfence.protocol.rules import Limits
from tests.examples_budget import examples
from tests.test_protocol_fence import result
from tests.test_protocol_fuzz import cand_keys, cost_keys, edge_values, keys


def _checked(frame: bytes, limits: Limits = DEFAULT_LIMITS) -> list[Result] | None:
    """The codec's hand-written verdict: the results when every one is good, else None."""
    try:
        out = _result_frame_checked(frame, limits)
    except RemoteProtocolError:
        return None
    return None if any(isinstance(r, RemoteProtocolError) for r in out) else out  # type: ignore[misc]


def _agree(frame: bytes, limits: Limits = DEFAULT_LIMITS) -> list[Result] | None:
    fast = typed.results(frame, limits)
    if fast is not None:
        assert fast == _checked(frame, limits), (fast, _checked(frame, limits))
        assert all(type(r.cost.wall_s) is float for r in fast)
    return fast


def _pack(m: object) -> bytes:
    return msgpack.packb(m, use_bin_type=True)


def test_valid_results_and_batches_take_the_c_path_and_equal_the_checked_ones():
    plain = result(candidates=(), stats={}, tokens=())
    rich = result(tokens=(b"tok", b"x" * 64), stats={"queries": 2, "unknown": 0}, error="é" * 10)
    for r in (plain, rich, result(status=Status.CRASH, error="boom")):
        assert _agree(encode(r)) == [r]
    batch = encode_batch("results", [encode(plain), encode(rich)])
    assert _agree(batch) == [plain, rich] == decode_result_frame(batch)


@settings(max_examples=examples(300), deadline=None)
@given(st.one_of(keys, st.just("tokens")), edge_values, cand_keys, edge_values, cost_keys, edge_values)
def test_an_edited_field_is_decoded_in_c_only_when_the_checks_take_it(key, value, ckey, cvalue, costkey,
                                                                      costvalue):
    m = result_to_map(result())
    for where, k, v in (("top", key, value), ("cand", ckey, cvalue), ("cost", costkey, costvalue)):
        copy = msgpack.unpackb(_pack(m), raw=False)
        target = copy if where == "top" else copy["candidates"][0] if where == "cand" else copy["cost"]
        target[k] = v
        _agree(_pack(copy))
        _agree(encode_batch("results", [encode(result()), _pack(copy)]))
        target.pop(k)
        _agree(_pack(copy))


def _raw_map(pairs: list[tuple[object, object]]) -> bytes:
    """A msgpack map written pair by pair (duplicate keys allowed)."""
    p = msgpack.Packer(use_bin_type=True, strict_types=False)
    return bytes([0x80 + len(pairs)]) + b"".join(p.pack(k) + p.pack(v) for k, v in pairs)


def test_odd_msgpack_is_left_to_the_checks():
    m = result_to_map(result())
    good = list(m.items())
    cases = {
        "unknown key holding a non-str key": _pack(m | {"x": {1: 2}}),
        "a duplicate key, bad then good": _raw_map([("token", "zz")] + good),
        "a duplicate key, good then bad": _raw_map(good + [("token", "A" * 64)]),
        "token with a trailing newline": _pack(m | {"token": m["token"] + "\n"}),
        "wall_s NaN": _pack(m | {"cost": m["cost"] | {"wall_s": float("nan")}}),
        "version 2": _pack(m | {"v": 2}),
        "version True": _pack(m | {"v": True}),
        "trailing bytes": _pack(m) + b"\x00",
        "a bad stats key": _pack(m | {"stats": {"q w": 1}}),
        "a batch of none": _pack({"v": 1, "kind": "results", "items": []}),
        "a batch with one bad item": encode_batch("results", [encode(result()), _pack(m | {"status": "OK"})]),
    }
    for name, frame in cases.items():
        assert typed.results(frame, DEFAULT_LIMITS) is None, name
    # the last duplicate wins in the checks: good then bad is refused there too
    assert _checked(cases["a duplicate key, good then bad"]) is None
    with pytest.raises(RemoteProtocolError) as exc:
        decode_result_frame(cases["version 2"])
    assert exc.value.reason is Reason.INCOMPATIBLE  # still the codec's reason


def test_limits_are_the_frame_s_own():
    r = result(error="e" * 300)
    assert _agree(encode(r)) == [r]
    small = Limits(max_text_bytes=200)
    assert typed.results(encode(r), small) is None
    (err,) = decode_result_frame(encode(r), small)
    assert isinstance(err, RemoteProtocolError) and err.reason is Reason.MALFORMED
    # a 64-character name cannot fit: the checks judge
    assert typed.results(encode(result()), Limits(max_text_bytes=63)) is None


@settings(max_examples=examples(400), deadline=None)
@given(st.binary(max_size=300))
def test_random_bytes_never_raise(data):
    assert _agree(data) is None or _checked(data) is not None
