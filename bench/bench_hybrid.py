"""Hybrid vs random benchmark: time to each planted bug, edges and execs/s, concolic campaigns vs random baselines.

Configurations, each with the same time budget (``--budget``, default 30 s) and repeated
``--repeat`` times (default 3, the table shows medians):
- the concolic campaign over the targets of ``--config`` (default configs/concolic.toml; e.g.
  configs/extended.toml adds targets with many paths) under mpiexec with 1 worker rank
  (``ranks=2``) and 2 worker ranks (``ranks=3``), ``campaign.duration_s`` = budget; a campaign
  whose search runs out of work ends early ("work exhausted"), its wall time is reported;
- ``bench.random_baseline`` in one process, blind and coverage-guided, round-robin over the same
  targets with budget / #targets seconds each (so the configuration as a whole gets the budget,
  on one core, like the 1-worker campaign's single worker). ``--plain`` adds the blind baseline
  on the uninstrumented targets (faster, no coverage).
Time to a bug is seconds since the campaign (or baseline run) started to the first crash of that
target, the median over repeats where a repeat that did not find it counts as infinite. Edges are
comparable: the baselines measure coverage with the engine's own trace-mode execution and
``edges_from_sites``, i.e. exactly what the campaign's ``edges_found`` counts (union over targets).
Execs/s differ in kind: a campaign exec is a concrete or a symbolic run of the target (the
symbolic ones cost ~1 ms with z3), a baseline exec is one concrete traced run.
Results go to bench/results/hybrid.{md,json} for configs/concolic.toml, else hybrid-<config stem>.
"""

from __future__ import annotations

import argparse
import math
import statistics
import tempfile
import time
import tomllib
from pathlib import Path
from typing import Any

from bench.common import campaign, save
from bench.random_baseline import ROOT, run_baseline
from symfence.worker.concolic.execution import own_alarm_signal


def _short(spec: str) -> str:
    return spec.split(":")[0].rsplit(".", 1)[-1]


DEFAULT_CONFIG = Path("configs/concolic.toml")


def config_path(name: str | Path) -> Path:
    """``name`` as given if it exists, else relative to the repository root."""
    path = Path(name)
    return path if path.is_absolute() or path.exists() else ROOT / path


def results_name(config: Path) -> str:
    """``hybrid`` for configs/concolic.toml (the default), ``hybrid-<stem>`` for any other."""
    default = (ROOT / DEFAULT_CONFIG).resolve()
    return "hybrid" if config.resolve() == default else f"hybrid-{config.stem}"


def run_concolic(tmp: Path, budget_s: float, ranks: int,
                 config: Path = ROOT / DEFAULT_CONFIG) -> dict[str, Any]:
    """One campaign of ``config`` under mpiexec; first crash per target, edges, execs/s, wall, end reason."""
    cfg = tomllib.loads(config.read_text())
    cfg["campaign"].update(duration_s=budget_s, ranks=ranks)
    cfg["campaign"].pop("output", None)
    t = time.monotonic()
    run = campaign(tmp, cfg, ranks=ranks, timeout_s=budget_s + 120)
    process_s = time.monotonic() - t
    events = run.events()
    ts = {e["event"]: e for e in events if e["event"].startswith("campaign.")}
    found: dict[str, dict[str, Any]] = {}
    for e in events:
        if e["event"] == "finding.crash" and e["target"] not in found:
            found[e["target"]] = {"found_s": e["found_s"], "exception": e["identity"].split(" @ ")[0]}
    stats = run.stats()
    return {"found": found, "edges": int(stats["edges_found"]), "execs": int(stats["execs_done"]),
            "execs_per_s": float(stats["execs_per_sec"]),
            "wall_s": round(ts["campaign.stopping"]["ts"] - ts["campaign.started"]["ts"], 2),
            "process_s": round(process_s, 2), "end": ts["campaign.finished"]["reason"]}


def run_random(targets: list[str], budget_s: float, guided: bool, plain: bool, seed: int) -> dict[str, Any]:
    """One baseline run with the configuration's budget split evenly over the targets."""
    r = run_baseline(targets, budget_s / len(targets), guided=guided, plain=plain, seed=seed)
    found = {t.target: {"found_s": t.first_crash.found_s, "exception": t.first_crash.exception}
             for t in r.targets if t.first_crash}
    return {"found": found, "edges": r.edges, "execs": r.execs, "execs_per_s": r.execs_per_s,
            "wall_s": r.wall_s, "end": "budget", "per_target": [
                {"target": t.target, "execs": t.execs, "edges": t.edges, "corpus": t.corpus} for t in r.targets]}


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else math.nan


def summarise(name: str, runs: list[dict[str, Any]], targets: list[str], budget_s: float) -> list[Any]:
    """One table row: median time to each bug (with how many repeats found it), edges, execs/s, wall."""
    row: list[Any] = [name]
    for spec in targets:
        hits = [r["found"][spec] for r in runs if spec in r["found"]]
        t = _median([r["found"][spec]["found_s"] if spec in r["found"] else math.inf for r in runs])
        if math.isinf(t):
            row.append(f"not found in {budget_s:g} s ({len(hits)}/{len(runs)})")
        else:
            exc = sorted({h["exception"].rsplit(".", 1)[-1] for h in hits})
            row.append(f"{t:.2f} s ({len(hits)}/{len(runs)}, {'/'.join(exc)})")
    edges = [r["edges"] for r in runs if r["edges"] is not None]
    row.append(f"{_median(edges):g}" if edges else "n/a")
    row.append(f"{_median([r['execs_per_s'] for r in runs]):,.0f}")
    row.append(f"{_median([r['execs'] for r in runs]):,.0f}")
    ends = sorted({r["end"] for r in runs})
    row.append(f"{_median([r['wall_s'] for r in runs]):.2f} s ({', '.join(ends)})")
    return row


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--budget", type=float, default=30.0, help="seconds per configuration")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--plain", action="store_true", help="also run the blind baseline on plain targets")
    p.add_argument("--config", default=str(DEFAULT_CONFIG),
                   help="campaign config whose campaign.targets all configurations fuzz (default %(default)s)")
    args = p.parse_args(argv)
    config = config_path(args.config).resolve()
    own_alarm_signal()  # the in-process baselines' per-execution time limit; nothing else uses SIGALRM
    targets: list[str] = tomllib.loads(config.read_text())["campaign"]["targets"]
    configs: list[tuple[str, dict[str, Any]]] = [
        ("concolic, 1 worker (ranks=2)", {"ranks": 2}),
        ("concolic, 2 workers (ranks=3)", {"ranks": 3}),
        ("random havoc, blind", {"guided": False, "plain": False}),
        ("random havoc + coverage feedback", {"guided": True, "plain": False}),
    ]
    if args.plain:
        configs.append(("random havoc, blind, plain target", {"guided": False, "plain": True}))
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name, _ in configs}
    with tempfile.TemporaryDirectory() as tmp:
        for rep in range(args.repeat):
            for i, (name, c) in enumerate(configs):
                if "ranks" in c:
                    r = run_concolic(Path(tmp) / f"c{i}-r{rep}", args.budget, c["ranks"], config)
                else:
                    r = run_random(targets, args.budget, c["guided"], c["plain"], seed=rep)
                runs[name].append(r)
                print(f"[{rep + 1}/{args.repeat}] {name}: {len(r['found'])}/{len(targets)} bugs, "
                      f"edges {r['edges']}, {r['execs_per_s']:,.0f} execs/s, {r['wall_s']} s ({r['end']})",
                      flush=True)
    headers = ["configuration", *(f"{_short(t)}: time to bug" for t in targets), "edges",
               "execs/s", "execs", "wall (end)"]
    rows = [summarise(name, runs[name], targets, args.budget) for name, _ in configs]
    print(save(results_name(config), headers, rows, {
        "config": str(config.relative_to(ROOT)) if config.is_relative_to(ROOT) else str(config),
        "budget_s": args.budget, "repeat": args.repeat, "targets": targets, "runs": runs,
        "notes": ["medians over repeats; a repeat that missed a bug counts as infinite time",
                  "time to bug: seconds since the campaign/baseline start to the target's first crash",
                  "random baselines: budget split evenly over targets, round-robin, one process",
                  "edges: baseline coverage measured with the engine's trace mode + edges_from_sites, "
                  "the same measure as the campaign's edges_found (union over targets)",
                  "execs: campaign = concrete + symbolic runs; baseline = concrete traced runs"]}))


if __name__ == "__main__":
    main()
