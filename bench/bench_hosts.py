"""Across hosts: results/s and worker utilisation at 0 and 50 ms added round trip, depth 1, 4 and auto.

Three network-namespace hosts (bench/netns.py; needs root): rank 0 on h1, one worker each on h2
and h3, MPI over TCP on the links (UCX_TLS=tcp,self). With `--rtt-ms 50` both workers' links hold
every frame 25 ms each way (a userspace forwarder on TAP devices). Synthetic tasks of
`--task-ms` (10). Per run: committed results/s, and each worker's utilisation twice: over the
whole run (fuzzer_stats `utilisation_rank_N`: busy time / time from the first dispatch to the
final stats, the ramp of "auto", the last results' drain and the STOP round trip included),
inside the budget (`budget_busy_s_rank_N` / duration: from the first dispatch to the end of the
budget, the ramp included, what follows the stop not) and after `--settle` seconds (results
committed after that, from plot_data, x the mean task time the workers measured, / time, both
workers averaged). For "auto" also when its depth first changed
(seconds after the first dispatch, from the `dispatch.depth_changed` events) and every depth it
chose per worker. `--reps N` runs the whole set N times, interleaved (each run its own row).
The issue's target: auto at least 90% busy at 50 ms over the whole run, for every worker.
Table and JSON in bench/results/hosts.{md,json}; `bench/bench_compare.py` runs the same (`run`)
as its `hosts` section.
"""

from __future__ import annotations

import argparse
import csv
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.common import save
from bench.netns import Cluster, why_not
from tests.mpi_helpers import synthetic_cfg
from tests.netns import run_hosts

DEPTHS: list[int | str] = [1, 4, "auto"]
SLOTS = {"h1": 1, "h2": 1, "h3": 1}
WORKER_RANKS = (1, 2)  # on h2 and h3
HEADERS = [
    "added round trip ms",
    "depth",
    "results/s",
    "utilisation h2 / h3 (whole run)",
    "worst worker (whole run)",
    "inside the budget h2 / h3",
    "utilisation after settling",
    "first depth change s",
    "depths chosen h2 / h3",
    "round trip measured h2 / h3 ms",
]


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


def one(tmp: Path, rtt_ms: float, depth: int | str, duration: float, task_ms: float,
        settle: float) -> tuple[list[Any], dict[str, Any]]:
    """One campaign on three hosts; returns its table row and what it rests on."""
    delays = {"h2": rtt_ms / 1000, "h3": rtt_ms / 1000} if rtt_ms else {}
    seeds = int(2 * 1000 / task_ms * duration * 1.2) + 100
    cfg = synthetic_cfg(
        synthetic={"seeds": seeds, "task_ms": task_ms},
        campaign={"duration_s": duration},
        dispatch={"depth": depth},
        stats={"interval_s": 0.25},
    )
    with Cluster(3, delays=delays) as c:
        run = run_hosts(c, tmp, cfg, SLOTS, timeout_s=duration + 120)
    if run.code != 0:
        raise RuntimeError(f"campaign exit {run.code}: {run.stderr.strip()[-300:]}")
    s = run.stats()
    util = [float(s[f"utilisation_rank_{r}"]) for r in WORKER_RANKS]
    # The same from the first dispatch to the end of the budget: the ramp in, the drain and STOP out.
    budget = [float(s.get(f"budget_busy_s_rank_{r}", "nan")) / duration for r in WORKER_RANKS]
    committed = int(s["committed"])
    elapsed = committed / float(s["results_per_sec"])
    mean_task_s = sum(util) * elapsed / committed  # the real task time (sleep overshoots 10 ms)
    settled = _settled(run.out, settle, mean_task_s, len(WORKER_RANKS))
    events = run.events()
    started = next(e["ts"] for e in events if e["event"] == "campaign.started")
    changes = [e for e in events if e["event"] == "dispatch.depth_changed"]
    first = min((e["ts"] - started for e in changes), default=None)
    paths, trips = [], []
    for r in WORKER_RANKS:
        mine = [e for e in changes if e["worker"] == r]
        paths.append("-".join(str(d) for d in [2, *(e["depth"] for e in mine)]) if depth == "auto"
                     else s.get(f"depth_rank_{r}", str(depth)))
        trip = mine[-1].get("round_trip_ms") if mine else None
        trips.append("-" if trip is None else f"{trip:.0f}")
    row = [
        f"{rtt_ms:g}",
        depth,
        f"{float(s['results_per_sec']):.1f}",
        " / ".join(f"{u:.1%}" for u in util),
        f"{min(util):.1%}",
        " / ".join(f"{u:.1%}" for u in budget),
        "-" if settled is None else f"{settled:.1%}",
        "-" if first is None else f"{first:.2f}",
        " / ".join(paths),
        " / ".join(trips),
    ]
    keys = ("worker", "depth", "round_trip_ms", "task_ms")
    raw = {"rtt_ms": rtt_ms, "depth": depth, "results_per_sec": float(s["results_per_sec"]),
           "utilisation": util, "in_budget": budget, "settled": settled, "first_change_s": first,
           "final_depths": {r: s.get(f"depth_rank_{r}", str(depth)) for r in WORKER_RANKS},
           "changes": [{k: e.get(k) for k in keys} | {"s": e["ts"] - started} for e in changes]}
    return row, raw


def run(tmp: Path, *, duration: float = 10.0, task_ms: float = 10.0, rtts: tuple[float, ...] = (0.0, 50.0),
        depths: tuple[int | str, ...] = tuple(DEPTHS), settle: float = 2.0, reps: int = 1,
        progress: Callable[[str], None] | None = None) -> tuple[list[list[Any]], list[dict[str, Any]]]:
    """Every (rep, round trip, depth) campaign in turn; a failed one is a row that says why."""
    rows: list[list[Any]] = []
    raws: list[dict[str, Any]] = []
    for rep in range(reps):
        for rtt in rtts:
            for i, depth in enumerate(depths):  # a depth may be listed twice (interleaved repeats)
                d = tmp / f"hosts-{rep}-{rtt:g}-{i}-{depth}"
                d.mkdir(parents=True)
                t = time.time()
                try:
                    row, raw = one(d, rtt, depth, duration, task_ms, settle)
                except Exception as exc:  # noqa: BLE001 - one failed run must not lose the others
                    why = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
                    row, raw = [f"{rtt:g}", depth, f"FAILED: {why}", *([""] * (len(HEADERS) - 3))], \
                        {"rtt_ms": rtt, "depth": depth, "error": str(exc)[-2000:]}
                raw["rep"] = rep
                rows.append(row)
                raws.append(raw)
                if progress is not None:
                    progress(f"  hosts {rtt:g} ms depth {depth}: {time.time() - t:.1f} s {row[2:]}")
    return rows, raws


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--duration", type=float, default=10.0, help="seconds per campaign (default 10)")
    p.add_argument("--task-ms", type=float, default=10.0)
    p.add_argument("--rtt-ms", default="0,50", help="added round trips, ms (default 0,50)")
    p.add_argument("--depths", default=",".join(map(str, DEPTHS)), help="default 1,4,auto")
    p.add_argument("--settle", type=float, default=2.0, help="seconds left out of the settled utilisation")
    p.add_argument("--reps", type=int, default=1, help="run the whole set this many times, interleaved")
    p.add_argument("--results", type=Path, default=None, help="folder for the table (default bench/results)")
    args = p.parse_args(argv)
    reason = why_not()
    if reason:
        raise SystemExit(f"bench_hosts: no namespace hosts: {reason}")
    depths = tuple(d if d == "auto" else int(d) for d in (x.strip() for x in args.depths.split(",")) if d)
    with tempfile.TemporaryDirectory(prefix="bench-hosts-") as tmp:
        rows, raws = run(Path(tmp), duration=args.duration, task_ms=args.task_ms,
                         rtts=tuple(float(x) for x in args.rtt_ms.split(",")), depths=depths,
                         settle=args.settle, reps=args.reps,
                         progress=lambda m: print(m, file=sys.stderr, flush=True))
    headers = [f"utilisation after {args.settle:g} s" if h == "utilisation after settling" else h
               for h in HEADERS]
    extra = {"task_ms": args.task_ms, "duration_s": args.duration, "settle_s": args.settle, "reps": args.reps,
             "runs": raws}
    print(save("hosts", headers, rows, extra, args.results))


if __name__ == "__main__":
    main()
