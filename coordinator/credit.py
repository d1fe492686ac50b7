"""Which stage an edge's first find is credited to, when both stages reached it in the same window.

An engine task answers in about a second; a fuzz turn answers at its end, every `fuzz.slice_s`
seconds, with the inputs it kept meanwhile. So an edge the fuzz stage reached three seconds into
its turn was credited to the engine if an engine task that reached it too was committed before
the turn ended: the engine's rate of first-found edges, which the auto share follows
(hybrid.py), counted edges the fuzz stage found on its own (on email-validator and toml the
engine had over half of the first-found edges and the hybrid no more lines than Atheris alone).

`EngineFinds` remembers, for a while, when the engine was credited with each edge. A fuzz turn's
commit gives back to the fuzz stage every edge of its traces that the engine was credited with
after the turn began: the fuzz stage reached it within the same turn, with or without the engine,
so the engine's find added nothing the fuzz stage did not have. What the engine keeps is what
the fuzz stage beside it did not reach in the same time. Pure: no clock of its own.
"""

from __future__ import annotations

from collections.abc import Iterable


class EngineFinds:
    """Edge -> when the engine was credited with finding it first, for `horizon_s` seconds."""

    def __init__(self, horizon_s: float) -> None:
        self.horizon_s = horizon_s
        self._at: dict[int, float] = {}  # insertion order is time order: the oldest first

    def __len__(self) -> int:
        return len(self._at)

    def found(self, edges: Iterable[int], now: float) -> None:
        """The engine was credited with these never-seen edges at `now`."""
        at = self._at
        for edge in edges:
            at[edge] = now
        cutoff = now - self.horizon_s
        while at:
            oldest = next(iter(at))
            if at[oldest] >= cutoff:
                break
            del at[oldest]

    def reclaim(self, trace: Iterable[int], since: float) -> int:
        """A fuzz turn that began at `since` reached the edges of `trace`: forget, and count, those
        the engine was credited with at `since` or later (their credit goes to the fuzz stage)."""
        at = self._at
        if not at:
            return 0
        n = 0
        for edge in trace:
            t = at.get(edge)
            if t is not None and t >= since:
                del at[edge]
                n += 1
        return n
