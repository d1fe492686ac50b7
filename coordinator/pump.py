"""The MPI pump: the one thread that touches MPI on the coordinator, bridging it to asyncio.

It drains `Improbe`/`Mrecv` into bytes, posts queued `Isend`s, tests outstanding send
requests, backs off when idle (yield first, then sleep; woken at once when a send is queued),
and hands received messages to the event loop in batches with one `call_soon_threadsafe` per
drain (one per message costs GIL ping-pong; docs/design.md, "Pipelining").

Under an MPI with ULFM (Open MPI's `mpiexec --with-ft ulfm`), a dead peer makes
`Improbe(ANY_SOURCE)` raise ERR_PROC_FAILED (and `Testsome` ERR_IN_STATUS for a send to it).
The pump then reads which ranks failed, acknowledges exactly those (so the probe stops raising),
reports them to the loop, and never posts to them again. Under MPICH a dead peer is never
reported (the launcher kills the job); heartbeats cover hung workers there.
"""

from __future__ import annotations

import asyncio
import collections
import os
import threading
from dataclasses import dataclass
from typing import Callable

from mpi4py import MPI

from symfence.protocol.backoff import Backoff


FAILURE_CLASSES = frozenset({MPI.ERR_PROC_FAILED, MPI.ERR_PROC_FAILED_PENDING, MPI.ERR_REVOKED})


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


@dataclass(frozen=True, slots=True)
class Inbound:
    source: int
    tag: int
    frame: bytes


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
    ) -> None:
        super().__init__(name="mpi-pump", daemon=True)
        self.comm = comm
        self.loop = loop
        self.deliver = deliver
        self.on_failed = on_failed
        self.failed = FailedRanks(comm)
        self.dropped_to_dead = 0
        self.batch = batch
        self.backoff = Backoff(cap_s=poll_cap_s, spins=64)
        self._outbox: collections.deque[tuple[int, int, bytes]] = collections.deque()
        self._wake = threading.Event()
        self._stopping = False
        self.error: BaseException | None = None
        # Counters read by the loop thread for stats (ints: torn reads are harmless).
        self.frames_in = 0
        self.frames_out = 0
        self.bytes_in = 0

    # --- called from the loop thread ----------------------------------------------------------

    def send(self, dest: int, tag: int, frame: bytes) -> None:
        self._outbox.append((dest, tag, frame))
        self._wake.set()

    def stop(self, timeout_s: float = 5.0) -> None:
        """Flush queued sends, then end the thread (receiving stops too)."""
        self._stopping = True
        self._wake.set()
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

    def _run(self) -> None:
        comm, outbox, dead = self.comm, self._outbox, self.failed.dead
        sending: list[tuple[MPI.Request, bytes]] = []
        status = MPI.Status()
        slept = False
        while True:
            progressed = False
            while outbox:
                dest, tag, frame = outbox.popleft()
                progressed = True
                if dest in dead:
                    self.dropped_to_dead += 1
                    continue
                try:
                    sending.append((comm.Isend([frame, MPI.BYTE], dest, tag), frame))
                    self.frames_out += 1
                except MPI.Exception as exc:
                    self._failure(exc)
            if sending:
                requests = [r for r, _ in sending]
                try:
                    done = MPI.Request.Testsome(requests)
                except MPI.Exception as exc:
                    # A send to a dead peer failed. mpi4py loses the indices but nulls every
                    # completed request (ok or failed): those are done.
                    self._failure(exc, frozenset({MPI.ERR_IN_STATUS}))
                    done = [i for i, r in enumerate(requests) if not r]
                if done:
                    gone = set(done)
                    sending = [s for i, s in enumerate(sending) if i not in gone]
                    progressed = True
            batch: list[Inbound] = []
            # After a sleep the first probe may miss a message that arrived meanwhile: probe twice.
            for _ in range(2 if slept else 1):
                while len(batch) < self.batch:
                    try:
                        msg = comm.Improbe(MPI.ANY_SOURCE, MPI.ANY_TAG, status)
                    except MPI.Exception as exc:  # a peer died (ULFM): note, ack, probe on
                        self._failure(exc)
                        continue
                    if msg is None:
                        break
                    size = status.Get_count(MPI.BYTE)
                    buf = bytearray(size)
                    msg.Recv([buf, MPI.BYTE])
                    batch.append(Inbound(status.Get_source(), status.Get_tag(), bytes(buf)))
                if batch:
                    break
            if batch:
                self.frames_in += len(batch)
                self.bytes_in += sum(len(b.frame) for b in batch)
                self.loop.call_soon_threadsafe(self.deliver, batch)
                progressed = True
            if self._stopping and not outbox and not sending:
                return
            slept = False
            if progressed:
                self.backoff.reset()
                continue
            delay = self.backoff.next_delay()
            if delay == 0.0:
                os.sched_yield()
            else:
                self._wake.wait(delay)
                self._wake.clear()
                slept = True
