"""Benchmark: committed results/s through the journal (lease + commit of 1 new entry + group flush).

Each result leases a pending work item, commits it with one new ~100-byte corpus entry (which
becomes pending work in turn) and flushes whenever the journal says a batch is due. Group size
G = results per flush (one SQLite transaction). The baseline does only the in-memory bookkeeping
the coordinator would do anyway (dict/set updates, no journal). Inputs, hashes and tokens are
prepared before timing, so the numbers are the journal's own cost.

    .venv/bin/python bench/bench_journal.py [--results 20000] [--groups 1,16,256] [--repeat 3]
        [--synchronous normal,full]   (journal.synchronous: FULL fsyncs the WAL at every commit)
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import platform
import sqlite3
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from symfence.coordinator.journal import Journal, NewEntry  # noqa: E402
from symfence.protocol.ids import sha256_hex, work_id_for  # noqa: E402

ENTRY_BYTES = 100
SEEDS = 64
OPS_PER_RESULT = 3  # lease, the new entry, the commit


@dataclass(frozen=True)
class Prepared:
    """Everything a run needs, computed before the clock starts."""

    seeds: list[tuple[bytes, str, str]]  # (data, sha256, work_id)
    children: list[tuple[bytes, str, str]]
    tokens: list[str]


@dataclass(frozen=True)
class Row:
    case: str
    group: int | None
    results: int
    seconds: float
    results_per_s: float
    us_per_result: float
    flushes: int
    mean_flush_ms: float
    max_flush_ms: float
    journal_bytes: int


def prepare(results: int) -> Prepared:
    def item(data: bytes) -> tuple[bytes, str, str]:
        sha = sha256_hex(data)
        return data, sha, work_id_for("bench", "bench", sha, 0, {})

    return Prepared(
        seeds=[item(os.urandom(ENTRY_BYTES)) for _ in range(SEEDS)],
        children=[item(os.urandom(ENTRY_BYTES)) for _ in range(results)],
        tokens=[os.urandom(32).hex() for _ in range(results)],
    )


def run_baseline(prep: Prepared) -> Row:
    """The coordinator's in-memory bookkeeping only: work states, known hashes, the corpus list."""
    work: dict[str, tuple[str, str | None, int]] = {}
    known: set[str] = set()
    corpus: list[tuple[int, bytes, str, str]] = []
    pending: collections.deque[str] = collections.deque()
    for data, sha, work_id in prep.seeds:
        known.add(sha)
        corpus.append((len(corpus), data, sha, work_id))
        work[work_id] = ("pending", None, 0)
        pending.append(work_id)
    started = time.perf_counter()
    for i, (data, sha, child_id) in enumerate(prep.children):
        work_id = pending.popleft()
        token = prep.tokens[i]
        state, _, attempts = work[work_id]
        work[work_id] = ("leased", token, attempts + 1)
        if work[work_id][1] == token and sha not in known and child_id not in work:
            known.add(sha)
            corpus.append((len(corpus), data, sha, child_id))
            work[child_id] = ("pending", None, 0)
            pending.append(child_id)
        work[work_id] = ("done", None, attempts + 1)
    seconds = time.perf_counter() - started
    n = len(prep.children)
    return Row(
        "baseline (no journal)", None, n, seconds, n / seconds, seconds / n * 1e6, 0, 0.0, 0.0, 0
    )


def run_journal(prep: Prepared, group: int, directory: Path, sync: str = "normal") -> Row:
    path = directory / f"journal-g{group}.sqlite"
    journal = Journal.open(path, resume=False, batch_ops=group * OPS_PER_RESULT, batch_ms=60_000.0,
                           synchronous=sync)
    seeds = journal.add_seeds(NewEntry(d, s, w) for d, s, w in prep.seeds)
    journal.flush()
    pending = collections.deque(e.work_id for e in seeds)
    flush_s: list[float] = []
    started = time.perf_counter()
    for i, (data, sha, child_id) in enumerate(prep.children):
        work_id = pending.popleft()
        token = prep.tokens[i]
        journal.lease(work_id, token)
        receipt = journal.commit(
            work_id, token, status="ok",
            new_entries=[NewEntry(data, sha, child_id, parent=0, origin="bench", new_bits=2)],
        )
        pending.extend(e.work_id for e in receipt.entries)
        if journal.needs_flush():
            flush_s.append(journal.flush().duration_s)
    flush_s.append(journal.flush().duration_s)
    seconds = time.perf_counter() - started
    journal.close()
    n = len(prep.children)
    size = sum(p.stat().st_size for p in directory.glob(path.name + "*") if p.suffix != ".lock")
    return Row(
        f"journal, group {group}" + ("" if sync == "normal" else f", synchronous={sync}"), group, n, seconds, n / seconds, seconds / n * 1e6,
        len(flush_s), sum(flush_s) / len(flush_s) * 1e3, max(flush_s) * 1e3, size,
    )


def markdown(rows: list[Row]) -> str:
    lines = [
        "| case | results/s | us/result | flushes | mean flush ms | max flush ms |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r.case} | {r.results_per_s:,.0f} | {r.us_per_result:.1f} | {r.flushes} "
            f"| {r.mean_flush_ms:.3f} | {r.max_flush_ms:.3f} |"
        )
    lines.append("")
    lines.append("median of the repeats; group = results per flush (one SQLite transaction)")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=int, default=20_000, help="results per case")
    parser.add_argument("--groups", default="1,16,256", help="results per flush, comma-separated")
    parser.add_argument("--repeat", type=int, default=3, help="runs per case; the median is shown")
    parser.add_argument("--synchronous", default="normal,full", help="journal.synchronous settings to compare")
    parser.add_argument(
        "--out", type=Path, default=Path(__file__).resolve().parent / "results" / "journal.json"
    )
    args = parser.parse_args()
    groups = [int(g) for g in args.groups.split(",")]

    prep = prepare(args.results)
    cases: list[tuple[str, Callable[[Path], Row]]] = [("baseline", lambda _: run_baseline(prep))]
    cases += [(f"group {g} {sync}", lambda d, g=g, sync=sync: run_journal(prep, g, d, sync))
              for sync in args.synchronous.split(",") for g in groups]
    rows: list[Row] = []
    repeats: list[list[float]] = []
    for _, case in cases:
        runs = []
        for _ in range(args.repeat):
            with tempfile.TemporaryDirectory(prefix="bench-journal-") as tmp:
                runs.append(case(Path(tmp)))
        runs.sort(key=lambda r: r.results_per_s)
        rows.append(runs[len(runs) // 2])  # the median run
        repeats.append([round(r.results_per_s) for r in runs])

    print(markdown(rows))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    report = {
        "benchmark": "journal",
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "entry_bytes": ENTRY_BYTES,
        "repeat": args.repeat,
        "rows": [asdict(r) | {"all_results_per_s": rates} for r, rates in zip(rows, repeats)],
    }
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"\nwrote {args.out}")


if __name__ == "__main__":
    main()
