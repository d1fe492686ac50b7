"""The core's membership: who the workers are, alive, lost, failed or banned, and what their CONTROL frames change.

HELLO makes a rank alive (it gets SETUP, then answers CHECKED for its host's files, hosts.py); a
HEARTBEAT keeps it so and lists what it holds (a dispatch it should hold but does not was lost
on the way: revoked); silence for `workers.lost_after_s` or MPI's failure report loses it (its
work is requeued); a rank that keeps sending garbage is banned (peers.py). STOP_ACKs count only
from ranks sent STOP. Rank 0 sends its own HEARTBEATs too (`_beat`), so a worker cut off from it
ends itself; workers' forwarded LOG frames go to hosts.py (a `HostReport` effect).

Part of the sans-IO core (coordinator/core.py): it sends and logs through effects only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from symfence.coordinator.config import import_path
from symfence.coordinator.effects import HostReport, Send
from symfence.coordinator.inflight import Revocation
from symfence.coordinator.members import MemberState
from symfence.protocol.codec import RemoteProtocolError, decode_control, encode
from symfence.protocol.ids import DispatchToken, Rank
from symfence.protocol.messages import Control, ControlKind, Tag

if TYPE_CHECKING:
    from collections.abc import Callable

    from symfence.coordinator.config import Config
    from symfence.coordinator.effects import Effect
    from symfence.coordinator.hybrid import HybridPlan
    from symfence.coordinator.inflight import InFlight
    from symfence.coordinator.members import Members
    from symfence.coordinator.peers import Peers
    from symfence.coordinator.stats import Stats
    from symfence.protocol.codec import Limits
    from symfence.protocol.ids import TokenMinter


class MembershipMixin:
    """The core's part for CONTROL frames and silence (state: the member table `members`,
    stop_acks, stop_sent, peers)."""

    # What it uses of the core, declared: bare annotations and TYPE_CHECKING-only stubs shadow nothing.
    _last_tick: float | None  # (the core's) the ticker's last time, for `_absorb_pause`
    _next_beat: float
    cfg: Config
    clock: Callable[[], float]
    setup: dict[str, Any]
    world_size: int
    workers: list[Rank]
    members: Members
    peers: Peers
    inflight: InFlight
    stats: Stats
    plan: HybridPlan
    limits: Limits
    minter: TokenMinter
    max_batch: int
    batch_of: dict[Rank, int]
    worker_rss_mb: dict[Rank, int]
    stop_acks: dict[Rank, dict[str, Any]]
    stop_sent: set[Rank]
    control_banned: int
    stopping: bool
    all_lost: bool
    _maybe_free: set[Rank]
    _out: list[Effect]

    if TYPE_CHECKING:
        def _log(self, level: str, event: str, **fields: Any) -> None: ...
        def _fill(self, ranks: set[Rank] | None = None) -> None: ...
        def _revoke(self, token: DispatchToken, why: Revocation, *, notify: bool = True,
                    charge: bool | None = None) -> None: ...
        def _stop(self, reason: str) -> None: ...

    def _on_control(self, source: Rank, frame: bytes, oversized: int = 0) -> None:
        if self.peers.banned(source):
            self.control_banned += 1
            return
        if oversized:
            self.stats.control_rejected += 1
            self._log("warning", "control.rejected", worker=source, reason="malformed",
                        detail=f"oversized: {oversized} bytes")
            self._garbage(source, oversized)
            return
        try:
            ctl = decode_control(frame, self.limits)
        except RemoteProtocolError as exc:
            self.stats.control_rejected += 1
            self._log("warning", "control.rejected", worker=source, reason=exc.reason.value, detail=exc.detail)
            self._garbage(source, len(frame))
            return
        members = self.members
        members.heard(source, self.clock())
        if ctl.kind is ControlKind.HELLO:
            if source in self.workers and members.hello(source):
                # Batched frames both ways only with a rank that said it takes them (a peer that
                # speaks single frames only, like tests/adversary.py, gets single frames).
                offered = ctl.info.get("max_batch", 1)
                self.batch_of[source] = max(1, min(self.max_batch, offered if type(offered) is int else 1))
                setup = Control(ControlKind.SETUP, info=self._setup_info(source))
                self._out.append(Send(source, Tag.CONTROL, encode(setup)))
                self._out.append(HostReport(source, "hello", {"host": str(ctl.info.get("host", ""))}))
                self._log("info", "worker.ready", worker=source, host=ctl.info.get("host"), pid=ctl.info.get("pid"))
        elif ctl.kind is ControlKind.HEARTBEAT:
            if members.state(source) is MemberState.LOST and not self.stopping:
                self._readmit(source, ctl.tokens)
            self._repair_from_heartbeat(source, set(ctl.tokens), ctl.info.get("work_received", 0))
            rss = ctl.info.get("rss_mb")
            if type(rss) is int:
                self.worker_rss_mb[source] = rss
        elif ctl.kind is ControlKind.CHECKED and source in members.alive:
            self._out.append(HostReport(source, "checked", dict(ctl.info)))
        elif ctl.kind is ControlKind.LOG and source in self.workers:
            self._out.append(HostReport(source, "log", dict(ctl.info)))
        elif ctl.kind is ControlKind.STOP_ACK and source in self.stop_sent and source not in self.stop_acks:
            self.stop_acks[source] = dict(ctl.info)
            self._log("info", "worker.stopped", worker=source,
                     totals={k: v for k, v in ctl.info.items() if k != "faults"})
        else:
            self.stats.control_rejected += 1
            self._log("warning", "control.unexpected", worker=source, kind=ctl.kind.value,
                        detail="no STOP was sent to this rank, or it already acknowledged"
                        if ctl.kind is ControlKind.STOP_ACK else "not a worker's message")
            self._garbage(source, len(frame))

    def _readmit(self, rank: Rank, held: tuple[DispatchToken, ...]) -> None:
        """A worker declared lost is talking again (it was hung, not dead): take it back.
        Everything it still holds was revoked when it was lost, so cancel all of it."""
        self.members.readmit(rank)
        stale = tuple(t for t in held if self.inflight.owner(t) != rank)
        for t in stale:  # revoked from it while it was lost, still held: a slot until let go
            self.inflight.hold(t, rank)
        if stale:
            self._out.append(Send(rank, Tag.CONTROL, encode(Control(ControlKind.CANCEL, stale))))
        self._log("warning", "worker.returned", worker=rank, cancelled=len(stale))
        self._fill()

    def _repair_from_heartbeat(self, rank: Rank, held: set[DispatchToken], work_received: int) -> None:
        """Revoke tokens the worker should hold (their WORK arrived) but does not: lost messages."""
        if rank not in self.members.alive:
            return
        for token in self.inflight.tokens_of(rank):
            d = self.inflight.get(token)
            assert d is not None  # one of tokens_of(rank): in the table
            if d.send_index < work_received and token not in held:
                self._log("warning", "task.lost", worker=rank, token=token[:16], reason="not held by worker")
                self._revoke(token, Revocation.LOST, notify=False)
        if self.inflight.release_unheld(rank, held, work_received):
            self._maybe_free.add(rank)  # it let go of revoked dispatches: their slots are free

    def _setup_info(self, rank: Rank) -> dict[str, Any]:
        faults = self.cfg.section("faults")
        return {
            "rank": rank,
            "heartbeat_s": self.cfg["workers.heartbeat_s"],
            "orphan_after_s": self.cfg["workers.orphan_after_s"],
            "poll_cap_ms": self.cfg["workers.poll_cap_ms"],
            "max_batch": self.batch_of.get(rank, 1),  # results in one frame, held at most hold_ms
            "hold_ms": self.cfg["mpi.hold_ms"],
            "log_path": f"{self.setup.get('log_dir', '.')}/worker-{rank}.jsonl",
            "scratch_dir": self.cfg["workers.scratch_dir"],
            "epoch": self.minter.epoch.hex()[:16],
            "files": self.setup.get("files", []),
            "pythonpath": import_path(self.cfg),  # first on the targets' import path (put_first_on_path)
            "faults": faults if faults["enabled"] else {},
            **self.limits.to_info(),  # the worker's sender fits its results to these (worker/sender.py)
            "world_size": self.world_size,
            "turn_s": self.plan.turn_s(),  # a task ends its turn for one waiting (worker/loop.py)
            "yield_s": self.plan.yield_s(),  # ... a fuzz turn sooner, for an engine task
        }

    def _absorb_pause(self, now: float) -> None:
        """After a pause of this process (SIGSTOP, a long GC, a swapped-out VM), the heartbeats
        and results sent meanwhile are still queued: judge silence and deadlines only once they
        had the same chance to arrive, by crediting the pause to every worker and dispatch."""
        last, self._last_tick = self._last_tick, now
        if last is None:
            return
        pause = now - last - 0.05  # beyond the ticker's own period
        if pause <= self.cfg["workers.lost_after_s"] / 2:
            return
        self.members.postpone(pause)
        self.inflight.postpone(pause)
        self._log("warning", "coordinator.paused", paused_s=round(pause, 3))

    def _check_lost(self, now: float) -> None:
        limit = self.cfg["workers.lost_after_s"]
        for rank in self.members.silent(now, limit):
            self._lose_worker(rank, f"no heartbeat for {limit} s")

    def _beat(self, now: float) -> None:
        """Every heartbeat_s, a HEARTBEAT to each alive worker: a worker hearing nothing for
        workers.orphan_after_s takes its host to be cut off and ends itself (worker/loop.py).

        A lost worker gets ONE beat (a frozen worker that wakes finds it queued, so it does not
        take itself for orphaned), not one every period: a frozen rank never takes its messages,
        and under MPICH's shared memory every message queued to it holds a cell of rank 0's
        own send pool, so beating it on would in time stall rank 0's sends to every rank
        (measured: a SIGSTOPped worker beaten every 0.1 s starved the others within seconds)."""
        if now < self._next_beat:
            return
        self._next_beat = now + self.cfg["workers.heartbeat_s"]
        beat = encode(Control(ControlKind.HEARTBEAT))
        for rank in self.members.beat_targets(self.stop_sent):
            self._out.append(Send(rank, Tag.CONTROL, beat))

    def _lose_worker(self, rank: Rank, why: str, *, failed: bool = False) -> None:
        members = self.members
        was_alive = rank in members.alive
        if failed:
            members.fail(rank)
        else:
            members.lose(rank)
        if not was_alive:
            return
        self.inflight.release_rank(rank)
        tokens = self.inflight.tokens_of(rank)
        self._log("error", "worker.lost", worker=rank, reason=why, requeued=len(tokens))
        for token in tokens:
            self._revoke(token, Revocation.LOST, notify=False, charge=True)
        self._fill()
        if not members.alive:
            self.all_lost = True
            self._stop("all workers lost")

    def _garbage(self, source: Rank, size: int = 0) -> None:
        if self.peers.garbage(source, size):
            self._ban(source, f"kept sending garbage (score over {self.peers.policy.ban_garbage:g})")

    def _ban(self, rank: Rank, why: str, *, flood: bool = False) -> None:
        """Stop dispatching to and decoding from a rank for good and requeue its work. It gets
        STOP with the others at the end (a rank that stops early would wait in MPI_Finalize)."""
        if rank not in self.workers or not self.peers.ban(rank, flood=flood):
            return
        tokens = self.inflight.tokens_of(rank)  # (the member table moved it to BANNED)
        self._log("error", "worker.banned", worker=rank, reason=why, requeued=len(tokens))
        self.inflight.release_rank(rank)
        for token in tokens:
            self._revoke(token, Revocation.LOST, notify=False)
        self._fill()
        if not self.members.alive:
            self._stop("all workers lost")
