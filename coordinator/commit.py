"""The commit: a fenced `current` result changes the in-flight map, statistics, map, corpus, journal.

Step 3 and 4 of the walk of one result (docs/design.md, "The coordinator"): `_commit` ends the
dispatch, believes the result's cost as far as the time it took allows, and hands it to its work
kind's handler (coordinator/workkinds.py). A corpus entry's or a fuzz slice's result is judged by
the pure `verdict.triage()`, then `_commit_entries` applies that verdict: map, claims, new
corpus entries, journal. Re-runs and minimizations go to confirm.py and triage.py.
"""

from __future__ import annotations

import time
from typing import Any

import structlog

from symfence.coordinator import failpoints
from symfence.coordinator.hybrid import StageFigures
from symfence.coordinator.journal import NewEntry
from symfence.coordinator.scheduler import WorkItem
from symfence.coordinator.targets import TargetProgress
from symfence.coordinator.verdict import Rejection, triage
from symfence.coordinator.workkinds import KINDS, KindHandler
from symfence.protocol.ids import Rank, work_id_for
from symfence.protocol.messages import Result, Status

log = structlog.get_logger()


class CommitMixin:
    """The coordinator's commit path (state: coverage, journal, scheduler, plan, targets, stats)."""

    def _commit(self, source: Rank, result: Result) -> int:
        """Commit a `current` result; returns the penalty points its sender earned (the caller
        applies them after the commit)."""
        d = self.inflight.commit(result.token)
        item = d.item
        self._maybe_free.add(source)
        st = self.stats
        st.committed += 1
        st.status_counts[result.status._value_] += 1  # (Enum's `value` is a Python-level property)
        self.peers.committed(source)
        # A result's claims are believed only as far as the time it took allows (peers.py).
        now_loop = self.clock()
        elapsed = max(now_loop - d.sent_at, 0.0)
        self.hotpath.latency.add(elapsed)  # dispatch-to-commit (hotpath.py)
        cost = result.cost
        execs = self.peers.plausible_execs(cost.execs, elapsed)
        wall_s = min(cost.wall_s, elapsed)
        auto = self.auto_depth
        if auto is not None and (new := auto.observe(source, d.sent_at, d.sent_at + elapsed, wall_s)):
            log.info("dispatch.depth_changed", worker=source, depth=new, **self.auto_depth.explain(source))
        st.record_result(source, wall_s, execs, min(cost.solver_s, elapsed))
        if self._duration_s:  # busy share of the budget (bench_busy.py): the task ended at its commit
            st.record_in_budget(source, now_loop - self._t0 - wall_s, now_loop - self._t0, self._duration_s)
        if result.stats:
            st.engine.add(item.target, result.stats, item.work_id)
        handler = KINDS[item.kind]
        if handler.judged:  # a corpus entry or a fuzz slice: verdict, then commit (below)
            return self._commit_entries(handler, source, item, result, execs, wall_s, now_loop)
        return handler.committed(self, source, item, result, execs, wall_s, now_loop)

    def _commit_entries(self, handler: KindHandler, source: Rank, item: WorkItem, result: Result, execs: int,
                        wall_s: float, now_loop: float) -> int:
        """A corpus entry's or a fuzz slice's result: judge it (`verdict.triage`, pure), then apply
        the verdict to the map, the claims, the corpus and the journal. Returns the penalty points."""
        st = self.stats
        status = result.status
        found_s = now_loop - self._t0
        progress = self.targets[item.target]
        progress.tasks += 1
        progress.execs += execs
        progress.errors += status is Status.ERROR
        if result.stats:
            self.solver_queries += int(result.stats.get("queries", 0))
            self.solver_timeouts += int(result.stats.get("unknown", 0))
        stage = self.plan.stage_of(item)
        fig = self.plan.figures[stage]
        fig.results += 1
        fig.execs += execs
        fig.busy_s += wall_s
        v = triage(result, execs, self.coverage.seen, self.peers, source, now_loop)  # decide (pure) ...
        for reason, n in v.rejected:  # ... then apply
            st.triage_rejected[reason.value] += n
        if v.capped is not None:
            log.warning("result.coverage_capped", worker=source, token=result.token[:16],
                        new_edges=v.capped[0], allowed=v.capped[1], execs=execs)
        elif v.new_edges:
            self.peers.take_edges(source, v.new_edges, now_loop)
        if v.task_trace is not None:
            self._merge_trace(v.task_trace, progress, fig)
        if result.tokens:
            self.plan.add_tokens(item.target, result.tokens)
        for c in v.claims:  # claimed crashes and hangs: saved only once a re-run agrees
            self._claim(c.kind, c.data, c.sha256, c.detail, item, source, found_s)
        if v.claims_task:
            self._claim(status, item.data, item.sha256, result.error, item, source, found_s)
        elif status is Status.ERROR:
            if not st.first_error:
                st.first_error = (result.error.strip().splitlines() or ["(no message)"])[-1][:300]
            log.warning("task.error", worker=source, work_id=item.work_id[:16], error=result.error[-300:])
        entries: list[NewEntry] = []
        for c, trace in v.admitted:
            if (bits := self._merge_trace(trace, progress, fig)) == 0:
                st.triage_rejected[Rejection.NO_NEW_BITS.value] += 1
            else:
                wid = work_id_for(self.corpus_executor, item.target, c.sha256, c.bound, self.options)
                entries.append(NewEntry(sha256=c.sha256, data=c.data, bound=c.bound, parent=item.queue_id,
                                        origin=stage.value, new_bits=bits, found_s=found_s,
                                        work_id=wid, target=item.target))
        receipt = handler.record(self, item, result, entries)
        if failpoints.ARMED:
            failpoints.hit("commit")
        if receipt is None:  # the journal-level fence: cannot happen unless state diverged
            st.journal_fence_rejected += 1
            log.error("commit.journal_fenced", work_id=item.work_id[:16], token=result.token[:16])
            return v.penalties
        st.triage_rejected[Rejection.DUPLICATE_INPUT.value] += receipt.skipped_entries
        if receipt.entries:
            now = time.time()
            for e in receipt.entries:
                self._queue_entry(e)
                self.afl.entry(e.queue_id, e.parent, now)
                self.journal.note_provenance("queue", e.queue_id, source)
            progress.corpus += len(receipt.entries)
            progress.last_find = now
            st.corpus += len(receipt.entries)
            fig.new_inputs += len(receipt.entries)
        return v.penalties

    def _queue_entry(self, entry: Any) -> None:
        """A new durable-to-be corpus entry: the engine's queue (if it runs) and the fuzzer's."""
        if self.shared is not None:
            self.shared.offer(entry)  # the campaign's work: whichever coordinator leases it runs it
        elif self.plan.concolic_on:
            self.scheduler.add(WorkItem.from_record(entry))
        self.plan.add_entry(entry.target, entry.data)

    def _merge_trace(self, trace: dict[int, int], progress: TargetProgress, fig: StageFigures) -> int:
        """Merge a trace into the map, crediting its first-found edges to its target and stage."""
        if not trace:
            return 0
        seen = self.coverage.seen
        fresh = sum(1 for edge in trace if not seen[edge])  # edges it reached first
        progress.edges += fresh
        fig.edges_first += fresh
        return self.coverage.merge(trace)
