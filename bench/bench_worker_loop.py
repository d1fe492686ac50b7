"""A worker's CPU per task without MPI: the real worker loop, a fake endpoint standing in for rank 0.

The fake endpoint keeps `--depth` no-op synthetic WORKs in flight (each refill in one frame, a
batch when there are several), and counts the results the worker sends; the worker runs its
own loop steps (receive, start, hold or send results, wait on the executor). CPU seconds of the
whole process (`time.process_time`), so the fake endpoint's own WORK encoding and RESULT decoding
are counted too, alike for every setting. `--batches 1,16` runs each `mpi.max_batch` side by
side, alternately. For instruction counts, which a loaded machine does not blur, run it under
`valgrind --tool=cachegrind --cache-sim=no` at two `--tasks` values and take the difference.

    python -m bench.bench_worker_loop --tasks 20000 --batches 1,16 --depth 8
"""

from __future__ import annotations

import argparse
import collections
import secrets
import time

from symfence.protocol.codec import encode

try:
    from symfence.protocol.codec import decode_result_frame, encode_batch
except ImportError:  # a tree from before batched frames (run there for a before/after): one per frame
    from symfence.protocol.codec import decode_result

    def decode_result_frame(frame: bytes) -> list:  # type: ignore[misc]
        return [decode_result(frame)]

    encode_batch = None  # type: ignore[assignment]
from symfence.protocol.ids import DispatchToken, WorkId, sha256_hex
from symfence.protocol.messages import Tag, Work
from symfence.worker.loop import Worker


class FakeRank0:
    """A worker's endpoint: WORK frames in, RESULT frames counted and answered with new WORKs."""

    rank = 1

    def __init__(self, tasks: int, max_batch: int) -> None:
        self.tasks, self.max_batch = tasks, max_batch
        self.issued = self.results = 0
        self.inbox: collections.deque[tuple[int, int, bytes]] = collections.deque()
        self.options = {"task_ms": 0.0}

    def poll(self, source: int = 0, limit: int = 64) -> list[tuple[int, int, bytes]]:
        return [self.inbox.popleft() for _ in range(min(limit, len(self.inbox)))]

    def send(self, dest: int, tag: int, frame: bytes) -> None:
        if tag == Tag.RESULT:
            n = len(decode_result_frame(frame))
            self.results += n
            self.refill(n)

    def refill(self, n: int) -> None:
        frames = []
        for _ in range(min(n, self.tasks - self.issued)):
            data = secrets.token_bytes(8)
            self.issued += 1
            token, work_id = DispatchToken(secrets.token_hex(32)), WorkId(secrets.token_hex(32))
            work = Work(token, work_id, data, sha256_hex(data), "synthetic", "t", 0, self.options)
            frames.append(encode(work))
        for i in range(0, len(frames), self.max_batch):
            group = frames[i:i + self.max_batch]
            self.inbox.append((0, Tag.WORK, group[0] if len(group) == 1 else encode_batch("works", group)))

    def flush(self, timeout_s: float = 5.0) -> bool:
        return True


def run(tasks: int, max_batch: int, depth: int) -> tuple[float, int]:
    """CPU seconds per task, and the RESULT frames the worker sent."""
    ep = FakeRank0(tasks, max_batch)
    w = Worker(ep, ep, lambda path, rank: None)  # type: ignore[arg-type]
    if hasattr(w, "_flush_held"):
        w.sender.max_batch, w.hold_s = max_batch, 0.002
    ep.refill(depth)
    t = time.process_time()
    while ep.results < tasks:
        w._receive()
        if w.running is None and w.queue:
            w._start(w.queue.popleft())
        if hasattr(w, "_flush_held"):
            w._flush_held(float("inf"))
        if w.running is not None and (outcome := w._wait(0.02)) is not None:
            w._finish(outcome)
    return (time.process_time() - t) / tasks, getattr(w.sender, "frames", w.sender.sent)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tasks", type=int, default=20_000)
    p.add_argument("--batches", default="1,16", help="comma-separated mpi.max_batch values")
    p.add_argument("--depth", type=int, default=8)
    p.add_argument("--repeat", type=int, default=2)
    args = p.parse_args(argv)
    sizes = [int(b) for b in args.batches.split(",")]
    best: dict[int, tuple[float, int]] = {}
    for _ in range(args.repeat):
        for b in sizes:  # alternately, so a change of load hits every size alike
            per, frames = run(args.tasks, b, args.depth)
            print(f"max_batch {b}: {per * 1e6:.1f} us per task, {frames} result frames, {args.tasks} results")
            if b not in best or per < best[b][0]:
                best[b] = (per, frames)
    for b in sizes:
        print(f"max_batch {b}, depth {args.depth}: best {best[b][0] * 1e6:.1f} us per task"
              f" ({best[b][0] / best[sizes[0]][0]:.2f}x of max_batch {sizes[0]}), {best[b][1]} result frames")


if __name__ == "__main__":
    main()
