"""Delta debugging of one input: the smallest input a predicate still accepts (bytes, then chunks).

``minimize(data, still_fails, deadline)``: first the shortest prefix (binary search on the
length: most parsers read their input front to back, so the bytes past the crash are noise),
then ddmin's chunk removal (halves, quarters, ... down to single bytes), repeated until a whole
pass removes nothing, then each remaining byte is tried as ``0x00``/``'0'`` (fewer distinct
bytes: as afl-tmin's alphabet pass) without changing the size. Pure: the predicate runs the
target; the deadline (time.monotonic) bounds the work and the best input so far is returned.
"""

from __future__ import annotations

import time
from typing import Callable


class _Out(Exception):
    pass


def minimize(data: bytes, still_fails: Callable[[bytes], bool], deadline: float,
             clock: Callable[[], float] = time.monotonic) -> tuple[bytes, int]:
    """(the smallest input found, predicate calls made)."""
    calls = 0
    seen: dict[bytes, bool] = {data: True}

    def test(candidate: bytes) -> bool:
        nonlocal calls
        if candidate in seen:
            return seen[candidate]
        if clock() >= deadline:
            raise _Out()
        calls += 1
        ok = bool(still_fails(candidate))
        seen[candidate] = ok
        return ok

    best = data
    try:
        # 1. the shortest failing prefix (binary search; only kept if it fails)
        lo, hi = 1, len(best)
        while lo < hi:
            mid = (lo + hi) // 2
            if test(best[:mid]):
                hi = mid
            else:
                lo = mid + 1
        if hi < len(best) and test(best[:hi]):
            best = best[:hi]
        # 2. ddmin chunk removal until a pass removes nothing
        changed = True
        while changed and len(best) > 1:
            changed = False
            chunk = max(len(best) // 2, 1)
            while chunk >= 1:
                i = 0
                while i < len(best) and len(best) > 1:
                    candidate = best[:i] + best[i + chunk:]
                    if candidate and test(candidate):
                        best, changed = candidate, True
                    else:
                        i += chunk
                chunk //= 2
        # 3. normalise bytes (same size, fewer distinct values)
        for i in range(len(best)):
            for b in (0x30, 0x00):
                if best[i] != b:
                    candidate = best[:i] + bytes([b]) + best[i + 1:]
                    if test(candidate):
                        best = candidate
                        break
    except _Out:
        pass
    return best, calls
