"""The coordinator's journal: durable work leases, corpus, findings and runs in one SQLite file.

One responsibility per module: `records` (the frozen values and enums), `leases` (the pure
lease state machine and its transition table), `store` (SQLite: schema, open and lock, writing
one batch), `recovery` (loading a journal back, every row checked), `mirror` (the `Journal`:
the in-memory mirror every mutation applies to, group-committed through the store) and
`errors`. The public names are re-exported here: `from symfence.coordinator.journal import
Journal, NewEntry, ...`.
"""

from symfence.coordinator.journal.errors import (
    JournalDamagedError,
    JournalError,
    JournalExistsError,
    JournalLockedError,
    JournalNotFoundError,
    JournalReadOnlyError,
    LeaseError,
)
from symfence.coordinator.journal.leases import RECOVERY_REASON, RETRY_REASON, TRANSITIONS, Leases, Move
from symfence.coordinator.journal.mirror import Journal
from symfence.coordinator.journal.records import (
    RECOVERED_WORK_ID,
    CommitReceipt,
    CorpusEntry,
    Finding,
    FindingKind,
    FlushBatch,
    FlushReceipt,
    JournalSnapshot,
    NewEntry,
    NewFinding,
    RecoveryReport,
    RunRecord,
    WorkLease,
    WorkState,
    WorkView,
)
from symfence.coordinator.journal.store import (
    JOURNAL_NAME,
    PROVENANCE_SCHEMA,
    SCHEMA,
    SCHEMA_VERSION,
    TRIAGE_SCHEMA,
    Durability,
    lock_holder,
)

__all__ = [
    "JOURNAL_NAME", "PROVENANCE_SCHEMA", "RECOVERED_WORK_ID", "RECOVERY_REASON", "RETRY_REASON",
    "SCHEMA", "SCHEMA_VERSION", "TRANSITIONS", "TRIAGE_SCHEMA", "CommitReceipt", "CorpusEntry",
    "Durability", "Finding", "FindingKind", "FlushBatch", "FlushReceipt", "Journal",
    "JournalDamagedError", "JournalError", "JournalExistsError", "JournalLockedError",
    "JournalNotFoundError", "JournalReadOnlyError", "JournalSnapshot", "Leases", "LeaseError",
    "Move", "NewEntry", "NewFinding", "RecoveryReport", "RunRecord", "WorkLease", "WorkState",
    "WorkView", "lock_holder",
]
