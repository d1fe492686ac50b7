"""Result classification reasons and the conserved per-reason counters with a stable rendering."""

from __future__ import annotations

import enum
from typing import Iterator, Mapping


class Reason(str, enum.Enum):
    """Outcome of fencing one RESULT. Members are in rendering order, not precedence order:
    `fence.classify` applies the rules in the order of docs/design.md's table, "The fence"."""

    MALFORMED = "malformed"
    INCOMPATIBLE = "incompatible"
    MISSING = "missing"
    CURRENT = "current"
    MISROUTED = "misrouted"
    DUPLICATE = "duplicate"
    EXPIRED = "expired"
    UNOWNED = "unowned"
    STALE = "stale"
    # Added later, so they render last (docs/design.md's fence table gives the precedence):
    MISMATCHED = "mismatched"  # current token, but not the work_id dispatched under it
    BANNED = "banned"  # the source rank is banned: the frame is counted, never decoded
    # Not the fence's: a current result whose commit the shared campaign store refused (its
    # lease expired, was taken over, or its coordinator's epoch is dead; coordinator/sharedwork.py).
    STALE_LEASE = "stale_lease"


# Every reason except CURRENT quarantines. This order is the stable rendering order.
QUARANTINE_REASONS: tuple[Reason, ...] = tuple(r for r in Reason if r is not Reason.CURRENT)


class QuarantineCounters:
    """Counts quarantined results per reason; every quarantine is counted exactly once."""

    def __init__(self, initial: Mapping[str, int] | None = None) -> None:
        self._counts: dict[Reason, int] = {r: 0 for r in QUARANTINE_REASONS}
        for key, value in (initial or {}).items():
            self._counts[Reason(key)] = int(value)

    def add(self, reason: Reason) -> None:
        if reason is Reason.CURRENT:
            raise ValueError("a current result is committed, not quarantined")
        self._counts[reason] += 1

    def __getitem__(self, reason: Reason) -> int:
        return self._counts[reason]

    def __iter__(self) -> Iterator[tuple[Reason, int]]:
        return iter(self._counts.items())

    @property
    def total(self) -> int:
        return sum(self._counts.values())

    def snapshot(self) -> dict[str, int]:
        return {r.value: n for r, n in self._counts.items()}

    def stats_items(self) -> list[tuple[str, int]]:
        """`quarantined_results` then one `quarantined_<reason>` per reason, stable order."""
        return [("quarantined_results", self.total)] + [
            (f"quarantined_{r.value}", n) for r, n in self._counts.items()
        ]

    def render(self) -> str:
        width = max(len(k) for k, _ in self.stats_items())
        return "\n".join(f"{k:<{width}} : {v}" for k, v in self.stats_items())
