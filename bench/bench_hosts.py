"""Across hosts: results/s and worker utilisation at 0 and 50 ms added round trip, depth 1, 4 and auto.

Three network-namespace hosts (bench/netns.py; needs root): rank 0 on h1, one worker each on h2
and h3, MPI over TCP on the links (UCX_TLS=tcp,self). With `--rtt-ms 50` both workers' links hold
every frame 25 ms each way (a userspace forwarder on TAP devices). Synthetic tasks of
`--task-ms` (10). Per run: committed results/s, and each worker's utilisation twice: over the
whole run (fuzzer_stats `utilisation_rank_N`: busy time / campaign time, the ramp of "auto"
included) and after `--settle` seconds (results committed after that, from plot_data, x the mean
task time the workers measured, / time, both workers averaged).
The issue's target: auto at least 90% busy at 50 ms.
Table and JSON in bench/results/hosts.{md,json}.
"""

from __future__ import annotations

import argparse
import csv
import tempfile
from pathlib import Path

from bench.common import save
from bench.netns import Cluster, why_not
from tests.mpi_helpers import synthetic_cfg
from tests.netns import run_hosts

DEPTHS: list[int | str] = [1, 4, "auto"]
SLOTS = {"h1": 1, "h2": 1, "h3": 1}


def _settled(out: Path, settle_s: float, task_s: float, workers: int) -> float | None:
    """Busy share of the workers after settle_s: results committed meanwhile (plot_data) x the mean
    task time the workers measured over the run (busy / committed), per worker and second."""
    rows = list(csv.reader((out / "plot_data").read_text().splitlines()))
    header = [h.strip().lstrip("# ").strip() for h in rows[0]]
    t, c = header.index("relative_time"), header.index("committed")
    points = [(float(r[t]), int(r[c])) for r in rows[1:] if len(r) == len(header)]
    after = [p for p in points if p[0] >= settle_s]
    if len(after) < 2:
        return None
    (t0, c0), (t1, c1) = after[0], after[-1]
    return (c1 - c0) * task_s / ((t1 - t0) * workers) if t1 > t0 else None


def one(tmp: Path, rtt_ms: float, depth: int | str, args: argparse.Namespace) -> list:
    delays = {"h2": rtt_ms / 1000, "h3": rtt_ms / 1000} if rtt_ms else {}
    seeds = int(2 * 1000 / args.task_ms * args.duration * 1.2) + 100
    cfg = synthetic_cfg(
        synthetic={"seeds": seeds, "task_ms": args.task_ms},
        campaign={"duration_s": args.duration},
        dispatch={"depth": depth},
        stats={"interval_s": 0.25},
    )
    with Cluster(3, delays=delays) as c:
        run = run_hosts(c, tmp, cfg, SLOTS, timeout_s=args.duration + 120)
    if run.code != 0:
        raise SystemExit(f"benchmark campaign failed ({run.code}):\n{run.stderr[-2000:]}")
    s = run.stats()
    util = [float(s[f"utilisation_rank_{r}"]) for r in (1, 2)]
    elapsed = int(s["committed"]) / float(s["results_per_sec"])
    mean_task_s = sum(util) * elapsed / int(s["committed"])  # the real task time (sleep overshoots 10 ms)
    settled = _settled(run.out, args.settle, mean_task_s, 2)
    final = [s.get(f"depth_rank_{r}", str(depth)) for r in (1, 2)]
    return [
        rtt_ms,
        depth,
        round(float(s["results_per_sec"]), 1),
        f"{util[0]:.1%} / {util[1]:.1%}",
        "-" if settled is None else f"{settled:.1%}",
        " / ".join(final),
    ]


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--duration", type=float, default=8.0)
    p.add_argument("--task-ms", type=float, default=10.0)
    p.add_argument("--rtt-ms", default="0,50")
    p.add_argument("--settle", type=float, default=2.0, help="seconds left out of the settled utilisation")
    args = p.parse_args(argv)
    reason = why_not()
    if reason:
        raise SystemExit(f"bench_hosts: no namespace hosts: {reason}")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for rtt in [float(x) for x in args.rtt_ms.split(",")]:
            for depth in DEPTHS:
                d = Path(tmp) / f"{rtt:g}-{depth}"
                d.mkdir()
                rows.append(one(d, rtt, depth, args))
                print(rows[-1], flush=True)
    headers = [
        "added round trip ms",
        "depth",
        "results/s",
        "utilisation h2 / h3 (whole run)",
        f"utilisation after {args.settle:g} s",
        "final depth h2 / h3",
    ]
    print(save("hosts", headers, rows, {"task_ms": args.task_ms, "duration_s": args.duration}))


if __name__ == "__main__":
    main()
