"""Results refused from not-banned ranks for reasons an honest worker never causes: a bug, said loudly.

An honest worker's sender keeps the wire's rules (worker/sender.py), answers with the token and
work id it was sent and speaks our protocol version, so a `malformed`, `incompatible` or
`mismatched` result from a rank that is not banned is a bug in symfence, not bad luck. Per rank
and reason this keeps how many and the first detail; the first of each is logged once
(`worker.results_refused`, on the console) and shown in the live view at once; the summary
says how many and why and what to send us; and when more than `limits.max_refused_share` of a
rank's results was refused that way the campaign exits with status 5 (failure.ExitCode.REFUSED).

A rank that ends up banned is judged hostile, as before (peers.py), not reported here. With
`[faults]` enabled the injector's own bad frames are expected: each rank's STOP_ACK counts
them, and they are subtracted before a rank is judged (a rank that never acknowledged is not
judged then). The `buggy_result` fault is the exception: it stands for a bug and is reported.
"""

from __future__ import annotations

import collections
from dataclasses import dataclass, field
from typing import Iterable, Mapping

from symfence.protocol.ids import Rank
from symfence.protocol.reasons import Reason

# The reasons no honest worker causes (the others follow from timing: late, lost, cancelled).
HONEST_NEVER = (Reason.MALFORMED, Reason.INCOMPATIBLE, Reason.MISMATCHED)
# Fault kinds (worker/faults.py) whose frames the fence must refuse for one of HONEST_NEVER: when
# faults are enabled they are subtracted. `buggy_result` is not here: it stands for a bug.
INJECTED = {"malformed_token": Reason.MALFORMED, "non_map": Reason.MALFORMED, "oversized": Reason.MALFORMED,
            "wrong_version": Reason.INCOMPATIBLE}
SEND_US = ("this is a bug in symfence, please send us {out}/logs/ (coordinator.jsonl and"
           " worker-{rank}.jsonl), {out}/campaign.json and `symfence --version`")


@dataclass
class _Rank:
    received: int = 0
    refused: collections.Counter[Reason] = field(default_factory=collections.Counter)
    first: dict[Reason, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Judged:
    rank: Rank
    refused: int  # after subtracting injected faults
    received: int
    reasons: tuple[tuple[str, int, str], ...]  # (reason, count, first detail)

    @property
    def share(self) -> float:
        return self.refused / max(self.received, 1)


class Refusals:
    def __init__(self, max_share: float, faults_enabled: bool) -> None:
        self.max_share = max_share
        self.faults_enabled = faults_enabled
        self._ranks: dict[Rank, _Rank] = {}

    def _of(self, rank: Rank) -> _Rank:
        r = self._ranks.get(rank)
        if r is None:
            r = self._ranks[rank] = _Rank()
        return r

    def received(self, rank: Rank) -> None:
        """One RESULT frame from the rank (every one, whatever its verdict)."""
        r = self._ranks.get(rank)
        if r is None:
            r = self._of(rank)
        r.received += 1

    def refused(self, rank: Rank, reason: Reason, detail: str) -> bool:
        """Count a refusal of a not-banned rank's result; True if it is the first for (rank, reason)."""
        if reason not in HONEST_NEVER:
            return False
        r = self._of(rank)
        r.refused[reason] += 1
        if reason in r.first:
            return False
        r.first[reason] = detail[:300]
        return True

    def live_text(self) -> str:
        """The live view's line while the run goes on ("" when nothing was refused that way)."""
        if self.faults_enabled or not any(r.refused for r in self._ranks.values()):
            return ""
        parts = []
        for rank, r in sorted(self._ranks.items()):
            if r.refused:
                reason, _ = r.refused.most_common(1)[0]
                parts.append(f"rank {rank}: {sum(r.refused.values())} of {r.received} {reason.value}"
                             f" ({r.first[reason][:120]})")
        return "REFUSED honest results (a bug in symfence): " + "; ".join(parts)

    def judge(self, banned: Iterable[Rank],
              injected: Mapping[Rank, Mapping[str, int]] | None) -> list[Judged]:
        """Every not-banned rank with results refused for a reason no honest worker causes, with
        injected faults subtracted (`injected`: per rank, its STOP_ACK's fault counts)."""
        out = []
        banned = set(banned)
        for rank, r in sorted(self._ranks.items()):
            if rank in banned or not r.refused:
                continue
            counts = collections.Counter(r.refused)
            if self.faults_enabled:
                faults = (injected or {}).get(rank)
                if faults is None:
                    continue  # cannot tell injected from genuine without its count
                for kind, reason in INJECTED.items():
                    counts[reason] -= min(counts[reason], int(faults.get(kind, 0)))
            total = sum(counts.values())
            if total:
                reasons = tuple((reason.value, n, r.first[reason]) for reason, n in counts.most_common() if n)
                out.append(Judged(rank, total, r.received, reasons))
        return out

    def over_share(self, judged: list[Judged]) -> list[Judged]:
        return [j for j in judged if j.share > self.max_share]

    def summary_lines(self, judged: list[Judged], out: str) -> list[str]:
        lines = []
        for j in judged:
            why = "; ".join(f"{n} {reason} (first: {detail})" for reason, n, detail in j.reasons)
            over = " (over limits.max_refused_share)" if j.share > self.max_share else ""
            lines.append(f"  REFUSED {j.refused} of {j.received} results ({100 * j.share:.1f}%) from rank"
                         f" {j.rank}, which is not banned{over}: {why}")
            lines.append("    " + SEND_US.format(out=out, rank=j.rank))
        return lines

    def stats_items(self) -> dict[str, int]:
        return {f"refused_honest_rank_{rank}": sum(r.refused.values())
                for rank, r in sorted(self._ranks.items()) if r.refused}
