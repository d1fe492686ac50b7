"""Per-rank health on the coordinator: fair turns, garbage scores and bans, expiry strikes, work caps.

No rank can take the campaign down by itself (issue 10). What this module bounds, per rank:
- **Turns.** Received frames wait in one queue per rank; each loop turn takes at most
  `frames_per_turn` frames (and about `bytes_per_turn` bytes) from each rank in round robin, so
  a flooding rank delays an honest one by one turn at most. An honest rank never has more than
  its dispatch depth of results (plus heartbeats) waiting, so a rank with more than
  `backlog_frames` waiting is flooding and is banned.
- **Garbage.** Every quarantined result and rejected CONTROL frame adds to the rank's garbage
  score (heavier for big frames); the score leaks at `garbage_leak_per_s`. Over `ban_garbage`
  the rank is banned: counted, logged (`worker.banned`), its work requeued, and from then on
  its frames are counted (reason `banned`) without being decoded.
- **Expiries.** `expiry_strikes` dispatches in a row that expired on a rank (no commit between)
  suspend it: no dispatch for `suspend_s` (doubling each time), then one dispatch on
  probation. Retried work prefers another rank (`scheduler.WorkItem.avoid`).
- **Claims relative to work.** A result's executions are believed up to what its measured
  time allows (`max_execs_per_s`); its candidates up to those executions; the new edges it
  may add to the coverage map up to `new_edges_per_exec` per execution, at most
  `max_new_edges_per_result`, and out of a per-rank budget refilled at `new_edges_per_s`.

Everything here is plain state on the loop thread, with an injectable clock. Whether a rank is
banned is kept by the member table (members.py), its one owner; this module decides a ban and
keeps the health that leads to one.
"""

from __future__ import annotations

import collections
import enum
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from symfence.coordinator.members import Members
from symfence.protocol.ids import Rank


class PeerState(str, enum.Enum):
    ACTIVE = "active"
    SUSPENDED = "suspended"  # its dispatches kept expiring: none for a while
    BANNED = "banned"  # (read from the member table, never stored here) kept sending garbage


@dataclass(frozen=True)
class PeerPolicy:
    frames_per_turn: int = 32
    bytes_per_turn: int = 1 << 20
    backlog_frames: int = 4096
    ban_garbage: float = 200.0  # 0 = never ban
    garbage_leak_per_s: float = 20.0
    garbage_frame_bytes: int = 16384  # a frame weighs 1 + min(len, garbage_cap_bytes) // this
    garbage_cap_bytes: int = 1 << 18  # (what is over the size limit is drained unread)
    expiry_strikes: int = 3  # 0 = never suspend
    suspend_s: float = 10.0
    max_execs_per_s: float = 100_000.0
    new_edges_per_exec: int = 1024
    max_new_edges_per_result: int = 32768
    new_edges_per_s: float = 512.0
    new_edges_burst: int = 32768
    max_pending_claims: int = 16  # unconfirmed crash/hang claims per rank

    @classmethod
    def from_config(cls, cfg: Any) -> PeerPolicy:
        try:
            section = cfg.section("peers")
        except KeyError:  # a config without the section: defaults
            return cls()
        return cls(**{k: v for k, v in section.items() if k in cls.__dataclass_fields__})


@dataclass
class Peer:
    rank: Rank
    state: PeerState = PeerState.ACTIVE
    garbage: float = 0.0
    garbage_at: float = 0.0
    strikes: int = 0
    suspended_until: float = 0.0
    suspensions: int = 0
    edge_budget: float = 0.0
    edge_at: float = 0.0
    pending_claims: int = 0
    queue: collections.deque[Any] = field(default_factory=collections.deque)


class Peers:
    def __init__(self, policy: PeerPolicy, clock: Callable[[], float], members: Members | None = None) -> None:
        self.policy = policy
        self.clock = clock
        self.members = Members() if members is None else members  # owns the bans
        self._banned_ranks = self.members.banned_index()  # its index, read here without a call per frame
        self._peers: dict[Rank, Peer] = {}
        self._order: list[Rank] = []
        self._next = 0  # round-robin start, so no rank always goes first
        self._queued = 0  # frames waiting in all ranks' queues (pending() per turn is O(1))
        self.banned_total = 0
        self.suspended_total = 0
        self.flood_bans = 0
        self.commits: collections.Counter[Rank] = collections.Counter()

    def peer(self, rank: Rank) -> Peer:
        """The rank's record, made on first sight (hot paths try `self._peers.get(rank)` first)."""
        p = self._peers.get(rank)
        if p is None:
            now = self.clock()
            p = self._peers[rank] = Peer(rank, garbage_at=now, edge_at=now,
                                         edge_budget=float(self.policy.new_edges_burst))
            self._order.append(rank)
        return p

    def state(self, rank: Rank) -> PeerState:
        return PeerState.BANNED if rank in self._banned_ranks else self.peer(rank).state

    def banned(self, rank: Rank) -> bool:
        return rank in self._banned_ranks

    def ranks_in(self, state: PeerState) -> list[Rank]:
        return sorted(r for r in self._peers if self.state(r) is state)

    # --- fair intake ------------------------------------------------------------------------

    def enqueue(self, rank: Rank, item: Any) -> bool:
        """Queue a received frame; False when the rank's backlog shows it is flooding."""
        p = self._peers.get(rank) or self.peer(rank)
        p.queue.append(item)
        self._queued += 1
        return len(p.queue) <= self.policy.backlog_frames or rank in self._banned_ranks

    def pending(self) -> bool:
        return self._queued > 0

    def turn(self, size: Callable[[Any], int]) -> Iterator[tuple[Rank, Any]]:
        """One round: up to `frames_per_turn` frames / `bytes_per_turn` bytes from each rank
        (at least one frame each). A banned rank's frames are all taken: they cost a count."""
        n = len(self._order)
        start, self._next = self._next, (self._next + 1) % max(n, 1)
        for i in range(n):
            p = self._peers[self._order[(start + i) % n]]
            if p.rank in self._banned_ranks:
                while p.queue:
                    self._queued -= 1
                    yield p.rank, p.queue.popleft()
                continue
            frames = used = 0
            while p.queue and frames < self.policy.frames_per_turn and (frames == 0 or used < self.policy.bytes_per_turn):
                item = p.queue.popleft()
                self._queued -= 1
                frames += 1
                used += size(item)
                yield p.rank, item

    # --- garbage and bans -----------------------------------------------------------------

    def garbage(self, rank: Rank, frame_bytes: int = 0) -> bool:
        """Count one bad frame against the rank; True if that crosses the ban threshold."""
        pol = self.policy
        p = self.peer(rank)
        if pol.ban_garbage <= 0 or rank in self._banned_ranks:
            return False
        now = self.clock()
        p.garbage = max(0.0, p.garbage - (now - p.garbage_at) * pol.garbage_leak_per_s)
        p.garbage_at = now
        p.garbage += 1 + min(frame_bytes, pol.garbage_cap_bytes) // pol.garbage_frame_bytes
        return p.garbage > pol.ban_garbage

    def ban(self, rank: Rank, *, flood: bool = False) -> bool:
        """Ban the rank (in the member table); False if it already was, or cannot be (failed)."""
        self.peer(rank)
        if not self.members.ban(rank):
            return False
        self.banned_total += 1
        self.flood_bans += flood
        return True

    # --- expiries and suspension ---------------------------------------------------------------

    def expired(self, rank: Rank, *, others: bool = True) -> bool:
        """A dispatch on the rank expired; True if the rank just got suspended. A rank is not
        suspended when no other rank could take its work (`others` False): slow beats idle."""
        pol = self.policy
        p = self.peer(rank)
        p.strikes += 1
        if p.state is not PeerState.ACTIVE or rank in self._banned_ranks or not pol.expiry_strikes or p.strikes < pol.expiry_strikes or not others:
            return False
        p.state = PeerState.SUSPENDED
        p.suspended_until = self.clock() + pol.suspend_s * (2 ** p.suspensions)
        p.suspensions += 1
        self.suspended_total += 1
        return True

    def committed(self, rank: Rank) -> None:
        p = self._peers.get(rank) or self.peer(rank)
        p.strikes = 0
        self.commits[rank] += 1

    def capacity(self, rank: Rank, depth: int) -> int:
        """How many dispatches the rank may hold now: 0 while suspended or banned, 1 on probation
        (the first dispatch after a suspension), else the depth."""
        p = self._peers.get(rank) or self.peer(rank)
        if rank in self._banned_ranks:
            return 0
        if p.state is PeerState.SUSPENDED:
            if self.clock() < p.suspended_until:
                return 0
            p.state = PeerState.ACTIVE
            p.strikes = max(0, self.policy.expiry_strikes - 1)  # one more expiry suspends again
        if self.policy.expiry_strikes and p.strikes >= self.policy.expiry_strikes - 1 and p.suspensions:
            return 1
        return depth

    def suspended_until(self, rank: Rank) -> float:
        return self.peer(rank).suspended_until

    # --- claims relative to work ------------------------------------------------------------

    def plausible_execs(self, claimed: int, elapsed_s: float) -> int:
        return max(1, min(claimed, 1 + int(max(elapsed_s, 0.0) * self.policy.max_execs_per_s)))

    def new_edge_allowance(self, rank: Rank, execs: int) -> int:
        pol = self.policy
        p = self.peer(rank)
        now = self.clock()
        p.edge_budget = min(float(pol.new_edges_burst), p.edge_budget + (now - p.edge_at) * pol.new_edges_per_s)
        p.edge_at = now
        return int(min(pol.max_new_edges_per_result, pol.new_edges_per_exec * execs, p.edge_budget))

    def spend_edges(self, rank: Rank, n: int) -> None:
        self.peer(rank).edge_budget -= n

    def edge_room(self, rank: Rank, execs: int, now: float) -> int:
        """`new_edge_allowance` at `now` without storing the refill (a read, for the pure verdict)."""
        pol = self.policy
        p = self._peers.get(rank) or self.peer(rank)
        budget = min(float(pol.new_edges_burst), p.edge_budget + (now - p.edge_at) * pol.new_edges_per_s)
        return int(min(pol.max_new_edges_per_result, pol.new_edges_per_exec * execs, budget))

    def take_edges(self, rank: Rank, n: int, now: float) -> None:
        """Refill the rank's budget to `now`, then spend `n` never-seen edges of it."""
        pol = self.policy
        p = self._peers.get(rank) or self.peer(rank)
        refilled = p.edge_budget + (now - p.edge_at) * pol.new_edges_per_s
        p.edge_budget = min(float(pol.new_edges_burst), refilled) - n
        p.edge_at = now

    def claim(self, rank: Rank) -> bool:
        """Reserve room for one unconfirmed crash/hang claim of the rank; False when it has too many."""
        p = self.peer(rank)
        if p.pending_claims >= self.policy.max_pending_claims:
            return False
        p.pending_claims += 1
        return True

    def claim_done(self, rank: Rank) -> None:
        p = self.peer(rank)
        p.pending_claims = max(0, p.pending_claims - 1)

    def stats_items(self) -> dict[str, int]:
        return {"workers_banned": self.banned_total, "workers_banned_flooding": self.flood_bans,
                "workers_suspended": self.suspended_total,
                **{f"committed_rank_{r}": n for r, n in sorted(self.commits.items())}}
