"""The MPI pump: the one thread that touches MPI on the coordinator, bridging it to asyncio.

It drains `Improbe`/`Mrecv` into bytes, posts queued `Isend`s, tests outstanding send
requests, backs off when idle (yield first, then sleep; woken at once when a send is queued),
and hands received messages to the event loop in batches with one `call_soon_threadsafe` per
drain (one per message costs GIL ping-pong; DESIGN.md section 5).
"""

from __future__ import annotations

import asyncio
import collections
import os
import threading
from dataclasses import dataclass
from typing import Callable

from mpi4py import MPI

from protocol.backoff import Backoff


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
        *,
        poll_cap_s: float = 0.001,
        batch: int = 256,
    ) -> None:
        super().__init__(name="mpi-pump", daemon=True)
        self.comm = comm
        self.loop = loop
        self.deliver = deliver
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

    def _run(self) -> None:
        comm, outbox = self.comm, self._outbox
        sending: list[tuple[MPI.Request, bytes]] = []
        status = MPI.Status()
        slept = False
        while True:
            progressed = False
            while outbox:
                dest, tag, frame = outbox.popleft()
                sending.append((comm.Isend([frame, MPI.BYTE], dest, tag), frame))
                self.frames_out += 1
                progressed = True
            if sending:
                done = MPI.Request.Testsome([r for r, _ in sending])
                if done:
                    gone = set(done)
                    sending = [s for i, s in enumerate(sending) if i not in gone]
                    progressed = True
            batch: list[Inbound] = []
            # After a sleep the first probe may miss a message that arrived meanwhile: probe twice.
            for _ in range(2 if slept else 1):
                while len(batch) < self.batch:
                    msg = comm.Improbe(MPI.ANY_SOURCE, MPI.ANY_TAG, status)
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
