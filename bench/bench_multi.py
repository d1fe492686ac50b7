"""Several coordinators on one campaign (issue 29) against one coordinator, side by side in one run.

`python -m bench.bench_multi` (or `python -m bench compare --only multi`) runs, on the same
machine one after the other, a fixed amount of synthetic no-op work (task_ms 0, `--items`
seeds, depth 4) to its end ("work exhausted"), WALL time from the first mpiexec's start to the
last job's exit (start-up and shutdown included):

- 1 coordinator + 4 workers, no store (today's campaign);
- 1 coordinator + 4 workers joined to a SQLite campaign store (what the store costs one);
- 2 coordinators (1 + 2 workers each, two mpiexec jobs started together) on one SQLite store;

and reports items/s over the wall time, the store's commits/s between its first and last
commit (from the store's history), each coordinator's share, and the ratio to the first row.
On a 2-core machine every rank shares the same cores: the ratio says what a second coordinator
costs or gives here, not what it gives with cores of its own (docs/design.md, "Capacity on
paper"). The checker runs on every store after its row (a violation fails the row).
Tables: bench/results/multi.{md,json}.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import save
from tests.mpi_helpers import read_stat, synthetic_cfg

HEADERS = ["setup", "ranks", "items", "wall s", "items/s (wall)", "store commits/s", "vs 1 coordinator",
           "shares", "notes"]
LEASE_BATCH = 512  # items per lease transaction (the default, twice the slots, is for small campaigns)


def cfg(items: int, store: str = "") -> dict[str, dict[str, Any]]:
    return synthetic_cfg(campaign={"duration_s": 0, "store": store}, dispatch={"depth": 4},
                         synthetic={"seeds": items, "task_ms": 0.0}, stats={"interval_s": 1.0},
                         workers={"heartbeat_s": 1.0}, store={"lease_batch": LEASE_BATCH, "lease_s": 10.0})


def run_row(tmp: Path, label: str, items: int, coordinators: int, workers: int, store: bool,
            timeout_s: float) -> dict[str, Any]:
    """Run `coordinators` jobs of 1 + `workers` ranks over `items` items; their figures."""
    from symfence.coordinator.shared import open_store
    from symfence.coordinator.shared.checker import check
    from symfence.coordinator.shared.records import EventKind
    from tests.multi_helpers import Job, run_all

    folder = tmp / label
    folder.mkdir(parents=True)
    where = f"sqlite:{folder / 'campaign.db'}" if store else ""
    jobs = [Job(folder, f"c{i + 1}", cfg(items, where), None, ranks=workers + 1) for i in range(coordinators)]
    codes = run_all(jobs, timeout_s)
    if any(codes):
        bad = next(job for job, code in zip(jobs, codes, strict=True) if code)
        raise RuntimeError(f"exit {codes}: {bad.stderr.strip()[-300:]}")
    wall = max(job.exited for job in jobs) - min(job.launched for job in jobs)
    committed = [read_stat(job.out, "committed") for job in jobs]
    row: dict[str, Any] = {"wall_s": wall, "committed": committed, "items_per_s": sum(committed) / wall}
    if store:
        s = open_store(where, create=False)
        try:
            history = s.history()
            report = check(history, s.items())
        finally:
            s.close()
        if not report.ok or not report.complete:
            raise RuntimeError("checker: " + "; ".join(report.lines()[:3]))
        commits = [e.at for e in history if e.kind is EventKind.COMMIT]
        span = max(commits) - min(commits) if len(commits) > 1 else float("nan")
        row["store_commits_per_s"] = len(commits) / span if span == span and span > 0 else float("nan")
    if sum(committed) != items:
        raise RuntimeError(f"committed {committed} of {items} items")
    return row


def multi(tmp: Path, items: int, timeout_s: float = 300) -> tuple[list[list[Any]], dict[str, Any]]:
    """The section's rows (and raw figures), one setup after the other."""
    setups = [("1 coordinator + 4 workers, no store", 1, 4, False),
              ("1 coordinator + 4 workers, SQLite store", 1, 4, True),
              ("2 coordinators (1 + 2 workers each), SQLite store", 2, 2, True)]
    rows: list[list[Any]] = []
    raw: dict[str, Any] = {}
    base = None
    for i, (label, coordinators, workers, store) in enumerate(setups):
        t, load = time.time(), os.getloadavg()[0]
        ranks = f"{coordinators} x (1 + {workers})"
        try:
            r = run_row(tmp, f"row{i}", items, coordinators, workers, store, timeout_s)
        except Exception as exc:  # noqa: BLE001 - one broken row must not lose the others
            why = str(exc).splitlines()[0][:160] if str(exc) else type(exc).__name__
            rows.append([label, ranks, items, "", f"FAILED: {why}", "", "", "", ""])
            continue
        finally:
            print(f"  {label}: {time.time() - t:.1f} s (load {load:.2f})", file=sys.stderr, flush=True)
        r["load_before"] = load
        raw[label] = r
        base = base or r["items_per_s"]
        shares = "/".join(f"{100 * n / max(sum(r['committed']), 1):.0f}%" for n in r["committed"])
        commits = r.get("store_commits_per_s")
        rows.append([label, ranks, f"{items:,}", f"{r['wall_s']:.2f}", f"{r['items_per_s']:,.0f}",
                     "-" if commits is None else f"{commits:,.0f}", f"{r['items_per_s'] / base:.2f}x",
                     shares if coordinators > 1 else "-", f"load {load:.1f} before"])
    return rows, raw


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--items", type=int, default=20_000, help="synthetic no-op items per row (default 20,000)")
    p.add_argument("--results", type=Path, default=None, help="folder for the table (default bench/results)")
    args = p.parse_args(argv)
    load0 = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="bench-multi-") as tmp:
        rows, raw = multi(Path(tmp), args.items)
    info = {"items": args.items, "lease_batch": LEASE_BATCH, "depth": 4, "load_before": load0,
            "load_after": os.getloadavg(), "raw": raw}
    print(save("multi", HEADERS, rows, info, args.results))
    print(f"(load average before {load0[0]:.2f}, after {os.getloadavg()[0]:.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
