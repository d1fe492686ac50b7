"""The worker's MPI side: drain messages without blocking, send with Isend, wait with back-off."""

from __future__ import annotations

import os
import time

from mpi4py import MPI


class Endpoint:
    """Point-to-point messaging with one peer group over one communicator (bytes only)."""

    def __init__(self, comm: MPI.Comm) -> None:
        self.comm = comm
        self.rank = comm.Get_rank()
        self._sending: list[tuple[MPI.Request, bytes]] = []
        self._status = MPI.Status()

    def poll(self, source: int = MPI.ANY_SOURCE, limit: int = 64) -> list[tuple[int, int, bytes]]:
        """Receive up to `limit` waiting messages as (source, tag, frame); never blocks."""
        out = []
        self.progress()
        while len(out) < limit:
            msg = self._probe(source)
            if msg is None:
                # A message that arrived while we slept may be missed by the first probe.
                msg = self._probe(source)
            if msg is None:
                break
            buf = bytearray(self._status.Get_count(MPI.BYTE))
            msg.Recv([buf, MPI.BYTE])
            out.append((self._status.Get_source(), self._status.Get_tag(), bytes(buf)))
        return out

    def _probe(self, source: int) -> MPI.Message | None:
        try:
            return self.comm.Improbe(source, MPI.ANY_TAG, self._status)
        except MPI.Exception as exc:
            # ULFM: an ANY_SOURCE probe raises once a peer died, until the failure is
            # acknowledged. A worker has nothing to do about a dead sibling but acknowledge it.
            if exc.Get_error_class() not in (MPI.ERR_PROC_FAILED, MPI.ERR_PROC_FAILED_PENDING):
                raise
            self.comm.Ack_failed()
            return None

    def send(self, dest: int, tag: int, frame: bytes) -> None:
        self._sending.append((self.comm.Isend([frame, MPI.BYTE], dest, tag), frame))
        self.progress()

    def send_synchronous(self, dest: int, tag: int, frame: bytes, timeout_s: float) -> bool:
        """Issend and wait until the receiver has matched it (used to order a fault exactly)."""
        req = self.comm.Issend([frame, MPI.BYTE], dest, tag)
        until = time.monotonic() + timeout_s
        while not req.Test():
            if time.monotonic() > until:
                self._sending.append((req, frame))
                return False
            time.sleep(0.0002)
        return True

    def progress(self) -> None:
        if self._sending:
            done = MPI.Request.Testsome([r for r, _ in self._sending])
            if done:
                gone = set(done)
                self._sending = [s for i, s in enumerate(self._sending) if i not in gone]

    def flush(self, timeout_s: float = 5.0) -> bool:
        until = time.monotonic() + timeout_s
        while self._sending and time.monotonic() < until:
            self.progress()
            os.sched_yield()
        return not self._sending
