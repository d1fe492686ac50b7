"""RESULT frame decoding: the hand-written checks against msgspec's typed decoder (protocol/typed.py).

Issue 28 asked whether msgspec (decodes msgpack and validates it into Structs, in C) pays for the
decoding of RESULT frames; it does, and the codec now takes it as its straight path. This
measures, per result, on the frames a worker sends with no-op tasks (the synthetic executor's
2-edge trace, no candidates) and with 4 candidates:

- `checks`: `protocol.codec._result_frame_checked`, the hand-written decoder alone (envelope,
  straight path of checks, `Result` dataclasses): what the codec ran before msgspec, and runs
  now for any frame typed.py declines (it names each fault);
- `codec`: `protocol.codec.decode_result_frame` (what the coordinator runs: typed.py's Structs
  made from rules.py's rules, then the same `Result` dataclasses);
- `structs`: the Structs alone (what it would cost if the Structs were the messages).

Run: `python -m bench.bench_decode` (docs/design.md, "Performance").
"""

from __future__ import annotations

import argparse
import hashlib
import time
from typing import Any

from symfence.protocol import typed
from symfence.protocol.codec import _result_frame_checked, decode_result_frame, encode, encode_batch
from symfence.protocol.coverage import pack_trace
from symfence.protocol.messages import Candidate, Cost, Result, Status
from symfence.protocol.rules import DEFAULT_LIMITS

_structs = typed._decoder_for(DEFAULT_LIMITS)  # typed.py's decoder of Structs, before any Result


def msgspec_structs(frame: bytes) -> list[Any]:
    obj = _structs(frame)
    return getattr(obj, "items", None) or [obj]


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
    print(f"{'frame':<28} {'checks us':>9} {'codec us':>11} {'structs us':>11} {'checks/codec':>14}")
    for candidates in (0, 4):
        for per in (1, 16):
            frames = []
            for n in range(args.frames // per):
                items = [encode(_result(n * per + k, candidates)) for k in range(per)]
                frames.append(items[0] if per == 1 else encode_batch("results", items))
            ours = [r for f in frames[:5] for r in decode_result_frame(f)]
            theirs = [r for f in frames[:5] for r in _result_frame_checked(f)]
            assert ours == theirs, "the two decoders disagree"
            a = _time(_result_frame_checked, frames, per, args.repeat)
            b = _time(decode_result_frame, frames, per, args.repeat)
            c = _time(msgspec_structs, frames, per, args.repeat)
            name = f"{per} result(s), {candidates} cand."
            print(f"{name:<28} {a:>9.2f} {b:>11.2f} {c:>11.2f} {a / b:>13.2f}x")


if __name__ == "__main__":
    main()
