"""The work items' lease state machine: one transition table over WorkState, pure (no SQLite).

Every change of a work item's state goes through `Leases._move`, which looks the move up in
`TRANSITIONS`: a move the table does not list raises `LeaseError` and changes nothing (as h11's
`_state.py` does). The moves that carry a dispatch token (commit, requeue, fail) are first
fenced by it: a token that does not hold the lease is a stale result, answered False, not an
error. Work item lifecycle (docs/design.md, "Leases, the journal and recovery")::

    pending --LEASE(token)--> leased(token) --COMMIT(token)--> done(status)
       ^                         |  \\--FAIL(token)--> failed
       +-----REQUEUE(token)------+       failed --RETRY (--retry-failed)--> pending
       +-----VOID---------------+   recovery: the leases of a dead coordinator are void

`attempts` counts only the revocations the work itself caused (its deadline passed, or its
worker was lost while running it): a lease voided by a coordinator restart or cancelled by a
stop is not charged, so restarts never use up a work item's `dispatch.max_attempts`.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from symfence.coordinator.journal.errors import LeaseError
from symfence.coordinator.journal.records import WorkState
from symfence.protocol.messages import Status

RECOVERY_REASON = "requeued: coordinator restarted"
RETRY_REASON = "retry requested (--retry-failed)"


class Move(str, enum.Enum):
    """What may happen to a work item's lease."""

    LEASE = "lease"  # dispatched under a token
    COMMIT = "commit"  # its result was committed
    REQUEUE = "requeue"  # revoked (deadline, worker lost, cancelled): to be dispatched again
    FAIL = "fail"  # revoked for good (out of attempts)
    RETRY = "retry"  # a failed item is given another chance (--retry-failed)
    VOID = "void"  # a lease of a previous coordinator run (its token died with it)


_P, _L, _D, _F = WorkState.PENDING, WorkState.LEASED, WorkState.DONE, WorkState.FAILED

# The legal moves, listed once: state -> {move: next state}. Anything else raises LeaseError.
TRANSITIONS: Mapping[WorkState, Mapping[Move, WorkState]] = MappingProxyType({
    _P: MappingProxyType({Move.LEASE: _L}),
    _L: MappingProxyType({Move.COMMIT: _D, Move.REQUEUE: _P, Move.FAIL: _F, Move.VOID: _P}),
    _D: MappingProxyType({}),
    _F: MappingProxyType({Move.RETRY: _P}),
})


@dataclass(slots=True)
class LeaseRow:
    """The mutable lease record of one work item (the `work` table's row, without its id)."""

    queue_id: int
    state: WorkState
    token: str | None  # set exactly while leased
    attempts: int
    reason: str  # why it failed / was last requeued
    status: Status | None  # set exactly once done


class Leases:
    """Every work item's lease row, the count per state, and the ids changed since the last
    `take_changed` (what the next group commit writes). Only `_move` changes a state."""

    __slots__ = ("_rows", "_counts", "_changed")

    def __init__(self) -> None:
        self._rows: dict[str, LeaseRow] = {}
        self._counts: dict[WorkState, int] = {state: 0 for state in WorkState}
        self._changed: set[str] = set()

    # --- reading ---------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._rows)

    def __contains__(self, work_id: object) -> bool:
        return work_id in self._rows

    def __iter__(self) -> Iterator[str]:
        return iter(self._rows)

    def get(self, work_id: str) -> LeaseRow | None:
        """The row of `work_id` (do not change it: the moves below are the only writers)."""
        return self._rows.get(work_id)

    def count(self, state: WorkState) -> int:
        return self._counts[state]

    def items(self) -> Iterator[tuple[str, LeaseRow]]:
        return iter(self._rows.items())

    def holds(self, work_id: str, token: str) -> bool:
        """Whether `token` holds the lease of `work_id` (the journal-level fence)."""
        row = self._rows.get(work_id)
        return row is not None and row.state is _L and row.token == token

    # --- adding ----------------------------------------------------------------------------

    def add(self, work_id: str, queue_id: int) -> None:
        """A new work item, pending."""
        if work_id in self._rows:
            raise LeaseError(f"work {work_id[:16]} exists already")
        self._rows[work_id] = LeaseRow(queue_id, _P, None, 0, "", None)
        self._counts[_P] += 1
        self._changed.add(work_id)

    def load(self, work_id: str, row: LeaseRow) -> None:
        """A row as the store holds it (durable, so not marked changed; recovery checks it)."""
        self._rows[work_id] = row
        self._counts[row.state] += 1

    def take_changed(self) -> set[str]:
        """The ids changed since the last call, and forget them."""
        changed, self._changed = self._changed, set()
        return changed

    # --- the moves ---------------------------------------------------------------------------

    def lease(self, work_id: str, token: str) -> int:
        """pending -> leased(token). Returns this dispatch's attempt number (charged attempts + 1)."""
        row = self._rows.get(work_id)
        if row is None:
            raise LeaseError(f"cannot lease unknown work {work_id[:16]}")
        self._move(work_id, row, Move.LEASE)
        row.token = token
        return row.attempts + 1

    def commit(self, work_id: str, token: str, status: Status) -> bool:
        """leased(token) -> done(status), only if `token` holds the lease (compare-and-set)."""
        row = self._rows.get(work_id)
        if row is None or row.state is not _L or row.token != token:
            return False
        self._move(work_id, row, Move.COMMIT)
        row.token = None
        row.status = status
        return True

    def requeue(self, work_id: str, token: str, reason: str, *, charge: bool) -> bool:
        """leased(token) -> pending, only if `token` holds the lease; `charge` counts an attempt."""
        return self._release(work_id, token, Move.REQUEUE, reason, charge)

    def fail(self, work_id: str, token: str, reason: str) -> bool:
        """leased(token) -> failed, only if `token` holds the lease; charged."""
        return self._release(work_id, token, Move.FAIL, reason, True)

    def retry_failed(self) -> int:
        """Every failed item -> pending with no attempts charged. Returns how many."""
        retried = [(work_id, row) for work_id, row in self._rows.items() if row.state is _F]
        for work_id, row in retried:
            self._move(work_id, row, Move.RETRY)
            row.attempts = 0
            row.reason = RETRY_REASON
        return len(retried)

    def void_leases(self) -> int:
        """Every leased item -> pending, uncharged (the previous run's tokens died with it)."""
        voided = [(work_id, row) for work_id, row in self._rows.items() if row.state is _L]
        for work_id, row in voided:
            self._move(work_id, row, Move.VOID)
            row.token = None
            row.reason = RECOVERY_REASON
        return len(voided)

    def _release(self, work_id: str, token: str, move: Move, reason: str, charge: bool) -> bool:
        row = self._rows.get(work_id)
        if row is None or row.state is not _L or row.token != token:
            return False
        self._move(work_id, row, move)
        row.token = None
        row.reason = reason
        if charge:
            row.attempts += 1
        return True

    def _move(self, work_id: str, row: LeaseRow, move: Move) -> None:
        """The one place a state changes: look the move up in TRANSITIONS, or raise."""
        new = TRANSITIONS[row.state].get(move)
        if new is None:
            raise LeaseError(f"cannot {move.value} work {work_id[:16]}: it is {row.state.value}")
        counts = self._counts
        counts[row.state] -= 1
        counts[new] += 1
        row.state = new
        self._changed.add(work_id)
