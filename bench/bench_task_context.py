"""Benchmark: the cost of a z3 context per concolic task, side by side with the shared context it replaced.

The engine gives each task a z3 context of its own (``worker/concolic/z3scope``) and empties its
caches of z3 objects (regex translations, constant-table arrays) per task, so that a task's
search no longer depends on what ran before it in the process. Here one fixed list of tasks
(recorded once from generational searches: every ``examples/constructs`` target to its find,
two standard-library parsers with their modules rewritten, json's scanner rewritten under a
harness (``examples/engine_only/fuzz_json_key.py``), and with ``--sqlparse`` the
``sqlparse`` harness, a lexer of ~50 regular expressions, needs the ``bench`` extra) runs in one
process with one engine, as a worker's child keeps it, rounds alternating: "shared" (the
engine's ``task_context`` replaced by a no-op: one context for every task, caches kept, as
before) and "per task". Per group: tasks, the median wall seconds of each mode, tasks per
second and per-task/shared; the solver answers the same queries either way except where the
models differ (queries and executions printed).

    .venv/bin/python bench/bench_task_context.py [--rounds 6] [--sqlparse]
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import importlib
import importlib.util
import os
import pkgutil
import statistics
import sys
import time
from collections import deque
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.append(str(ROOT))

from bench.common import save  # noqa: E402
from symfence.protocol.coverage import CoverageMap  # noqa: E402
from symfence.worker.concolic import engine as engine_module  # noqa: E402
from symfence.worker.concolic.engine import ConcolicEngine  # noqa: E402
from symfence.worker.executors.base import ExitKind, Task  # noqa: E402

PARSERS = [("examples.parsers.toml_document:target", {"instrument": "tomllib"}, (b"\x00",), 30),
           ("examples.parsers.email_message:target", {"instrument": "email"}, (b"\x00",), 30)]
JSON = [("examples.engine_only.fuzz_json_key:TestOneInput", {"instrument": "json"}, (b'{"a": [1]}',), 15)]
SQLPARSE = [("examples.harnesses.fuzz_sqlparse:TestOneInput", {}, (b"\x00SELECT a FROM t",), 3)]


def record(target: str, options: dict, seeds: tuple[bytes, ...], max_tasks: int) -> list[Task]:
    """The tasks of a coverage-guided generational search (as bench_engine_reach's), to the find."""
    engine, coverage = ConcolicEngine(), CoverageMap()
    queue, seen, tasks = deque((s, 0) for s in seeds), set(seeds), []
    while queue and len(tasks) < max_tasks:
        data, bound = queue.popleft()
        task = Task("t", hashlib.sha256(data).hexdigest(), data, target, bound, options)
        tasks.append(task)
        for child in engine.run_task(task).candidates:
            if child.kind is not ExitKind.OK:
                if "Found" in child.detail:
                    return tasks
            elif coverage.merge(child.trace) and child.data not in seen:
                seen.add(child.data)
                queue.append((child.data, child.bound))
    return tasks


def workload(sqlparse: bool) -> dict[str, list[Task]]:
    import examples.constructs as pkg

    constructs = []
    for info in pkgutil.iter_modules(pkg.__path__):
        if not info.name.startswith("_"):
            module = importlib.import_module(f"examples.constructs.{info.name}")
            constructs.append((f"examples.constructs.{info.name}:target",
                               dict(getattr(module, "OPTIONS", {})), (b"\x00",), 40))
    groups = {"constructs": constructs, "parsers": PARSERS, "json": JSON,
              **({"sqlparse": SQLPARSE} if sqlparse else {})}
    return {group: [t for target, options, seeds, n in searches for t in record(target, options, seeds, n)]
            for group, searches in groups.items()}


def run(tasks: list[Task]) -> tuple[float, int, int]:
    """Wall seconds, queries and executions of the tasks on one new engine."""
    engine, queries, execs = ConcolicEngine(), 0, 0
    start = time.perf_counter()
    for task in tasks:
        outcome = engine.run_task(task)
        queries += outcome.stats.get("queries", 0)
        execs += outcome.execs
    return time.perf_counter() - start, queries, execs


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=6)
    p.add_argument("--sqlparse", action="store_true", help="also the sqlparse harness (~15 s a task)")
    args = p.parse_args()
    if args.sqlparse and importlib.util.find_spec("sqlparse") is None:
        raise SystemExit("--sqlparse needs the bench extra: pip install -e '.[bench]'")
    load0 = os.getloadavg()
    groups = workload(args.sqlparse)
    per_task = engine_module.task_context
    modes = {"shared": contextlib.nullcontext, "per task": per_task}
    runs: dict[str, dict[str, list[tuple[float, int, int]]]] = {g: {m: [] for m in modes} for g in groups}
    for tasks in groups.values():
        run(tasks)  # targets loaded, untimed
    for rnd in range(args.rounds):
        for mode in (list(modes) if rnd % 2 == 0 else list(modes)[::-1]):
            engine_module.task_context = modes[mode]  # type: ignore[assignment]
            for group, tasks in groups.items():
                runs[group][mode].append(run(tasks))
    engine_module.task_context = per_task
    rows = []
    for group, tasks in groups.items():
        shared = statistics.median(r[0] for r in runs[group]["shared"])
        fresh = statistics.median(r[0] for r in runs[group]["per task"])
        rows.append([group, len(tasks), f"{shared:.3f}", f"{fresh:.3f}", f"{len(tasks) / shared:.1f}",
                     f"{len(tasks) / fresh:.1f}", f"{shared / fresh:.2f}",
                     f"{(fresh - shared) / len(tasks) * 1000:+.1f}",
                     f"{runs[group]['shared'][0][1]}/{runs[group]['per task'][0][1]}",
                     f"{runs[group]['shared'][0][2]}/{runs[group]['per task'][0][2]}"])
    headers = ["group", "tasks", "shared s", "per task s", "shared tasks/s", "per task tasks/s",
               "per task/shared", "ms per task", "queries", "execs"]
    print(save("task_context", headers, rows, {"rounds": args.rounds, "load_before": load0,
                                               "load_after": os.getloadavg(), "runs": runs}))


if __name__ == "__main__":
    main()
