"""Intake and the fence: received frames in fair turns; every RESULT is classified before all else.

Step 1 and 2 of the walk of one result (docs/design.md, "The coordinator"): the pump hands
frames to `_on_batch`; `_turn` serves every rank a bounded share (peers.py); `_on_result` calls
`protocol.fence.classify_frame` first, for each result a frame carries (one, or a batch). A `current` result goes to the commit (coordinator/commit.py),
any other is quarantined here: counted, logged once, scored against its sender.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

import structlog

from symfence.coordinator.hotpath import SAMPLE
from symfence.coordinator.hotpath import clock_ns as _ns
from symfence.coordinator.inflight import SlotRelease
from symfence.coordinator.pump import Inbound
from symfence.protocol.fence import Verdict, classify_frame
from symfence.protocol.ids import Rank
from symfence.protocol.messages import Tag
from symfence.protocol.reasons import Reason

log = structlog.get_logger()


class IntakeMixin:
    """The coordinator's receive path up to the fence's decision (state: peers, stats, refusals, hotpath)."""

    def _on_batch(self, batch: list[Inbound]) -> None:
        if self.pump is not None and self.pump.error is not None and not self._stop.is_set():
            log.error("pump.failed", error=repr(self.pump.error))
            for rank in sorted(self.members.alive):  # unreachable from now on
                self.members.fail(rank)
            self.request_stop("MPI pump failed")
        for m in batch:
            if not self.peers.enqueue(Rank(m.source), m):
                why = f"more than {self.peers.policy.backlog_frames} frames waiting"
                self._ban(Rank(m.source), why, flood=True)
        self._turn()

    def _turn(self) -> None:
        """Handle one fair turn of what the ranks sent (peers.py bounds each rank's share), then
        let the loop run other work before the next turn."""
        self._turn_scheduled = False
        for source, m in self.peers.turn(lambda m: len(m.frame)):
            if m.tag == Tag.RESULT:
                self._on_result(source, m.frame, m.oversized)
            elif m.tag == Tag.CONTROL:
                if self.shared is not None:
                    self.shared.flush()  # a heartbeat must see the parked results' dispatches ended
                self._on_control(source, m.frame, m.oversized)
            elif self.peers.banned(source):
                self.control_banned += 1
            else:
                self.stats.control_rejected += 1
                log.warning("message.unexpected_tag", worker=source, tag=m.tag)
                self._garbage(source, len(m.frame))
        if self.shared is not None:
            self.shared.flush_due()  # the group commit in the campaign store (or in GROUP_WAIT_S), then apply
        if self.peers.pending() and not self._turn_scheduled:
            self._turn_scheduled = True
            asyncio.get_running_loop().call_soon(self._turn)
        if self._maybe_free:
            self._fill(self._maybe_free)
        self._check_finished()
        self._changed.set()

    def _on_result(self, source: Rank, frame: bytes, oversized: int = 0) -> None:
        """Every result of one RESULT frame (one, or a batch): fenced, then committed or
        quarantined, one at a time and in order (`classify_frame` judges the next result only
        after this one is applied)."""
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
                if self.shared is not None and self.shared.park(source, verdict.result):
                    continue  # committed to the shared store first (sharedwork.py), at the turn's end
                penalties = self._commit(source, verdict.result)  # ... commit (commit.py) ...
                if timed:
                    hotpath.commit_ns += _ns() - t1
                while penalties:  # ... then what its claims cost the sender (peers.py)
                    self._garbage(source)
                    penalties -= 1
            else:
                self._quarantine(source, verdict, size)  # ... or quarantine
                size = 0  # a frame's bytes count against its sender once
                if verdict.token is not None and self.inflight.release(verdict.token, source, SlotRelease.RESULT):
                    self._maybe_free.add(source)  # a late answer: the worker let go of that dispatch

    def _quarantine(self, source: Rank, v: Verdict, size: int = 0) -> None:
        self.stats.quarantined(v.reason)
        if v.reason is Reason.BANNED:  # counted only: a banned rank cannot make us write logs
            return
        log.warning("result.quarantined", reason=v.reason.value, source_rank=source,
                    token=(v.token or "")[:16] or None, work_id=v.work_id, owner_rank=v.owner,
                    detail=v.detail)
        if self.refusals.refused(source, v.reason, v.detail):  # the first of this rank and reason
            log.error("worker.results_refused", rank=source, reason=v.reason.value, detail=v.detail,
                      note="a rank that is not banned sent a result no honest worker sends: a bug in symfence"
                           + (" (or an injected fault)" if self.refusals.faults_enabled else ""))
        self._garbage(source, size)
