"""The campaign store's interface: what several coordinators of one campaign share, and its errors.

A store holds the work items and who leases them, the findings (one per crash identity), the
coverage union, counters per coordinator and an append-only history of every lease event. Every
method is one transaction; a commit is a compare-and-set on the exact lease (work id,
coordinator, epoch, token, unexpired) and applies all of its outcome or none of it.
Implementations: `sqlite.SqliteStore` (one host, no server), `postgres.PostgresStore`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Protocol

from symfence.coordinator.shared.records import (
    CommitResult,
    CoordinatorId,
    CoordinatorStatus,
    Epoch,
    HistoryEvent,
    ItemRow,
    ItemState,
    Lease,
    LeaseGrant,
    Outcome,
    Registration,
    SharedFinding,
    WorkItem,
)


class StoreError(RuntimeError):
    """The store cannot be used (one line: what and where)."""


class StaleEpochError(StoreError):
    """A coordinator asked for leases under an epoch that is no longer its current one."""


class UnknownCoordinatorError(StoreError):
    """A coordinator that never registered asked for something only members may do."""


class CampaignStore(Protocol):
    """The shared campaign store. `now` is the store's clock (injectable in each implementation)."""

    def register(self, coordinator: CoordinatorId) -> Registration:
        """Take a new epoch, higher than any epoch anyone held; end this coordinator's older leases."""
        ...

    def add_work(self, items: Iterable[WorkItem]) -> int:
        """Add work items, pending; an id already present is skipped. Returns how many were new."""
        ...

    def lease(self, coordinator: CoordinatorId, epoch: Epoch, count: int, ttl_s: float) -> LeaseGrant:
        """Lease up to `count` items until now + ttl_s: expired leases first (taken over), then
        pending items in the order they were added. Raises StaleEpochError for a dead epoch."""
        ...

    def renew(self, leases: Iterable[Lease], ttl_s: float) -> tuple[Lease, ...]:
        """Extend the leases still current (held and unexpired) to now + ttl_s; returns them."""
        ...

    def commit(self, lease: Lease, outcome: Outcome) -> CommitResult:
        """Apply `outcome` if `lease` is still the item's current lease (compare-and-set);
        otherwise refuse it with its reason and apply nothing."""
        ...

    def commit_batch(self, commits: Sequence[tuple[Lease, Outcome]]) -> tuple[CommitResult, ...]:
        """Several commits in one transaction (a group commit), each fenced on its own: a refused
        one applies nothing, the others apply all. Results in the order given."""
        ...

    def add_findings(self, coordinator: CoordinatorId, epoch: Epoch, work_id: str,
                     findings: Iterable[SharedFinding]) -> tuple[str, ...]:
        """Record findings confirmed after their work item's commit (a re-run agreed), one per
        crash identity, the first finder kept; returns the identities new to the campaign.
        Raises StaleEpochError for a dead epoch."""
        ...

    def release(self, leases: Iterable[Lease]) -> int:
        """Give back the leases still current (their items become pending). Returns how many."""
        ...

    def expire(self) -> int:
        """End every expired lease (its item pending again). Returns how many."""
        ...

    def status(self) -> tuple[CoordinatorStatus, ...]:
        """One row per coordinator that ever registered: epoch, holdings, commits, share."""
        ...

    def counts(self) -> Mapping[ItemState, int]:
        """How many items are in each state."""
        ...

    def findings(self) -> tuple[tuple[str, str, CoordinatorId, str], ...]:
        """(identity, kind, first finder, work id) of every finding, one per crash identity."""
        ...

    def coverage(self) -> frozenset[int]:
        """The union of every coordinator's committed edges."""
        ...

    def counters(self) -> Mapping[str, int]:
        """Every counter summed over the coordinators."""
        ...

    def history(self) -> tuple[HistoryEvent, ...]:
        """The whole history, in store order."""
        ...

    def items(self) -> tuple[ItemRow, ...]:
        """Every work item's current row."""
        ...

    def close(self) -> None:
        """Close the connection (the data stays)."""
        ...


__all__ = [
    "CampaignStore",
    "CommitResult",
    "Outcome",
    "StaleEpochError",
    "StoreError",
    "UnknownCoordinatorError",
]
