"""The shared campaign store's values: typed ids, enums and the frozen records it takes and gives.

Nothing here touches a database. A work item is leased to a (coordinator, epoch, token): the
epoch is what the coordinator's registration took from the store's epoch sequence, the token is
the lease's own number from the store's lease sequence (both strictly increasing over the whole
campaign: fencing tokens in Kleppmann's sense, like etcd's revisions or ZooKeeper's zxid).
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import NewType

CoordinatorId = NewType("CoordinatorId", str)
Epoch = NewType("Epoch", int)
LeaseToken = NewType("LeaseToken", int)

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


def coordinator_id(name: str) -> CoordinatorId:
    """A coordinator's name, checked: 1-64 characters of letters, digits, '.', '_', '-'."""
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise ValueError(f"a coordinator id is 1-64 of [A-Za-z0-9._-], not starting with . _ -: {name!r}")
    return CoordinatorId(name)


class ItemState(str, enum.Enum):
    """Where a shared work item is: pending (nobody holds it), leased, or done (committed once)."""

    PENDING = "pending"
    LEASED = "leased"
    DONE = "done"


class RefuseReason(str, enum.Enum):
    """Why a commit (or renewal) was refused; nothing of a refused commit is applied."""

    UNKNOWN_ITEM = "unknown_item"  # no such work id in the store
    ALREADY_DONE = "already_done"  # committed before (by anyone, under any lease)
    STALE_EPOCH = "stale_epoch"  # the coordinator registered again since: this epoch is dead
    LEASE_TAKEN = "lease_taken"  # the lease expired and another lease holds the item now
    LEASE_EXPIRED = "lease_expired"  # the lease expired (still named on the item, but late)
    NOT_LEASED = "not_leased"  # the item is pending: the lease ended (expired and reclaimed, released)


class EventKind(str, enum.Enum):
    """A row of the store's append-only history (what the checker reads)."""

    REGISTER = "register"  # a coordinator took a new epoch
    ADD = "add"  # a work item was added
    LEASE = "lease"  # an item was leased (coordinator, epoch, token, expires)
    RENEW = "renew"  # a lease's expiry was moved (expires)
    COMMIT = "commit"  # the result under that lease was applied
    REFUSE = "refuse"  # a commit was refused (reason); nothing applied
    RELEASE = "release"  # the holder gave the item back (pending again)
    EXPIRE = "expire"  # a lease ended by its expiry: taken over, or reclaimed as pending
    VOID = "void"  # a lease of an older epoch, ended when its coordinator registered again


@dataclass(frozen=True)
class Registration:
    """A coordinator's membership: its id and the epoch it holds from now on."""

    coordinator: CoordinatorId
    epoch: Epoch
    voided: int  # leases of its older epochs ended by this registration


@dataclass(frozen=True)
class WorkItem:
    """A thing to execute, named by its work id (adding the same id twice adds it once)."""

    work_id: str
    payload: bytes = b""

    def __post_init__(self) -> None:
        if not isinstance(self.work_id, str) or not 1 <= len(self.work_id) <= 128:
            raise ValueError(f"a work id is a string of 1-128 characters, got {self.work_id!r}")


@dataclass(frozen=True)
class Lease:
    """One item leased to (coordinator, epoch, token) until `expires` (store clock, seconds)."""

    work_id: str
    coordinator: CoordinatorId
    epoch: Epoch
    token: LeaseToken
    expires: float
    payload: bytes = b""


@dataclass(frozen=True)
class LeaseGrant:
    """What one `lease` call got: the leases, and how many of them were taken over from an
    expired lease (the rest were pending)."""

    leases: tuple[Lease, ...]
    taken_over: int


@dataclass(frozen=True)
class SharedFinding:
    """A crash or hang, deduplicated across coordinators by `identity` (triage's crash identity)."""

    identity: str
    kind: str  # "crash" or "hang"
    data: bytes = b""
    detail: str = ""


def _frozen_counts(counts: Mapping[str, int]) -> Mapping[str, int]:
    return MappingProxyType(dict(counts))


@dataclass(frozen=True)
class Outcome:
    """A result to commit under a lease: all of it is applied in the commit's transaction, or
    (refused) none of it."""

    status: str = "ok"
    new_work: tuple[WorkItem, ...] = ()
    findings: tuple[SharedFinding, ...] = ()
    coverage: frozenset[int] = frozenset()  # edge indices seen (the union is kept)
    counters: Mapping[str, int] = field(default_factory=dict)  # increments, summed per coordinator

    def __post_init__(self) -> None:
        object.__setattr__(self, "counters", _frozen_counts(self.counters))
        object.__setattr__(self, "coverage", frozenset(self.coverage))


@dataclass(frozen=True)
class CommitResult:
    """A commit's answer: `reason` is None when it was applied."""

    work_id: str
    reason: RefuseReason | None
    added_work: int = 0  # new work items (ids not seen before)
    new_findings: tuple[str, ...] = ()  # identities first seen by this commit
    new_edges: int = 0  # edges new to the union

    @property
    def committed(self) -> bool:
        return self.reason is None


@dataclass(frozen=True)
class HistoryEvent:
    """One row of the history, in store order (`seq`); `at` is the store clock when it happened."""

    seq: int
    at: float
    kind: EventKind
    work_id: str | None = None
    coordinator: CoordinatorId | None = None
    epoch: Epoch | None = None
    token: LeaseToken | None = None
    expires: float | None = None
    reason: str = ""


@dataclass(frozen=True)
class ItemRow:
    """A work item's row as the store holds it now (what the checker compares with the history)."""

    work_id: str
    state: ItemState
    coordinator: CoordinatorId | None
    epoch: Epoch | None
    token: LeaseToken | None
    expires: float | None


@dataclass(frozen=True)
class CoordinatorStatus:
    """One row of `symfence status` for a shared campaign: a coordinator and its share."""

    coordinator: CoordinatorId
    epoch: Epoch  # its current epoch
    registrations: int  # how many times it registered (starts and restarts)
    holding: int  # items it holds under an unexpired lease now
    committed: int
    refused: int
    taken_from: int  # its leases that expired and were taken over or reclaimed
    share: float  # committed / all commits (0.0 when nothing is committed yet)
