"""The journal writer thread: group commits and queue/ files written off the event loop.

The event loop takes each batch off the journal's mirror (`Journal.prepare`, cheap) and hands
it here; this one thread hashes it and runs its SQLite transaction on its own connection, then
tells the loop (`on_durable`, or `on_error`) through `call_soon_threadsafe`. At most one batch
is out at a time: the loop prepares the next only after the previous one finished.

A queue/ file is written only after its entry is durable: the entries of each committed batch
join a backlog that this thread writes in small slices whenever no batch waits, so a corpus of
100,000 seeds never delays the first dispatch nor a commit. The backlog is background work: it
takes at most `BACKLOG_SHARE` of this thread's wall time (after each slice the thread rests
three times as long as the slice took; a batch handed over meanwhile is written at once), since
creating a file costs 40-200 us of CPU on a small machine, and 100,000 of them written flat out
took a core from the workers for seconds. A run that ends (or a kill) with a backlog left loses
no data: the journal holds every entry, the end of the run writes what it can in a short budget
(`drain_files`), and a resume writes the files of durable entries that have none.
"""

from __future__ import annotations

import collections
import concurrent.futures
import threading
import time
from typing import Any, Callable, Iterable

from symfence.coordinator import failpoints
from symfence.coordinator.journal import CorpusEntry, FlushBatch, FlushReceipt, Journal
from symfence.coordinator.outputs import OutputDir

FILES_PER_SLICE = 256  # queue files written between two looks for a waiting batch
BACKLOG_SHARE = 0.25  # of the wall time, at most, spent on the backlog of queue files during the run
DRAIN_THREADS = 4  # threads writing the files still owed when the run has ended


def write_queue_file(out: OutputDir, e: CorpusEntry) -> None:
    failpoints.hit("queue", out.queue)
    out.queue_entry(e.queue_id, e.data, parent=e.parent, origin=e.origin, new_bits=e.new_bits)


class JournalWriter:
    """One thread that writes prepared journal batches, then the queue/ files they made durable."""

    def __init__(self, journal: Journal, out: OutputDir, post: Callable[..., Any],
                 on_durable: Callable[[FlushBatch, FlushReceipt], None],
                 on_error: Callable[[FlushBatch | None, BaseException], None]) -> None:
        """`post(fn, *args)` runs fn on the loop thread (loop.call_soon_threadsafe)."""
        self.journal = journal
        self.out = out
        self._post = post
        self._on_durable = on_durable
        self._on_error = on_error
        self._conn = journal.writer_connection()
        self._cv = threading.Condition()
        self._batch: FlushBatch | None = None  # handed over, not yet picked up by the thread
        self._files: collections.deque[CorpusEntry] = collections.deque()
        self._files_failed = False  # a queue file could not be written: write no more here
        self._stopping = False
        self._rest_until = 0.0  # monotonic: no backlog file before this (the backlog's share)
        self._clock = time.monotonic
        self.busy = False  # loop thread only: a batch is out and its outcome not handled yet
        self.stopped = False
        self._outcomes: collections.deque[tuple[Callable[..., Any], tuple]] = collections.deque()
        self.batches = 0
        self.files_written = 0
        self.files_cpu_s = 0.0  # this thread's CPU in the backlog of queue/ files (hotpath.py reports it apart)
        self._thread = threading.Thread(target=self._run, name="journal-writer", daemon=True)
        self._thread.start()

    # ------------------------------------------------------------------ loop side

    def submit(self, batch: FlushBatch) -> None:
        if self.busy:
            raise RuntimeError("a journal batch is already being written")
        self.busy = True
        with self._cv:
            self._batch = batch
            self._cv.notify()

    def add_files(self, entries: Iterable[CorpusEntry]) -> None:
        """Durable entries whose queue/ file is missing (a resume after a kill): write them."""
        with self._cv:
            self._files.extend(entries)
            self._cv.notify()

    @property
    def files_pending(self) -> int:
        return len(self._files)

    def stop(self) -> None:
        """End the thread after what it is doing (a batch handed over is still written), then
        handle on this (the loop's) thread any outcome the loop has not run yet."""
        self.stopped = True
        with self._cv:
            self._stopping = True
            self._cv.notify()
        self._thread.join()
        self._deliver_all()

    def _deliver_all(self) -> None:
        while self._outcomes:
            fn, args = self._outcomes.popleft()
            fn(*args)

    def drain_files(self, threads: int = DRAIN_THREADS, budget_s: float | None = None) -> int:
        """Write the queue files still waiting (after `stop`, when nothing else runs): in a few
        threads, since each file is a handful of system calls that release the GIL; for at most
        `budget_s` seconds (None: every one). Raises the first failed write; the files not
        written stay queued."""
        if self._thread.is_alive():
            raise RuntimeError("drain_files() while the writer thread runs")
        entries = list(self._files)
        if not entries:
            return 0
        slices = [entries[i::threads] for i in range(threads)]
        done: list[set[int]] = [set() for _ in slices]
        until = None if budget_s is None else self._clock() + budget_s

        def write(k: int) -> None:
            for e in slices[k]:
                if until is not None and self._clock() >= until:
                    return
                write_queue_file(self.out, e)
                done[k].add(e.queue_id)

        with concurrent.futures.ThreadPoolExecutor(threads, thread_name_prefix="queue-files") as pool:
            futures = [pool.submit(write, k) for k in range(len(slices))]
        written = set().union(*done)
        self._files = collections.deque(e for e in entries if e.queue_id not in written)
        self.files_written += len(written)
        for f in futures:
            f.result()  # the first failure, if any
        return len(written)

    # ------------------------------------------------------------------ the thread

    def _run(self) -> None:
        while True:
            with self._cv:
                while self._batch is None and not self._stopping:
                    if self._files_failed or not self._files:
                        self._cv.wait()
                        continue
                    rest = self._rest_until - self._clock()
                    if rest <= 0:
                        break
                    self._cv.wait(rest)  # a batch handed over meanwhile wakes it
                batch, self._batch = self._batch, None
                if batch is None and self._stopping:
                    return
            if batch is not None:
                self._write(batch)
            else:
                self._write_files()

    def _write(self, batch: FlushBatch) -> None:
        try:
            failpoints.hit("flush.before", self.journal.path)
            receipt = self.journal.write(batch, self._conn)
            failpoints.hit("flush.after")
        except BaseException as exc:  # noqa: BLE001 - reported on the loop, which stops the run
            self._report(self._on_error, batch, exc)
            return
        self.batches += 1
        with self._cv:
            self._files.extend(receipt.entries)
        self._report(self._on_durable, batch, receipt)

    def _report(self, fn: Callable[..., Any], *args: Any) -> None:
        self._outcomes.append((fn, args))
        self._post(self._deliver_all)

    def _write_files(self) -> None:
        t0, cpu0 = self._clock(), time.thread_time()
        try:
            self._write_slice()
        finally:
            now = self._clock()
            self._rest_until = now + (now - t0) * (1 - BACKLOG_SHARE) / BACKLOG_SHARE
            self.files_cpu_s += time.thread_time() - cpu0

    def _write_slice(self) -> None:
        for _ in range(FILES_PER_SLICE):
            with self._cv:
                if not self._files or self._batch is not None or self._stopping:
                    return
                entry = self._files[0]
            try:
                write_queue_file(self.out, entry)
            except BaseException as exc:  # noqa: BLE001 - the entry stays queued for the end of the run
                with self._cv:
                    self._files_failed = True
                self._report(self._on_error, None, exc)
                return
            with self._cv:
                self._files.popleft()
            self.files_written += 1
