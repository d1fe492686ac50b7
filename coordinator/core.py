"""The coordinator core (sans-IO): fed received frames and ticks, it changes its state and returns effects.

In the manner of h11's `Connection`: `receive` takes what the pump drained (`(rank, tag, frame)`),
`tick(now)` the passing of time, `durable` the journal writer's receipt; each returns the
effects (coordinator/effects.py) the IO shell (coordinator/campaign.py) carries out: frames to
send, a journal group commit, finding files, quarantine and other log events. No MPI, asyncio,
SQLite, threads or files here: the journal is used through its in-memory mirror only (its
writes are the shell's `Flush`), and logs are `Log` effects.

The walk of one RESULT frame (docs/design.md, "The coordinator"), top to bottom in this module:

    receive -> turn             fair turns over the ranks (peers.py)
      -> _on_result             THE FENCE: `protocol.fence.classify_frame`, per item, lazily
         -> _quarantine         anything but `current`: counted, one `Quarantined` effect
         -> _commit             THE COMMIT: end the dispatch (inflight.py), believe its cost,
                                judge it (`verdict.triage`, pure), merge, journal (mirror)
      -> _fill                  one WORK frame per rank for the slots the turn freed
    tick(now) -> Flush          the group commit of everything committed since the last one

The state has one owner each, all held here: the dispatch table (`inflight`), the member table
(`members`), peer health (`peers`), the queues (`scheduler`, `plan`, `claims`), the coverage
map and the statistics. Claims and their re-runs are confirm.py's part of the core, control
frames and silence membership.py's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from symfence.coordinator import failpoints
from symfence.coordinator.afl import AflState
from symfence.coordinator.config import Config, executor_options
from symfence.coordinator.confirm import ClaimsMixin, Confirmations
from symfence.coordinator.depth import DepthController, DepthTuning
from symfence.coordinator.effects import (Effect, ExportAfl, Flush, Log, Quarantined, SaveFinding, Send,
                                          Stop)
from symfence.coordinator.hotpath import SAMPLE, HotPath
from symfence.coordinator.hotpath import clock_ns as _ns
from symfence.coordinator.engines import EngineSpec
from symfence.coordinator.hybrid import HybridPlan
from symfence.coordinator.inflight import InFlight, Revocation, SlotRelease
from symfence.coordinator.journal import CorpusEntry, FlushReceipt, Journal, NewEntry
from symfence.coordinator.members import Members
from symfence.coordinator.membership import MembershipMixin
from symfence.coordinator.outputs import FindingClass, finding_class
from symfence.coordinator.peers import PeerPolicy, Peers
from symfence.coordinator.refusals import Refusals
from symfence.coordinator.scheduler import Scheduler, WorkItem, WorkKind
from symfence.coordinator.stats import Stats
from symfence.coordinator.targets import TargetProgress, TargetTracker
from symfence.coordinator.triage import Triage
from symfence.coordinator.verdict import Rejection, triage
from symfence.coordinator.workkinds import KINDS
from symfence.protocol.codec import (Limits, WorkHead, checked_options, encode, encode_work, encode_work_with,
                                     pack_frames, work_head)
from symfence.protocol.coverage import CoverageMap
from symfence.protocol.fence import Verdict, classify_frame
from symfence.protocol.ids import DispatchToken, Rank, TokenMinter, work_id_for
from symfence.protocol.messages import Control, ControlKind, Result, Status, Tag
from symfence.protocol.reasons import Reason

if TYPE_CHECKING:
    from symfence.coordinator.sharedwork import SharedWork


class Core(ClaimsMixin, MembershipMixin):
    """Rank 0's state and decisions: frames and ticks in, effects out."""

    def __init__(self, cfg: Config, journal: Journal, triage_: Triage, *, world_size: int, token_key: bytes,
                 clock: Callable[[], float], setup: dict[str, Any] | None = None,
                 wall: Callable[[], float] | None = None, afl_sync: bool = False) -> None:
        """`token_key`: 32 random bytes (the epoch's token key, protocol/ids.py); `setup`: what
        every SETUP frame carries beside the rank's own (the shell's paths and files); `wall`:
        the wall clock for AFL++'s timestamps; `afl_sync`: AFL++ runs beside (its queue never
        runs out, so the work is never exhausted)."""
        self.cfg = cfg
        self.journal = journal  # its in-memory mirror: leases, corpus, findings (the shell writes it)
        self.clock = clock
        self.wall = wall if wall is not None else clock
        self.setup = dict(setup or {})
        self.world_size = world_size
        self.workers: list[Rank] = [Rank(r) for r in range(1, world_size)]
        self.members = Members(self.workers)  # each rank's one state: alive, lost, failed, banned
        self.minter = TokenMinter(token_key)
        self.inflight = InFlight(window=cfg["stats.window_tokens"], banned=self.members.banned)  # dispatch table
        self.scheduler = Scheduler()
        self.coverage = CoverageMap()
        self.worker_cov_version: dict[Rank, int] = {}
        self.stats = Stats()
        self.limits = Limits(max_message_bytes=cfg["limits.max_message_bytes"],
                             max_candidate_bytes=cfg["limits.max_candidate_bytes"],
                             max_candidates=cfg["limits.max_candidates"])
        self.depth: int | str = cfg["dispatch.depth"]  # or "auto": per rank, from depth.py
        self.auto_depth = DepthController(DepthTuning(max_depth=cfg["dispatch.max_depth"])) \
            if self.depth == "auto" else None
        self._duration_s: float = cfg["campaign.duration_s"]
        self._max_results: int = cfg["campaign.max_results"]
        self.max_batch: int = cfg["mpi.max_batch"]  # items in one frame, both ways
        self.batch_of: dict[Rank, int] = {}  # ... per rank: at most what its HELLO said it takes
        self._maybe_free: set[Rank] = set()  # ranks that may have a free slot (a turn fills only these)
        self._elsewhere_fns: dict[Rank, Callable[[WorkItem], bool]] = {}
        self.deadline_s: float = cfg["dispatch.deadline_s"]
        self.executor: str = cfg["campaign.executor"]
        self.options = checked_options(executor_options(cfg))  # checked once, not per WORK
        self._heads: dict[str, WorkHead] = {}  # per target: its plain WORKs' head, packed once (codec.py)
        self.plan = HybridPlan.from_config(cfg)  # which stage each free slot gets
        self.plan.clock = clock  # the time engine tasks in flight have had: the core's clock, as everything here
        self.corpus_executor = self.plan.corpus_stage.value  # runs corpus entries' work items
        self.afl = AflState()  # AFL++'s fuzzer_stats/plot_data bookkeeping (carried over --resume)
        self.tmouts = 0  # executions that timed out this run (hang findings, duplicates included)
        self.targets = TargetTracker(cfg["campaign.targets"])
        self.solver_queries = 0
        self.solver_timeouts = 0  # queries the solver gave up on ("unknown": its time-out)
        self.worker_rss_mb: dict[Rank, int] = {}
        self.afl_sync = afl_sync
        # Issue 29: the shared campaign store's side (sharedwork.py), set by the shell, or None. It
        # gates the commit (park, then its group commit at a turn's end), takes new corpus
        # entries (offer), confirmed findings (new_finding) and says when the work is exhausted.
        # It does IO (the store): with a store, the core is not sans-IO at these four calls.
        self.shared: SharedWork | None = None
        self.dispatching = False
        self.seeds_pending = False  # seeds not journaled yet (the shell's seeding.py): the work is not exhausted
        self.confirming = False  # draining at the end: only crash/hang re-runs are dispatched
        self.stopping = False  # the shell is ending the campaign
        self.all_lost = False
        self.stop_acks: dict[Rank, dict[str, Any]] = {}
        self.stop_sent: set[Rank] = set()
        self.control_banned = 0  # CONTROL (or unknown-tag) frames from banned ranks, not decoded
        self._last_tick: float | None = None
        self._next_beat = 0.0  # the next coordinator heartbeat to the workers (`_beat`)
        self._t0 = clock()
        self.peers = Peers(PeerPolicy.from_config(cfg), clock, self.members)
        self.claims = Confirmations(self.corpus_executor, self.options)
        self.triage = triage_
        self.hotpath = HotPath()  # CPU per result by phase, commit latency, start-up times
        self.refusals = Refusals(cfg["limits.max_refused_share"], cfg["faults.enabled"])
        self._out: list[Effect] = []

    # --- entry points: each returns the effects, in order ----------------------------------------

    def _take(self) -> list[Effect]:
        out, self._out = self._out, []
        return out

    def _log(self, level: str, event: str, **fields: Any) -> None:
        self._out.append(Log(level, event, fields))

    def receive(self, frames: Iterable[tuple[Rank, int, bytes, int]]) -> list[Effect]:
        """Frames the pump drained, `(source, tag, frame, oversized)`, in order: queued per rank,
        then one fair turn. While `pending()`, the shell calls `turn()` again (after other work)."""
        peers = self.peers
        for source, tag, frame, oversized in frames:
            if not peers.enqueue(source, (tag, frame, oversized)):
                self._ban(source, f"more than {peers.policy.backlog_frames} frames waiting", flood=True)
        return self.turn()

    def pending(self) -> bool:
        return self.peers.pending()

    def turn(self) -> list[Effect]:
        """One fair turn of what the ranks sent (peers.py bounds each rank's share) and the refill
        of the slots it freed. The group commit is the tick's (`Flush`, from a tick, every 50 ms,
        that finds one due): asked per turn, it was due at every 256 buffered ops, a transaction
        every few ms at depth 4, and cost 12-20% more coordinator CPU per result than main in
        four side-by-side runs (bench_core, 14:33-15:07 UTC); per tick, main's level or below."""
        for source, (tag, frame, oversized) in self.peers.turn(lambda m: len(m[1])):
            if tag == Tag.RESULT:
                self._on_result(source, frame, oversized)
            elif tag == Tag.CONTROL:
                if self.shared is not None:
                    self.shared.flush()  # a heartbeat must see the parked results' dispatches ended
                self._on_control(source, frame, oversized)
            elif self.peers.banned(source):
                self.control_banned += 1
            else:
                self.stats.control_rejected += 1
                self._log("warning", "message.unexpected_tag", worker=source, tag=tag)
                self._garbage(source, len(frame))
        if self.shared is not None:
            self.shared.flush_due()  # the group commit in the campaign store (or in GROUP_WAIT_S), then apply
        if self._maybe_free:
            self._fill(self._maybe_free)
        self._check_finished()
        return self._take()

    def tick(self, now: float) -> list[Effect]:
        """Time passed: pauses, deadlines, silent ranks, heartbeats, the group commit, the end."""
        self._absorb_pause(now)
        self._expire(now)
        self._check_lost(now)
        self._beat(now)
        self._flush_if_due()
        self._check_finished()
        return self._take()

    def seeded(self, added: Iterable[CorpusEntry]) -> None:
        """Corpus entries the shell journaled at start-up (seeds, AFL++ imports): queue them."""
        added = list(added)
        if self.plan.concolic_on:
            self.scheduler.extend(map(WorkItem.from_record, added))
        for e in added:
            self.plan.add_entry(e.target, e.data)
        self.afl.seeds(e.queue_id for e in added)
        for e in added:
            self.targets[e.target].corpus += 1

    def start(self) -> list[Effect]:
        """Seeded: start dispatching (the first fill)."""
        self.dispatching = True
        self._t0 = self.clock()
        self._fill()
        self._check_finished()
        return self._take()

    def refill(self) -> list[Effect]:
        """More work was queued by the shell (seeds journaled while dispatch runs): fill every free slot."""
        self._fill()
        self._check_finished()
        return self._take()

    def halt(self) -> None:
        """The shell is ending the campaign: dispatch nothing new."""
        self.dispatching = False
        self.stopping = True

    def drain(self) -> list[Effect]:
        """The end of a campaign: dispatch only claimed crash/hang re-runs from now on, and ask
        every rank with work in flight to answer it early (YIELD: a fuzz turn or an engine task
        answers with what it has, committed in the drain instead of cancelled at the stop)."""
        self.dispatching = False
        yield_frame = encode(Control(ControlKind.YIELD))
        for rank in sorted(self.members.alive):
            if self.inflight.in_flight_count(rank):
                self._out.append(Send(rank, Tag.CONTROL, yield_frame))
        self._fill()
        return self._take()

    def cancel_all(self) -> list[Effect]:
        """Revoke everything still in flight (cancelled on alive ranks, lost on the others)."""
        for rank in sorted(self.members.alive):
            for token in self.inflight.tokens_of(rank):
                self._revoke(token, Revocation.CANCELLED)
        for rank in self.workers:
            for token in self.inflight.tokens_of(rank):  # ranks lost meanwhile
                self._revoke(token, Revocation.LOST)
        return self._take()

    def failed(self, ranks: Iterable[int]) -> list[Effect]:
        """MPI (ULFM) reported these ranks dead."""
        for rank in ranks:
            self._lose_worker(Rank(rank), "MPI reported the process failed", failed=True)
        return self._take()

    def durable(self, receipt: FlushReceipt) -> list[Effect]:
        """A journal batch is on disk: what it allows to announce (AFL++ export, finding files)."""
        if self.afl_sync and receipt.entries:
            self._out.append(ExportAfl(tuple(receipt.entries)))
        for f in receipt.findings:
            key, sig = self.triage.sig_of(f.kind.value, f.finding_id)
            self._out.append(SaveFinding(f.kind.value, f.finding_id, f.data, f.detail, f.target, key, sig))
            if f.kind.value == "crash":
                self.stats.crashes += 1
                self.stats.ooms += finding_class("crash", f.detail) is FindingClass.OOM
            else:
                self.stats.hangs += 1
        return self._take()

    def _flush_if_due(self) -> None:
        if self.journal.flush_due():
            self._out.append(Flush())

    # --- the fence --------------------------------------------------------------------------------

    def _on_result(self, source: Rank, frame: bytes, oversized: int = 0) -> None:
        """Every result of one RESULT frame, fenced, then committed or quarantined, one at a time
        and in order (`classify_frame` judges the next only after this one is applied)."""
        if oversized and not self.inflight.banned(source):  # drained at the probe, never received
            verdicts: Iterable[Verdict] = (Verdict(Reason.MALFORMED, detail=f"oversized: {oversized} >"
                                                   f" {self.limits.max_message_bytes} bytes (drained unread)"),)
        else:
            verdicts = classify_frame(frame, source, self.inflight, self.limits)
        size = max(len(frame), oversized)
        stats, hotpath, judged = self.stats, self.hotpath, iter(verdicts)
        while True:
            timed = not (stats.results_received + 1) % SAMPLE  # one result in SAMPLE is timed (hotpath.py)
            t0 = _ns() if timed else 0
            verdict = next(judged, None)  # decide ...
            if verdict is None:
                return
            stats.results_received += 1
            self.refusals.received(source)
            if timed:
                t1 = _ns()
                hotpath.decode_ns += t1 - t0
            if verdict.reason is Reason.CURRENT:
                result = verdict.result
                assert result is not None  # the fence says CURRENT only of a decoded result
                if self.shared is not None and self.shared.park(source, result):
                    continue  # committed to the shared store first (sharedwork.py), at the turn's end
                penalties = self._commit(source, result)  # ... commit ...
                if timed:
                    hotpath.commit_ns += _ns() - t1
                while penalties:  # ... then what its claims cost the sender (peers.py)
                    self._garbage(source)
                    penalties -= 1
            else:
                self._quarantine(source, verdict, size)  # ... or quarantine
                size = 0  # a frame's bytes count against its sender once
                if verdict.token is not None and self.inflight.release(DispatchToken(verdict.token), source,
                                                                       SlotRelease.RESULT):
                    self._maybe_free.add(source)  # a late answer: the worker let go of that dispatch

    def _quarantine(self, source: Rank, v: Verdict, size: int = 0) -> None:
        self.stats.quarantined(v.reason)
        if v.reason is Reason.BANNED:  # counted only: a banned rank cannot make us write logs
            return
        self._out.append(Quarantined(source, v.reason, v.detail, v.token, v.work_id, v.owner))
        if self.refusals.refused(source, v.reason, v.detail):  # the first of this rank and reason
            self._log("error", "worker.results_refused", rank=source, reason=v.reason.value, detail=v.detail,
                      note="a rank that is not banned sent a result no honest worker sends: a bug in symfence"
                           + (" (or an injected fault)" if self.refusals.faults_enabled else ""))
        self._garbage(source, size)

    # --- the shared campaign store's answers (issue 29; its IO is sharedwork.py's) -------------------

    def store_settled(self, settled: Iterable[tuple[Rank, Result, str | None]]) -> list[Effect]:
        """The store's group commit answered for results parked there, in park order: `why` None
        = committed in the store, so applied here now (the commit BEFORE the local apply); else
        refused for `why` (`_store_refused`). The senders' penalty points come after every commit
        of the group (a ban revokes the rest). Returns the effects, as `receive` does."""
        penalties: list[tuple[Rank, int]] = []
        for source, result, why in settled:
            if why is None:
                penalties.append((source, self._commit(source, result)))
            else:
                self._store_refused(source, result, why)
        for source, points in penalties:
            for _ in range(points):
                self._garbage(source)
        return self._take()

    def _store_refused(self, source: Rank, result: Result, why: str) -> None:
        """A result whose commit the store refused: nothing of it is applied; its dispatch ends
        (revoked as `refused`, its slot free), its journal lease goes back to pending (the store
        gives the item to whoever holds its lease now), and it is quarantined as `stale_lease`,
        not scored against the sender (a late lease is this coordinator's doing)."""
        d = self.inflight.revoke(result.token, Revocation.REFUSED)
        self.stats.refused += 1
        self._maybe_free.add(source)
        self.journal.requeue(d.work_id, result.token, Reason.STALE_LEASE.value, charge=False)
        self.stats.quarantined(Reason.STALE_LEASE)
        self._out.append(Quarantined(source, Reason.STALE_LEASE, f"the campaign store refused its commit: {why}",
                                     result.token, result.work_id))

    # --- the commit -------------------------------------------------------------------------------

    def _commit(self, source: Rank, result: Result) -> int:
        """Commit a `current` result: end its dispatch, believe its cost as far as the time it
        took allows, hand it to its kind; returns the penalty points its sender earned."""
        d = self.inflight.commit(result.token)
        item: WorkItem = d.item  # type: ignore[assignment]  # every dispatch of a campaign carries one
        self._maybe_free.add(source)
        st = self.stats
        st.committed += 1
        st.status_counts[result.status._value_] += 1  # (Enum's `value` is a Python-level property)
        if result.status is Status.ERROR:  # of any kind (a minimization's too): the summary points here
            if not st.first_error:
                st.first_error = (result.error.strip().splitlines() or ["(no message)"])[-1][:300]
            self._log("warning", "task.error", worker=source, kind=item.kind.value, work_id=item.work_id[:16],
                      error=result.error[-300:])
        self.peers.committed(source)
        now_loop = self.clock()
        elapsed = max(now_loop - d.sent_at, 0.0)
        self.hotpath.latency.add(elapsed)  # dispatch-to-commit (hotpath.py)
        cost = result.cost
        execs = self.peers.plausible_execs(cost.execs, elapsed)
        wall_s = min(cost.wall_s, elapsed)
        auto = self.auto_depth
        if auto is not None and (new := auto.observe(source, d.sent_at, d.sent_at + elapsed, wall_s)):
            self._log("info", "dispatch.depth_changed", worker=source, depth=new, **auto.explain(source))
        st.record_result(source, wall_s, execs, min(cost.solver_s, elapsed))
        if self._duration_s:  # busy share of the budget (bench_busy.py): the task ended at its commit
            st.record_in_budget(source, now_loop - self._t0 - wall_s, now_loop - self._t0, self._duration_s)
        if result.stats:
            st.engine.add(item.target, result.stats, item.work_id)
        handler = KINDS[item.kind]
        if not handler.judged:  # a re-run or a minimization: its kind's handler (workkinds.py)
            return handler.committed(self, source, item, result, execs, wall_s, now_loop)
        # A corpus entry or a fuzz slice: judge (pure), then apply to map, claims, corpus, journal.
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
            self._log("warning", "result.coverage_capped", worker=source, token=result.token[:16],
                      new_edges=v.capped[0], allowed=v.capped[1], execs=execs)
        elif v.new_edges:
            self.peers.take_edges(source, v.new_edges, now_loop)
        began = now_loop - wall_s
        if v.task_trace:
            if result.candidates or (v.new_edges and self.plan.fuzz_on):
                self._merge_trace(v.task_trace, progress, stage, began, now_loop)
            else:  # the task's trace alone: its never-seen edges are the verdict's count of them
                progress.edges += v.new_edges
                fig.edges_first += v.new_edges
                self.coverage.merge(v.task_trace)
        if result.tokens:
            self.plan.add_tokens(item.target, result.tokens)
        for c in v.claims:  # claimed crashes and hangs: saved only once a re-run agrees (confirm.py)
            self._claim(c.kind, c.data, c.sha256, c.detail, item, source, found_s)
        if v.claims_task:
            self._claim(status, item.data, item.sha256, result.error, item, source, found_s)
        entries: list[NewEntry] = []
        for c, trace in v.admitted:
            if (bits := self._merge_trace(trace, progress, stage, began, now_loop)) == 0:
                st.triage_rejected[Rejection.NO_NEW_BITS.value] += 1
            else:
                wid = work_id_for(self.corpus_executor, item.target, c.sha256, c.bound, self.options)
                entries.append(NewEntry(sha256=c.sha256, data=c.data, bound=c.bound, parent=item.queue_id,
                                        origin=stage.value, new_bits=bits, found_s=found_s,
                                        work_id=wid, target=item.target))
        receipt = handler.record(self, item, result, entries)  # the journal's mirror (durable at Flush)
        if failpoints.ARMED:
            failpoints.hit("commit")
        if receipt is None:  # the journal-level fence: cannot happen unless state diverged
            st.journal_fence_rejected += 1
            self._log("error", "commit.journal_fenced", work_id=item.work_id[:16], token=result.token[:16])
            return v.penalties
        if receipt.skipped_entries:
            st.triage_rejected[Rejection.DUPLICATE_INPUT.value] += receipt.skipped_entries
        if receipt.entries:
            now = self.wall()
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

    def _merge_trace(self, trace: dict[int, int], progress: TargetProgress, stage: EngineSpec,
                     began: float, now: float) -> int:
        """Merge a trace into the map, crediting its first-found edges to its target and stage
        (`began`: when its task began, `now` its commit, for the credit of a fuzz turn's late
        report: hybrid.py)."""
        if not trace:
            return 0
        progress.edges += self.plan.credit_first(stage, trace, self.coverage.seen, now, began)
        return self.coverage.merge(trace)

    # --- dispatch ---------------------------------------------------------------------------------

    def _fill(self, ranks: set[Rank] | None = None) -> None:
        """Dispatch to every free slot: of all workers, or (after a turn) of `ranks` only, the
        ranks that got a slot back or were left with one free (`_maybe_free`); the ticker's
        full fill catches capacity that time gives back (the end of a suspension). Each rank's
        new WORKs go out in frames of up to what it takes (`batch_of`): one frame per refill."""
        if not self.dispatching and not self.confirming:
            return
        self.hotpath.fills += 1
        t0 = 0 if self.hotpath.fills % SAMPLE else _ns()  # one fill in SAMPLE is timed (hotpath.py)
        maybe_free, alive, claims = self._maybe_free, self.members.alive, self.claims.queue
        auto, fns = self.auto_depth, self._elsewhere_fns
        left = self._duration_s - (self.clock() - self._t0) if self._duration_s and self.dispatching else None
        for rank in self.workers if ranks is None else sorted(ranks):
            # Revoked dispatches the worker may still hold take slots too (inflight.py, held slots).
            depth: int = self.depth if auto is None else auto.depth(rank)  # type: ignore[assignment]
            free = self.peers.capacity(rank, depth) - self.inflight.occupied(rank) if rank in alive else 0
            if free <= 0:
                maybe_free.discard(rank)
                if len(claims) and free == 0 and rank in alive:
                    self._rerun_beyond_depth(rank, depth)
                continue
            view = self.scheduler.for_rank(rank, fns.get(rank) or self._elsewhere_of(rank))
            frames: list[bytes] = []
            while free > 0:
                item = claims.pop_for(rank, view.elsewhere) if len(claims) else None
                if item is None and self.dispatching and len(self.triage.queue):
                    item = self.triage.queue.pop_for(rank, view.elsewhere)
                if item is None and self.dispatching:
                    item = self.plan.pick(rank, view, left)  # type: ignore[arg-type]  # a RankView reads as one
                if item is None:
                    if self.auto_depth is not None:
                        self.auto_depth.short(rank)  # its waiting says nothing of the round trip
                    break
                frames.append(self._dispatch(rank, item))
                free -= 1
            if frames:
                for frame in pack_frames("works", frames, self.batch_of.get(rank, 1), self.limits):
                    self._out.append(Send(rank, Tag.WORK, frame))
            if free > 0:
                maybe_free.add(rank)
            else:
                maybe_free.discard(rank)
        if t0:
            self.hotpath.dispatch_ns += _ns() - t0

    def _rerun_beyond_depth(self, rank: Rank, depth: int) -> None:
        """A full rank takes one claimed crash's re-run beyond its depth: the worker runs it
        ahead of its queue and ends a fuzz turn early for it (protocol.messages.RERUN_BOUND), so
        a find is confirmed in about a second instead of after the turns already queued. Not on
        probation (capacity 1) nor while the rank may still hold a revoked dispatch (it may be
        stuck), and one at a time: it adds at most one slot."""
        inflight = self.inflight
        if self.peers.capacity(rank, depth) != depth or inflight.held_count(rank) \
                or any(inflight.get(t).item.kind is WorkKind.CONFIRMATION  # type: ignore[union-attr]
                       for t in inflight.tokens_of(rank)):
            return
        item = self.claims.queue.pop_for(rank, self._elsewhere_of(rank))
        if item is not None:
            self._out.append(Send(rank, Tag.WORK, self._dispatch(rank, item)))

    def _elsewhere_of(self, rank: Rank) -> Callable[[WorkItem], bool]:
        """Whether a rank other than `rank` that an item has not failed on could take it (made once per rank)."""
        f = self._elsewhere_fns.get(rank)
        if f is None:
            def elsewhere(item: WorkItem, rank: Rank = rank) -> bool:
                alive, peers = self.members.alive, self.peers
                return any(r != rank and r in alive and r not in item.avoid
                           and peers.capacity(r, self._depth_of(r)) for r in self.workers)
            f = self._elsewhere_fns[rank] = elsewhere
        return f

    def _depth_of(self, rank: Rank) -> int:
        return self.depth if self.auto_depth is None else self.auto_depth.depth(rank)  # type: ignore[return-value]

    def _dispatch(self, rank: Rank, item: WorkItem) -> bytes:
        """Lease the item to `rank` under a new token; returns its WORK frame (`_fill` sends it)."""
        token = self.minter.mint(rank)
        now = self.clock()
        self.inflight.add(token, rank, item.work_id, now, now + self.deadline_s if self.deadline_s else None, item)
        self.afl.cur_item = item.queue_id or 0
        handler = KINDS[item.kind]
        if handler.leased:  # the transient kinds are fenced by token, not leased in the journal
            self.journal.lease(item.work_id, token)
        if failpoints.ARMED:
            failpoints.hit("dispatch")
        version, delta = self.coverage.delta_since(self.worker_cov_version.get(rank, 0))
        self.worker_cov_version[rank] = version
        self.stats.dispatched += 1
        if item.attempts:
            self._log("info", "task.redispatched", work_id=item.work_id[:16], attempt=item.attempts + 1,
                      worker=rank, token=token[:16])
        if handler.plain:  # the corpus executor's WORK: its head's bytes, then this dispatch's fields
            head = self._heads.get(item.target)
            if head is None:
                head = self._heads[item.target] = work_head(self.corpus_executor, item.target, self.options,
                                                            self.deadline_s)
            return encode_work_with(head, token, item.work_id, item.data, item.sha256, item.bound, version, delta,
                                    item.attempts + 1)
        executor, options = handler.work(self, item, now)
        return encode_work(token, item.work_id, item.data, item.sha256, executor, item.target, item.bound,
                           options, self.deadline_s, version, delta, item.attempts + 1)  # (no Work built)

    def _revoke(self, token: DispatchToken, why: Revocation, *, notify: bool = True,
                charge: bool | None = None) -> None:
        """Revoke a dispatch and requeue its work. Only revocations the work caused count toward
        max_attempts (`charge`): its deadline (the default for EXPIRED) or its worker lost while
        running it; not a cancel at stop or a lost message."""
        d = self.inflight.revoke(token, why)
        item: WorkItem = d.item  # type: ignore[assignment]
        self._maybe_free.add(d.rank)
        setattr(self.stats, why.value, getattr(self.stats, why.value) + 1)
        charge = why is Revocation.EXPIRED if charge is None else charge
        attempts = item.attempts + charge
        avoid = item.avoid if why is Revocation.CANCELLED else item.avoid | {d.rank}
        exhausted = charge and attempts >= self.cfg["dispatch.max_attempts"]
        KINDS[item.kind].revoked(self, token, item, why, charge, attempts, avoid, exhausted)
        if notify and d.rank in self.members.alive:
            self._out.append(Send(d.rank, Tag.CONTROL, encode(Control(ControlKind.CANCEL, (token,)))))

    def _expire(self, now: float) -> None:
        for d in list(self.inflight.due(now)):
            self._log("warning", "task.expired", token=d.token[:16], worker=d.rank, work_id=d.work_id[:16],
                      after_s=round(now - d.sent_at, 3))
            self._revoke(d.token, Revocation.EXPIRED)
            others = any(r != d.rank and r in self.members.alive and self.peers.capacity(r, self._depth_of(r))
                         for r in self.workers)
            if self.peers.expired(d.rank, others=others):
                self._log("error", "worker.suspended", worker=d.rank, strikes=self.peers.peer(d.rank).strikes,
                          until_s=round(self.peers.suspended_until(d.rank) - now, 3))
        self._fill()

    def _stop(self, reason: str) -> None:
        self.dispatching = False
        self.stopping = True
        self._out.append(Stop(reason))

    def _check_finished(self) -> None:
        if self.stopping or not self.dispatching:
            return
        elapsed = self.clock() - self._t0
        if self._duration_s and elapsed >= self._duration_s:
            self._stop("duration reached")
        elif self._max_results and self.stats.committed >= self._max_results:
            self._stop("max_results reached")
        elif not len(self.inflight) and not self.plan.fuzz_on and not len(self.scheduler) \
                and not len(self.claims.queue) and not len(self.triage.queue) and not self.afl_sync \
                and not self.seeds_pending \
                and (self.shared is None or self.shared.exhausted()):
            self._stop("work exhausted")  # a mutation stage or AFL++ alongside never runs out
