"""The coordinator loop thread's CPU per result, without MPI: the real Campaign, a fake pump.

Feeds the real `Campaign` (journal on, flushed every 50 ms as the ticker does) one encoded
RESULT per batch through `_on_batch`, as the pump hands them over at depth 4 with no-op tasks;
each result answers a WORK the coordinator sent, carrying the synthetic executor's 2-edge trace.
Only the coordinator's calls are timed, in CPU seconds (`time.process_time`), so the fake
workers' encoding is not counted and a loaded machine inflates the figure less than wall time.
`--profile` prints a cProfile (thread CPU clock) of the same calls. `--batches 1,4,16` runs
each frame size side by side (`mpi.max_batch`: the fake workers answer every WORK frame's
results in frames of up to that many, as a worker holding results does; 1 = one per frame).
Used for docs/design.md, "Performance": `python -m bench.bench_loop --results 10000`, best of
`--repeat` runs.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import pstats
import tempfile
import time
from pathlib import Path
from typing import Any

from symfence.coordinator import log as logsetup
from symfence.coordinator.campaign import Campaign
from symfence.coordinator.config import Config, parse
from symfence.coordinator.journal import Journal
from symfence.coordinator.outputs import OutputDir
from symfence.coordinator.pump import Inbound
from symfence.protocol.codec import decode_work_frame
from symfence.protocol.coverage import pack_trace
from symfence.protocol.messages import Cost, Result, Status, Tag
from symfence.worker.executors.synthetic import _fake_trace
from symfence.worker.sender import ResultSender


class _Comm:
    def __init__(self, size: int = 4) -> None:  # 1 coordinator + 3 workers
        self.size = size

    def Get_size(self) -> int:  # noqa: N802 - mpi4py's name
        return self.size


class _Pump:
    """Collects what the coordinator sends; the counters `fuzzer_stats` reads."""

    frames_in = frames_out = bytes_in = dropped_to_dead = 0
    oversized_frames = oversized_bytes = side_frames_dropped = 0
    error = None

    def __init__(self) -> None:
        self.out: list[tuple[int, int, bytes]] = []

    def send(self, dest: int, tag: int, frame: bytes) -> None:
        self.out.append((dest, tag, frame))


def offline_campaign(cfg: Config, out: Path, *, workers: int = 3, max_batch: int = 1) -> tuple[Campaign, Any]:
    """The real `Campaign` without MPI (for benchmarks and tests): journal on, a fake pump that
    collects what it sends, every worker said hello offering `max_batch`; seeded and dispatching,
    its first fill sent. Returns it and the log handle to close."""
    od = OutputDir(out)
    handle = logsetup.configure(od.logs / "coordinator.jsonl", verbose=False, rank=0)
    journal = Journal.open(od.root / "journal.sqlite", resume=False, batch_ops=cfg["journal.batch_ops"],
                           batch_ms=cfg["journal.batch_ms"], synchronous=cfg["journal.synchronous"])
    c = Campaign(cfg, _Comm(workers + 1), od, journal)
    journal.begin_run(c.minter.epoch.hex())
    c.pump = _Pump()
    for r in c.workers:
        c.batch_of[r] = max_batch  # what each worker's HELLO would offer
        c.members.hello(r)
        c.members.heard(r, c.clock())
    c._seed()
    c._seed_step(len(c._seeds_left))  # the seeds past campaign.seed_first: no loop runs `seed_rest` here
    c._apply(c.core.start())
    return c, handle


def no_op_answers(c: Campaign, senders: dict[int, ResultSender]) -> None:
    """Answer every WORK the campaign sent since the last call as a worker with a no-op task does
    (the synthetic executor's 2-edge trace); `senders` hold and send the results."""
    sends, c.pump.out = c.pump.out, []
    for dest, tag, frame in sends:
        if tag == Tag.WORK:
            for w in decode_work_frame(frame):
                r = Result(w.token, w.work_id, Status.OK, cost=Cost(0.0001, 0.0001, 0.0, 1),
                           cov_version=w.cov_version, trace=pack_trace(_fake_trace(w.data)))
                senders[dest].hold(w.token, r)
            senders[dest].flush()


async def _run(n: int, out: Path, profile: cProfile.Profile | None, max_batch: int = 1,
               depth: int = 4) -> float:
    cfg = parse({"campaign": {"executor": "synthetic", "duration_s": 0}, "mpi": {"max_batch": max_batch},
                 "dispatch": {"depth": depth}, "synthetic": {"seeds": n + 1000, "task_ms": 0}})
    c, handle = offline_campaign(cfg, out, max_batch=max_batch)
    journal = c.journal
    batch: list[Inbound] = []
    senders = {r: ResultSender(lambda f, r=r: batch.append(Inbound(r, Tag.RESULT, f))) for r in c.workers}
    for s in senders.values():
        s.max_batch = max_batch
    done, busy, last_flush = 0, 0.0, time.monotonic()
    while done < n and c.dispatching:
        batch.clear()
        no_op_answers(c, senders)
        t = time.process_time()
        if profile:
            profile.enable()
        for m in batch:
            c._on_batch([m])
            while c.peers.pending():
                c._turn()
        if time.monotonic() - last_flush > 0.05 and c.journal.needs_flush():
            c._flush()
            last_flush = time.monotonic()
        if profile:
            profile.disable()
        busy += time.process_time() - t
        done = c.stats.committed
    journal.close()
    handle.close()
    return busy / max(done, 1)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--results", type=int, default=10_000)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--profile", action="store_true")
    p.add_argument("--batches", default="1", help="comma-separated mpi.max_batch values, run side by side")
    p.add_argument("--depth", type=int, default=4)
    args = p.parse_args(argv)
    sizes = [int(b) for b in args.batches.split(",")]
    best = {b: float("inf") for b in sizes}
    for _ in range(args.repeat):
        for b in sizes:  # interleaved, so a change of load hits every size alike
            prof = cProfile.Profile(time.thread_time) if args.profile else None
            with tempfile.TemporaryDirectory() as tmp:
                per = asyncio.run(_run(args.results, Path(tmp) / "out", prof, b, args.depth))
            print(f"max_batch {b}: loop thread CPU per result: {per * 1e6:.1f} us")
            best[b] = min(best[b], per)
            if prof:
                pstats.Stats(prof).sort_stats("tottime").print_stats(30)
    for b in sizes:
        ratio = best[b] / best[sizes[0]]
        print(f"max_batch {b}: best of {args.repeat}: {best[b] * 1e6:.1f} us per result"
              f" ({args.results} results, depth {args.depth}, {ratio:.2f}x of max_batch {sizes[0]})")


if __name__ == "__main__":
    main()
