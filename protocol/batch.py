"""Batch frames: many WORK or RESULT frames behind one fixed head, grouped by count and size.

codec.py re-exports these; its decoders read a batch's items (`codec._items`).
"""

from __future__ import annotations

import msgpack

from symfence.protocol.errors import LocalProtocolError
from symfence.protocol.messages import PROTOCOL_VERSION
from symfence.protocol.rules import DEFAULT_LIMITS, MAX_BATCH, Limits

# ---------------------------------------------------------------------------------- batches
# A batch frame is the map {"v": 1, "kind": "results" | "works", "items": [...]} whose items are
# the maps of single frames, byte for byte: each item is packed and checked by `encode` on its
# own, and a batch is their bytes behind a fixed head, so packing one costs a join.

BATCH_OF = {"result": "results", "work": "works"}  # an item's kind -> its batch's kind
_BATCH_HEAD = {kind: b"\x83" + b"".join(msgpack.packb(x) for x in ("v", PROTOCOL_VERSION, "kind", kind, "items"))
               for kind in BATCH_OF.values()}
_ARRAY_HEADER = msgpack.Packer().pack_array_header
BATCH_HEAD_BYTES = max(map(len, _BATCH_HEAD.values())) + 5  # a batch's bytes besides its items, at most


def encode_batch(kind: str, frames: list[bytes], limits: Limits = DEFAULT_LIMITS) -> bytes:
    """One frame carrying `frames` (each made by `encode`, so each keeps the rules) as a batch of
    `kind` ("results" or "works"); LocalProtocolError when it would break the count or size rule."""
    if not 1 <= len(frames) <= MAX_BATCH:
        raise LocalProtocolError("items", f"{len(frames)} items in one frame, not in [1, {MAX_BATCH}]")
    frame = b"".join((_BATCH_HEAD[kind], _ARRAY_HEADER(len(frames)), *frames))
    if len(frame) > limits.max_message_bytes:
        raise LocalProtocolError("message", f"{len(frame)} bytes, more than limits.max_message_bytes"
                                            f" = {limits.max_message_bytes}")
    return frame


def pack_frames(kind: str, frames: list[bytes], max_items: int, limits: Limits = DEFAULT_LIMITS) -> list[bytes]:
    """`frames` (each made by `encode`) in order, in as few frames as `max_items` items and the
    message size allow: a group of one is its own frame, a larger one a batch of `kind`. The one
    place frames are grouped, for rank 0's WORKs and a worker's held results alike."""
    out: list[bytes] = []
    group: list[bytes] = []
    size = BATCH_HEAD_BYTES
    for frame in frames:
        if group and (len(group) >= max_items or size + len(frame) > limits.max_message_bytes):
            out.append(group[0] if len(group) == 1 else encode_batch(kind, group, limits))
            group, size = [], BATCH_HEAD_BYTES
        group.append(frame)
        size += len(frame)
    if group:
        out.append(group[0] if len(group) == 1 else encode_batch(kind, group, limits))
    return out
