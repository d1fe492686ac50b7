"""A rank for tests that answers every WORK frame with ONE batch frame of results, mixed with junk.

Run as the LAST rank of an MPMD job beside a real coordinator and honest workers:

    mpiexec -n 3 python -m symfence.coordinator --config C --out O : -n 1 python tests/batch_rank.py REPORT

It speaks the wire by hand (msgpack maps, MPI tags), sharing no code with `worker/`, so its
frames are what the wire's description says, not what our encoder happens to make. For each
WORK frame it receives (one WORK, or a batch of them) it sends one "results" batch whose items
are, in order:

  - a result under a token never issued (`stale`: the rank has dispatches in flight then);
  - a result whose status is not a status (`malformed`), under another invented token;
  - a result of protocol version 2 (`incompatible`);
  - an item that is not a map at all (`malformed`);
  - then, for each WORK, its genuine answer, and after the first one a copy of it (`duplicate`).

Every genuine answer must commit and every other item must be quarantined under its own reason,
whatever stands beside it in the frame. REPORT (JSON) counts what was sent per class.
"""

from __future__ import annotations

import collections
import hashlib
import json
import os
import secrets
import struct
import sys
import time

import msgpack
from mpi4py import MPI

WORK, RESULT, CONTROL = 11, 12, 13
V = 1

world = MPI.COMM_WORLD
side = world.Dup()  # collective: every symfence rank Dups COMM_WORLD once at start
sent: collections.Counter[str] = collections.Counter()
pending: list[tuple[MPI.Request, bytes]] = []
work_received = 0
stop_seen = False


def pack(obj: object) -> bytes:
    return msgpack.packb(obj, use_bin_type=True)


def send(tag: int, frame: bytes) -> None:
    pending.append((world.Isend([frame, MPI.BYTE], 0, tag), frame))
    progress()


def progress() -> None:
    global pending
    if pending:
        done = set(MPI.Request.Testsome([r for r, _ in pending]) or [])
        pending = [p for i, p in enumerate(pending) if i not in done]


def control(kind: str, info: dict, tokens: tuple = ()) -> bytes:
    return pack({"v": V, "kind": kind, "tokens": list(tokens), "info": info})


def trace(data: bytes) -> bytes:
    """Two edges from the input's hash, packed like protocol.coverage.pack_trace (u16 edge, u32 count)."""
    h = hashlib.sha256(b"batch-rank" + data).digest()
    return b"".join(struct.pack("<HI", int.from_bytes(h[i:i + 2], "big"), 1) for i in (0, 2))


def result(token: str, work_id: str, **kw: object) -> dict:
    m = {"v": V, "kind": "result", "token": token, "work_id": work_id, "status": "ok", "candidates": [],
         "cost": {"wall_s": 0.0001, "cpu_s": 0.0001, "solver_s": 0.0, "execs": 1}, "cov_version": 0,
         "trace": b"", "error": "", "stats": {}}
    m.update(kw)
    return m


def answer(works: list[dict]) -> None:
    items: list[object] = [
        result(secrets.token_hex(32), secrets.token_hex(32)),
        result(secrets.token_hex(32), secrets.token_hex(32), status="bogus"),
        {**result(secrets.token_hex(32), secrets.token_hex(32)), "v": 2},
        42,
    ]
    sent["stale"] += 1
    sent["malformed"] += 2
    sent["incompatible"] += 1
    for i, w in enumerate(works):
        genuine = result(w["token"], w["work_id"], trace=trace(w["data"]), cov_version=w["cov_version"])
        items.append(genuine)
        sent["genuine"] += 1
        if i == 0:
            items.append(dict(genuine))
            sent["duplicate"] += 1
    send(RESULT, pack({"v": V, "kind": "results", "items": items}))
    sent["frames"] += 1


def poll() -> None:
    global work_received, stop_seen
    status = MPI.Status()
    progress()
    while True:
        msg = world.Improbe(0, MPI.ANY_TAG, status)
        if msg is None:
            return
        buf = bytearray(status.Get_count(MPI.BYTE))
        msg.Recv([buf, MPI.BYTE])
        m = msgpack.unpackb(bytes(buf), raw=False)
        if status.Get_tag() == WORK:
            works = m["items"] if m.get("kind") == "works" else [m]
            work_received += len(works)
            sent["work_frames"] += 1
            sent["batched_work_frames"] += m.get("kind") == "works"
            answer(works)
        elif m.get("kind") == "stop":
            stop_seen = True


def main() -> int:
    report_path = sys.argv[1]
    send(CONTROL, control("hello", {"host": "batch-rank", "pid": os.getpid(), "max_batch": 256}))
    status = MPI.Status()
    while True:  # SETUP, then the host check's answer (rank 0 starts once every rank gave it)
        msg = world.Improbe(0, CONTROL, status)
        if msg is not None:
            buf = bytearray(status.Get_count(MPI.BYTE))
            msg.Recv([buf, MPI.BYTE])
            m = msgpack.unpackb(bytes(buf), raw=False)
            if m.get("kind") == "setup":
                send(CONTROL, control("checked", {"host": "batch-rank", "files_checked": 0}))
                break
            if m.get("kind") == "stop":
                return 0
        time.sleep(0.001)
    next_beat = 0.0
    while not stop_seen:
        poll()
        if time.monotonic() >= next_beat:  # it holds nothing: every WORK is answered on arrival
            send(CONTROL, control("heartbeat", {"work_received": work_received, "busy_s": 0.0}))
            next_beat = time.monotonic() + 0.2
        time.sleep(0.0005)
    send(CONTROL, control("stop_ack", {"results_sent": sent["genuine"]}))
    until = time.monotonic() + 10
    while pending and time.monotonic() < until:
        progress()
        time.sleep(0.001)
    with open(report_path, "w") as fh:
        json.dump(dict(sent), fh)
    return 0


if __name__ == "__main__":
    code = main()
    MPI.Finalize()
    sys.exit(code)
