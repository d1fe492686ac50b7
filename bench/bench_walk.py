"""The walk of one committed result: the calls rank 0's loop makes for one RESULT frame of one result.

Drives the real `Campaign` (journal on, no MPI, as bench_loop.py) at depth 4 with no-op results
until the pipeline is steady, then records, with `sys.setprofile`, every call made while one
RESULT frame carrying one result is handled: its intake, fence, commit and the refill WORK it
frees. Prints the Python calls, the C calls, the modules they are in, how often the walk moves
from one module to another and how often it comes back to a module already visited (issue 28's
"walk of a committed result"), and the core's own part of it (its functions, in order).
`-v` lists the Python calls in order.
Run: `python -m bench.bench_walk [-v]`.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench.bench_loop import no_op_answers, offline_campaign
from symfence.coordinator.config import parse
from symfence.coordinator.pump import Inbound
from symfence.protocol.messages import Tag
from symfence.worker.sender import ResultSender


def _where(filename: str) -> str:
    for mark in ("/symfence/", "/site-packages/", "/lib/python3"):
        if mark in filename:
            return filename.split(mark)[-1]
    return filename


async def walk(out: Path, warm_steps: int = 60) -> list[tuple[str, str]]:
    cfg = parse({"campaign": {"executor": "synthetic", "duration_s": 0}, "mpi": {"max_batch": 1},
                 "dispatch": {"depth": 4}, "synthetic": {"seeds": 20_000, "task_ms": 0}})
    c, handle = offline_campaign(cfg, out)
    batch: list[Inbound] = []
    senders = {r: ResultSender(lambda f, r=r: batch.append(Inbound(r, Tag.RESULT, f))) for r in c.workers}
    calls: list[tuple[str, str]] = []
    for step in range(warm_steps + 1):
        batch.clear()
        no_op_answers(c, senders)
        for i, m in enumerate(batch):
            if step == warm_steps and i == 0:
                def prof(frame: Any, event: str, arg: Any) -> None:
                    if event == "call":
                        calls.append((_where(frame.f_code.co_filename), frame.f_code.co_name))
                    elif event == "c_call":
                        calls.append(("<C>", getattr(arg, "__qualname__", str(arg))))

                before = c.stats.committed
                sys.setprofile(prof)
                c._on_batch([m])
                sys.setprofile(None)
                assert c.stats.committed == before + 1, "the traced frame did not commit"
            else:
                c._on_batch([m])
            while c.peers.pending():
                c._turn()
        if c.journal.needs_flush():
            c._flush()
    c.journal.close()
    handle.close()
    return calls


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("-v", action="store_true", help="list the Python calls in order")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as d:
        calls = asyncio.run(walk(Path(d)))
    py = [c for c in calls if c[0] != "<C>"]
    modules = collections.Counter(m for m, _ in py)
    order: list[str] = []
    for m, _ in py:
        if not order or order[-1] != m:
            order.append(m)
    moves, back = len(order) - 1, len(order) - len(set(order))
    print(f"one committed result: {len(py)} Python calls, {len(calls) - len(py)} C calls,"
          f" {len(modules)} modules, {moves} moves between modules, {back} back to a module already visited")
    core = [f for m, f in py if m == "coordinator/core.py" and not f.startswith("<")]
    print(f"in the core (coordinator/core.py): {len(core)} calls of {len(set(core))} functions:"
          f" {' -> '.join(core)}")
    for m, n in modules.most_common():
        print(f"  {n:4d} {m}")
    if args.v:
        for m, f in py:
            print(f"{m}:{f}")


if __name__ == "__main__":
    main()
