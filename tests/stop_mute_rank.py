"""A rank that never acknowledges STOP, for the hung-rank ending's tests (tests/test_mpi_stop_hung.py).

Run as the LAST rank of an MPMD job beside a real coordinator and honest workers:

    mpiexec -n 3 python -m symfence.coordinator --config C --out O : -n 1 python tests/stop_mute_rank.py

It says hello and passes the host check like a worker, then holds every WORK it gets without
answering and keeps sending heartbeats that name them, so rank 0 sees it alive to the end; STOP
is read and ignored. The job ends with rank 0's MPI_Abort (exit 6), which kills this process.
Like tests/adversary.py it builds its frames by hand (msgpack maps), sharing nothing with worker/.
"""

from __future__ import annotations

import os
import time

import msgpack
from mpi4py import MPI

WORK, CONTROL = 11, 13
V = 1

world = MPI.COMM_WORLD
side = world.Dup()  # collective: every symfence rank Dups COMM_WORLD once at start
pending: list[MPI.Request] = []


def control(kind: str, info: dict, tokens: tuple[str, ...] = ()) -> bytes:
    return msgpack.packb({"v": V, "kind": kind, "tokens": list(tokens), "info": info}, use_bin_type=True)


def send(frame: bytes) -> None:
    global pending
    pending.append(world.Isend([frame, MPI.BYTE], 0, CONTROL))
    pending = [r for r in pending if not r.Test()]


def main() -> int:
    send(control("hello", {"host": "mute", "pid": os.getpid()}))
    held: list[str] = []
    next_beat = 0.0
    status = MPI.Status()
    while True:
        msg = world.Improbe(0, MPI.ANY_TAG, status)
        if msg is not None:
            buf = bytearray(status.Get_count(MPI.BYTE))
            msg.Recv([buf, MPI.BYTE])
            m = msgpack.unpackb(bytes(buf), raw=False)
            if status.Get_tag() == WORK:
                held.append(m["token"])
            elif m.get("kind") == "setup":
                send(control("checked", {"host": "mute", "files_checked": 0}))
            continue  # STOP, CANCEL, heartbeats: read, never answered
        if time.monotonic() >= next_beat:
            send(control("heartbeat", {"work_received": len(held), "busy_s": 0.0}, tuple(held)))
            next_beat = time.monotonic() + 0.1
        time.sleep(0.005)


if __name__ == "__main__":
    raise SystemExit(main())
