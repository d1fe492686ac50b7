"""What the hot-path accounting (coordinator/hotpath.py) costs: CPU per result and per dispatch round.

Times, in CPU seconds (time.process_time, so a loaded machine does not inflate it), exactly the
statements campaign.py runs per result (three clock reads, two adds, one histogram add) and per
`_fill` call (two clock reads, one add), against an empty function call.
"""

from __future__ import annotations

import time
import timeit

from bench.common import save
from symfence.coordinator.hotpath import HotPath, clock_ns


def main() -> None:
    hp = HotPath()
    _ns = clock_ns

    def per_result() -> None:  # _on_result + _commit's additions
        t0 = _ns()
        t1 = _ns()
        hp.decode_ns += t1 - t0
        hp.latency.add(0.00123)
        hp.commit_ns += _ns() - t1

    def per_fill() -> None:  # _fill's additions
        t0 = _ns()
        hp.dispatch_ns += _ns() - t0

    def empty() -> None:
        pass

    n = 200_000
    cost = {f.__name__: min(timeit.repeat(f, number=n, repeat=5, timer=time.process_time)) / n
            for f in (empty, per_result, per_fill)}
    rows = [[name, f"{1e9 * (cost[name] - cost['empty']):.0f}"] for name in ("per_result", "per_fill")]
    rows.append(["clock read (time.thread_time_ns)",
                 f"{1e9 * min(timeit.repeat(_ns, number=n, repeat=5, timer=time.process_time)) / n:.0f}"])
    print(save("hotpath", ["accounting added", "ns CPU"], rows, {"calls": n}))


if __name__ == "__main__":
    main()
