"""Campaign counters saved in the journal and carried over by `--resume`.

Each group commit saves these counters in the same transaction as the work states, so after a
kill they describe exactly the durable state. A resumed run starts from them: `fuzzer_stats`
and the summary count the whole campaign, not only the last run. Dispatches that were in
flight at the last save were voided by the restart (their work is pending again, uncharged);
they are counted as `voided` so the conservation equation still holds across runs.
"""

from __future__ import annotations

from typing import Mapping

from symfence.coordinator.stats import Stats
from symfence.protocol.reasons import QUARANTINE_REASONS, QuarantineCounters

# execs and crash totals are carried by afl.AflState (its `afl_*` counters), not here.
_PLAIN = ("dispatched", "results_received", "committed", "expired", "cancelled", "lost", "voided",
          "refused", "work_failed", "control_rejected", "journal_fence_rejected", "continued",
          "continuations_dropped")
_STATUS = "status_"
_QUARANTINED = "quarantined_"
_TRIAGE = "triage_rejected_"


def saved_counters(stats: Stats) -> dict[str, int]:
    """What the journal keeps of `stats` (integers only)."""
    out = {name: int(getattr(stats, name)) for name in _PLAIN}
    out.update({f"{_QUARANTINED}{k}": v for k, v in stats.quarantine.snapshot().items()})
    out.update({f"{_STATUS}{k}": int(v) for k, v in stats.status_counts.items()})
    out.update({f"{_TRIAGE}{k}": int(v) for k, v in stats.triage_rejected.items()})
    return out


def restore(stats: Stats, saved: Mapping[str, int]) -> int:
    """Start `stats` from a previous run's saved counters; returns how many dispatches the
    restart voided (in flight at the last save)."""
    if not saved:
        return 0
    for name in _PLAIN:
        setattr(stats, name, int(saved.get(name, 0)))
    known = {r.value for r in QUARANTINE_REASONS}
    quarantined = {}
    for key, value in saved.items():
        if key.startswith(_QUARANTINED) and key[len(_QUARANTINED):] in known:
            quarantined[key[len(_QUARANTINED):]] = int(value)
        elif key.startswith(_STATUS):
            stats.status_counts[key[len(_STATUS):]] = int(value)
        elif key.startswith(_TRIAGE):
            stats.triage_rejected[key[len(_TRIAGE):]] = int(value)
    stats.quarantine = QuarantineCounters(quarantined)
    stats.carried_committed = stats.committed
    in_flight = stats.dispatched - (stats.committed + stats.expired + stats.cancelled + stats.lost
                                    + stats.voided + stats.refused)
    voided = max(in_flight, 0)
    stats.voided += voided
    return voided
