"""Group commit: what the next flush writes, when it is due, and the one batch out at a time.

The mirror (`Journal`) records here every change it buffers; `take` copies them into one
immutable `FlushBatch` (field tuples and frozen records only), which the store writes in ONE
transaction, maybe on another thread (writer.py). At most one batch is out (`writing`) until
`finish`; a batch whose write failed is kept (`unwritten`) and merged into the next one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from symfence.coordinator.journal.errors import JournalError
from symfence.coordinator.journal.leases import Leases
from symfence.coordinator.journal.records import CorpusEntry, Finding, FlushBatch, RunRecord

ProvenanceRow = tuple[str, int, int, int | None]
TriageRow = tuple[str, int, str, str, bytes | None, float | None]


class GroupCommit:
    """The buffer of one journal: new rows, dirty snapshots, and the count of buffered ops.

    `ops` counts buffered records (work-state changes, new entries and findings, snapshots); a
    flush is due once there are `batch_ops` of them or the oldest is `batch_s` old."""

    def __init__(self, batch_ops: int, batch_s: float, clock: Callable[[], float]) -> None:
        self.entries: list[CorpusEntry] = []
        self.findings: list[Finding] = []
        self.provenance: list[ProvenanceRow] = []
        self.triage: list[TriageRow] = []
        self.coverage_dirty = False
        self.counters_dirty = False
        self.run_end_dirty = False
        self.ops = 0
        self.writing: FlushBatch | None = None  # taken, being written (maybe by another thread)
        self.unwritten: FlushBatch | None = None  # a batch whose write failed: retried next
        self._batch_ops = batch_ops
        self._batch_s = batch_s
        self._clock = clock
        self._started = 0.0

    def note(self, ops: int = 1) -> None:
        """`ops` more records are buffered."""
        if self.ops == 0:
            self._started = self._clock()
        self.ops += ops

    @property
    def unflushed_ops(self) -> int:
        """Records not durable yet: buffered, plus a failed batch kept for the next flush."""
        return self.ops + (self.unwritten.ops if self.unwritten is not None else 0)

    def delay_s(self) -> float | None:
        """Seconds until a flush is due (0.0 = now); None when nothing is buffered."""
        if self.unwritten is not None:
            return 0.0
        if self.ops == 0:
            return None
        if self.ops >= self._batch_ops:
            return 0.0
        return max(0.0, self._started + self._batch_s - self._clock())

    def take(
        self, leases: Leases, runs: list[RunRecord], coverage: bytes | None, counters: Mapping[str, int]
    ) -> FlushBatch | None:
        """Everything buffered (and a failed batch before it) as one batch, now `writing`."""
        if self.writing is not None:
            raise JournalError("prepare() while the previous batch is not finished")
        retry, self.unwritten = self.unwritten, None
        if self.ops == 0:
            if retry is not None:
                self.writing = retry
            return retry
        work: dict[str, tuple] = {}
        get = leases.get
        for work_id in leases.take_changed():
            row = get(work_id)
            assert row is not None
            status = row.status  # (Enum's `value` is a Python-level property: `_value_`, one per row)
            work[work_id] = (row.queue_id, work_id, row.state._value_, row.token, row.attempts, row.reason,
                             status._value_ if status is not None else None)
        run_end = None
        if self.run_end_dirty:
            run = runs[-1]
            run_end = (run.run, run.epoch, run.started, run.ended, run.clean)
        batch = FlushBatch(
            entries=tuple(self.entries), findings=tuple(self.findings), work=work,
            provenance=tuple(self.provenance), triage=tuple(self.triage),
            coverage=coverage if self.coverage_dirty else None,
            counters=dict(counters) if self.counters_dirty else None,
            run_end=run_end, ops=self.ops,
        )
        if retry is not None:
            batch = retry.merged(batch)
        self.entries = []
        self.findings = []
        self.provenance = []
        self.triage = []
        self.coverage_dirty = self.counters_dirty = self.run_end_dirty = False
        self.ops = 0
        self.writing = batch
        return batch

    def finish(self, batch: FlushBatch, *, ok: bool) -> None:
        """The batch's write ended: a failed one is written with the next."""
        if self.writing is not batch:
            raise JournalError("finish() of a batch that is not the one being written")
        self.writing = None
        if not ok:
            self.unwritten = batch
