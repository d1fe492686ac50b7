"""A WORK's head (executor, target, options, deadline) packed once: the same frames, the same rules.

`work_head` + `encode_work_with` is how rank 0 encodes its WORKs (coordinator/core.py); these
tests hold it to `encode(Work(...))` and to the decoder: a field the decoder refuses is refused
by the encoder, naming the field, and everything it encodes decodes to the same `Work`.
"""

from __future__ import annotations

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from symfence.protocol.codec import (
    LocalProtocolError,
    RemoteProtocolError,
    checked_options,
    decode_work,
    decode_work_frame,
    encode,
    encode_work_with,
    pack_frames,
    work_head,
)
from symfence.protocol.messages import Work
from symfence.protocol.rules import Limits
from tests.examples_budget import examples
from tests.test_protocol_fuzz import edge_values

TOKEN, WID, SHA = "a" * 64, "ab" * 32, "cd" * 32
OPTIONS = {"task_ms": 0.5, "name": "x", "n": 3, "flag": True, "none": None}


def _work(**over: object) -> Work:
    fields = dict(token=TOKEN, work_id=WID, data=b"in", sha256=SHA, executor="synthetic", target="t", bound=7,
                  options=dict(OPTIONS), deadline_s=2.0, cov_version=3, cov_delta=b"\x01\x02", attempt=1)
    fields.update(over)
    return Work(**fields)  # type: ignore[arg-type]


def _with(head, w: Work) -> bytes:
    return encode_work_with(head, w.token, w.work_id, w.data, w.sha256, w.bound, w.cov_version, w.cov_delta,
                            w.attempt)


def test_a_head_packed_once_gives_the_frames_of_encode_work_and_decodes_to_the_same_work():
    head = work_head("synthetic", "t", checked_options(OPTIONS), 2.0)
    for w in (_work(), _work(token="0" * 64, data=b"", cov_delta=b"", attempt=5, bound=0),
              _work(data=b"x" * 70_000, cov_version=2**53 - 1)):
        frame = _with(head, w)
        assert frame == encode(w)  # one encoder: encode(Work) is a head for one WORK
        assert decode_work(frame) == w
        assert msgpack.unpackb(frame, raw=False) == msgpack.unpackb(msgpack.packb(
            {k: getattr(w, k) for k in w.__dataclass_fields__} | {"v": 1, "kind": "work"}, use_bin_type=True),
            raw=False)
    frames = [_with(head, _work(token=f"{i:064x}")) for i in range(5)]
    (batch,) = pack_frames("works", frames, 8)
    assert [w.token for w in decode_work_frame(batch)] == [f"{i:064x}" for i in range(5)]  # type: ignore[union-attr]


@pytest.mark.parametrize("field,value", [("executor", 5), ("target", b"t"), ("deadline_s", float("nan")),
                                         ("deadline_s", -1.0), ("options", {"bad": [1, 2]}),
                                         ("options", {1: "x"}), ("executor", "e" * (64 << 10 + 1))])
def test_a_head_the_decoder_would_refuse_is_refused_naming_its_field(field, value):
    args = {"executor": "synthetic", "target": "t", "options": OPTIONS, "deadline_s": 2.0} | {field: value}
    with pytest.raises(LocalProtocolError) as exc:
        work_head(args["executor"], args["target"], args["options"], args["deadline_s"])  # type: ignore[arg-type]
    assert exc.value.field.startswith(f"work.{field}"), exc.value.field


def test_a_head_keeps_the_limits_it_was_checked_for():
    small = Limits(max_text_bytes=100)
    with pytest.raises(LocalProtocolError):
        # options checked for 64 KiB of text are checked again for these limits
        work_head("synthetic", "t", checked_options({"s": "x" * 200}), 2.0, small)
    head = work_head("synthetic", "t", {"s": "x" * 50}, 2.0, Limits(max_message_bytes=500))
    assert decode_work(_with(head, _work(options={"s": "x" * 50}, data=b"")), Limits(max_message_bytes=500))
    with pytest.raises(LocalProtocolError) as exc:
        _with(head, _work(data=b"x" * 200))
    assert exc.value.field in ("message", "work.data")


@settings(max_examples=examples(300), deadline=None)
@given(st.sampled_from(["token", "work_id", "data", "sha256", "bound", "cov_version", "cov_delta",
                        "attempt"]), edge_values)
def test_a_dispatch_field_is_encoded_exactly_when_the_decoder_takes_it(key, value):
    head = work_head("synthetic", "t", checked_options(OPTIONS), 2.0)
    w = _work()
    m = {k: getattr(w, k) for k in w.__dataclass_fields__} | {"v": 1, "kind": "work", key: value}
    try:
        want: Work | None = decode_work(msgpack.packb(m, use_bin_type=True))
    except RemoteProtocolError as exc:
        want, why = None, exc.detail
    try:
        got = decode_work(encode_work_with(head, m["token"], m["work_id"], m["data"], m["sha256"], m["bound"],
                                           m["cov_version"], m["cov_delta"], m["attempt"]))
    except LocalProtocolError as exc:
        assert want is None and exc.detail == why  # the same rule, in the same words
    else:
        assert got == want
