"""Real parsers: symfence hybrid vs concolic only vs plain Atheris, lines covered and bugs, side by side.

For every target (the harnesses in examples/parsers/, the planted-bug targets of configs/concolic.toml and
examples/sealed_command.py) and every configuration, one run with the same budget (``--budget``,
default 60 s) on the same number of processes (``--cores``, default 2), one after the other:
- ``hybrid``: a symfence campaign of configs/hybrid.toml on the one target, ``--cores`` worker ranks;
- ``concolic``: the same campaign with ``campaign.executor = "concolic"``;
- ``atheris``: plain Atheris (bench/atheris_driver.py: instrumented import, ``atheris.Setup``,
  ``atheris.Fuzz``, ``-max_total_time``), ``--cores`` processes on one shared corpus directory
  (what libFuzzer's ``-jobs=N -workers=N`` does; those flags need a native binary), each
  restarted with the remaining time if libFuzzer stops early.
Every run's output corpus (symfence: queue/ and crashes/; Atheris: the corpus directory and the
crash files) is then replayed under coverage.py by bench/parser_replay.py in a fresh process, one
yardstick for all: lines covered in the parser's own modules (a harness's ``MODULES``; for a demo
target its own module), distinct unexpected exceptions (type + innermost frame), and the time to
each (the mtime of the first file raising it, minus the run's start). Hang inputs are not
replayed. Results: bench/results/parsers.{md,json} (the per-run details are in the JSON).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path
from typing import Any

from bench.common import RESULTS, campaign, save, table
from tests.mpi_helpers import ROOT as ROOT_DIR

CONFIGS = ("hybrid", "concolic", "atheris")


def default_targets() -> list[str]:
    from examples.parsers import HARNESSES

    demo = tomllib.loads((ROOT_DIR / "configs" / "concolic.toml").read_text())["campaign"]["targets"]
    return [*HARNESSES, *demo, "examples.sealed_command:target"]


def parser_modules(spec: str) -> list[str]:
    """The modules whose lines count for ``spec`` (symfence.tools.linecov's default, as `symfence coverage`)."""
    from symfence.tools.linecov import default_modules

    return default_modules(spec)


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT_DIR), os.environ.get("PYTHONPATH")) if p)}


def campaign_config(spec: str, executor: str, budget_s: float, cores: int) -> dict[str, dict[str, Any]]:
    """configs/hybrid.toml with one target, the executor and the budget swapped in."""
    cfg = tomllib.loads((ROOT_DIR / "configs" / "hybrid.toml").read_text())
    cfg["campaign"].update(targets=[spec], executor=executor, duration_s=budget_s, ranks=cores + 1)
    cfg["campaign"].pop("output", None)
    cfg["campaign"]["name"] = f"bench-{executor}"
    return cfg


def run_symfence(tmp: Path, spec: str, executor: str, budget_s: float, cores: int) -> dict[str, Any]:
    cfg = campaign_config(spec, executor, budget_s, cores)
    start = time.time()
    run = campaign(tmp, cfg, ranks=cores + 1, timeout_s=budget_s + 180)
    wall = time.time() - start
    stats = run.stats()
    ends = [e for e in run.events() if e["event"] == "campaign.finished"]
    files = [p for d in ("queue", "crashes") for p in sorted((run.out / d).glob("*")) if not p.name.startswith(".")]
    return {"start": start, "wall_s": round(wall, 1), "end": ends[-1]["reason"] if ends else "?",
            "execs": int(float(stats.get("execs_done", 0))), "files": files,
            "stats": {k: v for k, v in stats.items() if re.search(r"execs|edges|crash|fuzz|concolic|stage", k)}}


def run_atheris(tmp: Path, spec: str, budget_s: float, cores: int, *, own_sessions: bool = False,
                seeds: Path | None = None) -> dict[str, Any]:
    """Atheris alone, ``cores`` processes on one corpus folder. ``own_sessions``: each process in a
    session of its own, as symfence starts its fuzzing processes, so that a side-by-side run on a
    kernel with autogroup scheduling gives each fuzzing process the same CPU share. ``seeds``: a
    folder whose files start the corpus."""
    corpus, crashes = tmp / "corpus", tmp / "crashes"
    corpus.mkdir(parents=True)
    crashes.mkdir(parents=True)
    for seed in sorted(seeds.iterdir()) if seeds is not None else ():
        (corpus / seed.name).write_bytes(seed.read_bytes())
    start = time.time()
    deadline = time.monotonic() + budget_s
    execs, restarts = 0, 0
    jobs: list[tuple[subprocess.Popen, Path]] = []

    def launch(job: int) -> None:
        remaining = int(deadline - time.monotonic())
        log = tmp / f"job{job}-{len(jobs)}.log"
        cmd = [sys.executable, "-m", "bench.atheris_driver", spec, str(crashes), f"-max_total_time={remaining}",
               "-print_final_stats=1", "-timeout=30", f"-artifact_prefix={crashes}/", str(corpus)]
        jobs.append((subprocess.Popen(cmd, cwd=ROOT_DIR, env=_env(), stdout=subprocess.DEVNULL,
                                      stderr=log.open("w"), start_new_session=own_sessions), log))

    for job in range(cores):
        launch(job)
    running = {i: i for i in range(cores)}  # job -> index in jobs
    while running:
        time.sleep(0.2)
        for job, index in list(running.items()):
            proc, log = jobs[index]
            if proc.poll() is None:
                if time.monotonic() > deadline + 60:
                    proc.kill()
                continue
            m = re.search(r"stat::number_of_executed_units: (\d+)", log.read_text(errors="replace"))
            execs += int(m.group(1)) if m else 0
            del running[job]
            if deadline - time.monotonic() > 2:
                restarts += 1
                launch(job)
                running[job] = len(jobs) - 1
    wall = time.time() - start
    files = sorted(corpus.glob("*")) + sorted(p for p in crashes.glob("*") if p.is_file())
    return {"start": start, "wall_s": round(wall, 1), "end": "budget", "execs": execs, "files": files,
            "restarts": restarts}


def replay(spec: str, run: dict[str, Any], tmp: Path) -> dict[str, Any]:
    """Replay the run's files under coverage.py in a fresh process (the file list goes in a file)."""
    listing = tmp / "replay-files.txt"
    listing.write_text("\n".join(str(p) for p in run["files"]))
    proc = subprocess.run([sys.executable, "-m", "bench.parser_replay", spec, ",".join(parser_modules(spec)),
                           repr(run["start"]), f"@{listing}"], cwd=ROOT_DIR, env=_env(),
                          capture_output=True, text=True, timeout=1800)
    if proc.returncode != 0:
        raise SystemExit(f"replay of {spec} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _short(spec: str) -> str:
    return spec.partition(":")[0].rsplit(".", 1)[-1]


def _exc(signature: str) -> str:
    """``ValueError @ tarfile.py:2596 in next`` from the full signature."""
    kind, _, where = signature.partition(" @ ")
    kind = kind.removeprefix("builtins.")
    return f"{kind.rsplit('.', 1)[-1] if '.' in kind else kind} @ {Path(where.split(':')[0]).name}:{where.split(':', 1)[-1]}"


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--budget", type=float, default=60.0, help="seconds per run (default %(default)s)")
    p.add_argument("--cores", type=int, default=2, help="worker ranks / Atheris processes per run (default %(default)s)")
    p.add_argument("--targets", nargs="*", help="target specs (default: every parser harness, demo target and sealed_command)")
    p.add_argument("--configs", nargs="*", default=list(CONFIGS), choices=CONFIGS)
    args = p.parse_args(argv)
    targets = args.targets or default_targets()
    results: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-parsers-") as tmpdir:
        for t_index, spec in enumerate(targets):
            results[spec] = {}
            for config in args.configs:
                tmp = Path(tmpdir) / f"t{t_index}-{config}"
                tmp.mkdir(parents=True)
                if config == "atheris":
                    run = run_atheris(tmp, spec, args.budget, args.cores)
                else:
                    run = run_symfence(tmp, spec, config, args.budget, args.cores)
                measured = replay(spec, run, tmp)
                results[spec][config] = {**{k: v for k, v in run.items() if k != "files"}, **measured}
                print(f"{_short(spec)} / {config}: {measured['lines']} lines, {len(measured['exceptions'])} "
                      f"exceptions, {measured['inputs']} inputs, {run['execs']:,} execs, {run['wall_s']} s "
                      f"({run['end']})", flush=True)
    headers = ["target", "parser lines (statements)", *(f"lines: {c}" for c in args.configs)]
    if {"hybrid", "atheris"} <= set(args.configs):
        headers.append("hybrid - Atheris")
    headers += [f"bugs: {c}" for c in args.configs]
    rows = []
    for spec, by_config in results.items():
        first = next(iter(by_config.values()))
        row: list[Any] = [_short(spec), f"{', '.join(first['modules'])} ({first['statements']})"]
        row += [by_config[c]["lines"] for c in args.configs]
        if {"hybrid", "atheris"} <= set(args.configs):
            row.append(f"{by_config['hybrid']['lines'] - by_config['atheris']['lines']:+d}")
        row += [len(by_config[c]["exceptions"]) for c in args.configs]
        rows.append(row)
    bug_headers = ["target", "unexpected exception (type @ innermost frame)", *(f"{c}: time to bug" for c in args.configs)]
    bug_rows = []
    for spec, by_config in results.items():
        signatures = sorted({s for r in by_config.values() for s in r["exceptions"]})
        for sig in signatures:
            bug_rows.append([_short(spec), _exc(sig), *(
                f"{by_config[c]['exceptions'][sig]['found_s']:.1f} s" if sig in by_config[c]["exceptions"] else "not found"
                for c in args.configs)])
    text = save("parsers", headers, rows, {"budget_s": args.budget, "cores": args.cores, "targets": targets,
                                           "bug_headers": bug_headers, "bug_rows": bug_rows, "runs": results})
    bugs = table(bug_headers, bug_rows) if bug_rows else "(no unexpected exceptions)"
    (RESULTS / "parsers.md").write_text(text + "\n\n" + bugs + "\n")
    print(text + "\n\n" + bugs)


if __name__ == "__main__":
    main()
