"""The scheduler queue: which pending work item to dispatch next, each work_id at most once."""

from __future__ import annotations

import enum
import heapq
import itertools
from dataclasses import dataclass
from typing import Any, Callable, Iterable

from symfence.coordinator.engines import TIERS
from symfence.protocol.ids import WorkId


class WorkKind(enum.Enum):
    """What a work item asks a worker to do; each kind has one handler (coordinator/workkinds.py)."""

    CORPUS = "corpus"  # run a corpus entry with the corpus stage's executor (a journal work item)
    FUZZ_SLICE = "fuzz"  # one transient Atheris slice (coordinator/hybrid.py)
    CONFIRMATION = "confirm"  # re-run a claimed crash/hang (coordinator/confirm.py)
    MINIMIZATION = "minimize"  # shrink a saved crash/hang (coordinator/triage.py)

    # Members are singletons compared by identity: hash them so too (Enum's own __hash__ is a
    # Python-level call, and the hot path looks a kind up in workkinds.KINDS per dispatch/result).
    __hash__ = object.__hash__


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
    avoid: frozenset[int] = frozenset()  # ranks whose dispatch of it expired or was lost
    kind: WorkKind = WorkKind.CORPUS
    continued: int = 0  # times its task was cut short and handed back the rest (workkinds.continuation)

    @property
    def stage(self) -> str:
        """The stage executor a transient slice names ("fuzz"); "" for every other kind."""
        return "fuzz" if self.kind is WorkKind.FUZZ_SLICE else ""

    @classmethod
    def from_record(cls, rec: Any) -> WorkItem:
        """From a journal corpus entry or pending-work view (both name their input's origin)."""
        return cls(rec.work_id, rec.data, rec.sha256, rec.target, rec.bound, rec.queue_id, rec.new_bits,
                   rec.origin == "seed", getattr(rec, "attempts", 0), rec.origin)


class Scheduler:
    """Retries first, then seeds, then the fuzzer's finds (as SymCC takes AFL's queue first),
    then inputs that found new coverage, then shallower bound, then smaller; native mutation
    slices' finds last (bound 0, often new only by a hit count: ahead of the engine's own deeper
    children they stalled its generational search, e.g. tlv's depth bug past 300 s).

    `add` refuses a work_id it has seen before (work is never run twice); `requeue` puts back
    an item whose dispatch was revoked (or that a resumed campaign found pending).
    """

    def __init__(self) -> None:
        self._heap: list[tuple[tuple[int, int, int, int, int], WorkItem]] = []
        self._seq = itertools.count()
        self.known: set[WorkId] = set()
        self._views: dict[int, RankView] = {}

    @staticmethod
    def _key(item: WorkItem, seq: int) -> tuple[int, int, int, int, int]:
        if item.attempts or item.kind is WorkKind.CONFIRMATION:
            tier = -1
        else:
            tier = 0 if item.seed else TIERS.get(item.origin, 2)  # the finding engine's (engines.py)
        return (tier, -item.new_bits, item.bound, len(item.data), seq)

    def add(self, item: WorkItem) -> bool:
        if item.work_id in self.known:
            return False
        self.known.add(item.work_id)
        heapq.heappush(self._heap, (self._key(item, next(self._seq)), item))
        return True

    def extend(self, items: Iterable[WorkItem]) -> int:
        """`add` for many items (seeding): one heapify instead of a push each. Returns how many
        were new."""
        heap, known, seq, key = self._heap, self.known, self._seq, self._key
        before = len(heap)
        for item in items:
            if item.work_id not in known:
                known.add(item.work_id)
                heap.append((key(item, next(seq)), item))
        heapq.heapify(heap)
        return len(heap) - before

    def requeue(self, item: WorkItem) -> None:
        heapq.heappush(self._heap, (self._key(item, next(self._seq)), item))

    def pop(self) -> WorkItem | None:
        return heapq.heappop(self._heap)[1] if self._heap else None

    def queued_ids(self) -> set[WorkId]:
        """The work ids the queue holds now (a scan)."""
        return {entry[1].work_id for entry in self._heap}

    def for_rank(self, rank: int, elsewhere: Callable[[WorkItem], bool]) -> RankView:
        """The scheduler as `rank` sees it (kept per rank: the dispatch path asks on every turn)."""
        view = self._views.get(rank)
        if view is None or view.elsewhere is not elsewhere:
            view = self._views[rank] = RankView(self, rank, elsewhere)
        return view

    def pop_for(self, rank: int, elsewhere: Callable[[WorkItem], bool], scan: int = 64) -> WorkItem | None:
        """The best item for `rank`: an item that already failed there is passed over (up to
        `scan` of them) while `elsewhere(item)` says another rank could take it."""
        heap = self._heap
        if heap and rank not in heap[0][1].avoid:  # the common case: the best item is fine here
            return heapq.heappop(heap)[1]
        skipped: list[tuple[tuple[int, int, int, int, int], WorkItem]] = []
        found = None
        while self._heap and len(skipped) < scan:
            entry = heapq.heappop(self._heap)
            if rank in entry[1].avoid and elsewhere(entry[1]):
                skipped.append(entry)
                continue
            found = entry[1]
            break
        for entry in skipped:
            heapq.heappush(self._heap, entry)
        return found

    def __len__(self) -> int:
        return len(self._heap)


class RankView:
    """The scheduler as one rank sees it (`pop`, `len`): items that failed there are passed
    over while another rank could take them."""

    def __init__(self, scheduler: Scheduler, rank: int, elsewhere: Callable[[WorkItem], bool]) -> None:
        self.scheduler = scheduler
        self.rank = rank
        self.elsewhere = elsewhere

    def pop(self) -> WorkItem | None:
        return self.scheduler.pop_for(self.rank, self.elsewhere)

    def __len__(self) -> int:
        return len(self.scheduler)
