"""The dispatch table: one record per dispatch token (the only place in-flight work lives), the
windows of committed and revoked tokens, and the slots revoked dispatches still take on their ranks.

This is the state the fence reads (with the member table, `protocol.fence.FenceView`). A record
(`Dispatch`) holds everything about one dispatch: its rank, its work item (what was leased), when
it was sent and its deadline. Nothing else keeps who holds what: the journal's lease of a corpus
work item is written from this record when it is made and ended with it (commit or revoke), so it
follows the table and is never read to decide. Records are keyed by dispatch token only; the rank
index exists for failure handling and counting, and nothing is ever removed "by rank" without
naming each token.

**Held slots.** A dispatch revoked while its worker may still hold it (its deadline passed, or
it was cancelled) is no longer in flight (the fence answers `expired` for it), but the worker is
still busy with it or has it queued until the CANCEL reaches it, and a task stuck in a call the
worker cannot interrupt keeps it busy longer still. Such a revoked dispatch keeps taking one of
its rank's dispatch slots (`occupied`) until the worker shows it no longer holds it: a late
RESULT under its token, a heartbeat that counts its WORK as received but does not list the
token, or the rank being lost (`SlotRelease`). Otherwise the next dispatch would queue behind
the revoked one with its deadline already running, and expire through no fault of its own.
"""

from __future__ import annotations

import enum
import heapq
from dataclasses import dataclass, replace
from typing import Callable, Iterator, cast

from symfence.coordinator.scheduler import WorkItem
from symfence.protocol.ids import DispatchToken, Rank, WorkId
from symfence.protocol.window import RecentTokens


class Revocation(str, enum.Enum):
    """Why a dispatch left the in-flight map without being committed."""

    EXPIRED = "expired"  # its deadline passed
    CANCELLED = "cancelled"  # the campaign stopped before it answered
    LOST = "lost"  # its worker is gone, or does not hold it (heartbeat reconciliation)
    REFUSED = "refused"  # its result came back, but the shared campaign store refused its commit


class SlotRelease(str, enum.Enum):
    """How a revoked dispatch's slot on its rank was found free again."""

    RESULT = "result"  # its late result arrived (quarantined as expired)
    HEARTBEAT = "heartbeat"  # a heartbeat shows the worker no longer holds it
    LOST = "lost"  # its rank was lost or banned


# Revocations after which the worker may still hold the dispatch (a LOST one it does not hold,
# or its rank is gone).
HELD_AFTER = frozenset({Revocation.EXPIRED, Revocation.CANCELLED})
ARRIVED = -1  # send index of a held slot whose WORK is known to have reached the worker


@dataclass(frozen=True, slots=True)
class Dispatch:
    """One dispatch: the one record of who holds what under which token. (With several
    coordinators sharing a campaign it will also carry the shared lease's epoch.)"""

    token: DispatchToken
    rank: Rank
    work_id: WorkId
    sent_at: float
    deadline: float | None  # loop-clock time, None = no deadline
    send_index: int  # n-th WORK sent to this rank (heartbeats report how many arrived)
    item: WorkItem | None = None  # the work item leased under the token (None only in unit tests)


def _never(rank: Rank) -> bool:
    return False


class InFlight:
    def __init__(self, window: int = 65536, banned: Callable[[Rank], bool] | None = None) -> None:
        self._by_token: dict[DispatchToken, Dispatch] = {}
        self._by_rank: dict[Rank, set[DispatchToken]] = {}
        self._deadlines: list[tuple[float, DispatchToken]] = []
        self._sent_to: dict[Rank, int] = {}
        self._held: dict[DispatchToken, tuple[Rank, int]] = {}  # revoked, maybe still held: (rank, send index)
        self._held_by_rank: dict[Rank, set[DispatchToken]] = {}
        self.released: dict[SlotRelease, int] = {why: 0 for why in SlotRelease}
        self.committed = RecentTokens(window)
        self.revoked_tokens = RecentTokens(window)
        # The fence's `banned` question is answered by the member table (members.py), its one owner.
        self.banned: Callable[[Rank], bool] = banned if banned is not None else _never

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

    def work_id_of(self, token: DispatchToken) -> WorkId | None:
        d = self._by_token.get(token)
        return None if d is None else d.work_id

    # --- mutation ------------------------------------------------------------------------------

    def add(self, token: DispatchToken, rank: Rank, work_id: WorkId, now: float, deadline: float | None,
            item: WorkItem | None = None) -> Dispatch:
        if token in self._by_token:
            raise ValueError("token already in flight")  # a minter bug, never a peer's doing
        index = self._sent_to.get(rank, 0)
        self._sent_to[rank] = index + 1
        d = Dispatch(token, rank, work_id, now, deadline, index, item)
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
        """Remove a dispatch without committing it; its token joins the revoked window. After an
        expiry or a cancel its slot stays taken until the worker shows it let go (`release`)."""
        d = self._remove(token)
        self.revoked_tokens.add(token, (why, d.rank))
        if why in HELD_AFTER:
            self.hold(token, d.rank, d.send_index)
        return d

    # --- held slots of revoked dispatches ---------------------------------------------------------

    def revoked_from(self, token: DispatchToken) -> Rank | None:
        """The rank a recently revoked token had been dispatched to."""
        entry = self.revoked_tokens.get(token)  # (why, rank), as `revoke` adds it
        return None if entry is None else cast(tuple[Revocation, Rank], entry)[1]

    def hold(self, token: DispatchToken, rank: Rank, send_index: int = ARRIVED) -> bool:
        """Count a revoked `token` against `rank`'s slots until it is released. `send_index`:
        which WORK to this rank it was (ARRIVED when the worker itself said it holds it).
        Only a token revoked from that rank qualifies (False otherwise): a rank listing another's
        tokens cannot make it hold slots."""
        if token in self._by_token or self.revoked_from(token) != rank:
            return False
        self._held[token] = (rank, send_index)
        self._held_by_rank.setdefault(rank, set()).add(token)
        return True

    def release(self, token: DispatchToken, rank: Rank, why: SlotRelease) -> bool:
        """Free the slot a revoked `token` takes on `rank`; False if it takes none there (a token
        another rank sends back frees nothing)."""
        held = self._held.get(token)
        if held is None or held[0] != rank:
            return False
        del self._held[token]
        self._held_by_rank[rank].discard(token)
        self.released[why] += 1
        return True

    def release_unheld(self, rank: Rank, held: set[DispatchToken] | frozenset[DispatchToken],
                       work_received: int) -> int:
        """A heartbeat: the worker had received `work_received` WORKs and held `held`. Free every
        slot whose WORK it had received but no longer holds; return how many."""
        freed = 0
        for token in list(self._held_by_rank.get(rank, ())):
            index = self._held[token][1]
            if index < work_received and token not in held:
                freed += self.release(token, rank, SlotRelease.HEARTBEAT)
        return freed

    def release_rank(self, rank: Rank) -> int:
        """The rank is lost or banned: none of its slots is counted any more."""
        tokens = list(self._held_by_rank.get(rank, ()))
        for token in tokens:
            self.release(token, rank, SlotRelease.LOST)
        return len(tokens)

    def held_count(self, rank: Rank) -> int:
        """Revoked dispatches the rank may still hold."""
        return len(self._held_by_rank.get(rank, ()))

    def occupied(self, rank: Rank) -> int:
        """Slots taken on the rank: its dispatches in flight plus revoked ones it may still hold."""
        return len(self._by_rank.get(rank, ())) + len(self._held_by_rank.get(rank, ()))  # (hot: no calls)

    def stats_items(self) -> dict[str, int]:
        """fuzzer_stats rows: slots revoked dispatches hold now, and how held slots were freed."""
        return {"slots_held_revoked": len(self._held),
                **{f"slots_freed_by_{why.value}": n for why, n in self.released.items()}}

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
