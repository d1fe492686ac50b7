"""dispatch.depth = "auto" against fixed depths 1, 2, 4 and 8, side by side in one run.

Synthetic tasks of 0, 1 and 10 ms (and 50 ms with --task-ms) on 1 coordinator + 3 worker ranks.
The runs of each task time are interleaved over `--reps` rounds (depth 1, 2, 4, 8, auto, then
again) so that load from elsewhere falls on all of them alike; each cell is the median of its
rounds. Results/s is what counts (committed / elapsed); the last column is auto's ratio to the
best fixed depth of the same task time (the issue's target: >= 0.95).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path

from bench.common import save
from tests.mpi_helpers import run_campaign, synthetic_cfg

DEPTHS: list[int | str] = [1, 2, 4, 8, "auto"]


def _seeds(task_ms: float, duration: float, rate: float) -> int:
    """Work for the whole duration at up to `rate` results/s (3 workers cannot beat 3000/task_ms);
    no more, since seeding and the end-of-run queue files grow with it. A run that runs out
    ends early ("work exhausted") and its results/s still counts."""
    cap = rate if task_ms == 0 else min(rate, 3000 / task_ms)
    return int(cap * 1.1 * duration) + 100


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--duration", type=float, default=6.0)
    p.add_argument("--task-ms", default="0,1,10")
    p.add_argument("--reps", type=int, default=2)
    p.add_argument("--rate", type=float, default=3000, help="results/s the seeds must last for")
    args = p.parse_args(argv)
    rows = []
    failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        for task_ms in [float(t) for t in args.task_ms.split(",")]:
            rps: dict[int | str, list[float]] = {d: [] for d in DEPTHS}
            util: dict[int | str, list[float]] = {d: [] for d in DEPTHS}
            chosen: list[str] = []
            for rep in range(args.reps):
                for depth in DEPTHS:
                    cfg = synthetic_cfg(campaign={"duration_s": args.duration}, dispatch={"depth": depth},
                                        synthetic={"seeds": _seeds(task_ms, args.duration, args.rate), "task_ms": task_ms},
                                        stats={"interval_s": 1.0}, workers={"heartbeat_s": 1.0})
                    out = Path(tmp) / f"t{task_ms}-d{depth}-r{rep}"
                    out.mkdir(parents=True)
                    run = run_campaign(out, cfg, ranks=4, timeout_s=300)
                    if run.code != 0:  # counted, not hidden: the table says how many runs failed
                        failed += 1
                        print(f"run failed ({run.code}): task_ms {task_ms:g}, depth {depth}: {run.stderr[-300:]}")
                        continue
                    s = run.stats()
                    rps[depth].append(float(s["results_per_sec"]))
                    util[depth].append(sum(float(s[f"utilisation_rank_{r}"]) for r in (1, 2, 3)) / 3)
                    if depth == "auto":
                        chosen.append("/".join(s[f"depth_rank_{r}"] for r in (1, 2, 3)))
            med = {d: statistics.median(v) if v else 0.0 for d, v in rps.items()}
            best = max((d for d in DEPTHS if d != "auto"), key=lambda d: med[d])
            rows.append([f"{task_ms:g}", *(f"{med[d]:,.0f}" for d in DEPTHS),
                         f"{statistics.median(util['auto']) * 100:.0f}%", ", ".join(chosen), best,
                         f"{med['auto'] / med[best]:.3f}"])
            print(rows[-1], flush=True)
    print(save("auto_depth", ["task ms", *(f"depth {d} results/s" for d in DEPTHS), "auto utilisation",
                              "auto's final depths (ranks 1/2/3, each round)", "best fixed", "auto / best"],
               rows, {"duration_s": args.duration, "reps": args.reps, "workers": 3, "failed_runs": failed}))
    if failed:
        print(f"{failed} run(s) failed and are left out of the medians")


if __name__ == "__main__":
    main()
