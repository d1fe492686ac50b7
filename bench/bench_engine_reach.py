"""Benchmark: how far the concolic engine follows real code - constructs found, counters on real parsers and harnesses.

Three parts, all the engine alone (in process, no MPI, no random mutation), each a
coverage-guided generational search from one zero byte like the coordinator's:
- ``constructs``: every ``examples/constructs/*.py`` target (a planted ``Found`` exception
  behind one construct); found or not, seconds and tasks to it.
- ``parsers``: a fixed time budget on four standard-library parser harnesses of
  ``examples/parsers/`` with the parser's own modules (``MODULES``) instrumented; the engine's summed
  counters (branches, concretisations by kind, queries, divergences, false findings), edges
  and findings.
- ``harnesses``: the OSS-Fuzz-form harnesses of ``examples/harnesses`` (the ``bench`` extra),
  each twice side by side, in a fresh process per run: the harness alone rewritten
  (``instrument_imports = false``, the engine before issue 27) and with the library it imports
  rewritten (the default). Per run: the instrumented import's seconds, the engine's busy
  seconds (summed task wall time) and tasks in the budget, its branches and concretisations,
  the engine's own edges, the lines of the package its corpus covers (one coverage.py replay,
  ``symfence.tools.linecov``), and the per-execution cost of a concrete (trace) run on the
  seeds against the plain harness (no proxies). The seeds (a zero byte and 8 printable
  inputs, ``harness_seeds``) stand in for the fuzz stage's corpus the engine takes in a hybrid.
Engine-version agnostic (only ``ConcolicEngine.run_task`` and ``Outcome.stats``), so the same
script measures an older checkout: ``PYTHONPATH=/path/to/old/checkout python bench/bench_engine_reach.py``.

    .venv/bin/python bench/bench_engine_reach.py [--part constructs|parsers|harnesses|all] [--budget 30] [--json out.json]
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import json
import os
import pkgutil
import subprocess
import sys
import tempfile
import time
from collections import Counter, deque
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.append(str(ROOT))

from symfence.protocol.coverage import CoverageMap  # noqa: E402
from symfence.worker.concolic.engine import ConcolicEngine  # noqa: E402
from symfence.worker.executors.base import ExitKind, Task  # noqa: E402

PARSERS = (  # the standard-library harnesses of examples/parsers, each with its parser's modules
    "examples.parsers.toml_document:target",
    "examples.parsers.plist_binary:target",
    "examples.parsers.wave_header:target",
    "examples.parsers.email_message:target",
)


def search(target: str, budget_s: float, options: dict, stop_on: str | None,
           corpus: list[bytes] | None = None, seeds: tuple[bytes, ...] = (b"\x00",)) -> dict:
    """Generational search for ``budget_s``; stops at the first crash containing ``stop_on``.
    ``corpus`` (if given) receives every input kept (the seeds and each child with new edges)."""
    engine = ConcolicEngine()
    coverage = CoverageMap()
    queue = deque((seed, 0) for seed in seeds)
    seen = set(seeds)
    totals: Counter[str] = Counter()
    findings: Counter[str] = Counter()
    start = time.perf_counter()
    tasks = 0
    busy_s = 0.0
    found_s = None
    if corpus is not None:
        corpus.extend(seeds)
    while queue and time.perf_counter() - start < budget_s:
        data, bound = queue.popleft()
        work_id = hashlib.sha256(data + bound.to_bytes(4, "big")).hexdigest()
        outcome = engine.run_task(Task("t", work_id, data, target, bound, options))
        busy_s += outcome.wall_s
        tasks += 1
        totals.update({k: v for k, v in outcome.stats.items() if isinstance(v, int)})
        coverage.merge(outcome.trace)
        for child in outcome.candidates:
            if child.kind in (ExitKind.CRASH, ExitKind.HANG):
                line = (child.detail.strip().splitlines() or ["?"])[-1][:80]
                findings[line] += 1
                if stop_on and stop_on in child.detail and found_s is None:
                    found_s = time.perf_counter() - start
            elif coverage.merge(child.trace) and child.data not in seen:
                seen.add(child.data)
                queue.append((child.data, child.bound))
                if corpus is not None:
                    corpus.append(child.data)
        if found_s is not None:
            break
    edges = sum(1 for x in coverage.seen if x) if hasattr(coverage, "seen") else None
    return {"target": target, "tasks": tasks, "found_s": found_s, "wall_s": time.perf_counter() - start,
            "busy_s": round(busy_s, 2), "edges": edges, "findings": dict(findings), "stats": dict(totals)}


def constructs(budget_s: float) -> list[dict]:
    import examples.constructs as pkg

    out = []
    for info in pkgutil.iter_modules(pkg.__path__):
        if info.name.startswith("_"):
            continue
        name = f"examples.constructs.{info.name}"
        module = importlib.import_module(name)
        options = dict(getattr(module, "OPTIONS", {}))
        result = search(f"{name}:target", budget_s, options, "Found")
        result["construct"] = (module.__doc__ or info.name).strip().splitlines()[0]
        out.append(result)
        print(f"{info.name:28} found={result['found_s'] is not None} "
              f"s={result['found_s'] if result['found_s'] is None else round(result['found_s'], 2)} "
              f"tasks={result['tasks']}", flush=True)
    return out


def parsers(budget_s: float) -> list[dict]:
    out = []
    for target in PARSERS:
        module = importlib.import_module(target.partition(":")[0])
        instrument = ",".join(getattr(module, "MODULES", ()))
        result = search(target, budget_s, {"instrument": instrument}, None)
        out.append(result)
        s = result["stats"]
        print(f"{target:40} tasks={result['tasks']} edges={result['edges']} branches={s.get('branches', 0)} "
              f"concretisations={s.get('concretisations', 0)} findings={sum(result['findings'].values())}",
              flush=True)
    return out


HARNESSES = ("sqlparse", "dnspython", "toml", "jmespath", "dateutil", "idna", "pyasn1",
             "email_validator", "simplejson")


def harness_seeds(name: str) -> tuple[bytes, ...]:
    """A zero byte and 8 printable inputs of 8-63 bytes (the same for both runs of a harness),
    standing in for the fuzz stage's corpus the engine takes in a hybrid campaign."""
    import random

    rng = random.Random(name)
    return (b"\x00", *(bytes(rng.randrange(32, 127) for _ in range(rng.randrange(8, 64))) for _ in range(8)))


def harness_run(name: str, imports: bool, budget_s: float, out: Path) -> dict:
    """One engine run on one harness (in this fresh process); its corpus written to ``out``."""
    from symfence.worker.concolic.execution import execute
    from symfence.worker.concolic.harness_imports import harness_imports
    from symfence.worker.concolic.instrument import load_target

    spec = f"examples.harnesses.fuzz_{name}:TestOneInput"
    t0 = time.perf_counter()
    target = load_target(spec, (), imports)
    import_s = time.perf_counter() - t0
    corpus: list[bytes] = []
    result = search(spec, budget_s, {"instrument_imports": imports}, None, corpus, harness_seeds(name))
    out.mkdir(parents=True, exist_ok=True)
    for i, data in enumerate(corpus):
        (out / f"{i:06d}").write_bytes(data)
    sample = list(harness_seeds(name))  # the same inputs in both runs of a harness

    def per_exec(fn: object) -> float:
        start = time.perf_counter()
        for _ in range(5):
            for data in sample:
                execute(fn, data, symbolic=False, timeout_s=1.0, max_branches=2000)  # type: ignore[arg-type]
        return (time.perf_counter() - start) / max(5 * len(sample), 1) * 1e6

    traced_us = per_exec(target)
    plain = importlib.import_module(spec.partition(":")[0]).TestOneInput
    start = time.perf_counter()
    for _ in range(5):
        for data in sample:
            try:
                plain(data)
            except Exception:  # noqa: BLE001 - a finding; the time is what counts here
                pass
    plain_us = (time.perf_counter() - start) / max(5 * len(sample), 1) * 1e6
    s = result["stats"]
    kinds = sorted(((k[len("concretised_"):], v) for k, v in s.items() if k.startswith("concretised_")),
                   key=lambda kv: -kv[1])[:5]
    return {"harness": name, "imports": imports, "package": list(harness_imports(spec.partition(":")[0])),
            "import_s": round(import_s, 2), "tasks": result["tasks"], "busy_s": result["busy_s"],
            "wall_s": round(result["wall_s"], 1), "engine_edges": result["edges"], "corpus": len(corpus),
            "branches": s.get("branches", 0), "concretisations": s.get("concretisations", 0),
            "top_concretised": kinds, "sat": s.get("sat", 0), "unknown": s.get("unknown", 0),
            "divergences": s.get("divergences", 0), "findings": sum(result["findings"].values()),
            "traced_exec_us": round(traced_us, 1), "plain_exec_us": round(plain_us, 1)}


def harnesses(budget_s: float, only: list[str] | None) -> list[dict]:
    """Each harness without and with its library rewritten, side by side (see the docstring)."""
    out: list[dict] = []
    tmp = Path(tempfile.mkdtemp(prefix="sf-reach-"))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    for name in only or HARNESSES:
        row: dict = {"harness": name}
        for imports in (False, True):
            corpus = tmp / f"{name}-{int(imports)}"
            proc = subprocess.run(
                [sys.executable, str(Path(__file__).resolve()), "--harness-run", name, str(int(imports)),
                 str(budget_s), str(corpus)], capture_output=True, text=True, env=env, cwd=ROOT)
            if proc.returncode != 0:
                row["library" if imports else "harness"] = {"error": proc.stderr.strip().splitlines()[-1:]}
                continue
            run = json.loads(proc.stdout.strip().splitlines()[-1])
            package = run["package"]
            listing = tmp / f"{name}-{int(imports)}.txt"
            listing.write_text("\n".join(str(p) for p in sorted(corpus.iterdir())))
            cov = subprocess.run(
                [sys.executable, "-m", "symfence.tools.linecov", f"examples.harnesses.fuzz_{name}:TestOneInput",
                 "5", str(listing), "--modules", ",".join(package)], capture_output=True, text=True, env=env, cwd=ROOT)
            run["lines"] = json.loads(cov.stdout)["lines"] if cov.returncode == 0 else None
            row["library" if imports else "harness"] = run
        out.append(row)
        print(f"{name:16} before: {_line(row.get('harness'))}\n{'':16} after:  {_line(row.get('library'))}",
              flush=True)
    return out


def _line(r: dict | None) -> str:
    if not isinstance(r, dict) or "tasks" not in r:
        return str(r)
    return (f"import {r['import_s']}s busy {r['busy_s']}s tasks {r['tasks']} branches {r['branches']} "
            f"edges {r['engine_edges']} lines {r['lines']} exec {r['traced_exec_us']}us "
            f"(plain {r['plain_exec_us']}us)")


def main() -> None:
    if sys.argv[1:2] == ["--harness-run"]:  # one run in a fresh process (harnesses())
        name, imports, budget, out = sys.argv[2:6]
        print(json.dumps(harness_run(name, imports == "1", float(budget), Path(out))))
        return
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--part", choices=("constructs", "parsers", "harnesses", "all"), default="all")
    p.add_argument("--harness", action="append", default=None, help="only this harness (repeatable)")
    p.add_argument("--budget", type=float, default=30.0, help="seconds per parser")
    p.add_argument("--construct-budget", type=float, default=20.0, help="seconds per construct")
    p.add_argument("--json", type=Path, default=None)
    args = p.parse_args()
    report: dict = {"date": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "python": sys.version.split()[0]}
    if args.part in ("constructs", "all"):
        report["constructs"] = constructs(args.construct_budget)
    if args.part in ("parsers", "all"):
        report["parsers"] = parsers(args.budget)
    if args.part in ("harnesses", "all"):
        report["load_before"] = os.getloadavg()
        report["harnesses"] = harnesses(args.budget, args.harness)
        report["load_after"] = os.getloadavg()
    text = json.dumps(report, indent=1, sort_keys=True)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(text)
    else:
        print(text)


if __name__ == "__main__":
    main()
