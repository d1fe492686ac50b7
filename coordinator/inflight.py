"""The token-indexed in-flight map, plus the windows of committed and revoked tokens.

This is the state the fence reads (it implements `protocol.fence.FenceView`). Entries are
keyed by dispatch token only; the rank index exists for failure handling and counting,
and nothing is ever removed "by rank" without naming each token.
"""

from __future__ import annotations

import enum
import heapq
from dataclasses import dataclass, replace
from typing import Iterator

from symfence.protocol.ids import DispatchToken, Rank, WorkId
from symfence.protocol.window import RecentTokens


class Revocation(str, enum.Enum):
    """Why a dispatch left the in-flight map without being committed."""

    EXPIRED = "expired"  # its deadline passed
    CANCELLED = "cancelled"  # the campaign stopped before it answered
    LOST = "lost"  # its worker is gone, or does not hold it (heartbeat reconciliation)


@dataclass(frozen=True, slots=True)
class Dispatch:
    token: DispatchToken
    rank: Rank
    work_id: WorkId
    sent_at: float
    deadline: float | None  # loop-clock time, None = no deadline
    send_index: int  # n-th WORK sent to this rank (heartbeats report how many arrived)


class InFlight:
    def __init__(self, window: int = 65536) -> None:
        self._by_token: dict[DispatchToken, Dispatch] = {}
        self._by_rank: dict[Rank, set[DispatchToken]] = {}
        self._deadlines: list[tuple[float, DispatchToken]] = []
        self._sent_to: dict[Rank, int] = {}
        self.committed = RecentTokens(window)
        self.revoked_tokens = RecentTokens(window)
        self.banned_ranks: set[Rank] = set()  # filled by coordinator.peers when it bans a rank

    # --- FenceView ------------------------------------------------------------------------------

    def owner(self, token: DispatchToken) -> Rank | None:
        d = self._by_token.get(token)
        return None if d is None else d.rank

    def recently_committed(self, token: DispatchToken) -> bool:
        return token in self.committed

    def revoked(self, token: DispatchToken) -> bool:
        return token in self.revoked_tokens

    def in_flight_count(self, rank: Rank) -> int:
        return len(self._by_rank.get(rank, ()))

    def banned(self, rank: Rank) -> bool:
        return rank in self.banned_ranks

    def work_id_of(self, token: DispatchToken) -> WorkId | None:
        d = self._by_token.get(token)
        return None if d is None else d.work_id

    # --- mutation ------------------------------------------------------------------------------

    def add(self, token: DispatchToken, rank: Rank, work_id: WorkId, now: float, deadline: float | None) -> Dispatch:
        if token in self._by_token:
            raise ValueError("token already in flight")  # a minter bug, never a peer's doing
        index = self._sent_to.get(rank, 0)
        self._sent_to[rank] = index + 1
        d = Dispatch(token, rank, work_id, now, deadline, index)
        self._by_token[token] = d
        self._by_rank.setdefault(rank, set()).add(token)
        if deadline is not None:
            heapq.heappush(self._deadlines, (deadline, token))
        return d

    def commit(self, token: DispatchToken) -> Dispatch:
        """Remove a `current` dispatch; its token joins the committed window."""
        d = self._remove(token)
        self.committed.add(token, d.rank)
        return d

    def revoke(self, token: DispatchToken, why: Revocation) -> Dispatch:
        d = self._remove(token)
        self.revoked_tokens.add(token, why)
        return d

    def postpone(self, seconds: float) -> None:
        """Move every deadline `seconds` later (the coordinator was paused: not the work's fault).
        Adding one constant keeps the heap ordered."""
        self._deadlines = [(deadline + seconds, token) for deadline, token in self._deadlines]
        for token, d in self._by_token.items():
            if d.deadline is not None:
                self._by_token[token] = replace(d, deadline=d.deadline + seconds)

    def _remove(self, token: DispatchToken) -> Dispatch:
        d = self._by_token.pop(token)
        self._by_rank[d.rank].discard(token)
        return d

    # --- queries ---------------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._by_token)

    def __contains__(self, token: object) -> bool:
        return token in self._by_token

    def get(self, token: DispatchToken) -> Dispatch | None:
        return self._by_token.get(token)

    def tokens_of(self, rank: Rank) -> list[DispatchToken]:
        return sorted(self._by_rank.get(rank, ()), key=lambda t: self._by_token[t].send_index)

    def sent_to(self, rank: Rank) -> int:
        return self._sent_to.get(rank, 0)

    def due(self, now: float) -> Iterator[Dispatch]:
        """Dispatches whose deadline has passed (lazy heap: entries already gone are skipped)."""
        while self._deadlines and self._deadlines[0][0] <= now:
            _, token = heapq.heappop(self._deadlines)
            d = self._by_token.get(token)
            if d is not None:
                yield d
