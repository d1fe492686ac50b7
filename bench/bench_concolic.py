"""Benchmark: concolic engine speed - executions/s in and out of the child process, time to each bug.

For each demo target: plain calls/s (no engine), traced executions/s (proxies + coverage, what
every replay costs), one symbolic run, and the coverage-guided generational search through
``ConcolicExecutor`` (child process) from a one-byte seed until the planted bug: tasks,
generations, executions, seconds and executions/s. Also the per-task round trip of the
executor on tasks that need no solving.

    .venv/bin/python bench/bench_concolic.py [--repeat 2000] [--seed-hex 00]
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import time
from collections import deque
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import save  # noqa: E402
from examples import checksum, magic_header, tlv  # noqa: E402
from symfence.protocol.coverage import CoverageMap  # noqa: E402
from symfence.worker.concolic.execution import execute  # noqa: E402
from symfence.worker.concolic.instrument import load_target  # noqa: E402
from symfence.worker.executors.base import ExitKind, Task  # noqa: E402
from symfence.worker.executors.concolic import ConcolicExecutor  # noqa: E402

# Inputs that pass every check but the last one, so each run walks the deepest path.
DEEP_INPUTS = {
    "examples.magic_header:target": (magic_header.target, b"SYMF\x03\xef\xbe?"),
    "examples.tlv:target": (tlv.target, bytes.fromhex("010a020400adf00d02020000")),
    "examples.checksum:target": (checksum.target, (ord("X") + 0x38 + 0x13 + 0x20).to_bytes(2, "big")
                                 + b"X\x38\x13" + b" " * 3),
}


def per_second(count: int, seconds: float) -> float:
    return round(count / seconds, 1) if seconds > 0 else 0.0


def timed(fn, repeat: int) -> float:
    start = time.perf_counter()
    for _ in range(repeat):
        fn()
    return time.perf_counter() - start


def wait_for(ex: ConcolicExecutor):
    while True:
        outcome = ex.wait(1.0)
        if outcome is not None:
            return outcome


def search(ex: ConcolicExecutor, target: str, seed: bytes, max_tasks: int = 500) -> dict[str, float]:
    """Coverage-guided generational search through the executor until the first crash."""
    coverage = CoverageMap()
    queue = deque([(seed, 0, 0)])
    tasks = execs = 0
    start = time.perf_counter()
    while queue and tasks < max_tasks:
        data, bound, generation = queue.popleft()
        work_id = hashlib.sha256(data + bound.to_bytes(4, "big")).hexdigest()
        ex.start(Task("bench", work_id, data, target, bound))
        outcome = wait_for(ex)
        tasks += 1
        execs += outcome.execs
        for child in outcome.candidates:
            if child.kind is ExitKind.CRASH:
                wall = time.perf_counter() - start
                return {"tasks": tasks, "generations": generation + 1, "execs": execs,
                        "seconds": round(wall, 3), "execs_per_s": per_second(execs, wall)}
            if coverage.merge(child.trace):
                queue.append((child.data, child.bound, generation + 1))
    raise SystemExit(f"{target}: bug not found in {tasks} tasks")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=2000, help="executions per in-process timing")
    parser.add_argument("--seed-hex", default="00", help="seed of the generational search")
    args = parser.parse_args()
    seed = bytes.fromhex(args.seed_hex)

    rows = []
    with ConcolicExecutor() as ex:
        for name in DEEP_INPUTS:  # child start-up, z3 import, target import; no solving (bound)
            ex.start(Task("bench", "warm-up", b"", name, bound=10**6))
            wait_for(ex)
        for name, (plain, deep) in DEEP_INPUTS.items():
            target = load_target(name)
            plain_s = timed(lambda: plain(deep), args.repeat)
            traced_s = timed(lambda: execute(target, deep, symbolic=False, timeout_s=1.0,
                                             max_branches=2000), args.repeat)
            symbolic_s = timed(lambda: execute(target, deep, symbolic=True, timeout_s=10.0,
                                               max_branches=2000), 20) / 20
            found = search(ex, name, seed)
            rows.append([name, per_second(args.repeat, plain_s), per_second(args.repeat, traced_s),
                         round(symbolic_s * 1e3, 2), found["tasks"], found["generations"],
                         found["execs"], found["seconds"], found["execs_per_s"]])

        round_trips = 200
        deep = DEEP_INPUTS["examples.magic_header:target"][1]
        start = time.perf_counter()
        for _ in range(round_trips):
            ex.start(Task("bench", "rt", deep, "examples.magic_header:target", bound=10**6))
            wait_for(ex)
        round_trip_s = (time.perf_counter() - start) / round_trips

    headers = ["target", "plain calls/s", "traced execs/s", "symbolic run ms", "tasks to bug",
               "generations", "execs to bug", "seconds to bug", "executor execs/s"]
    text = save("concolic", headers, rows, {
        "seed_hex": args.seed_hex, "repeat": args.repeat,
        "executor_task_round_trip_ms": round(round_trip_s * 1e3, 3),
    })
    print(text)
    print(f"\nexecutor round trip of a task without solving (2 executions): "
          f"{round_trip_s * 1e3:.2f} ms ({per_second(1, round_trip_s)} tasks/s)")


if __name__ == "__main__":
    main()
