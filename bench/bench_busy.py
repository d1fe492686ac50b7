"""Busy share of every worker over a campaign's budget, engine only vs engine + mutation slices (issue 22).

Four short campaigns under mpiexec, 1 coordinator + 2 workers (``ranks = 3``), each with the
same budget (``--budget``, default 40 s):
- native (configs/native.toml on examples/native/record and tlv, TritonDSE + forkserver oracle,
  built with afl-cc into a temporary folder): ``fuzz.native_slices = false`` (the engine only:
  before) and ``true`` (idle slots get native havoc slices through the forkserver: after);
- Python (configs/hybrid.toml's targets): ``executor = "concolic"`` (the engine only: before)
  and ``"hybrid"`` (Atheris slices fill idle slots: after).
Per worker: **busy inside the budget** = of each committed task's run (its wall time up to its
commit), the part inside the budget, summed (``budget_busy_s_rank_N`` in fuzzer_stats) / budget: the
goal's measure; **committed busy share** = the coordinator's sum of the committed tasks' wall time
for that rank, the drain after the budget included (``busy_s_rank_N`` in fuzzer_stats: what the
worker reported, capped by what rank 0 measured) / budget; and the worker's own busy share
(``busy_s`` + ``aborted_busy_ms`` of its STOP_ACK totals: time inside a task, child start-ups and
the task cut at the stop included) / budget. A campaign that ends before its budget ("work
exhausted") counts the rest as idle. Edges = ``edges_found``.
Results: bench/results/busy.{md,json}. The goal: busy inside the budget >= 95% for every worker
after, in both hybrids.

``--finds N``: instead, the price of the slices for the engine's finds: N native campaigns on
record + tlv from 32 zero bytes with slices off and N with slices on (``--budget`` each, stopped
early once the three planted bugs are saved), and the time to each planted bug from the
coordinator's ``finding.*`` events. Results: bench/results/busy_finds.{md,json}.
"""

from __future__ import annotations

import argparse
import tempfile
import tomllib
from pathlib import Path
from typing import Any

from bench.common import campaign, machine, save
from tests.mpi_helpers import ROOT, run_campaign

GOAL = 0.95


def native_cfg(build: Path, budget_s: float, slices: bool) -> dict[str, Any]:
    cfg = tomllib.loads((ROOT / "configs" / "native.toml").read_text())
    cfg["campaign"].update(targets=[str(build / "record"), str(build / "tlv")], duration_s=budget_s, ranks=3)
    cfg["campaign"].pop("output", None)
    cfg["native"]["options"]["oracle"] = "forkserver"
    cfg.setdefault("fuzz", {}).update(native_slices=slices)
    return cfg


def python_cfg(budget_s: float, slices: bool) -> dict[str, Any]:
    cfg = tomllib.loads((ROOT / "configs" / "hybrid.toml").read_text())
    cfg["campaign"].update(executor="hybrid" if slices else "concolic", duration_s=budget_s, ranks=3)
    cfg["campaign"].pop("output", None)
    return cfg


def measure(tmp: Path, cfg: dict[str, Any], budget_s: float) -> dict[str, Any]:
    run = campaign(tmp, cfg, ranks=3, timeout_s=budget_s + 180)
    stats = run.stats()
    totals = {e["worker"]: e["totals"] for e in run.events() if e["event"] == "worker.stopped"}
    own = {w: t.get("busy_s", 0.0) + t.get("aborted_busy_ms", 0) / 1000 for w, t in totals.items()}
    end = next(e["reason"] for e in run.events() if e["event"] == "campaign.finished")
    ranks = sorted(int(k.rsplit("_", 1)[1]) for k in stats if k.startswith("busy_s_rank_"))
    return {"end": end, "edges": int(stats["edges_found"]), "execs": int(stats["execs_done"]),
            "committed": {r: float(stats[f"busy_s_rank_{r}"]) / budget_s for r in ranks},
            "in_budget": {r: float(stats[f"budget_busy_s_rank_{r}"]) / budget_s for r in ranks},
            "own": {r: float(own.get(r, 0.0)) / budget_s for r in ranks},
            "cut_at_stop_s": {r: totals.get(r, {}).get("aborted_busy_ms", 0) / 1000 for r in ranks},
            "stages": {k: stats[k] for k in stats if k.endswith(("_busy_s", "_results", "_edges_first"))
                       and not k.startswith("stage_")}}


BUGS = {("record", "crash"): "RecordChecksumBug", ("record", "hang"): "RecordLoopBug",
        ("tlv", "crash"): "TlvDepthBug"}


def _stop_when_found(out: Path, cap_s: float) -> Any:
    """An on_start hook: Ctrl-C the campaign once 2 crashes and 1 hang are saved (or at cap_s)."""
    import os
    import signal
    import threading
    import time

    def found() -> bool:
        try:
            return len(list((out / "crashes").iterdir())) >= 2 and len(list((out / "hangs").iterdir())) >= 1
        except OSError:
            return False

    def watch(proc: Any) -> None:
        deadline = time.monotonic() + cap_s
        while proc.poll() is None and time.monotonic() < deadline and not found():
            time.sleep(0.2)
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGINT)

    return lambda proc: threading.Thread(target=watch, args=(proc,), daemon=True).start()


def finds(tmp: Path, cfg: dict[str, Any], budget_s: float) -> dict[str, Any]:
    """One campaign: seconds to each planted bug (None: not found within the budget)."""
    cfg = {**cfg, "stats": {"interval_s": 0.5}}
    tmp.mkdir(parents=True, exist_ok=True)
    run = run_campaign(tmp, cfg, ranks=3, timeout_s=budget_s + 180,
                       on_start=_stop_when_found(tmp / "out", budget_s + 30))
    if run.code != 0:
        raise SystemExit(f"benchmark campaign failed ({run.code}):\n{run.stderr[-2000:]}")
    times: dict[str, float | None] = dict.fromkeys(BUGS.values())
    for e in run.events():
        if e.get("event") in ("finding.crash", "finding.hang"):
            bug = BUGS.get((Path(e["target"]).name, e["event"].split(".")[1]))
            if bug and times[bug] is None:
                times[bug] = round(float(e["found_s"]), 1)
    end = next((e["reason"] for e in run.events() if e["event"] == "campaign.finished"), "?")
    return {"times": times, "end": end}


def main_finds(runs: int, budget: float, tmp: Path) -> None:
    from examples.native.build import build

    build(tmp / "build", afl=True)
    rows: list[list[Any]] = []
    raw: dict[str, Any] = {}
    for slices in (False, True):
        what = "engine + slices" if slices else "engine only"
        raw[what] = []
        for i in range(runs):
            cfg = native_cfg(tmp / "build", budget, slices)
            result = finds(tmp / f"{'on' if slices else 'off'}{i}", cfg, budget)
            raw[what].append(result)
            print(f"{what} run {i + 1}: {result}", flush=True)
        for bug in BUGS.values():
            got = sorted(r["times"][bug] for r in raw[what] if r["times"][bug] is not None)
            spread = f"{got[0]:g}-{got[-1]:g}" if got else "-"
            rows.append([what, bug, f"{len(got)}/{runs}", spread, f"{got[len(got) // 2]:g}" if got else "-"])
    headers = ["stages", "planted bug", "found", "time to bug (s), min-max", "median"]
    text = save("busy_finds", headers, rows, {"budget_s": budget, "runs": raw})
    print(text)
    print(f"[{machine()}, {runs} runs of at most {budget:g} s per configuration]")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--budget", type=float, default=40.0, help="seconds per campaign (default 40)")
    p.add_argument("--only", choices=("native", "python"), help="run one of the two hybrids")
    p.add_argument("--keep", type=Path, help="keep the campaigns' output folders here")
    p.add_argument("--finds", type=int, default=0, metavar="N",
                   help="instead: N native campaigns each with and without slices, time to each planted bug")
    args = p.parse_args()
    budget = args.budget
    if args.finds:
        with tempfile.TemporaryDirectory(prefix="symfence-bench-finds-") as tmp_s:
            main_finds(args.finds, budget, args.keep or Path(tmp_s))
        return
    rows: list[list[Any]] = []
    raw: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="symfence-bench-busy-") as tmp_s:
        tmp = args.keep or Path(tmp_s)
        plans = []
        if args.only in (None, "native"):
            from examples.native.build import build

            build(tmp / "build", afl=True)
            plans += [("native", "engine only", native_cfg(tmp / "build", budget, False)),
                      ("native", "engine + slices", native_cfg(tmp / "build", budget, True))]
        if args.only in (None, "python"):
            plans += [("python", "engine only", python_cfg(budget, False)),
                      ("python", "engine + slices", python_cfg(budget, True))]
        for i, (kind, what, cfg) in enumerate(plans):
            result = measure(tmp / f"run{i}", cfg, budget)
            raw[f"{kind} {what}"] = result
            for rank in sorted(result["committed"]):
                rows.append([kind, what, rank, f"{100 * result['in_budget'][rank]:.1f}%",
                             f"{100 * result['committed'][rank]:.1f}%",
                             f"{100 * result['own'][rank]:.1f}%", result["cut_at_stop_s"][rank],
                             result["edges"], result["execs"], result["end"]])
            print(f"{kind} / {what}: {result}", flush=True)
    headers = ["hybrid", "stages", "worker rank", "busy inside the budget", "committed busy / budget",
               "worker's own busy / budget",
               "of it cut at the stop (s)", "edges", "execs", "end"]
    after = [r for r in rows if r[1] == "engine + slices"]
    met = all(float(r[3].rstrip("%")) >= 100 * GOAL for r in after)
    text = save("busy", headers, rows, {"budget_s": budget, "goal": GOAL, "goal_met": met, "runs": raw})
    print(text)
    print(f"goal (every worker >= {GOAL:.0%} of the budget with slices): {'met' if met else 'MISSED'}"
          f"  [{machine()}, budget {budget:g} s per campaign]")


if __name__ == "__main__":
    main()
