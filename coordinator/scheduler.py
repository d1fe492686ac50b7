"""The scheduler queue: which pending work item to dispatch next, each work_id at most once."""

from __future__ import annotations

import heapq
import itertools
from dataclasses import dataclass
from typing import Any

from symfence.protocol.ids import WorkId


@dataclass(frozen=True, slots=True)
class WorkItem:
    work_id: WorkId
    data: bytes
    sha256: str
    target: str
    bound: int = 0
    queue_id: int | None = None
    new_bits: int = 0  # what the input that made this item found: 2 new edge, 1 new counts
    seed: bool = False
    attempts: int = 0
    origin: str = ""  # the stage that found the input ("seed", "concolic", "fuzz", ...)
    stage: str = ""  # "" = a corpus entry's task; "fuzz" = a transient fuzz slice (coordinator.hybrid)

    @classmethod
    def from_record(cls, rec: Any) -> WorkItem:
        """From a journal corpus entry or pending-work view (both name their input's origin)."""
        return cls(rec.work_id, rec.data, rec.sha256, rec.target, rec.bound, rec.queue_id, rec.new_bits,
                   rec.origin == "seed", getattr(rec, "attempts", 0), rec.origin)


class Scheduler:
    """Retries first, then seeds, then the fuzzer's finds (as SymCC takes AFL's queue first),
    then inputs that found new coverage, then shallower bound, then smaller.

    `add` refuses a work_id it has seen before (work is never run twice); `requeue` puts back
    an item whose dispatch was revoked (or that a resumed campaign found pending).
    """

    def __init__(self) -> None:
        self._heap: list[tuple[tuple[int, int, int, int, int], WorkItem]] = []
        self._seq = itertools.count()
        self.known: set[WorkId] = set()

    @staticmethod
    def _key(item: WorkItem, seq: int) -> tuple[int, int, int, int, int]:
        tier = -1 if item.attempts else (0 if item.seed else (1 if item.origin == "fuzz" else 2))
        return (tier, -item.new_bits, item.bound, len(item.data), seq)

    def add(self, item: WorkItem) -> bool:
        if item.work_id in self.known:
            return False
        self.known.add(item.work_id)
        heapq.heappush(self._heap, (self._key(item, next(self._seq)), item))
        return True

    def requeue(self, item: WorkItem) -> None:
        heapq.heappush(self._heap, (self._key(item, next(self._seq)), item))

    def pop(self) -> WorkItem | None:
        return heapq.heappop(self._heap)[1] if self._heap else None

    def __len__(self) -> int:
        return len(self._heap)
