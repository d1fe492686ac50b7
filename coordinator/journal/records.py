"""The journal's records: the frozen values it takes and hands out, and the enums they use.

Nothing here touches SQLite or the mirror: inputs to add (`NewEntry`, `NewFinding`), what the
journal assigned (`CorpusEntry`, `Finding`), a work item's lease (`WorkLease`), what a commit,
a flush and an open report, and `FlushBatch`, the copy of the mirror one group commit writes.
"""

from __future__ import annotations

import enum
import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass

from symfence.protocol.ids import DispatchToken, WorkId
from symfence.protocol.messages import Status

RECOVERED_WORK_ID = WorkId("0" * 64)  # the finder of a finding re-admitted from crashes/

_HEX64 = re.compile(r"[0-9a-f]{64}")


class WorkState(str, enum.Enum):
    """Where a work item is in its lease life (leases.TRANSITIONS says how it moves)."""

    PENDING = "pending"
    LEASED = "leased"
    DONE = "done"
    FAILED = "failed"


class FindingKind(str, enum.Enum):
    """What a finding is: a crash or a hang (ids count per kind)."""

    CRASH = "crash"
    HANG = "hang"


def _check_sha256(data: bytes, sha256: str) -> None:
    if hashlib.sha256(data).hexdigest() != sha256:
        raise ValueError(f"sha256 {sha256[:16]!r}... does not match the data")


@dataclass(frozen=True)
class NewEntry:
    """An input to add to the corpus; it also becomes a pending work item named `work_id`."""

    data: bytes
    sha256: str
    work_id: WorkId
    target: str = ""
    bound: int = 0
    parent: int | None = None  # queue id of the input it came from
    origin: str = "seed"  # "seed" or the executor's name
    new_bits: int = 0
    found_s: float = 0.0

    def __post_init__(self) -> None:
        _check_sha256(self.data, self.sha256)
        if not _HEX64.fullmatch(self.work_id):
            raise ValueError(f"work_id must be 64 lowercase hex characters, got {self.work_id!r}")
        if self.new_bits not in (0, 1, 2):
            raise ValueError(f"new_bits must be 0, 1 or 2, got {self.new_bits!r}")


@dataclass(frozen=True)
class CorpusEntry:
    """A corpus entry with the queue id the journal assigned it."""

    queue_id: int
    sha256: str
    data: bytes
    target: str
    bound: int
    parent: int | None
    origin: str
    new_bits: int
    found_s: float
    work_id: WorkId
    attempts = 0  # not a field: read like a pending `WorkView`'s (a new entry was never revoked)


@dataclass(frozen=True)
class NewFinding:
    """A crash or hang to record; its work_id is the one of the task being committed."""

    kind: FindingKind
    data: bytes
    sha256: str
    target: str = ""
    detail: str = ""  # traceback or timeout description
    found_s: float = 0.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", FindingKind(self.kind))
        _check_sha256(self.data, self.sha256)


@dataclass(frozen=True)
class Finding:
    """A crash or hang with the id the journal assigned it (ids count per kind)."""

    kind: FindingKind
    finding_id: int
    sha256: str
    data: bytes
    target: str
    detail: str
    work_id: WorkId
    found_s: float


@dataclass(frozen=True)
class WorkLease:
    """The lease state of one work item (the scheduler's queued item is scheduler.WorkItem)."""

    work_id: WorkId
    queue_id: int
    state: WorkState
    token: DispatchToken | None
    attempts: int
    reason: str
    status: Status | None


@dataclass(frozen=True)
class WorkView:
    """A pending work item with what the scheduler needs to dispatch it again."""

    work_id: WorkId
    queue_id: int
    sha256: str
    data: bytes
    target: str
    bound: int
    new_bits: int
    origin: str
    attempts: int


@dataclass(frozen=True)
class CommitReceipt:
    """What one successful commit added (not yet durable: see `FlushReceipt`)."""

    work_id: WorkId
    status: Status
    entries: tuple[CorpusEntry, ...]
    skipped_entries: int  # input or work_id already known


@dataclass(frozen=True)
class FlushReceipt:
    """What one flush made durable: only these entries and findings may be written as files."""

    entries: tuple[CorpusEntry, ...] = ()
    findings: tuple[Finding, ...] = ()
    ops: int = 0
    duration_s: float = 0.0


@dataclass(frozen=True)
class FlushBatch:
    """Everything one flush writes, copied off the mirror (`Journal.prepare`): field tuples and
    immutable records only, so another thread can write it while the mirror changes."""

    entries: tuple[CorpusEntry, ...]
    findings: tuple[Finding, ...]
    work: Mapping[str, tuple]  # work_id -> the work row's fields (integrity.COLUMNS order)
    provenance: tuple[tuple[str, int, int, int | None], ...]
    coverage: bytes | None  # None: unchanged
    counters: Mapping[str, int] | None  # None: unchanged
    run_end: tuple | None  # the runs row's fields, when this run's end is recorded
    ops: int
    triage: tuple[tuple[str, int, str, str, bytes | None, float | None], ...] = ()  # store.TRIAGE_SCHEMA rows

    def merged(self, later: FlushBatch) -> FlushBatch:
        """This (failed) batch followed by a later one, as one batch: later values win."""
        return FlushBatch(
            self.entries + later.entries, self.findings + later.findings,
            {**self.work, **later.work}, self.provenance + later.provenance,
            later.coverage if later.coverage is not None else self.coverage,
            later.counters if later.counters is not None else self.counters,
            later.run_end if later.run_end is not None else self.run_end, self.ops + later.ops,
            self.triage + later.triage,
        )


@dataclass(frozen=True)
class RunRecord:
    """One coordinator run on this output directory."""

    run: int
    epoch: str
    started: float  # unix time
    ended: float | None  # None while running, or after a crash
    clean: bool


@dataclass(frozen=True)
class RecoveryReport:
    """What opening the journal found and repaired (all zero for a new journal)."""

    requeued: int  # leased items of the previous run, now pending again
    pending: int
    done: int
    failed: int
    corpus: int
    next_queue_id: int
    previous_run: RunRecord | None

    @property
    def previous_clean(self) -> bool | None:
        """Whether the previous run ended cleanly; None when there was no previous run."""
        return None if self.previous_run is None else self.previous_run.clean


@dataclass(frozen=True)
class JournalSnapshot:
    """Counts of everything in the journal (the mirror's view, including unflushed changes)."""

    pending: int
    leased: int
    done: int
    failed: int
    corpus: int
    crashes: int
    hangs: int
    runs: int
    last_run: RunRecord | None
    unflushed_ops: int
