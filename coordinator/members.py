"""The member table: each worker rank's one state (new, alive, lost, failed, banned) and when it was last heard.

This is the only place membership lives: the fence asks it whether a rank is banned
(`protocol.fence.FenceView.banned`), peers.py asks it too (and keeps only health: scores,
strikes, suspensions), dispatch asks it who is alive. Every change goes through one transition
table (`TRANSITIONS`, as h11 keeps its connection states): a move the table does not list
changes nothing and returns False, so a caller can tell a first ban from a repeated one.

    NEW --hello--> ALIVE --lose--> LOST --readmit/hello--> ALIVE
    NEW, ALIVE, LOST --ban--> BANNED             (never dispatched to or decoded again)
    any but FAILED --fail--> FAILED              (MPI reported it dead: it never comes back)

Sans-IO: no MPI, no clock of its own (times are passed in).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable

from symfence.protocol.ids import Rank


class MemberState(str, enum.Enum):
    NEW = "new"  # not heard from yet (no HELLO)
    ALIVE = "alive"
    LOST = "lost"  # silent for too long; taken back if it speaks again
    FAILED = "failed"  # reported dead by MPI (ULFM) or unreachable: never comes back
    BANNED = "banned"  # kept sending garbage (peers.py decides): never dispatched to or decoded again


class Event(str, enum.Enum):
    HELLO = "hello"
    LOSE = "lose"
    READMIT = "readmit"
    BAN = "ban"
    FAIL = "fail"


_S, _E = MemberState, Event
TRANSITIONS: dict[tuple[MemberState, Event], MemberState] = {
    (_S.NEW, _E.HELLO): _S.ALIVE,
    (_S.LOST, _E.HELLO): _S.ALIVE,
    (_S.ALIVE, _E.LOSE): _S.LOST,
    (_S.LOST, _E.READMIT): _S.ALIVE,
    (_S.NEW, _E.BAN): _S.BANNED,
    (_S.ALIVE, _E.BAN): _S.BANNED,
    (_S.LOST, _E.BAN): _S.BANNED,
    (_S.NEW, _E.FAIL): _S.FAILED,
    (_S.ALIVE, _E.FAIL): _S.FAILED,
    (_S.LOST, _E.FAIL): _S.FAILED,
    (_S.BANNED, _E.FAIL): _S.FAILED,
}


class Members:
    """Each rank's state, the set of alive ranks (an index the hot path reads) and last-heard times."""

    def __init__(self, ranks: Iterable[Rank] = ()) -> None:
        self._state: dict[Rank, MemberState] = {Rank(r): MemberState.NEW for r in ranks}
        self._alive: set[Rank] = set()  # index of the ALIVE ranks; read it, never change it
        self._banned: set[Rank] = set()  # index of the BANNED ranks (the fence asks per frame)
        self.last_seen: dict[Rank, float] = {}
        self._beaten_lost: set[Rank] = set()  # lost ranks already sent their one heartbeat (`beat_targets`)

    # --- reading -----------------------------------------------------------------------------

    def state(self, rank: Rank) -> MemberState:
        return self._state.get(rank, MemberState.NEW)

    @property
    def alive(self) -> set[Rank]:
        """The alive ranks (the table's own index: do not change it)."""
        return self._alive

    def banned(self, rank: Rank) -> bool:
        return rank in self._banned

    def banned_index(self) -> set[Rank]:
        """The set of banned ranks itself (kept by this table; for hot paths to read, never change)."""
        return self._banned

    def ranks_in(self, state: MemberState) -> list[Rank]:
        return sorted(r for r, s in self._state.items() if s is state)

    # --- changing -----------------------------------------------------------------------------

    def _move(self, rank: Rank, event: Event) -> bool:
        old = self._state.get(rank, MemberState.NEW)
        new = TRANSITIONS.get((old, event))
        if new is None:
            return False
        self._state[rank] = new
        if old is MemberState.ALIVE:
            self._alive.discard(rank)
        elif old is MemberState.BANNED:
            self._banned.discard(rank)
        if new is MemberState.ALIVE:
            self._alive.add(rank)
        elif new is MemberState.BANNED:
            self._banned.add(rank)
        return True

    def hello(self, rank: Rank) -> bool:
        """A HELLO: True if it made the rank alive."""
        return self._move(rank, Event.HELLO)

    def heard(self, rank: Rank, now: float) -> None:
        self.last_seen[rank] = now

    def lose(self, rank: Rank) -> bool:
        return self._move(rank, Event.LOSE)

    def readmit(self, rank: Rank) -> bool:
        return self._move(rank, Event.READMIT)

    def ban(self, rank: Rank) -> bool:
        """True for the first ban of a rank that could be banned."""
        return self._move(rank, Event.BAN)

    def fail(self, rank: Rank) -> bool:
        return self._move(rank, Event.FAIL)

    # --- time ---------------------------------------------------------------------------------

    def silent(self, now: float, limit_s: float) -> list[Rank]:
        """Alive ranks not heard from for more than `limit_s`."""
        seen = self.last_seen
        return [r for r in sorted(self._alive) if now - seen.get(r, now) > limit_s]

    def postpone(self, seconds: float) -> None:
        """The coordinator was paused: credit the pause to every rank's silence."""
        for rank in self.last_seen:
            self.last_seen[rank] += seconds

    def beat_targets(self, exclude: set[Rank]) -> list[Rank]:
        """Ranks to send the coordinator's HEARTBEAT now: every alive rank, and each lost one
        once (membership.py `_beat` says why only once); not those in `exclude`."""
        lost = {r for r, s in self._state.items() if s is MemberState.LOST}
        self._beaten_lost &= lost  # a readmitted rank is beaten as alive; lost again, once more
        targets = sorted((self._alive | (lost - self._beaten_lost)) - exclude)
        self._beaten_lost |= lost
        return targets
