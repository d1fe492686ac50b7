"""Crash and hang claims: a finding is saved only after a re-run (on another rank where there is one) agrees.

A worker's result may claim that its input, or a candidate it produced, crashes or hangs the
target. Nothing the claiming rank says is saved on its word: the input becomes a *confirmation
task* (the same executor and target, with a generational bound so high that no candidates are
produced: a plain re-execution), dispatched first and, where another rank is alive, never to
the claimer. When the re-run ends with the same kind (crash or hang) the finding is saved with
the re-run's own detail and both ranks recorded; otherwise the claim is counted unconfirmed.

Confirmation tasks are dispatched and fenced like any work (token, in-flight map, deadline) but
are not journal work items: a claim still pending when the coordinator is killed is lost, and
the result that made it stays committed (the input is re-found only if the search reaches it
again).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from symfence.coordinator.scheduler import Scheduler, WorkItem
from symfence.protocol.ids import Rank, WorkId, work_id_for
from symfence.protocol.messages import Status

CONFIRM_BOUND = 1 << 31  # beyond any branch count: the engine re-executes and negates nothing


@dataclass(frozen=True)
class Claim:
    kind: Status  # CRASH or HANG
    data: bytes
    sha256: str
    detail: str
    target: str
    source: Rank  # the rank that claimed it
    parent_work_id: WorkId  # the committed work whose result claimed it
    found_s: float
    stage: Any = None  # the stage (hybrid.Stage) whose result claimed it, for per-stage figures


class Confirmations:
    def __init__(self, executor: str, options: dict[str, Any]) -> None:
        self.executor = executor
        self.options = options
        self.pending: dict[WorkId, Claim] = {}
        self.queue = Scheduler()  # re-runs waiting for a rank: served before any other work
        self.confirmed = 0
        self.unconfirmed = 0
        self.abandoned = 0  # their re-run never finished (attempts used up, or the campaign ended)

    def task_for(self, claim: Claim) -> WorkItem:
        wid = work_id_for(self.executor, claim.target, claim.sha256, CONFIRM_BOUND, self.options)
        return WorkItem(wid, claim.data, claim.sha256, claim.target, CONFIRM_BOUND,
                        avoid=frozenset({claim.source}), confirm=True)

    def add(self, claim: Claim, item: WorkItem) -> None:
        self.pending[item.work_id] = claim

    def take(self, work_id: WorkId) -> Claim | None:
        return self.pending.pop(work_id, None)

    @staticmethod
    def agrees(claim: Claim, status: Status) -> bool:
        return status is claim.kind

    def stats_items(self) -> dict[str, int]:
        return {"claims_confirmed": self.confirmed, "claims_unconfirmed": self.unconfirmed,
                "claims_abandoned": self.abandoned, "claims_pending": len(self.pending)}
