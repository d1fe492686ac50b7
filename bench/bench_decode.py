"""RESULT frame decoding: today's codec (msgpack + hand-written checks) against msgspec's typed decoder.

Issue 28 asks whether msgspec (decodes msgpack and validates it into Structs, in C) pays for the
decoding of RESULT frames. This measures, per result, on the frames a worker sends with no-op
tasks (the synthetic executor's 2-edge trace, no candidates) and with 4 candidates:

- `codec`: `protocol.codec.decode_result_frame` (what the coordinator runs: envelope, straight
  path of checks, `Result` dataclasses);
- `msgspec`: `msgspec.msgpack.Decoder` into Structs carrying the rules msgspec can express
  (types, 64-hex tokens, sizes, ranges), then the same `Result` dataclasses built from them;
- `msgspec-structs`: the Structs alone (what it would cost if the Structs were the messages).

The Structs here copy rules from protocol/rules.py by value; adopting msgspec would have to make
them from rules.py, and keep the checks msgspec cannot express (key names, the token dictionary,
the version-before-body precedence of faults) in Python.
Run: `pip install msgspec; python -m bench.bench_decode`
(msgspec is not a dependency: it was measured, not adopted; docs/design.md, "Performance").
"""

from __future__ import annotations

import argparse
import hashlib
import time
from typing import Annotated

try:
    import msgspec
except ImportError:  # not a dependency of symfence: only this measurement needs it
    raise SystemExit("bench_decode needs msgspec: pip install msgspec") from None

from symfence.protocol.codec import decode_result_frame, encode, encode_batch
from symfence.protocol.coverage import pack_trace
from symfence.protocol.messages import Candidate, Cost, Result, Status
from symfence.protocol.rules import COUNT_MAX, INT_MAX, NEW_BITS_MAX, SECONDS_MAX, Limits

_L = Limits()
Hex64 = Annotated[str, msgspec.Meta(pattern="^[0-9a-f]{64}$")]
Blob = Annotated[bytes, msgspec.Meta(max_length=_L.max_candidate_bytes)]
Text = Annotated[str, msgspec.Meta(max_length=_L.max_text_bytes)]
Count = Annotated[int, msgspec.Meta(ge=0, le=COUNT_MAX)]
Seconds = Annotated[float, msgspec.Meta(ge=0, le=SECONDS_MAX)]
StatusName = Annotated[str, msgspec.Meta(pattern="^(ok|crash|hang|error)$")]


class MCandidate(msgspec.Struct, forbid_unknown_fields=False):
    data: Blob
    sha256: Hex64
    trace: Blob
    kind: StatusName
    bound: Count
    new_bits: Annotated[int, msgspec.Meta(ge=0, le=NEW_BITS_MAX)]
    detail: Text


class MCost(msgspec.Struct):
    wall_s: Seconds
    cpu_s: Seconds
    solver_s: Seconds
    execs: Count


class MResult(msgspec.Struct, tag_field="kind", tag="result"):
    v: int
    token: Hex64
    work_id: Hex64
    status: StatusName
    candidates: Annotated[list[MCandidate], msgspec.Meta(max_length=_L.max_candidates)]
    cost: MCost
    cov_version: Annotated[int, msgspec.Meta(ge=0, le=INT_MAX)]
    trace: Blob
    error: Text
    stats: dict[str, Count]
    tokens: list[bytes] = []


class MBatch(msgspec.Struct, tag_field="kind", tag="results"):
    v: int
    items: Annotated[list[MResult], msgspec.Meta(min_length=1, max_length=256)]


_STATUS = {s.value: s for s in Status}
_decoder = msgspec.msgpack.Decoder(MResult | MBatch)


def _to_result(m: MResult) -> Result:
    return Result(m.token, m.work_id, _STATUS[m.status],
                  tuple(Candidate(c.data, c.sha256, c.trace, _STATUS[c.kind], c.bound, c.new_bits, c.detail)
                        for c in m.candidates),
                  Cost(m.cost.wall_s, m.cost.cpu_s, m.cost.solver_s, m.cost.execs),
                  m.cov_version, m.trace, m.error, m.stats, tuple(m.tokens))


def msgspec_results(frame: bytes) -> list[Result]:
    obj = _decoder.decode(frame)
    return [_to_result(m) for m in obj.items] if isinstance(obj, MBatch) else [_to_result(obj)]


def msgspec_structs(frame: bytes) -> list[MResult]:
    obj = _decoder.decode(frame)
    return obj.items if isinstance(obj, MBatch) else [obj]


def _result(i: int, candidates: int) -> Result:
    token = hashlib.sha256(b"t%d" % i).hexdigest()
    wid = hashlib.sha256(b"w%d" % i).hexdigest()
    cands = tuple(Candidate(b"x" * 32, hashlib.sha256(b"c%d%d" % (i, k)).hexdigest(),
                            pack_trace({k: 1, 7: 2}), bound=k, new_bits=2) for k in range(candidates))
    return Result(token, wid, Status.OK, cands, Cost(0.0001, 0.0001, 0.0, 1), 3,
                  pack_trace({i % 4096: 1, 9: 1}), "", {"queries": 1})


def _time(fn, frames: list[bytes], per: int, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t = time.process_time()
        for f in frames:
            fn(f)
        best = min(best, time.process_time() - t)
    return best / (len(frames) * per) * 1e6


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--frames", type=int, default=2000)
    p.add_argument("--repeat", type=int, default=5)
    args = p.parse_args(argv)
    print(f"{'frame':<28} {'codec us':>9} {'msgspec us':>11} {'structs us':>11} {'codec/msgspec':>14}")
    for candidates in (0, 4):
        for per in (1, 16):
            frames = []
            for n in range(args.frames // per):
                items = [encode(_result(n * per + k, candidates)) for k in range(per)]
                frames.append(items[0] if per == 1 else encode_batch("results", items))
            ours = [r for f in frames[:5] for r in decode_result_frame(f)]
            assert ours == [r for f in frames[:5] for r in msgspec_results(f)], "the two decoders disagree"
            a = _time(decode_result_frame, frames, per, args.repeat)
            b = _time(msgspec_results, frames, per, args.repeat)
            c = _time(msgspec_structs, frames, per, args.repeat)
            name = f"{per} result(s), {candidates} cand."
            print(f"{name:<28} {a:>9.2f} {b:>11.2f} {c:>11.2f} {a / b:>13.2f}x")


if __name__ == "__main__":
    main()
