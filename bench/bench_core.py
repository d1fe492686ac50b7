"""Side by side in one run: another tree (a worktree of main) against this one, on the core's figures.

For each tree, interleaved (base, head, base, head, ...), each in its own process with that
tree first on PYTHONPATH: the walk of one committed result (bench/bench_walk.py: Python calls,
modules, moves and returns between modules), the loop thread's CPU per result without MPI
(bench/bench_loop.py, max_batch 1 and 8, best of the rounds), and with `--compare` the real
campaign rows of `bench.bench_compare --only compare --depths 4` (results/s, vs
MPIPoolExecutor, vs the bare farm, coordinator CPU per result over its three threads).
The load average is read before and after each row. Prints a markdown table and writes
bench/results/core.{md,json}.
Run: `python -m bench.bench_core --base /path/to/main-worktree [--rounds 3] [--compare]`.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench.common import save

HEAD = Path(__file__).resolve().parent.parent
WALK = re.compile(r"one committed result: (\d+) Python calls, (\d+) C calls, (\d+) modules, (\d+) moves"
                  r" between modules, (\d+) back")
LOOP = re.compile(r"max_batch (\d+): loop thread CPU per result: ([\d.]+) us")


def _load() -> float:
    return os.getloadavg()[0]


def _run(tree: Path, args: list[str], timeout_s: float) -> str:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    out = subprocess.run([sys.executable, *args], cwd=tree, env=env, capture_output=True, text=True,
                         timeout=timeout_s)
    if out.returncode != 0:
        raise SystemExit(f"{tree}: {' '.join(args)} failed:\n{out.stderr[-2000:]}")
    return out.stdout


def walk(tree: Path) -> dict[str, int]:
    m = WALK.search(_run(tree, ["-m", "bench.bench_walk"], 300))
    assert m, "bench_walk printed no summary"
    keys = ("python_calls", "c_calls", "modules", "moves", "back")
    return dict(zip(keys, map(int, m.groups()), strict=True))


def loop(tree: Path, results: int) -> dict[int, float]:
    cmd = ["-m", "bench.bench_loop", "--results", str(results), "--repeat", "1", "--batches", "1,8"]
    out = _run(tree, cmd, 600)
    return {int(b): float(us) for b, us in LOOP.findall(out)}


def compare(tree: Path, duration: float) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        _run(tree, ["-m", "bench.bench_compare", "--only", "compare", "--depths", "4",
                    "--duration", str(duration), "--results", tmp], 900)
        saved = json.loads((Path(tmp) / "compare.json").read_text())
    rows, headers = saved["rows"], saved["headers"]
    by = {(r[0], str(r[1])): r for r in rows}
    d4 = by.get(("symfence", "4"), [])
    return {"rps": d4[2] if d4 else "failed", "vs_pool": d4[3] if d4 else "-",
            "vs_farm": d4[4] if d4 else "-", "cpu_us": d4[5] if d4 else "-",
            "phases_us": dict(zip(headers[6:-3], d4[6:-3], strict=True)) if d4 else {},
            "pool_rps": by.get(("MPIPoolExecutor", "1"), ["", "", "-"])[2],
            "farm_d4_rps": by.get(("bare msgpack farm", "4"), ["", "", "-"])[2]}


def _num(text: Any) -> float:
    try:
        return float(str(text).replace(",", ""))
    except ValueError:
        return float("inf")


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--base", type=Path, required=True, help="the other tree (a worktree of main)")
    p.add_argument("--rounds", type=int, default=3, help="bench_loop runs per tree, interleaved (best kept)")
    p.add_argument("--results", type=int, default=5000, help="results per bench_loop run")
    p.add_argument("--compare", action="store_true", help="also bench_compare's real depth-4 campaign rows")
    p.add_argument("--duration", type=float, default=3.0, help="seconds per bench_compare campaign")
    p.add_argument("--compare-rounds", type=int, default=1,
                   help="bench_compare runs per tree, interleaved (the median by CPU per result is shown)")
    args = p.parse_args(argv)
    trees = {"base": args.base.resolve(), "head": HEAD}
    got: dict[str, dict[str, Any]] = {n: {"tree": str(t), "loop": {1: [], 8: []}} for n, t in trees.items()}
    loads = [_load()]
    for name, tree in trees.items():
        got[name]["walk"] = walk(tree)
    for _ in range(args.rounds):
        for name, tree in trees.items():
            for b, us in loop(tree, args.results).items():
                got[name]["loop"][b].append(us)
            loads.append(_load())
    for _ in range(args.compare_rounds if args.compare else 0):  # interleaved: base, head, base, head
        for name, tree in trees.items():
            got[name].setdefault("compares", []).append(compare(tree, args.duration))
            loads.append(_load())
    headers = ["tree", "walk: Python calls", "modules", "moves", "back", "loop CPU us/result, max_batch 1",
               "max_batch 8"] + (["d4 results/s", "vs pool", "vs farm d4", "coord CPU us/result (3 threads)",
                                  "pool results/s", "pump us/result (each run)"] if args.compare else [])
    rows = []
    for name in trees:
        g, w = got[name], got[name]["walk"]
        row = [name, w["python_calls"], w["modules"], w["moves"], w["back"],
               f"{min(g['loop'][1]):.1f}", f"{min(g['loop'][8]):.1f}"]
        if args.compare:
            runs = g["compares"]
            c = sorted(runs, key=lambda r: _num(r["cpu_us"]))[len(runs) // 2]  # the median run by CPU
            row += [c["rps"], c["vs_pool"], c["vs_farm"], c["cpu_us"], c["pool_rps"],
                    ", ".join(str(r["phases_us"].get("pump us", "-")) for r in runs)]
        rows.append(row)
    text = save("core", headers, rows, {"trees": got, "loads": loads, "rounds": args.rounds,
                                        "results": args.results, "duration_s": args.duration})
    print(text)
    print(f"(load average over the run: {min(loads):.2f} .. {max(loads):.2f}; best of {args.rounds}"
          f" bench_loop runs of {args.results} results per tree)")


if __name__ == "__main__":
    main()
