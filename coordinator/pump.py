"""The MPI pump: the one thread that touches MPI on the coordinator, bridging it to asyncio.

Each wake-up it posts every queued send (`Isend` of the frame's bytes), tests the outstanding
ones, receives every message waiting (`Improbe` then `Recv` into a bytearray of the probed size,
at most `batch`), and hands them to the event loop as one batch of `Inbound` tuples (what
`Core.receive` takes, built without a Python call). When a wake-up finds nothing it sleeps with
exponential back-off (`poll_cap_s`) on a **bell**: a lock that `send` releases only while the
pump sleeps, so a queued send wakes it at once and a send while it is awake costs one attribute
read, not an `Event.set`. It does not yield-spin: measured with `bench/bench_pump.py` (real
`mpiexec`, 1 + 3 ranks, depth 4) the spins were ~4.5 empty polls per frame and most of the
pump's CPU, while the loop's replies ring the bell anyway. The discard communicators (below)
are drained when the main one has nothing, before a sleep. (docs/design.md, "Pipelining".) At
most one hand-over is pending at a time: batches drained while the loop has not yet taken the
previous one wait beside it, so the loop is woken (`call_soon_threadsafe`, a pipe write) once
per hand-over, not once per drain. Each drained batch is still delivered as its own batch, in
order: frames are fenced in the order the drains received them (a frame matched before another
rank's later frame is judged first, as tests/test_mpi_faults.py's misrouted results need). The
pump keeps probing meanwhile (not probing while the loop is slow delays matching, and a
synchronous sender waiting on that match times out: measured with tests/test_mpi_faults.py
under load). A rank that never receives leaves its sends outstanding, never blocks the pump.

Under an MPI with ULFM (Open MPI's `mpiexec --with-ft ulfm`), a dead peer makes
`Improbe(ANY_SOURCE)` raise ERR_PROC_FAILED (and `Testsome` ERR_IN_STATUS for a send to it).
The pump then reads which ranks failed, acknowledges exactly those (so the probe stops raising),
reports them to the loop, and never posts to them again. Under MPICH a dead peer is never
reported (the launcher kills the job); heartbeats cover hung workers there.

A frame's size is read from the probe status BEFORE it is received: a frame over
`max_frame_bytes` is received into a 64 KiB sink (a datatype of extent 0 that lands every
chunk on the same buffer, so nothing of it is kept or allocated), counted, and handed on as an
`Inbound` with `oversized` set and no bytes. Frames on the `discard` communicators (rank 0's
side of the fault injector's channel, which no honest peer writes to) are drained the same way
and counted, so a peer cannot make rank 0 hoard unexpected messages.
"""

from __future__ import annotations

import asyncio
import collections
import threading
from typing import Callable, NamedTuple

from mpi4py import MPI

from symfence.protocol.backoff import Backoff
from symfence.protocol.ids import Rank


ANY_SOURCE, ANY_TAG, BYTE = MPI.ANY_SOURCE, MPI.ANY_TAG, MPI.BYTE
FAILURE_CLASSES = frozenset({MPI.ERR_PROC_FAILED, MPI.ERR_PROC_FAILED_PENDING, MPI.ERR_REVOKED})
SINK_BYTES = 1 << 16


class Sink:
    """Receives a matched message of any size without keeping it: `count` elements of a
    64 KiB block resized to extent 0 all land on one 64 KiB buffer (works with MPICH and Open
    MPI; a truncating receive instead crashes Open MPI's ob1, measured)."""

    def __init__(self) -> None:
        block = MPI.BYTE.Create_contiguous(SINK_BYTES)
        self.type = block.Create_resized(0, 0).Commit()
        block.Free()
        self.buf = bytearray(SINK_BYTES)

    def drain(self, msg: MPI.Message, size: int) -> None:
        msg.Recv([self.buf, max(1, -(-size // SINK_BYTES)), self.type])


def frame_size(status: MPI.Status) -> int:
    """Bytes of a probed message; -1 when MPI cannot say in an int (treated as oversized)."""
    size = status.Get_count(MPI.BYTE)
    return -1 if size == MPI.UNDEFINED or size < 0 else size


class FailedRanks:
    """The ranks of `comm` that MPI (ULFM) has reported dead, acknowledged as they are read."""

    def __init__(self, comm: MPI.Comm) -> None:
        self.comm = comm
        self.world = comm.Get_group()
        self.dead: set[int] = set()

    def refresh(self) -> list[int]:
        """Newly failed ranks. Acks exactly the failures read, so none that lands meanwhile is lost."""
        group = self.comm.Get_failed()
        try:
            n = group.Get_size()
            ranks = MPI.Group.Translate_ranks(group, list(range(n)), self.world) if n else []
        finally:
            group.Free()
        self.comm.Ack_failed(n)
        new = sorted(r for r in ranks if r not in self.dead)
        self.dead.update(new)
        return new


class Inbound(NamedTuple):
    """One drained frame, as the core takes it (`Core.receive`): a plain tuple, built in C."""

    source: Rank  # (an int from MPI's status: a NewType costs nothing at run time)
    tag: int
    frame: bytes
    oversized: int = 0  # > 0: a frame of this many bytes (-1: unknown) was drained, not kept


class Pump(threading.Thread):
    def __init__(
        self,
        comm: MPI.Comm,
        loop: asyncio.AbstractEventLoop,
        deliver: Callable[[list[Inbound]], None],
        on_failed: Callable[[list[int]], None],
        *,
        poll_cap_s: float = 0.001,
        batch: int = 256,
        max_frame_bytes: int = 1 << 62,
        discard: tuple[MPI.Comm, ...] = (),
    ) -> None:
        super().__init__(name="mpi-pump", daemon=True)
        self.comm = comm
        self.loop = loop
        self.deliver = deliver
        self.on_failed = on_failed
        self.failed = FailedRanks(comm)
        self.dropped_to_dead = 0
        self.batch = batch
        self.max_frame_bytes = max_frame_bytes
        self.discard = discard
        self.backoff = Backoff(cap_s=poll_cap_s, spins=0)  # sleeps on the bell at once: no yield-spin
        self._outbox: collections.deque[tuple[int, int, bytes]] = collections.deque()
        self._inbox: collections.deque[list[Inbound]] = collections.deque()  # drained batches the loop has not taken
        self._handover_pending = False  # a `_hand_over` call is scheduled on the loop
        # The pump sleeps on `_bell` (a lock held while nobody rings) with the back-off's timeout;
        # `send` rings it only while `_sleeping`: no Event and no wake-up per queued send.
        self._bell = threading.Lock()
        self._bell.acquire()
        self._sleeping = False
        self._status = MPI.Status()
        self._sink: Sink  # an MPI datatype: made by `_run`, on the pump thread
        self._stopping = False
        self.error: BaseException | None = None
        # Counters read by the loop thread for stats (ints: torn reads are harmless).
        self.frames_in = 0
        self.frames_out = 0
        self.bytes_in = 0
        self.oversized_frames = 0  # drained at the probe, never received into memory
        self.oversized_bytes = 0
        self.side_frames_dropped = 0  # frames on the discard communicators

    # --- called from the loop thread ----------------------------------------------------------

    def send(self, dest: int, tag: int, frame: bytes) -> None:
        self._outbox.append((dest, tag, frame))
        if self._sleeping:  # the pump checks the outbox after setting this: no send is missed
            self._ring()

    def _ring(self) -> None:
        try:
            self._bell.release()
        except RuntimeError:  # already rung, not yet heard
            pass

    def _hand_over(self) -> None:
        """On the loop thread: take every frame received so far and deliver it as one batch."""
        self._handover_pending = False  # cleared before taking: a frame added after this is
        inbox = self._inbox  # either taken here or schedules another call
        batches = [inbox.popleft() for _ in range(len(inbox))]  # deque ops are atomic under the GIL
        for batch in batches:
            self.deliver(batch)

    def _post(self, batch: list[Inbound]) -> None:
        """On the pump thread: queue frames for the loop; wake it only if no hand-over is pending."""
        self._inbox.append(batch)
        if not self._handover_pending:
            self._handover_pending = True
            self.loop.call_soon_threadsafe(self._hand_over)

    def stop(self, timeout_s: float = 5.0) -> None:
        """Flush queued sends, then end the thread (receiving stops too)."""
        self._stopping = True
        self._ring()
        self.join(timeout_s)

    # --- the pump thread --------------------------------------------------------------------------

    def run(self) -> None:
        try:
            self._run()
        except BaseException as exc:  # reported to the loop; the coordinator aborts cleanly
            self.error = exc
            self.loop.call_soon_threadsafe(self.deliver, [])

    def _failure(self, exc: MPI.Exception, extra: frozenset[int] = frozenset()) -> None:
        if exc.Get_error_class() not in FAILURE_CLASSES | extra:
            raise exc
        new = self.failed.refresh()
        if new:
            self.loop.call_soon_threadsafe(self.on_failed, new)

    def _drain_side(self) -> bool:
        """Receive and drop whatever is waiting on the discard communicators (bounded per call;
        called when the main communicator has nothing, before the pump sleeps)."""
        sink, status, got = self._sink, self._status, False
        for comm in self.discard:
            for _ in range(self.batch):
                try:
                    msg = comm.Improbe(MPI.ANY_SOURCE, MPI.ANY_TAG, status)
                except MPI.Exception as exc:  # ULFM: failures are reported on the main communicator
                    if exc.Get_error_class() in FAILURE_CLASSES:
                        comm.Ack_failed()
                    break
                if msg is None:
                    break
                size = frame_size(status)
                sink.drain(msg, size if size >= 0 else 1 << 40)
                self.side_frames_dropped += 1
                got = True
        return got

    def _run(self) -> None:
        comm, outbox, dead, inbound = self.comm, self._outbox, self.failed.dead, self._inbound
        self._sink = Sink()
        requests: list[MPI.Request] = []  # outstanding sends, and the frames they send from
        frames: list[bytes] = []
        backoff, bell = self.backoff, self._bell
        slept = False
        while True:
            progressed = False
            if outbox:  # every send queued since the last wake-up, posted at once
                progressed = True
                isend, posted = comm.Isend, 0
                for _ in range(len(outbox)):
                    dest, tag, frame = outbox.popleft()
                    if dest in dead:
                        self.dropped_to_dead += 1
                        continue
                    try:
                        requests.append(isend(frame, dest, tag))
                        frames.append(frame)
                        posted += 1
                    except MPI.Exception as exc:
                        self._failure(exc)
                self.frames_out += posted
            if requests:
                requests, frames = self._test_sends(requests, frames)
            batch = inbound(slept)  # after a sleep the first probe may miss a message: probe twice
            if batch:
                self.frames_in += len(batch)
                self._post(batch)
                progressed = True
            elif self.discard:  # nothing on the main communicator (before each sleep): the side channel
                progressed = self._drain_side() or progressed
            if self._stopping and not outbox and not requests:
                return
            slept = False
            if progressed:
                backoff.reset()
                continue
            self._sleeping = True  # from here on `send` rings the bell
            if not outbox and not self._stopping:  # (the back-off has no spins: always a sleep)
                bell.acquire(timeout=backoff.next_delay())  # a ring (a queued send) ends it at once
                slept = True
            self._sleeping = False

    def _test_sends(self, requests: list[MPI.Request], frames: list[bytes]) -> tuple[list[MPI.Request], list[bytes]]:
        """Drop the completed sends (and the frames they were sent from)."""
        try:
            done = MPI.Request.Testsome(requests)
        except MPI.Exception as exc:
            # A send to a dead peer failed. mpi4py loses the indices but nulls every
            # completed request (ok or failed): those are done.
            self._failure(exc, frozenset({MPI.ERR_IN_STATUS}))
            done = [i for i, r in enumerate(requests) if not r]
        if not done:
            return requests, frames
        if len(done) == len(requests):
            return [], []
        gone = set(done)
        keep = [i for i in range(len(requests)) if i not in gone]
        return [requests[i] for i in keep], [frames[i] for i in keep]

    def _inbound(self, twice: bool) -> list[Inbound]:
        """Receive every message waiting (at most `batch`): one `Improbe` and one `Recv` per frame."""
        comm, status, limit, cap = self.comm, self._status, self.batch, self.max_frame_bytes
        improbe, count, new = comm.Improbe, status.Get_count, tuple.__new__
        batch: list[Inbound] = []
        for _ in range(2 if twice else 1):
            while len(batch) < limit:
                try:
                    msg = improbe(ANY_SOURCE, ANY_TAG, status)
                except MPI.Exception as exc:  # a peer died (ULFM): note, ack, probe on
                    self._failure(exc)
                    continue
                if msg is None:
                    break
                size = count(BYTE)
                if 0 <= size <= cap:
                    buf = bytearray(size)
                    msg.Recv(buf)
                    self.bytes_in += size
                    batch.append(new(Inbound, (status.source, status.tag, bytes(buf), 0)))
                    continue
                size = frame_size(status)
                self._sink.drain(msg, size if size >= 0 else 1 << 40)
                self.oversized_frames += 1
                self.oversized_bytes += max(size, 0)
                batch.append(Inbound(Rank(status.source), status.tag, b"", oversized=size))
            if batch:
                break
        return batch
