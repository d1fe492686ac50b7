"""Crash and hang claims: a finding is saved only after a re-run (on another rank where there is one) agrees.

A worker's result may claim that its input, or a candidate it produced, crashes or hangs the
target. Nothing the claiming rank says is saved on its word: the input becomes a *confirmation
task* (the same executor and target, with a generational bound so high that no candidates are
produced: a plain re-execution), dispatched first and, where another rank is alive, never to
the claimer. When the re-run ends with the same kind (crash or hang) the finding is saved with
the re-run's own detail and both ranks recorded; otherwise the claim is counted unconfirmed, and
the first claim of each identity (at most MAX_UNCONFIRMED_SAVED in a run) is kept in
unconfirmed/ for the user: a crash that needs the state earlier inputs left in the process (a
cache, a global registry) does not reproduce alone, and Atheris alone would have reported it.

Confirmation tasks are dispatched and fenced like any work (token, in-flight map, deadline) but
are not journal work items: a claim still pending when the coordinator is killed is lost, and
the result that made it stays committed (the input is re-found only if the search reaches it
again).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from symfence.coordinator.effects import Effect, SaveUnconfirmed
from symfence.coordinator.journal import FindingKind, NewFinding
from symfence.coordinator.outputs import finding_class
from symfence.coordinator.scheduler import Scheduler, WorkItem, WorkKind
from symfence.coordinator.verdict import Rejection
from symfence.protocol.coverage import unpack_trace
from symfence.protocol.ids import Rank, WorkId, work_id_for
from symfence.protocol.messages import RERUN_BOUND, Result, Status

if TYPE_CHECKING:
    from collections.abc import Callable

    from symfence.coordinator.afl import AflState
    from symfence.coordinator.hybrid import HybridPlan
    from symfence.coordinator.journal import Journal
    from symfence.coordinator.peers import Peers
    from symfence.coordinator.sharedwork import SharedWork
    from symfence.coordinator.stats import Stats
    from symfence.coordinator.targets import TargetTracker
    from symfence.coordinator.triage import Triage


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


MAX_UNCONFIRMED_SAVED = 64  # files in unconfirmed/ per run: what a flood of false claims can cost


class Confirmations:
    def __init__(self, executor: str, options: dict[str, Any]) -> None:
        self.executor = executor
        self.options = options
        self.pending: dict[WorkId, Claim] = {}
        self.queue = Scheduler()  # re-runs waiting for a rank: served before any other work
        self.confirmed = 0
        self.unconfirmed = 0
        self.abandoned = 0  # their re-run never finished (attempts used up, or the campaign ended)
        self.unconfirmed_kept: set[tuple[str, str, str]] = set()  # (kind, target, identity) in unconfirmed/

    def keep_unconfirmed(self, claim: Claim, identity: str) -> int | None:
        """The number of the unconfirmed/ file for this claim, or None: one per identity, at most
        MAX_UNCONFIRMED_SAVED."""
        key = (claim.kind.value, claim.target, identity or claim.sha256)
        if key in self.unconfirmed_kept or len(self.unconfirmed_kept) >= MAX_UNCONFIRMED_SAVED:
            return None
        self.unconfirmed_kept.add(key)
        return len(self.unconfirmed_kept) - 1  # numbered from 0, as findings are

    def task_for(self, claim: Claim) -> WorkItem:
        wid = work_id_for(self.executor, claim.target, claim.sha256, RERUN_BOUND, self.options)
        return WorkItem(wid, claim.data, claim.sha256, claim.target, RERUN_BOUND,
                        avoid=frozenset({claim.source}), kind=WorkKind.CONFIRMATION)

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


class ClaimsMixin:
    """The core's claims (coordinator/core.py): file a result's crash/hang claims, journal a finding
    when its re-run agrees (state: claims, triage, peers, journal); it logs through effects."""

    # What it uses of the core, declared: bare annotations and TYPE_CHECKING-only stubs shadow nothing.
    claims: Confirmations
    triage: Triage
    peers: Peers
    journal: Journal
    stats: Stats
    plan: HybridPlan
    targets: TargetTracker
    afl: AflState
    shared: SharedWork | None
    workers: list[Rank]
    tmouts: int
    _out: list[Effect]
    _maybe_free: set[Rank]
    wall: Callable[[], float]

    if TYPE_CHECKING:
        def _log(self, level: str, event: str, **fields: Any) -> None: ...
        def _garbage(self, source: Rank, size: int = 0) -> None: ...

    def _claim(self, kind: Status, data: bytes, sha: str, detail: str, item: WorkItem, source: Rank,
               found_s: float) -> None:
        """A crash/hang the result claims: saved only once a re-run agrees (confirm.py)."""
        if kind is Status.CRASH:
            self.stats.crashes_total += 1
            ident = self.triage.identity(detail, item.target)  # frameless (native): known after its re-run
            if ident.has_frames and self.triage.is_known(item.target, ident):
                self.stats.triage_rejected[Rejection.KNOWN_CRASH.value] += 1
                return
        if kind is Status.HANG:
            self.tmouts += 1
            ident = self.triage.identity(detail, item.target, kind="hang")  # a stack: known before its re-run
            if ident.has_frames and self.triage.is_known(item.target, ident):
                self.stats.triage_rejected[Rejection.KNOWN_HANG.value] += 1
                return
        if not self.peers.claim(source):
            self.stats.triage_rejected[Rejection.CLAIMS_BACKLOG.value] += 1
            return
        claim = Claim(kind, data, sha, detail, item.target, source, item.work_id, found_s,
                      self.plan.stage_of(item))
        task = self.claims.task_for(claim)
        if not self.claims.queue.add(task):  # the same input is already claimed (or re-run)
            self.peers.claim_done(source)
            self.stats.triage_rejected[Rejection.DUPLICATE_CLAIM.value] += 1
            return
        self.claims.add(claim, task)
        self._maybe_free.update(r for r in self.workers if r != source)  # its re-run may go beyond a depth

    def _confirmed(self, source: Rank, item: WorkItem, result: Result) -> None:
        """The re-run of a claimed crash/hang came back: save the finding if it agrees."""
        claim = self.claims.take(item.work_id)
        if claim is None:
            return
        self.peers.claim_done(claim.source)
        if not self.claims.agrees(claim, result.status):
            self.claims.unconfirmed += 1
            self._log("warning", "finding.unconfirmed", kind=claim.kind.value, claimed_by=claim.source,
                        rerun_by=source, rerun_status=result.status.value, target=claim.target,
                        sha256=claim.sha256[:16])
            self._garbage(claim.source)
            ident = self.triage.identity(claim.detail, claim.target, kind=claim.kind.value)
            number = self.claims.keep_unconfirmed(claim, ident.key)
            if number is not None:
                self._out.append(SaveUnconfirmed(number, claim.kind.value, claim.data, claim.detail, claim.target,
                                                 claim.source, source, result.status.value))
            return
        detail = result.error or claim.detail  # the re-running rank's own account
        if claim.kind is Status.CRASH:
            ident = self.triage.identity(detail, claim.target, self._trace_edges(result.trace))
            if self.triage.is_known(claim.target, ident):
                self.stats.triage_rejected[Rejection.KNOWN_CRASH.value] += 1
                return
            self.triage.remember(claim.target, ident)
        else:  # a hang: one loop reached by many inputs is one hang (when its stack is known)
            ident = self.triage.identity(detail, claim.target, kind="hang")
            if ident.has_frames:
                if self.triage.is_known(claim.target, ident):
                    self.stats.triage_rejected[Rejection.KNOWN_HANG.value] += 1
                    return
                self.triage.remember(claim.target, ident)
        if self.shared is not None and not self.shared.new_finding(
                claim.kind.value, claim.target, ident.key or claim.sha256, claim.data, detail, claim.parent_work_id):
            self.stats.triage_rejected[(Rejection.KNOWN_CRASH if claim.kind is Status.CRASH
                                        else Rejection.KNOWN_HANG).value] += 1
            return  # another coordinator of the campaign saved this identity first
        self.claims.confirmed += 1
        finding = NewFinding(kind=FindingKind(claim.kind.value), sha256=claim.sha256, data=claim.data,
                             detail=detail, found_s=claim.found_s, target=claim.target)
        now = self.wall()
        for f in self.journal.add_findings(claim.parent_work_id, [finding]):
            self.journal.note_provenance(f.kind.value, f.finding_id, claim.source, source)
            self.triage.saved(f, ident, claim.stage.value if claim.stage is not None else "")
            progress, fig = self.targets[claim.target], self.plan.figures[claim.stage]
            if f.kind.value == "crash":
                self.afl.crash(now, self.stats.execs)
                progress.crashes += 1
                fig.crashes += 1
            else:
                self.afl.hang(now)
                progress.hangs += 1
                fig.hangs += 1
            self._log("warning", f"finding.{finding_class(f.kind.value, f.detail).value}", finding_id=f.finding_id,
                        target=claim.target,
                        identity=ident.key,
                        found_s=round(claim.found_s, 2), worker=claim.source, confirmed_by=source)

    @staticmethod
    def _trace_edges(packed: bytes) -> list[int] | None:
        """The edges of a packed trace (a frameless crash's identity), None if it has none."""
        try:
            return list(unpack_trace(packed)) if packed else None
        except ValueError:
            return None
