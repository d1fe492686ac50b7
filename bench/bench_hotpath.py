"""What the hot-path accounting (coordinator/hotpath.py) costs: CPU per result and per dispatch round.

Times, in CPU seconds (time.process_time, so a loaded machine does not inflate it), the
statements campaign.py adds per result (a sampling check, one histogram add; the clock reads
for one result in SAMPLE) and per `_fill` call. The whole-coordinator figure with and without
the accounting comes from bench/bench_loop.py run on both trees (see README).
"""

from __future__ import annotations

import time
import timeit

from bench.common import save
from symfence.coordinator.hotpath import SAMPLE, HotPath, clock_ns


def main() -> None:
    hp = HotPath()
    _ns = clock_ns

    class St:
        results_received = 0

    st = St()

    def per_result() -> None:  # _on_result + _commit's additions, as campaign.py has them
        st.results_received += 1  # (campaign.py counts this anyway; here it is the sampling counter)
        timed = not st.results_received % SAMPLE
        t0 = _ns() if timed else 0
        if timed:
            t1 = _ns()
            hp.decode_ns += t1 - t0
        hp.latency.add(0.00123)
        if timed:
            hp.commit_ns += _ns() - t1

    def per_fill() -> None:  # _fill's additions
        hp.fills += 1
        t0 = 0 if hp.fills % SAMPLE else _ns()
        if t0:
            hp.dispatch_ns += _ns() - t0

    def empty() -> None:
        st.results_received += 1

    n = 320_000
    cost = {f.__name__: min(timeit.repeat(f, number=n, repeat=5, timer=time.process_time)) / n
            for f in (empty, per_result, per_fill)}
    rows = [["per result (mean; 1 in SAMPLE timed)", f"{1e9 * (cost['per_result'] - cost['empty']):.0f}"],
            ["per dispatch round (mean)", f"{1e9 * cost['per_fill']:.0f}"],
            ["clock read (time.thread_time_ns)",
             f"{1e9 * min(timeit.repeat(_ns, number=n, repeat=5, timer=time.process_time)) / n:.0f}"]]
    print(save("hotpath", ["accounting added", "ns CPU"], rows, {"calls": n, "sample": SAMPLE}))


if __name__ == "__main__":
    main()
