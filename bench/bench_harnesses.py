"""OSS-Fuzz-style Atheris harnesses, unchanged: `symfence run fuzz_x.py` (hybrid) against Atheris alone.

``python -m bench.bench_harnesses [--budget S] [--harnesses fuzz_x ...]`` runs every harness of
``examples/harnesses`` (the packages of the ``bench`` extra) twice with the same budget on the
same cores: the drop-in command ``symfence run examples/harnesses/fuzz_x.py -max_total_time=S
--ranks 3`` (hybrid: 2 worker ranks) and plain Atheris as a user runs it, 2 processes on one
corpus folder (``bench.bench_parsers.run_atheris``: ``bench/atheris_driver.py``, keep-going).
One yardstick for both: one coverage.py replay of each run's output corpus and crashes over the
package under test (``bench/parser_replay.py``): lines covered (and added: beyond what importing
and one empty input cover), distinct unexpected exceptions.
Also: fuzz-stage executions per worker-second (symfence: ``fuzz_execs / fuzz_busy_s``; Atheris:
executions / (2 x budget)) and the engine's ``concolic_edges_first``. Results go to
``bench/results/harnesses.{json,md}``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.bench_parsers import run_atheris
from bench.common import RESULTS, save
from tests.mpi_helpers import ROOT as ROOT_DIR

HARNESS_DIR = ROOT_DIR / "examples" / "harnesses"
# harness -> (package measured, whether it splits its input with FuzzedDataProvider)
HARNESSES: dict[str, tuple[str, bool]] = {
    "fuzz_sqlparse": ("sqlparse", True),
    "fuzz_dnspython": ("dns", True),
    "fuzz_toml": ("toml", True),
    "fuzz_jmespath": ("jmespath", True),
    "fuzz_dateutil": ("dateutil", True),
    "fuzz_idna": ("idna", True),
    "fuzz_pyasn1": ("pyasn1", False),
    "fuzz_email_validator": ("email_validator", False),
}


def run_hybrid(tmp: Path, name: str, budget_s: float) -> dict[str, Any]:
    out = tmp / "out"
    env = {**os.environ, "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
    start = time.time()
    proc = subprocess.run([sys.executable, "-m", "symfence", "run", str(HARNESS_DIR / f"{name}.py"),
                           f"-max_total_time={budget_s:g}", "--ranks", "3", "--out", str(out), "--no-status"],
                          cwd=tmp, env=env, capture_output=True, text=True, timeout=budget_s + 240,
                          stdin=subprocess.DEVNULL)
    if proc.returncode != 0:
        raise SystemExit(f"symfence run {name} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    stats = {}
    for line in (out / "fuzzer_stats").read_text().splitlines():
        key, _, value = line.partition(":")
        stats[key.strip()] = value.strip()
    files = [p for d in ("queue", "crashes") for p in sorted((out / d).glob("*")) if p.is_file()]
    busy = float(stats.get("fuzz_busy_s", 0) or 0)
    return {"start": start, "wall_s": round(time.time() - start, 1), "files": files,
            "execs": int(float(stats.get("execs_done", 0))),
            "fuzz_execs_per_worker_s": round(int(stats.get("fuzz_execs", 0)) / busy) if busy else 0,
            "concolic_edges_first": int(stats.get("concolic_edges_first", 0)),
            "concolic_crashes": int(stats.get("concolic_crashes", 0))}


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--budget", type=float, default=30.0, help="seconds per run (default %(default)s)")
    p.add_argument("--harnesses", nargs="*", choices=list(HARNESSES), help="default: all")
    args = p.parse_args(argv)
    names = args.harnesses or list(HARNESSES)
    rows, runs = [], {}
    with tempfile.TemporaryDirectory(prefix="bench-harnesses-") as tmpdir:
        for name in names:
            package, fdp = HARNESSES[name]
            spec = f"examples.harnesses.{name}:TestOneInput"
            tmp = Path(tmpdir) / name
            (tmp / "hybrid").mkdir(parents=True)
            hybrid = run_hybrid(tmp / "hybrid", name, args.budget)
            atheris = run_atheris(tmp / "atheris", spec, args.budget, 2)
            atheris["fuzz_execs_per_worker_s"] = round(atheris["execs"] / (2 * args.budget))
            measured = {}
            for config, run in (("hybrid", hybrid), ("atheris", atheris)):
                measured[config] = _replay(spec, package, run, tmp / config)
            (tmp / "empty").write_bytes(b"")  # what importing and one empty input cover
            base = _replay(spec, package, {"start": time.time(), "files": [tmp / "empty"]}, tmp)["lines"]
            h, a = measured["hybrid"], measured["atheris"]
            h["added"], a["added"] = h["lines"] - base, a["lines"] - base
            runs[name] = {"hybrid": {**{k: v for k, v in hybrid.items() if k != "files"}, **h},
                          "atheris": {**{k: v for k, v in atheris.items() if k != "files"}, **a}}
            ratio = h["added"] / a["added"] if a["added"] > 0 else float("inf")
            rows.append([name, package, "FDP" if fdp else "bytes", f"{h['lines']} (+{h['added']})",
                         f"{a['lines']} (+{a['added']})", f"{ratio:.2f}",
                         len(h["exceptions"]), len(a["exceptions"]), hybrid["fuzz_execs_per_worker_s"],
                         atheris["fuzz_execs_per_worker_s"], hybrid["concolic_edges_first"]])
            print(" | ".join(str(x) for x in rows[-1]), flush=True)
    ratios = [float(r[5]) for r in rows if r[5] != "inf"]
    headers = ["harness", "package", "input", "lines (+added): hybrid", "lines (+added): Atheris x2",
               "added: hybrid / Atheris",
               "crashes: hybrid", "crashes: Atheris", "fuzz execs/worker-s: hybrid",
               "execs/process-s: Atheris", "concolic_edges_first"]
    extra = {"budget_s": args.budget, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
             "median_ratio": statistics.median(ratios) if ratios else None, "runs": runs}
    text = save("harnesses", headers, rows, extra)
    median = f"median hybrid / Atheris added lines: {extra['median_ratio']}"
    (RESULTS / "harnesses.md").write_text(f"{text}\n\n{median}\n")
    print(text)
    print(f"median hybrid / Atheris added lines: {extra['median_ratio']}")


def _replay(spec: str, package: str, run: dict[str, Any], tmp: Path) -> dict[str, Any]:
    listing = tmp / "replay-files.txt"
    listing.write_text("\n".join(str(p) for p in run["files"]))
    paths = (str(ROOT_DIR), os.environ.get("PYTHONPATH"))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in paths if p)}
    proc = subprocess.run([sys.executable, "-m", "bench.parser_replay", spec, package, repr(run["start"]),
                           f"@{listing}"], cwd=ROOT_DIR, env=env, capture_output=True, text=True,
                          timeout=1800)
    if proc.returncode != 0:
        raise SystemExit(f"replay of {spec} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


if __name__ == "__main__":
    main()
