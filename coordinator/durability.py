"""Durability and announcement: journal batches to the writer thread, and what a durable batch allows.

The shell's part of the group commit (docs/design.md, "The coordinator"): the journal's mirror
buffers what the core's commits changed; on the core's `Flush` effect `_flush` hands a batch to
the writer thread (writer.py); `_durable` runs when it is on disk and asks the core what that
allows (`Core.durable`: AFL++ export, finding files), then carries it out. Queue files are the
writer's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import structlog

from symfence.coordinator import failpoints
from symfence.coordinator.hotpath import clock_ns as _ns
from symfence.coordinator.journal import FlushBatch, FlushReceipt

if TYPE_CHECKING:
    import asyncio
    from collections.abc import Iterable

    from symfence.coordinator.core import Core
    from symfence.coordinator.effects import Effect
    from symfence.coordinator.hotpath import HotPath
    from symfence.coordinator.journal import Journal
    from symfence.coordinator.outputs import OutputDir
    from symfence.coordinator.writer import JournalWriter
    from symfence.protocol.coverage import CoverageMap

log = structlog.get_logger()


class DurabilityMixin:
    """The coordinator's group commits and their announcement (state: writer, journal, _saved_cov_version)."""

    # What it uses of the campaign, declared: bare annotations and TYPE_CHECKING-only stubs shadow nothing.
    journal: Journal
    out: OutputDir
    writer: JournalWriter | None
    core: Core
    coverage: CoverageMap
    hotpath: HotPath
    _changed: asyncio.Event
    _saved_cov_version: int

    if TYPE_CHECKING:
        def _apply(self, effects: Iterable[Effect]) -> None: ...
        def _counters(self) -> dict[str, int]: ...
        async def _wait_change(self, timeout: float) -> None: ...
        def fail(self, exc: BaseException) -> None: ...

    def _snapshot_state(self) -> None:
        """Buffer the coverage map (when it changed) and the counters for the next flush."""
        if self.coverage.version != self._saved_cov_version:
            self.journal.save_coverage(self.coverage.to_bytes())
            self._saved_cov_version = self.coverage.version
        self.journal.save_counters(self._counters())

    def _flush(self) -> None:
        """Hand what the journal buffered to the writer thread; its effects follow in `_durable`.
        At most one batch is out: while one is written, the next waits in the journal."""
        if self.writer is None or self.writer.busy or self.writer.stopped:
            return
        t0 = _ns()
        self._snapshot_state()
        batch = self.journal.prepare()
        if batch is not None:
            self.writer.submit(batch)
        self.hotpath.flush_ns += _ns() - t0

    async def _writer_idle(self) -> None:
        assert self.writer is not None  # made by `Campaign.run` before anything waits for it
        while self.writer.busy:
            await self._wait_change(0.05)

    def _write_failed(self, batch: FlushBatch | None, exc: BaseException) -> None:
        """The writer thread could not write a batch (kept for the next flush) or a queue file."""
        if batch is not None:
            self.journal.finish(batch, ok=False)
            assert self.writer is not None  # the writer thread is the caller
            self.writer.busy = False
        self._changed.set()
        self.fail(exc)

    def _durable(self, batch: FlushBatch, receipt: FlushReceipt) -> None:
        """A batch is durable (writer thread): finish it, then what may follow a commit."""
        t0 = _ns()
        self.journal.finish(batch, ok=True)
        assert self.writer is not None  # the writer thread is the caller
        self.writer.busy = False
        self._changed.set()
        try:
            self._apply(self.core.durable(receipt))
        except Exception as exc:  # noqa: BLE001 - a failed write stops the run like any other
            self.fail(exc)
        self.hotpath.flush_ns += _ns() - t0

    def _flush_now(self) -> None:
        """The end of the run: flush on this thread, completely. The queue files still owed are
        written by `write_owed_files`, after MPI_Finalize (the workers need not wait for them)."""
        self._snapshot_state()
        failpoints.hit("flush.before", self.journal.path)
        durable = self.journal.flush()
        failpoints.hit("flush.after")
        if self.writer is not None:
            self.writer.add_files(durable.entries)
            if self.writer.files_pending:
                log.info("outputs.queue_files_owed", files=self.writer.files_pending)
        else:
            for e in durable.entries:
                failpoints.hit("queue", self.out.queue)
                self.out.queue_entry(e.queue_id, e.data, parent=e.parent, origin=e.origin,
                                     new_bits=e.new_bits)
        self._apply(self.core.durable(durable))

    def write_owed_files(self, budget_s: float | None = None) -> int:
        """Write the queue files of durable entries that the writer thread had not written yet
        (after the run), for at most `budget_s` (None: all); the rest stay owed (a resume
        writes them). Raises OSError like any failed write."""
        return self.writer.drain_files(budget_s=budget_s) if self.writer is not None else 0
