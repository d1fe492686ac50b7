"""The input of one fuzz slice: corpus entries and dictionary tokens the worker does not have yet.

A fuzz WORK carries this as its ``data`` (so its sha256 and the work_id name exactly what the
slice starts from). The coordinator sends deltas: entries and tokens added since the last slice
of that target the worker answered, and the worker keeps what it already has, as it does with the
coverage map. Encoding: a msgpack map ``{"v": 1, "entries": [bytes...], "tokens": [bytes...]}``;
``unpack_spec`` is strict and raises ``ValueError`` on anything else.
"""

from __future__ import annotations

from dataclasses import dataclass

import msgpack

from symfence.protocol.rules import MAX_TOKEN_BYTES, is_token

SPEC_VERSION = 1


@dataclass(frozen=True)
class SliceSpec:
    entries: tuple[bytes, ...] = ()  # corpus entries to add to the worker's copy for the target
    tokens: tuple[bytes, ...] = ()  # dictionary entries to add (comparison constants)


def pack_spec(spec: SliceSpec) -> bytes:
    return msgpack.packb({"v": SPEC_VERSION, "entries": list(spec.entries), "tokens": list(spec.tokens)},
                         use_bin_type=True)


def unpack_spec(blob: bytes) -> SliceSpec:
    try:
        obj = msgpack.unpackb(blob, raw=False, strict_map_key=True)
    except Exception as exc:  # msgpack raises several unrelated types
        raise ValueError(f"fuzz slice spec is not msgpack: {exc}") from None
    if type(obj) is not dict or obj.get("v") != SPEC_VERSION or set(obj) != {"v", "entries", "tokens"}:
        raise ValueError("fuzz slice spec: expected a map with v=1, entries, tokens")
    entries, tokens = obj["entries"], obj["tokens"]
    if type(entries) is not list or not all(type(e) is bytes for e in entries):
        raise ValueError("fuzz slice spec: entries must be a list of bytes")
    if type(tokens) is not list or not all(map(is_token, tokens)):
        raise ValueError(f"fuzz slice spec: tokens must be a list of 1..{MAX_TOKEN_BYTES} bytes")
    return SliceSpec(tuple(entries), tuple(tokens))
