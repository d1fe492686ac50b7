"""Pipelining benchmark: worker utilisation and results/s at depth 1, 2 and 4, in one run.

Synthetic 1 ms tasks on 3 worker ranks (mpiexec -n 4, oversubscribed on 2 cores). Depth 1 is
the seed design's stop-and-wait: every task pays a coordinator round trip before the next.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from bench.common import campaign, save
from tests.mpi_helpers import synthetic_cfg


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--duration", type=float, default=8.0)
    p.add_argument("--task-ms", type=float, default=1.0)
    p.add_argument("--depths", default="1,2,4")
    args = p.parse_args(argv)
    rows = []
    base = None
    with tempfile.TemporaryDirectory() as tmp:
        for depth in [int(d) for d in args.depths.split(",")]:
            cfg = synthetic_cfg(campaign={"duration_s": args.duration}, dispatch={"depth": depth},
                                synthetic={"seeds": 40_000, "task_ms": args.task_ms},
                                stats={"interval_s": 1.0}, workers={"heartbeat_s": 1.0})
            s = campaign(Path(tmp) / f"d{depth}", cfg, ranks=4).stats()
            util = [float(s[f"utilisation_rank_{r}"]) for r in (1, 2, 3)]
            rps = float(s["results_per_sec"])
            base = base or rps
            rows.append([depth, f"{rps:,.0f}", f"{rps / base:.2f}x", f"{100 * sum(util) / 3:.1f}%",
                         " / ".join(f"{100 * u:.0f}%" for u in util), s["quarantined_results"]])
    print(save("pipeline", ["depth", "results/s", "vs depth 1", "mean worker utilisation",
                            "per rank", "quarantined"], rows,
               {"task_ms": args.task_ms, "duration_s": args.duration, "workers": 3}))


if __name__ == "__main__":
    main()
