"""The MPI pump thread's CPU per frame, alone: rank 0 runs the real `Pump` under an asyncio loop
that answers every frame with one frame back (depth D per worker), the workers echo.

No core, no journal: what is measured is the pump thread (probe, receive, send, test, back-off)
and the loop's side of its hand-over, per round trip (one frame in, one frame out), from the
threads' own CPU clocks. With `--base TREE` the same rows run with TREE's pump (TREE first on
PYTHONPATH), interleaved base, head, base, head: side by side in one run. The load average is
read before and after each row.
Run: `python -m bench.bench_pump [--base /path/to/main-worktree] [--frames 20000] [--rounds 3]`.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from bench.common import save

HEAD = Path(__file__).resolve().parent.parent
MPIEXEC = str(Path(sys.executable).parent / "mpiexec")

RANK_PROGRAM = r"""
import asyncio, json, sys, time
from mpi4py import MPI
from symfence.coordinator.pump import Pump
from symfence.protocol.backoff import Backoff

frames, depth, size = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
comm = MPI.COMM_WORLD
rank, n = comm.Get_rank(), comm.Get_size()
payload = bytes(size)
if rank:
    status, back = MPI.Status(), Backoff(cap_s=0.001)
    while True:
        msg = comm.Improbe(0, MPI.ANY_TAG, status)
        if msg is None:
            d = back.next_delay()
            time.sleep(d) if d else None
            continue
        back.reset()
        buf = bytearray(status.Get_count(MPI.BYTE))
        msg.Recv([buf, MPI.BYTE])
        if status.Get_tag() == 9:
            break
        comm.Send([buf, MPI.BYTE], 0, 1)
    sys.exit(0)

async def main():
    loop = asyncio.get_running_loop()
    done = loop.create_future()
    got = sent = 0
    pump = None
    def deliver(batch):
        nonlocal got, sent
        for m in batch:
            got += 1
            if sent < frames:
                pump.send(m.source, 2, payload)
                sent += 1
        if got >= frames and not done.done():
            done.set_result(None)
    pump = Pump(comm, loop, deliver, lambda ranks: None)
    pump.start()
    await asyncio.sleep(0.05)
    t0, l0 = time.perf_counter(), time.thread_time()
    p0 = time.clock_gettime(time.pthread_getcpuclockid(pump.ident))
    for r in range(1, n):
        for _ in range(depth):
            pump.send(r, 2, payload)
            sent += 1
    await done
    wall = time.perf_counter() - t0
    pump_cpu = time.clock_gettime(time.pthread_getcpuclockid(pump.ident)) - p0
    loop_cpu = time.thread_time() - l0
    for r in range(1, n):
        pump.send(r, 9, b"")
    pump.stop()
    print(json.dumps({"frames": got, "wall_s": wall, "pump_us": 1e6 * pump_cpu / got,
                      "loop_us": 1e6 * loop_cpu / got, "per_s": got / wall}))

asyncio.run(main())
"""


def row(tree: Path, ranks: int, frames: int, depth: int, size: int) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    load0 = os.getloadavg()[0]
    cmd = [MPIEXEC, "-n", str(ranks), sys.executable, "-c", RANK_PROGRAM, str(frames), str(depth), str(size)]
    out = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True, timeout=120)
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("{")]
    if out.returncode or not lines:
        raise SystemExit(f"{tree}: pump row failed:\n{out.stderr[-2000:]}")
    return {**json.loads(lines[-1]), "load": [round(load0, 2), round(os.getloadavg()[0], 2)]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", type=Path, help="another tree (a worktree of main) to run side by side")
    ap.add_argument("--frames", type=int, default=20_000)
    ap.add_argument("--ranks", type=int, default=4, help="1 coordinator + ranks-1 workers")
    ap.add_argument("--depth", type=int, default=4)
    ap.add_argument("--size", type=int, default=300, help="bytes per frame")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args(argv)
    trees = ([("base", args.base.resolve())] if args.base else []) + [("head", HEAD)]
    rows: dict[str, list[dict[str, Any]]] = {name: [] for name, _ in trees}
    for _ in range(args.rounds):
        for name, tree in trees:
            r = row(tree, args.ranks, args.frames, args.depth, args.size)
            rows[name].append(r)
            print(f"{name}: pump {r['pump_us']:.1f} us/frame, loop {r['loop_us']:.1f} us/frame, "
                  f"{r['per_s']:,.0f} frames/s (load {r['load'][0]}-{r['load'][1]})", flush=True)
    headers = ["tree", "pump CPU us/frame (best)", "(median)", "loop CPU us/frame (median)",
               "frames/s (median)"]
    table = []
    for name, rs in rows.items():
        med = sorted(rs, key=lambda r: r["pump_us"])[len(rs) // 2]
        table.append([name, round(min(r["pump_us"] for r in rs), 1), round(med["pump_us"], 1),
                      round(sorted(r["loop_us"] for r in rs)[len(rs) // 2], 1),
                      round(sorted(r["per_s"] for r in rs)[len(rs) // 2])])
    print(save("pump", headers, table, {"args": {k: str(v) for k, v in vars(args).items()}, "runs": rows}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
