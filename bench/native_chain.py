"""The native engine's generational search replayed in one process, on a map a slice covered first.

    python -m bench.native_chain TARGET [--slice-execs N] [--seed S] [--keep-all]

The parts are the campaign's own: TritonDSE + the forkserver oracle (``worker.native.runner``), a
real native slice (``worker.native.fuzz_slice``, ``max_execs`` so a seed gives the same slice), the
coordinator's ``CoverageMap`` and its scheduler's order (seeds, the engine's children, the slices'
finds last; more new bits, lower bound, shorter first). A candidate with no new bits is dropped, as
the worker's filter does (``--keep-all`` keeps it instead, last). Prints the tasks to the first
crash and the line of inputs that led there, or that the queue ran dry. docs/native-slices.md,
"What kept the engine from its finds", has the runs.
"""

from __future__ import annotations

import argparse
import heapq
import itertools
import os
import tempfile
import time
from typing import Any

from symfence.protocol.coverage import CoverageMap
from symfence.protocol.options import NativeFuzzOptions
from symfence.worker.engine_api import ExitKind
from symfence.worker.native.fuzz_slice import SliceRunner
from symfence.worker.native.runner import Runner


class _NoEvents:
    def entered(self, *a: object) -> None: ...
    def found(self, *a: object) -> None: ...
    def subgroup(self, *a: object) -> None: ...


def replay(target: str, slice_execs: int, seed: str, keep_all: bool, max_tasks: int = 400) -> int | None:
    options: dict[str, Any] = {"engine": "tritondse", "oracle": "forkserver", "afl_target": "{target}.afl",
                               "exec_timeout_s": 1.0, "engine_timeout_s": 30.0, "max_candidates": 64}
    start = bytes(32)
    cmap = CoverageMap()
    heap: list[Any] = []
    seq = itertools.count()
    parents: dict[bytes, tuple[bytes | None, int, str, int]] = {}

    def push(data: bytes, bound: int, bits: int, origin: str, parent: bytes | None = None) -> None:
        parents[data] = (parent, bits, origin, bound)
        tier = 0 if origin == "seed" else 3 if origin == "native_fuzz" else 4 if bits == 0 else 2
        heapq.heappush(heap, ((tier, -bits, bound, len(data), next(seq)), data, bound))

    push(start, 0, 0, "seed")
    if slice_execs:
        folder = tempfile.mkdtemp(prefix="native-chain-")
        with open(os.path.join(folder, "0" * 40), "wb") as fh:
            fh.write(start)
        runner = SliceRunner(folder)
        try:
            out = runner.slice(target, folder, seed, NativeFuzzOptions.from_mapping(
                {"slice_s": 600.0, "max_execs": slice_execs, "exec_timeout_s": 1.0}))
        finally:
            runner.close()
        kept = 0
        for c in out.candidates:
            if c.kind is ExitKind.OK and (bits := cmap.merge(c.trace)):
                push(c.data, 0, bits, "native_fuzz")
                kept += 1
        print(f"slice: {out.execs} execs, {kept} kept, {len(cmap.edges_found())} edges")
    engine = Runner(tempfile.mkdtemp(prefix="native-chain-"))
    tasks, t0, seen = 0, time.monotonic(), {start}
    try:
        while heap and tasks < max_tasks:
            _, data, bound = heapq.heappop(heap)
            out = engine.run_task(target, data, bound, dict(options), _NoEvents())  # type: ignore[arg-type]
            tasks += 1
            cmap.merge(out.trace)
            for c in out.candidates:
                if c.kind is not ExitKind.OK:
                    print(f"{c.kind.value} after {tasks} engine tasks ({time.monotonic() - t0:.1f} s): "
                          f"{c.data[:24].hex()}")
                    line: bytes | None = data
                    while line is not None:
                        parent, bits, origin, b = parents[line]
                        print(f"   from {origin:11} new bits {bits}  bound {b:2}  {line[:20].hex()}")
                        line = parent
                    return tasks
                bits = cmap.merge(c.trace)
                if c.data in seen or (bits == 0 and not keep_all):
                    continue
                seen.add(c.data)
                push(c.data, c.bound, bits, "native", data)
    finally:
        engine.close()
    left = f"{len(heap)} left" if heap else "empty"
    print(f"no crash after {tasks} engine tasks ({time.monotonic() - t0:.1f} s), queue {left}")
    return None


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("target", help="a native target with its afl-cc build beside it (TARGET.afl)")
    p.add_argument("--slice-execs", type=int, default=15000, help="the slice run first (0: none)")
    p.add_argument("--seed", default="s1", help="the slice's seed")
    p.add_argument("--keep-all", action="store_true", help="keep candidates with no new bits (last)")
    args = p.parse_args()
    replay(args.target, args.slice_execs, args.seed, args.keep_all)


if __name__ == "__main__":
    main()
