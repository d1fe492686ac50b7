"""RESULT frames decoded and checked in C (msgspec Structs made from rules.py's rules): the codec's straight path.

`results(frame, limits)` gives a RESULT frame's results when msgspec decodes the whole frame
into Structs that carry the wire's rules (types, 64-hex names, sizes, ranges; a stats map's key
rule is rules.py's `check_counters`, in Python), and None on ANY doubt: then codec.py's own
decoder judges the frame and names each fault with its reason, as it always did. So this path
only ever accepts; it never classifies, and every quarantine reason stays codec.py's.

It accepts a subset of what codec.py accepts, never more: unknown keys are refused here (the
codec ignores them, but msgpack there also refuses non-str keys inside them), a duplicated key
is judged at each occurrence (the codec keeps the last), and limits below a 64-character name
are left to the codec. tests/test_protocol_typed.py holds the two equal on edited frames.
"""


from functools import lru_cache
from typing import Annotated, Any, Callable, Literal

import msgspec

from symfence.protocol.messages import PROTOCOL_VERSION, Candidate, Cost, Result, Status
from symfence.protocol.rules import (COUNT_MAX, INT_MAX, MAX_BATCH, MAX_TOKEN_BYTES, MAX_TOKENS, NEW_BITS_MAX,
                                     SECONDS_MAX, Limits, RuleError, check_counters)

HEX64 = r"\A[0-9a-f]{64}\Z"  # rules.py / ids.py: 64 lowercase hex (\Z: no trailing newline, unlike $)


def _decoder(limits: Limits) -> Callable[[bytes], Any]:
    """The decode function of RESULT frames under `limits` (Structs defined per limits; their
    annotations are evaluated here, so this module has no `from __future__ import annotations`)."""
    Hex64 = Annotated[str, msgspec.Meta(pattern=HEX64)]
    Blob = Annotated[bytes, msgspec.Meta(max_length=limits.max_candidate_bytes)]
    Text = Annotated[str, msgspec.Meta(max_length=limits.max_text_bytes)]
    Count = Annotated[int, msgspec.Meta(ge=0, le=COUNT_MAX)]
    Seconds = Annotated[float, msgspec.Meta(ge=0, le=SECONDS_MAX)]  # NaN and inf fail the range
    Version = Literal[PROTOCOL_VERSION]  # type: ignore[valid-type]
    strict = {"forbid_unknown_fields": True}

    class TCandidate(msgspec.Struct, **strict):
        data: Blob
        sha256: Hex64
        trace: Blob
        kind: Status
        bound: Count
        new_bits: Annotated[int, msgspec.Meta(ge=0, le=NEW_BITS_MAX)]
        detail: Text

    class TCost(msgspec.Struct, **strict):
        wall_s: Seconds
        cpu_s: Seconds
        solver_s: Seconds
        execs: Count

    class TResult(msgspec.Struct, tag_field="kind", tag="result", **strict):
        v: Version
        token: Hex64
        work_id: Hex64
        status: Status
        candidates: Annotated[list[TCandidate], msgspec.Meta(max_length=limits.max_candidates)]
        cost: TCost
        cov_version: Annotated[int, msgspec.Meta(ge=0, le=INT_MAX)]
        trace: Blob
        error: Text
        stats: dict[str, int]  # its keys' rule: check_counters, below
        tokens: Annotated[list[Annotated[bytes, msgspec.Meta(min_length=1, max_length=MAX_TOKEN_BYTES)]],
                          msgspec.Meta(max_length=MAX_TOKENS)] = []

    class TBatch(msgspec.Struct, tag_field="kind", tag="results", **strict):
        v: Version
        items: Annotated[list[TResult], msgspec.Meta(min_length=1, max_length=MAX_BATCH)]

    return msgspec.msgpack.Decoder(TResult | TBatch).decode


_decoder_for = lru_cache(maxsize=8)(_decoder)


def results(frame: bytes, limits: Limits) -> list[Result] | None:
    """The results of a RESULT frame that keeps every rule, or None (codec.py judges it)."""
    if limits.max_text_bytes < 64:
        return None
    try:
        obj = _decoder_for(limits)(frame)
    except Exception:  # msgspec's DecodeError / ValidationError, or anything: the codec judges
        return None
    out = []
    for m in getattr(obj, "items", None) or (obj,):
        stats = m.stats
        if stats:
            try:
                check_counters(stats, "result.stats")
            except RuleError:
                return None
        cost = m.cost
        out.append(Result(m.token, m.work_id, m.status,
                          tuple([Candidate(c.data, c.sha256, c.trace, c.kind, c.bound, c.new_bits, c.detail)
                                 for c in m.candidates]) if m.candidates else (),
                          Cost(cost.wall_s, cost.cpu_s, cost.solver_s, cost.execs),
                          m.cov_version, m.trace, m.error, stats, tuple(m.tokens) if m.tokens else ()))
    return out
