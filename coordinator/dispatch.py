"""Dispatch: fill every free slot with work, mint its token, send the WORK; revoke and requeue.

Which work a free slot of a rank gets, in order: a claimed crash/hang's re-run
(coordinator/confirm.py), a minimization (coordinator/triage.py), then the stage plan's pick
(coordinator/hybrid.py: a corpus entry or a fuzz slice). What the WORK runs and what a
revocation does with the item depend on its kind: one handler per `WorkKind`
(coordinator/workkinds.py). Deadlines (`_expire`) revoke here too.
"""

from __future__ import annotations

from collections.abc import Callable

import structlog

from symfence.coordinator import failpoints
from symfence.coordinator.hotpath import SAMPLE
from symfence.coordinator.hotpath import clock_ns as _ns
from symfence.coordinator.inflight import Revocation
from symfence.coordinator.scheduler import WorkItem
from symfence.coordinator.workkinds import KINDS
from symfence.protocol.codec import encode, pack_frames
from symfence.protocol.ids import DispatchToken, Rank
from symfence.protocol.messages import Control, ControlKind, Tag, Work

log = structlog.get_logger()


class DispatchMixin:
    """The coordinator's dispatch (state: inflight (the dispatch table), scheduler, minter, worker_cov_version,
    _maybe_free)."""

    def _fill(self, ranks: set[Rank] | None = None) -> None:
        """Dispatch to every free slot: of all workers, or (after a turn) of `ranks` only, the
        ranks that got a slot back or were left with one free (`_maybe_free`); the ticker's
        full fill catches capacity that time gives back (the end of a suspension)."""
        if not self.dispatching and not self.confirming:
            return
        self.hotpath.fills += 1
        t0 = 0 if self.hotpath.fills % SAMPLE else _ns()  # one fill in SAMPLE is timed (hotpath.py)
        maybe_free, alive, claims = self._maybe_free, self.members.alive, self.claims.queue
        left = self._duration_s - (self.clock() - self._t0) if self._duration_s and self.dispatching else None
        for rank in self.workers if ranks is None else sorted(ranks):
            # Revoked dispatches the worker may still hold take slots too (inflight.py, held slots).
            free = self.peers.capacity(rank, self._depth_of(rank)) - self.inflight.occupied(rank) \
                if rank in alive else 0
            if free <= 0:
                maybe_free.discard(rank)
                continue
            view = self.scheduler.for_rank(rank, self._elsewhere_of(rank))
            frames: list[bytes] = []
            while free > 0:
                item = claims.pop_for(rank, view.elsewhere) if len(claims) else None
                if item is None and self.dispatching and len(self.triage.queue):
                    item = self.triage.queue.pop_for(rank, view.elsewhere)
                if item is None and self.dispatching:
                    item = self.plan.pick(rank, view, left)
                if item is None:
                    if self.auto_depth is not None:
                        self.auto_depth.short(rank)  # its waiting says nothing of the round trip
                    break
                frames.append(self._dispatch(rank, item))
                free -= 1
            if frames:
                self._send_works(rank, frames)
            if free > 0:
                maybe_free.add(rank)
            else:
                maybe_free.discard(rank)
        if t0:
            self.hotpath.dispatch_ns += _ns() - t0

    def _elsewhere_of(self, rank: Rank) -> Callable[[WorkItem], bool]:
        """`_elsewhere` for one rank, made once per rank (the fill asks for it on every turn)."""
        f = self._elsewhere_fns.get(rank)
        if f is None:
            f = self._elsewhere_fns[rank] = lambda it, r=rank: self._elsewhere(it, r)
        return f

    def _elsewhere(self, item: WorkItem, rank: Rank) -> bool:
        """Whether a rank other than `rank` that the item has not failed on could take it."""
        alive, peers = self.members.alive, self.peers
        return any(r != rank and r in alive and r not in item.avoid and peers.capacity(r, self._depth_of(r))
                   for r in self.workers)

    def _depth_of(self, rank: Rank) -> int:
        return self.depth if self.auto_depth is None else self.auto_depth.depth(rank)

    def _send_works(self, rank: Rank, frames: list[bytes]) -> None:
        """The WORK frames of one fill of a rank, batched as far as the rank takes (`batch_of`)."""
        for frame in pack_frames("works", frames, self.batch_of.get(rank, 1), self.limits):
            self.pump.send(rank, Tag.WORK, frame)

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
        if handler.plain:
            executor, options = self.corpus_executor, self.options
        else:
            executor, options = handler.work(self, item, now)
        work = Work(token, item.work_id, item.data, item.sha256, executor, item.target, item.bound,
                    options, self.deadline_s, version, delta, item.attempts + 1)
        self.stats.dispatched += 1
        if item.attempts:
            log.info("task.redispatched", work_id=item.work_id[:16], attempt=item.attempts + 1, worker=rank,
                     token=token[:16])
        return encode(work)

    def _revoke(self, token: DispatchToken, why: Revocation, *, notify: bool = True,
                charge: bool | None = None) -> None:
        """Revoke a dispatch and requeue its work. Only revocations the work caused count toward
        max_attempts (`charge`): its deadline (the default for EXPIRED) or its worker lost while
        running it; not a cancel at stop or a lost message."""
        d = self.inflight.revoke(token, why)
        item = d.item
        self._maybe_free.add(d.rank)
        setattr(self.stats, why.value, getattr(self.stats, why.value) + 1)
        charge = why is Revocation.EXPIRED if charge is None else charge
        attempts = item.attempts + charge
        avoid = item.avoid if why is Revocation.CANCELLED else item.avoid | {d.rank}
        exhausted = charge and attempts >= self.cfg["dispatch.max_attempts"]
        KINDS[item.kind].revoked(self, token, item, why, charge, attempts, avoid, exhausted)
        if notify and d.rank in self.members.alive:
            self.pump.send(d.rank, Tag.CONTROL, encode(Control(ControlKind.CANCEL, (token,))))

    def _expire(self, now: float) -> None:
        for d in list(self.inflight.due(now)):
            log.warning("task.expired", token=d.token[:16], worker=d.rank, work_id=d.work_id[:16],
                        after_s=round(now - d.sent_at, 3))
            self._revoke(d.token, Revocation.EXPIRED)
            others = any(r != d.rank and r in self.members.alive and self.peers.capacity(r, self._depth_of(r))
                         for r in self.workers)
            if self.peers.expired(d.rank, others=others):
                log.error("worker.suspended", worker=d.rank, strikes=self.peers.peer(d.rank).strikes,
                          until_s=round(self.peers.suspended_until(d.rank) - now, 3))
        self._fill()
