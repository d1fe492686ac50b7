"""Draining an oversized frame at the probe: rank 0's time and peak memory, sink vs full receive.

    .venv/bin/python -m bench.bench_oversized [--mib 2100]

Runs `mpiexec -n 2`: rank 1 sends one frame of the given size, then a small one; rank 0 probes
it and either drains it through the pump's 64 KiB sink (coordinator.pump.Sink) or receives it
whole into a buffer of its size (what the pump did before issue 10), then receives the small one.
Each case is its own job, side by side in the same run; rank 0 reports seconds and peak RSS.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MPIEXEC = str(Path(sys.executable).parent / "mpiexec")

RANK_PROGRAM = r"""
import json, resource, sys, time
from mpi4py import MPI
from symfence.coordinator.pump import Sink, frame_size
comm, size, mode = MPI.COMM_WORLD, int(sys.argv[1]), sys.argv[2]
if comm.Get_rank() == 1:
    big = bytearray(size)
    req = comm.Isend([big, MPI.BYTE], 0, 5)
    comm.Send([b"next", MPI.BYTE], 0, 6)
    req.Wait()
else:
    st = MPI.Status()
    while (msg := comm.Improbe(1, 5, st)) is None:
        time.sleep(0.001)
    n = frame_size(st)
    t = time.perf_counter()
    if mode == "sink":
        Sink().drain(msg, n)
    else:
        buf = bytearray(n)
        msg.Recv([buf, MPI.BYTE])
        frame = bytes(buf)
    took = time.perf_counter() - t
    small = bytearray(16)
    comm.Recv([small, MPI.BYTE], 1, 6, st)
    print(json.dumps({"mode": mode, "bytes": n, "seconds": round(took, 3),
                      "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024,
                      "next_frame_ok": bytes(small[:st.Get_count(MPI.BYTE)]) == b"next"}))
"""


def run(size: int, mode: str) -> dict:
    cmd = [MPIEXEC, "-n", "2", sys.executable, "-c", RANK_PROGRAM, str(size), mode]
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    if out.returncode:
        return {"mode": mode, "bytes": size, "error": out.stderr.strip()[-300:]}
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--mib", type=int, default=2100)
    args = p.parse_args()
    size = args.mib << 20
    rows = [run(size, "sink"), run(size, "receive")]
    print("| rank 0 handles one frame of | how | seconds | peak RSS (MiB) | next frame ok |")
    print("|---|---|---:|---:|---|")
    for r in rows:
        print(f"| {size >> 20} MiB | {r['mode']} | {r.get('seconds', '-')} | {r.get('peak_rss_mib', '-')} |"
              f" {r.get('next_frame_ok', r.get('error'))} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
