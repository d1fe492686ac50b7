"""Stop latency: from the end of the budget (or a Ctrl-C) to the exit of `symfence run`, as a user sees it.

Two campaigns, each stopped two ways, on two code trees side by side in one run (this checkout
and, with --before DIR, another one, e.g. a worktree of main: `git worktree add /tmp/main main`):

- demo: configs/demo.toml of each tree (hybrid, wave + zipfile, 3 ranks) with a shorter budget;
- large: a synthetic campaign with a corpus of --seeds seeds (1 ms tasks, 3 ranks): every
  corpus entry owes a queue/ file, and the journal holds them all.

Each run is `symfence run CONFIG --out OUT --no-status` (mpiexec, rank 0, the workers, and the
teardown of the job included). "budget": the time from the `campaign.stopping` event (the budget
reached) to the exit of the launched process. "sigint": SIGINT is sent to the process (as a
Ctrl-C in a terminal sends it to mpiexec, which forwards it) some seconds into the campaign, and
the time from the signal to the exit is reported. Table and JSON in bench/results/stop.{md,json}.

    python -m bench stop --before /tmp/main            # ~8 min on 2 cores
    python -m bench stop --repeat 1 --seeds 20000      # this tree only, quicker
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import tomllib
from pathlib import Path
from typing import Any

from bench.common import save
from tests.mpi_helpers import ROOT, toml_dump


def _events(out: Path) -> list[dict[str, Any]]:
    try:
        lines = (out / "logs" / "coordinator.jsonl").read_text().splitlines()
    except OSError:
        return []
    events = []
    for line in lines:
        try:
            events.append(json.loads(line))
        except ValueError:
            pass  # a line being written
    return events


def _config(tree: Path, kind: str, duration_s: float, seeds: int) -> dict[str, Any]:
    if kind == "demo":
        cfg = tomllib.loads((tree / "configs" / "demo.toml").read_text())
        cfg["campaign"]["duration_s"] = duration_s
        return cfg
    return {"campaign": {"executor": "synthetic", "duration_s": duration_s, "ranks": 3},
            "dispatch": {"depth": 2}, "synthetic": {"seeds": seeds, "task_ms": 1.0}}


def one_run(tree: Path, kind: str, how: str, tmp: Path, *, duration_s: float, sigint_after_s: float,
            seeds: int, timeout_s: float = 600) -> dict[str, Any]:
    """One campaign on `tree`; the stop latency and what the exit left behind."""
    out = tmp / "out"
    config = tmp / "campaign.toml"
    cfg = _config(tree, kind, duration_s if how == "budget" else 600.0, seeds)
    config.write_text(toml_dump(cfg))
    symfence = Path(sys.executable).parent / "symfence"
    load = os.getloadavg()[0]
    proc = subprocess.Popen([str(symfence), "run", str(config), "--out", str(out), "--no-status"], cwd=tree,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(tree)})
    signalled: list[float] = []

    def interrupt() -> None:
        while proc.poll() is None:
            started = [e["ts"] for e in _events(out) if e["event"] == "campaign.started"]
            if started and time.time() >= started[0] + sigint_after_s:
                signalled.append(time.time())
                proc.send_signal(signal.SIGINT)
                return
            time.sleep(0.05)

    watcher = threading.Thread(target=interrupt, daemon=True) if how == "sigint" else None
    if watcher is not None:
        watcher.start()
    try:
        stdout, stderr = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        stdout, stderr = proc.communicate()
    ended = time.time()
    events = _events(out)
    stopping = next((e["ts"] for e in events if e["event"] == "campaign.stopping"), None)
    finished = next((e["ts"] for e in events if e["event"] == "campaign.finished"), None)
    since = signalled[0] if how == "sigint" and signalled else stopping
    queue = out / "queue"
    stats = (out / "fuzzer_stats").read_text().splitlines() if (out / "fuzzer_stats").exists() else []
    return {
        "tree": str(tree), "campaign": kind, "stop": how, "code": proc.returncode,
        "latency_s": None if since is None else round(ended - since, 3),
        "drain_and_stop_s": None if finished is None or stopping is None else round(finished - stopping, 3),
        "after_finished_s": None if finished is None else round(ended - finished, 3),
        "summary": "campaign finished:" in stdout,
        "queue_files": sum(1 for p in queue.iterdir() if not p.name.startswith(".")) if queue.is_dir() else 0,
        "corpus": next((int(line.split(":")[1]) for line in stats if line.startswith("corpus_count")), None),
        "load_1min": round(load, 2),
        "stderr_tail": stderr[-300:] if proc.returncode else "",
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--before", type=Path, help="another tree to measure side by side"
                                                   " (e.g. a worktree of main)")
    p.add_argument("--repeat", type=int, default=2, help="runs per demo row (default 2)")
    p.add_argument("--repeat-large", type=int, default=1, help="runs per large row (default 1)")
    p.add_argument("--seeds", type=int, default=160_000, help="the large campaign's corpus (default 160,000)")
    p.add_argument("--demo-duration", type=float, default=12.0, help="the demo's budget here (default 12 s)")
    p.add_argument("--large-duration", type=float, default=5.0, help="the large campaign's budget"
                                                                     " (default 5 s)")
    p.add_argument("--only", choices=("demo", "large"), help="one campaign only")
    args = p.parse_args()
    trees = [("this", ROOT)] + ([("before", args.before.resolve())] if args.before else [])
    kinds = [args.only] if args.only else ["demo", "large"]
    runs: list[dict[str, Any]] = []
    for kind in kinds:
        duration = args.demo_duration if kind == "demo" else args.large_duration
        for how in ("budget", "sigint"):
            for i in range(args.repeat if kind == "demo" else args.repeat_large):
                for label, tree in (trees if i % 2 == 0 else trees[::-1]):  # alternate the order
                    with tempfile.TemporaryDirectory(prefix="bench-stop-") as tmp:
                        r = one_run(tree, kind, how, Path(tmp), duration_s=duration,
                                    sigint_after_s=duration / 2, seeds=args.seeds)
                    r["label"] = label
                    runs.append(r)
                    print(json.dumps(r), flush=True)
    rows = []
    for kind in kinds:
        for how in ("budget", "sigint"):
            for label, _ in trees:
                rs = [r for r in runs if (r["campaign"], r["stop"], r["label"]) == (kind, how, label)]
                lat = [r["latency_s"] for r in rs if r["latency_s"] is not None]
                rows.append([
                    kind, how, label, len(rs),
                    f"{min(lat):.2f} / {statistics.median(lat):.2f} / {max(lat):.2f}" if lat else "-",
                    " ".join(f"{r['drain_and_stop_s']}" for r in rs),
                    " ".join(f"{r['after_finished_s']}" for r in rs),
                    " ".join(str(r["code"]) for r in rs),
                    f"{sum(r['summary'] for r in rs)}/{len(rs)}",
                    " ".join(f"{r['queue_files']}/{r['corpus']}" for r in rs),
                    " ".join(f"{r['load_1min']}" for r in rs),
                ])
    headers = ["campaign", "stopped by", "tree", "runs", "stop -> exit s (min / median / max)",
               "drain + STOP s", "finished -> exit s", "exit codes", "summary printed",
               "queue files / corpus", "load (1 min)"]
    print(save("stop", headers, rows, {"runs": runs, "seeds": args.seeds}))


if __name__ == "__main__":
    main()
