"""A bare single-threaded msgpack farm: the messaging ceiling symfence is compared against.

`mpiexec -n 4 python -m bench.farm --depth 4 --duration 5`: rank 0 Iprobe-spins and keeps
`depth` no-op tasks in flight per worker, with buffer-based Send/Recv of msgpack bytes (a task
id and an 8-byte payload); workers unpack each task and send back a packed reply. No journal,
no fence, no threads: what one Python process can move through MPI. Prints one JSON line.
"""

from __future__ import annotations

import argparse
import json
import time

import msgpack
from mpi4py import MPI

TASK, STOP = 1, 2


def master(comm: MPI.Comm, depth: int, duration: float) -> dict:
    workers = range(1, comm.Get_size())
    status = MPI.Status()
    seq = in_flight = done = 0
    t0 = time.perf_counter()
    end = t0 + duration
    for w in workers:
        for _ in range(depth):
            comm.Send([msgpack.packb((seq, b"\0" * 8)), MPI.BYTE], w, TASK)
            seq += 1
            in_flight += 1
    counted_until = None
    while in_flight:
        if not comm.Iprobe(MPI.ANY_SOURCE, MPI.ANY_TAG, status):
            continue
        source = status.Get_source()
        buf = bytearray(status.Get_count(MPI.BYTE))
        comm.Recv([buf, MPI.BYTE], source, TASK)
        msgpack.unpackb(buf)
        in_flight -= 1
        if counted_until is None:
            now = time.perf_counter()
            if now < end:
                done += 1
                comm.Send([msgpack.packb((seq, b"\0" * 8)), MPI.BYTE], source, TASK)
                seq += 1
                in_flight += 1
            else:
                counted_until = now  # stop refilling; drain what is in flight (not counted)
    elapsed = (counted_until or time.perf_counter()) - t0
    for w in workers:
        comm.Send([b"", MPI.BYTE], w, STOP)
    return {"results": done, "elapsed_s": elapsed, "results_per_sec": done / elapsed, "depth": depth,
            "workers": comm.Get_size() - 1}


def worker(comm: MPI.Comm) -> None:
    status = MPI.Status()
    while True:
        comm.Probe(0, MPI.ANY_TAG, status)
        buf = bytearray(status.Get_count(MPI.BYTE))
        comm.Recv([buf, MPI.BYTE], 0, status.Get_tag())
        if status.Get_tag() == STOP:
            return
        seq, payload = msgpack.unpackb(buf)
        comm.Send([msgpack.packb((seq, payload, 0)), MPI.BYTE], 0, TASK)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--depth", type=int, default=4)
    p.add_argument("--duration", type=float, default=5.0)
    args = p.parse_args()
    comm = MPI.COMM_WORLD
    if comm.Get_rank() == 0:
        print(json.dumps(master(comm, args.depth, args.duration)), flush=True)
    else:
        worker(comm)


if __name__ == "__main__":
    main()
