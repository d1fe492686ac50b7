"""Unique crashes and their minimization: the coordinator's side of crash identity (issue 19).

A confirmed crash is saved only when its identity (``protocol.crashid``: crash type plus the top
3 frames in the code under test, else the edge path of its input) is new for its target; the
identity names the file (``sig:``), heads ``crash_details/`` and is kept in the journal's
``triage`` side table. Every saved crash and hang then becomes a *minimization task*: a work kind
beside corpus entries, fuzz slices and confirmations, dispatched and fenced like any work (token,
in-flight map, deadline) to executor ``minimize`` on a worker (``worker/executors/minimize.py``),
which returns the smallest input it found with the same identity. The minimized input is kept in
the journal (``triage.min_data``) and as ``minimized/crashes/<same name>``; findings not
minimized yet are queued again on ``--resume``.

A hang has an identity too when its detail has the stack it hung in (``crashid.identity_from_hang``:
``timeout`` and the top 3 frames active at the deadline); a hang with a known identity is not saved
again. A hang without a stack (a native target without gdb) has none and is always saved.

Resume: a saved finding keeps the name it was saved under (the identity stored in its triage row,
or for a journal from before identities the exception type), whatever the rules are now; both
that stored identity and the one the current rules give its detail count as known, so the same
bug found again is not saved again after the rules changed, and its minimization (owed) looks
for the current rules' identity, which the minimizer computes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Sequence

import structlog

from symfence.coordinator.engines import TargetKind, corpus_engine
from symfence.coordinator.outputs import OutputDir
from symfence.coordinator.scheduler import Scheduler, WorkItem, WorkKind
from symfence.protocol.crashid import CrashIdentity, code_under_test, identity_from_detail
from symfence.protocol.ids import WorkId, sha256_hex, work_id_for
from symfence.protocol.messages import Result, Status

log = structlog.get_logger()

EXECUTOR = "minimize"  # the worker's executor name for minimization tasks
OPTION_PREFIX = "minimize_"  # the task's own options, beside the base executor's


@dataclass(frozen=True)
class MinJob:
    """One finding to minimize."""

    kind: str  # "crash" or "hang"
    finding_id: int
    target: str
    data: bytes
    identity: str  # CrashIdentity.key ('' if it has none)
    name: str  # the finding's file name (the minimized file gets the same)


class Triage:
    """Known identities per target, each finding's identity, and the minimization queue."""

    def __init__(self, out: OutputDir, journal: Any, *, base_executor: str, base_options: dict[str, Any],
                 minimize: bool = True, budget_s: float = 60.0) -> None:
        self.out = out
        self.journal = journal
        self.base_executor = base_executor
        self.base_options = dict(base_options)
        spec = corpus_engine(base_executor)  # (an engine, or a mode: its corpus engine) minimizable?
        self.enabled = minimize and spec is not None and spec.minimize
        self.budget_s = budget_s
        self.known: set[tuple[str, str]] = set()  # (target, identity key)
        self.identity_of: dict[tuple[str, int], CrashIdentity] = {}  # (kind, finding id), new ones
        self.queue = Scheduler()  # minimization tasks waiting for a rank
        self.jobs: dict[WorkId, MinJob] = {}
        self.minimized = 0
        self.min_failed = 0
        self.not_reproduced = 0  # of min_failed: the original input did not reproduce (a flaky finding)
        self.cut: dict[WorkId, float] = {}  # dispatched with a budget cut to the campaign's end

    # -- identity -------------------------------------------------------------------------------

    def under_test(self, target: str) -> frozenset[str]:
        """The stdlib modules counted as this target's code under test (``crashid.code_under_test``;
        from the executor options the minimizer gets too, so both compute the same identity)."""
        return code_under_test(target, self.base_options) if self.python else frozenset()

    @property
    def python(self) -> bool:
        spec = corpus_engine(self.base_executor)
        return spec is not None and spec.target is TargetKind.PYTHON

    def identity(self, detail: str, target: str, trace: Iterable[int] | None = None, *,
                 kind: str = "crash") -> CrashIdentity:
        """A crash's (``kind="hang"``: a hang's) identity from the confirming rank's detail."""
        return identity_from_detail(detail, target, trace, self.under_test(target), kind=kind)

    def is_known(self, target: str, ident: CrashIdentity) -> bool:
        return (target, ident.key) in self.known

    def remember(self, target: str, ident: CrashIdentity) -> None:
        self.known.add((target, ident.key))

    def sig_of(self, kind: str, finding_id: int) -> tuple[str | None, str | None]:
        """(identity key, sig) of a finding saved this campaign with an identity, else (None, None)."""
        ident = self.identity_of.get((kind, finding_id))
        return (ident.key, ident.sig) if ident is not None else (None, None)

    def name_of(self, f: Any) -> str:
        return self.out.finding_name(f.kind.value, f.finding_id, detail=f.detail, target=f.target,
                                     sig=self.sig_of(f.kind.value, f.finding_id)[1])

    # -- a new finding ------------------------------------------------------------------------

    def saved(self, f: Any, ident: CrashIdentity | None, stage: str) -> None:
        """A finding the journal just recorded (`f`: journal.Finding): note its identity and queue
        its minimization."""
        kind = f.kind.value
        if ident is not None and (kind == "crash" or ident.has_frames):
            self.identity_of[(kind, f.finding_id)] = ident
        stored = ident.key if ident is not None and (kind == "crash" or ident.has_frames) else ""
        self.journal.note_triage(kind, f.finding_id, identity=stored, stage=stage)
        key = ident.key if ident is not None and ident.has_frames else ""
        self._enqueue(MinJob(kind, f.finding_id, f.target, f.data, key, self.name_of(f)))

    def _enqueue(self, job: MinJob) -> None:
        if not self.enabled or len(job.data) <= 1:
            return
        item = self.task_for(job)
        if self.queue.add(item):
            self.jobs[item.work_id] = job

    def task_for(self, job: MinJob) -> WorkItem:
        sha = sha256_hex(job.data)
        named = {**self.base_options, "finding": f"{job.kind}-{job.finding_id}"}
        wid = work_id_for(EXECUTOR, job.target, sha, 0, named)
        return WorkItem(wid, job.data, sha, job.target, 0, kind=WorkKind.MINIMIZATION)

    def options_for(self, item: WorkItem, budget_left_s: float | None = None) -> dict[str, Any]:
        """A minimization's options; its budget cut to what is left of the campaign's (>= 2 s), so
        it ends with the campaign, not cancelled at the stop with its work lost."""
        job = self.jobs[item.work_id]
        budget = self.budget_s
        if budget_left_s is not None and budget_left_s < budget:
            budget = self.cut[item.work_id] = max(2.0, round(budget_left_s, 1))
        else:
            self.cut.pop(item.work_id, None)
        return {**self.base_options, f"{OPTION_PREFIX}executor": self.base_executor,
                f"{OPTION_PREFIX}kind": job.kind, f"{OPTION_PREFIX}identity": job.identity,
                f"{OPTION_PREFIX}budget_s": budget}

    # -- resume ---------------------------------------------------------------------------------

    def restore(self, findings: Iterable[Any]) -> int:
        """After --resume: known identities (stored, or recomputed from an old finding's detail),
        minimized files the journal holds but the folder lacks, and minimizations still owed."""
        rows = self.journal.triage()
        written = 0
        for f in findings:
            kind = f.kind.value
            row = rows.get((kind, f.finding_id))
            key = row[0] if row else ""
            now = self.identity(f.detail, f.target, kind=kind)  # the current rules' identity
            if key:  # its name: the identity it was saved under
                self.identity_of[(kind, f.finding_id)] = CrashIdentity.from_key(key)
                self.remember(f.target, CrashIdentity.from_key(key))
            if now.has_frames or (kind == "crash" and not key):  # (a frameless one: before identities)
                self.remember(f.target, now)
            name = self.name_of(f)
            min_data = row[2] if row else None
            if min_data is not None:
                path = self.out.minimized_dir(kind) / name
                if not path.exists():
                    self.out.minimized(kind, name, min_data)
                    written += 1
            else:
                own = now.key if now.has_frames else key  # what the minimizer computes now
                self._enqueue(MinJob(kind, f.finding_id, f.target, f.data, own, name))
        return written

    # -- a minimization task's end --------------------------------------------------------------

    def done(self, item: WorkItem, result: Result, source: int, now_s: float) -> None:
        """Its result came back (fenced and current): keep the smaller input if it is one."""
        job = self.jobs.pop(item.work_id, None)
        cut_to = self.cut.pop(item.work_id, None)  # and it ran to that cut: its minimum is not final
        cut = cut_to is not None and result.cost.wall_s >= 0.9 * cut_to
        if job is None:
            return
        best = None
        for c in result.candidates:
            fits = 0 < len(c.data) <= len(job.data)
            if c.kind.value == job.kind and sha256_hex(c.data) == c.sha256 and fits:
                if best is None or len(c.data) < len(best):
                    best = c.data
        if result.status is Status.ERROR or best is None:
            self.min_failed += 1
            if result.stats.get("not_reproduced"):  # the minimizer's plain runs do not crash or hang on it
                self.not_reproduced += 1
                log.warning("finding.flaky", kind=job.kind, finding_id=job.finding_id, rank=source,
                            note="confirmed when found, but the minimizer's runs of the original input "
                                 "did not reproduce it: it depends on timing or state (kept, unminimized)")
            else:
                log.warning("finding.minimize_failed", kind=job.kind, finding_id=job.finding_id, rank=source,
                            status=result.status.value, error=result.error[-300:])
            best = job.data  # recorded as its own minimum: not retried on every --resume
        if not cut:  # one cut by the campaign's end is saved as far as it got, and owed on --resume
            self.journal.note_triage(job.kind, job.finding_id, min_data=best, min_s=now_s)
        path = self.out.minimized(job.kind, job.name, best)
        self.minimized += 1
        log.info("finding.minimized", kind=job.kind, finding_id=job.finding_id, rank=source,
                 original_bytes=len(job.data), minimized_bytes=len(best), path=str(path),
                 execs=result.cost.execs, wall_s=round(result.cost.wall_s, 2), cut_by_budget=cut)

    def revoked(self, item: WorkItem, *, give_up: bool, attempts: int, avoid: frozenset[int]) -> None:
        """Its dispatch was revoked: requeue it, or give up (the finding stays unminimized and is
        queued again on --resume)."""
        if give_up:
            self.jobs.pop(item.work_id, None)
            return
        from dataclasses import replace

        self.queue.requeue(replace(item, attempts=attempts, avoid=avoid))

    def stats_items(self) -> dict[str, int]:
        return {"minimized": self.minimized, "minimize_failed": self.min_failed,
                "minimize_not_reproduced": self.not_reproduced, "minimize_pending": len(self.jobs)}


# -- `symfence status` ---------------------------------------------------------------------------

def reproduce_command(target: str, path: str, pythonpath: Sequence[str] = ()) -> str:
    """One shell line that runs the plain target on a saved input (`pythonpath`: the campaign's
    `campaign.pythonpath`, where its targets import from)."""
    import shlex

    if ":" in target and "/" not in target.partition(":")[0]:
        module, _, fn = target.partition(":")
        code = f'import {module} as m; m.{fn}(open("{path}", "rb").read())'
        env = f"PYTHONPATH={shlex.quote(':'.join(pythonpath))} " if pythonpath else ""
        return f"{env}python -c {shlex.quote(code)}"
    return f"{shlex.quote(target)} < {shlex.quote(path)}"


def unique_crashes(journal: Any, out_root: Any, pythonpath: Sequence[str] = ()) -> list[str]:
    """`symfence status`'s unique-crash lines: identity, first found (campaign time, stage),
    original and minimized size, and the command that reproduces it."""
    from pathlib import Path

    root = Path(out_root)
    rows = journal.triage()
    lines = []
    for f in journal.iter_findings():
        kind = f.kind.value
        ident, stage, min_data, _ = rows.get((kind, f.finding_id), ("", "", None, None))
        if kind == "crash":
            recomputed = identity_from_detail(f.detail, f.target).key
            ident = ident or f"{recomputed} (recomputed; saved before identities)"
        else:
            ident = ident or "hang (no stack: not deduplicated)"
        folder = root / ("crashes" if kind == "crash" else "hangs")
        path = next(folder.glob(f"id:{f.finding_id:06d},*"), None)
        mpath = root / "minimized" / folder.name / path.name if path is not None else None
        size = f"{len(f.data)} B" + (f" -> {len(min_data)} B minimized" if min_data is not None
                                     else ", not minimized yet")
        shown = mpath if mpath is not None and mpath.exists() else path
        cmd = reproduce_command(f.target, str(shown), pythonpath) if shown is not None \
            else "(file missing: --resume rewrites it)"
        lines.append(f"{kind} {f.finding_id:06d}  {ident}")
        by = f" by {stage}" if stage else ""
        lines.append(f"    target {f.target}; first found at {f.found_s:.1f} s{by}"
                     + f"; {size}")
        lines.append(f"    reproduce: {cmd}")
    return lines
