"""One handler per work kind: what its WORK runs, what its committed result does, what a revocation does.

The table `KINDS` (kind -> handler) is the only place the kinds differ; the core's dispatch,
commit and revocation (coordinator/core.py) ask it and never test a kind themselves:

- `CORPUS` (journal-leased): runs the corpus stage's executor; its result is judged by the
  verdict and committed (map, corpus, journal); revoked, it is requeued, or failed after
  `dispatch.max_attempts`. A result cut short (``Result.resume_at``: a re-run waited on its
  worker, or the drain) commits what it found and hands the item back, pending, to run again
  from the first branch it did not try (`continuation`).
- `FUZZ_SLICE`: runs `fuzz` with its budget cut to what is left; its result is judged and
  committed like a corpus entry's and acknowledges the spec it carried; revoked, it is dropped
  (the next slice starts afresh).
- `CONFIRMATION`: a plain re-run with the corpus stage's executor; its result saves the claimed
  finding or counts it unconfirmed; revoked, it is requeued, or the claim is abandoned.
- `MINIMIZATION`: runs `minimize` over the corpus executor; the smaller input it returns is
  kept; revoked, it is requeued, or left for the next `--resume`.

Transient kinds are fenced by token like any work but are not journal work items.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from symfence.coordinator import triage as triage_mod
from symfence.coordinator.effects import Minimized
from symfence.coordinator.inflight import Revocation
from symfence.coordinator.scheduler import WorkItem, WorkKind
from symfence.protocol.ids import DispatchToken, Rank
from symfence.protocol.messages import Result, Status

if TYPE_CHECKING:
    from symfence.coordinator.core import Core

MAX_CONTINUATIONS = 16  # cut-short runs of one item handed back; past it the item is done as it stands
CONTINUED_REASON = "continued: its task was cut short"


def continuation(item: WorkItem, result: Result, shared: bool) -> int | None:
    """The bound to run `item` again with when its (current, OK) result was cut short, else None.

    Not in a shared campaign (the store's item is done with its commit; counted, a limit), not
    past `MAX_CONTINUATIONS` (a rank that cuts forever cannot keep the work from ending), and
    never below the item's own bound (the branches before it were another item's to try)."""
    if result.resume_at is None or result.status is not Status.OK or shared:
        return None
    if item.continued >= MAX_CONTINUATIONS:
        return None
    return max(result.resume_at, item.bound)


class KindHandler:
    """The corpus-entry kind; the other kinds override what differs."""

    kind = WorkKind.CORPUS
    leased = True  # a journal work item: leased at dispatch, committed compare-and-set by token
    judged = True  # its result goes through verdict.triage() and the core's commit (core.py, then `record`)
    plain = True  # its WORK runs the corpus executor with the campaign's options (`work` is not asked)

    def work(self, c: Core, item: WorkItem, now: float) -> tuple[str, dict[str, Any]]:
        """(executor, options) of the item's WORK."""
        return c.corpus_executor, c.options

    def committed(self, c: Core, source: Rank, item: WorkItem, result: Result, execs: int,
                  wall_s: float, now: float) -> int:
        """The current result of a kind that is not `judged`, after the common bookkeeping;
        returns the sender's penalty points."""
        raise NotImplementedError

    def record(self, c: Core, item: WorkItem, result: Result, entries: list) -> Any:
        """Journal the result and its new entries; None when the journal's own fence refuses it.
        A result cut short leaves its item pending, to run again from where it stopped."""
        c.plan.engine_ended(item.work_id)  # its time is in the stage's busy seconds from now on
        bound = continuation(item, result, c.shared is not None)
        if bound is None:
            if result.resume_at is not None:
                c.stats.continuations_dropped += 1
            return c.journal.commit(item.work_id, result.token, status=result.status, new_entries=entries)
        if not c.journal.requeue(item.work_id, result.token, CONTINUED_REASON, charge=False):
            return None  # the journal's fence: its lease is not this token's
        receipt = c.journal.record_transient(item.work_id, new_entries=entries)
        c.scheduler.requeue(replace(item, bound=bound, continued=item.continued + 1))
        c.stats.continued += 1
        return receipt

    def revoked(self, c: Core, token: DispatchToken, item: WorkItem, why: Revocation, charge: bool,
                attempts: int, avoid: frozenset[int], exhausted: bool) -> None:
        """Its dispatch was revoked (`exhausted`: charged and out of attempts)."""
        c.plan.engine_ended(item.work_id)
        if exhausted:
            c.journal.fail(item.work_id, token, f"{why.value} after {attempts} attempts")
            c.stats.work_failed += 1
            c._log("error", "task.failed", work_id=item.work_id[:16], attempts=attempts, reason=why.value)
        else:
            c.journal.requeue(item.work_id, token, why.value, charge=charge)
            if why is not Revocation.CANCELLED:
                c.scheduler.requeue(replace(item, attempts=attempts, avoid=avoid))


class FuzzSliceKind(KindHandler):
    kind = WorkKind.FUZZ_SLICE
    leased = False
    plain = False

    def work(self, c: Core, item: WorkItem, now: float) -> tuple[str, dict[str, Any]]:
        duration = c.cfg["campaign.duration_s"]  # a slice ends with the budget, not after it
        # The plan's mutation stage names the executor: "fuzz" (Atheris) or "native_fuzz".
        return c.plan.fuzz_stage.value, c.plan.slice_options(duration - (now - c._t0) if duration else None)

    def record(self, c: Core, item: WorkItem, result: Result, entries: list) -> Any:
        c.plan.slice_ended(item, committed=True)
        return c.journal.record_transient(item.work_id, new_entries=entries)

    def revoked(self, c: Core, token: DispatchToken, item: WorkItem, why: Revocation, charge: bool,
                attempts: int, avoid: frozenset[int], exhausted: bool) -> None:
        c.plan.slice_ended(item, committed=False)  # not redone: the next slice starts afresh


class ConfirmationKind(KindHandler):
    kind = WorkKind.CONFIRMATION
    leased = False
    judged = False

    def committed(self, c: Core, source: Rank, item: WorkItem, result: Result, execs: int,
                  wall_s: float, now: float) -> int:
        c._confirmed(source, item, result)
        return 0

    def revoked(self, c: Core, token: DispatchToken, item: WorkItem, why: Revocation, charge: bool,
                attempts: int, avoid: frozenset[int], exhausted: bool) -> None:
        if why is Revocation.CANCELLED or exhausted:
            claim = c.claims.take(item.work_id)
            if claim is not None:
                c.claims.abandoned += 1
                c.peers.claim_done(claim.source)
        else:
            c.claims.queue.requeue(replace(item, attempts=attempts, avoid=avoid))


class MinimizationKind(KindHandler):
    kind = WorkKind.MINIMIZATION
    leased = False
    judged = False
    plain = False

    def work(self, c: Core, item: WorkItem, now: float) -> tuple[str, dict[str, Any]]:
        left = c._duration_s - (now - c._t0) if c._duration_s else None  # it ends with the budget
        return triage_mod.EXECUTOR, c.triage.options_for(item, left)

    def committed(self, c: Core, source: Rank, item: WorkItem, result: Result, execs: int,
                  wall_s: float, now: float) -> int:
        c._out.append(Minimized(item, result, source, now - c._t0))  # the shell keeps its file (triage.py)
        return 0

    def revoked(self, c: Core, token: DispatchToken, item: WorkItem, why: Revocation, charge: bool,
                attempts: int, avoid: frozenset[int], exhausted: bool) -> None:
        c.triage.revoked(item, attempts=attempts, avoid=avoid,
                         give_up=why is Revocation.CANCELLED or exhausted)


KINDS: dict[WorkKind, KindHandler] = {h.kind: h for h in (KindHandler(), FuzzSliceKind(), ConfirmationKind(),
                                                           MinimizationKind())}
assert set(KINDS) == set(WorkKind), "every work kind has a handler"
