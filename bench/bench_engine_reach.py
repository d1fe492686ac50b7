"""Benchmark: how far the concolic engine follows real code - constructs found, counters on real parsers.

Two parts, both the engine alone (in process, no MPI, no random mutation), each a
coverage-guided generational search from one zero byte like the coordinator's:
- ``constructs``: every ``examples/constructs/*.py`` target (a planted ``Found`` exception
  behind one construct); found or not, seconds and tasks to it.
- ``parsers``: a fixed time budget on four standard-library parser harnesses of
  ``examples/parsers/`` with the parser's own modules (``MODULES``) instrumented; the engine's summed
  counters (branches, concretisations by kind, queries, divergences, false findings), edges
  and findings.
Engine-version agnostic (only ``ConcolicEngine.run_task`` and ``Outcome.stats``), so the same
script measures an older checkout: ``PYTHONPATH=/path/to/old/checkout python bench/bench_engine_reach.py``.

    .venv/bin/python bench/bench_engine_reach.py [--part constructs|parsers|all] [--budget 30] [--json out.json]
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import json
import pkgutil
import sys
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


def search(target: str, budget_s: float, options: dict, stop_on: str | None) -> dict:
    """Generational search for ``budget_s``; stops at the first crash containing ``stop_on``."""
    engine = ConcolicEngine()
    coverage = CoverageMap()
    queue = deque([(b"\x00", 0)])
    seen = {b"\x00"}
    totals: Counter[str] = Counter()
    findings: Counter[str] = Counter()
    start = time.perf_counter()
    tasks = 0
    found_s = None
    while queue and time.perf_counter() - start < budget_s:
        data, bound = queue.popleft()
        work_id = hashlib.sha256(data + bound.to_bytes(4, "big")).hexdigest()
        outcome = engine.run_task(Task("t", work_id, data, target, bound, options))
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
        if found_s is not None:
            break
    edges = sum(1 for x in coverage.seen if x) if hasattr(coverage, "seen") else None
    return {"target": target, "tasks": tasks, "found_s": found_s, "wall_s": time.perf_counter() - start,
            "edges": edges, "findings": dict(findings), "stats": dict(totals)}


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


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--part", choices=("constructs", "parsers", "all"), default="all")
    p.add_argument("--budget", type=float, default=30.0, help="seconds per parser")
    p.add_argument("--construct-budget", type=float, default=20.0, help="seconds per construct")
    p.add_argument("--json", type=Path, default=None)
    args = p.parse_args()
    report: dict = {"date": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "python": sys.version.split()[0]}
    if args.part in ("constructs", "all"):
        report["constructs"] = constructs(args.construct_budget)
    if args.part in ("parsers", "all"):
        report["parsers"] = parsers(args.budget)
    text = json.dumps(report, indent=1, sort_keys=True)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(text)
    else:
        print(text)


if __name__ == "__main__":
    main()
