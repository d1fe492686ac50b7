"""The MPI pump with real mpiexec ranks: frames in order per rank, sends batched per wake-up, an
oversized frame drained at the probe, and a rank that never receives does not stall the others."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MPIEXEC = str(Path(sys.executable).parent / "mpiexec")

PROGRAM = r"""
import asyncio, json, sys, time
from mpi4py import MPI
from symfence.coordinator.pump import Inbound, Pump

comm = MPI.COMM_WORLD
rank = comm.Get_rank()
N = 300
if rank == 1:  # sends N numbered frames and one oversized, then echoes what comes back
    for i in range(N):
        comm.Send(i.to_bytes(4, "big") * 8, 0, 1)
    comm.Send(bytes(5000), 0, 1)
    got = []
    while len(got) < N:
        buf = bytearray(32)
        comm.Recv(buf, 0, 2)
        got.append(int.from_bytes(buf[:4], "big"))
    comm.Send(json.dumps(got).encode(), 0, 3)
    sys.exit(0)
if rank == 2:  # silent: receives nothing until rank 0 says so on a tag of its own
    comm.Recv(bytearray(1), 0, 9)
    buf = bytearray(1 << 22)
    comm.Recv(buf, 0, 2)  # the large frame rank 0 posted long ago
    sys.exit(0)

async def main():
    loop = asyncio.get_running_loop()
    seen, batches, echoed, done = [], [], None, loop.create_future()
    def deliver(batch):
        nonlocal echoed
        batches.append(len(batch))
        for m in batch:
            assert type(m) is Inbound and isinstance(m, tuple)
            if m.tag == 1 and not m.oversized:
                seen.append((m.source, int.from_bytes(m.frame[:4], "big")))
                pump.send(1, 2, m.frame)
            elif m.oversized:
                seen.append((m.source, "oversized", m.oversized, m.frame.hex()))
            elif m.tag == 3:
                echoed = json.loads(m.frame)
                done.set_result(None)
    pump = Pump(comm, loop, deliver, lambda ranks: None, max_frame_bytes=4096, batch=16)
    pump.start()
    pump.send(2, 2, bytes(1 << 22))  # rank 2 does not receive it: the send stays outstanding
    t0 = time.monotonic()
    await asyncio.wait_for(done, 60)
    served_s = time.monotonic() - t0
    pump.send(2, 9, b"x")  # now rank 2 takes its large frame and the pump can stop
    pump.stop(10)
    print(json.dumps({"seen": seen, "echoed": echoed, "max_batch": max(batches), "alive": pump.is_alive(),
                      "error": repr(pump.error), "frames_in": pump.frames_in, "frames_out": pump.frames_out,
                      "oversized": pump.oversized_frames, "served_s": served_s}))

asyncio.run(main())
"""


def test_pump_orders_batches_drains_oversized_and_is_not_held_by_a_silent_rank() -> None:
    out = subprocess.run([MPIEXEC, "-n", "3", sys.executable, "-c", PROGRAM], cwd=ROOT, capture_output=True,
                         text=True, timeout=120, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr[-3000:]
    r = json.loads([ln for ln in out.stdout.splitlines() if ln.startswith("{")][-1])
    numbered = [n for s, n, *_ in r["seen"] if s == 1 and isinstance(n, int)]
    assert numbered == list(range(300))  # every frame of rank 1, in the order it sent them
    assert r["echoed"] == list(range(300))  # every send posted, in order, while rank 2's send was stuck
    assert [x for x in r["seen"] if x[1] == "oversized"] == [[1, "oversized", 5000, ""]]
    assert r["oversized"] == 1 and r["frames_in"] == 302  # 300 + the oversized one + rank 1's report
    assert r["frames_out"] == 302  # 300 echoes, the stuck frame, rank 2's go-ahead
    assert r["max_batch"] <= 16 and r["error"] == "None" and not r["alive"]
