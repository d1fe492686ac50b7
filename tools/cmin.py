"""`symfence cmin OUT --to DIR`: the fewest corpus entries that keep every edge of the campaign's map.

afl-cmin's semantics, step for step: every corpus entry is run once and its trace taken as a
set of tuples (edge, AFL hit-count class; ``--edges-only``: edge alone, afl-cmin's ``-e``); for
each tuple the smallest input that has it is its *best* input (equal sizes: afl-cmin's order,
the name sorting last wins); then, from the rarest tuple to the most common, a tuple not yet
covered brings in its best input and every tuple that input has. Entries that crash or hang
now are left out (afl-cmin's default). The kept files are copied to DIR under their ``queue/``
names. A campaign with several targets gets one folder per target (``--target`` picks one).

The trace is the campaign's own yardstick: for Python targets the real tracer
(``worker.realtrace``, coverage.py's arcs, the ``coverage.include`` list of the config); for
native targets the afl-cc build (``native.options.afl_target``) through the campaign's forkserver
oracle, or (``--oracle showmap``) one ``afl-showmap -r`` run per input (raw counts: the same
traces; afl-cmin's own runs differ only where afl-showmap 4.04c drops an edge hit 8+ times).
Exit status: 0 done, 2 usage (no campaign, DIR not empty, no AFL build), 1 nothing kept.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping

from symfence.protocol.coverage import bucket
from symfence.tools.campaign_dir import CampaignDir, CampaignDirError, SavedInput

EXIT_OK = 0
EXIT_NOTHING = 1
EXIT_USAGE = 2
Tuple = tuple[int, int]


@dataclass(frozen=True)
class Traced:
    item: SavedInput
    status: str  # "ok", "crash" or "hang"
    tuples: frozenset[Tuple]


def tuples_of(trace: Mapping[int, int], edges_only: bool = False) -> frozenset[Tuple]:
    """A trace (edge -> raw hit count) as afl-cmin's tuples: (edge, count class 1..8: 1, 2, 3,
    4-7, 8-15, 16-31, 32-127, 128+), the class always 1 with ``edges_only`` (afl-showmap -Z / -e)."""
    return frozenset((e, 1 if edges_only else bucket(c).bit_length()) for e, c in trace.items() if c)


def minimize(traced: Iterable[tuple[str, int, frozenset[Tuple]]]) -> list[str]:
    """afl-cmin's selection over (name, size, tuples); returns the kept names in selection order."""
    # Smallest first; equal sizes by name, last first (afl-cmin: `sort -k1n -k2r`).
    ordered = sorted(traced, key=lambda t: t[0], reverse=True)
    ordered.sort(key=lambda t: t[1])
    best: dict[Tuple, str] = {}
    count: dict[Tuple, int] = {}
    by_name: dict[str, frozenset[Tuple]] = {}
    for name, _, tuples in ordered:
        by_name[name] = tuples
        for t in tuples:
            count[t] = count.get(t, 0) + 1
            best.setdefault(t, name)
    covered: set[Tuple] = set()
    kept: list[str] = []
    # Rarest tuples first; equal counts as `sort -k1n` leaves them: by the line's text, which
    # is afl-showmap -Z's key, the class digit followed by the edge index.
    for t in sorted(count, key=lambda t: (count[t], f"{t[1]}{t[0]}")):
        if t in covered:
            continue
        name = best[t]
        covered |= by_name[name]
        if name not in kept:
            kept.append(name)
    return kept


# ---------------------------------------------------------------------------------- tracing


def trace_python(campaign: CampaignDir, target: str, items: list[SavedInput]) -> list[Traced]:
    from symfence.worker.realtrace.client import TraceClient

    client = TraceClient()
    try:
        include = list(campaign.cfg["coverage.include"])
        client.submit(target, include, campaign.timeout_s, [i.data for i in items])
        while (done := client.poll(1.0)) is None:
            pass
    except RuntimeError as exc:  # the target cannot be loaded
        raise CampaignDirError(f"target {target}: {exc}") from None
    finally:
        client.close()
    return [Traced(i, t.status, tuples_of(t.trace)) for i, t in zip(items, done)]


def trace_native(campaign: CampaignDir, target: str, items: list[SavedInput], binary: str | None,
                 oracle_name: str = "forkserver") -> list[Traced]:
    from symfence.protocol.options import NativeOptions
    from symfence.worker.native.base import NativeError, RunKind
    from symfence.worker.native.forkserver import ForkserverOracle
    from symfence.worker.native.showmap import ShowmapOracle

    opts = NativeOptions.from_mapping(campaign.cfg["native.options"])
    build = binary or opts.afl_path(target)
    if not Path(build).is_file():
        raise CampaignDirError(f"native.options.afl_target: {build} does not exist (cmin traces the afl-cc"
                               " build; build it, or pass --afl-binary)")
    try:
        cls = ShowmapOracle if oracle_name == "showmap" else ForkserverOracle
        oracle = cls(build, input_mode=opts.input, exec_timeout_s=campaign.timeout_s,
                     mem_limit_mb=opts.target_mem_limit_mb)
    except NativeError as exc:
        raise CampaignDirError(f"native.options.afl_target: {exc}") from None
    out = []
    try:
        for item in items:
            run = oracle.run(item.data)
            status = {RunKind.OK: "ok", RunKind.HANG: "hang"}.get(run.kind, "crash")
            out.append(Traced(item, status, tuples_of(run.trace)))
    finally:
        oracle.close()
    return out


# ---------------------------------------------------------------------------------- the command


def _safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", text.replace(":", "."))[:80]


def cmin_target(campaign: CampaignDir, target: str, items: list[SavedInput], to: Path, *,
                edges_only: bool = False, afl_binary: str | None = None,
                oracle: str = "forkserver") -> dict[str, int]:
    if campaign.native:
        traced = trace_native(campaign, target, items, afl_binary, oracle)
    else:
        traced = trace_python(campaign, target, items)
    usable = [t for t in traced if t.status == "ok"]
    if edges_only:
        usable = [Traced(t.item, t.status, frozenset((e, 1) for e, _ in t.tuples)) for t in usable]
    by_name = {t.item.name: t for t in usable}
    kept = minimize((t.item.name, len(t.item.data), t.tuples) for t in usable)
    to.mkdir(parents=True, exist_ok=True)
    for name in kept:
        (to / name).write_bytes(by_name[name].item.data)
    tuples = frozenset().union(*(t.tuples for t in usable)) if usable else frozenset()
    return {"entries": len(items), "kept": len(kept), "tuples": len(tuples),
            "edges": len({e for e, _ in tuples}), "crashed": sum(t.status == "crash" for t in traced),
            "hung": sum(t.status == "hang" for t in traced),
            "bytes_in": sum(len(t.item.data) for t in usable),
            "bytes_kept": sum(len(by_name[n].item.data) for n in kept)}


def run_cmin(args) -> int:  # noqa: ANN001 - argparse.Namespace
    to = Path(args.to)
    try:
        campaign = CampaignDir.open(args.outdir)
        if campaign.python is campaign.native:
            raise CampaignDirError(f"{campaign.root}: a {campaign.executor} campaign has no target to trace")
        if to.exists() and (not to.is_dir() or any(to.iterdir())):
            raise CampaignDirError(f"--to: {to} exists and is not an empty directory")
        targets = [campaign.check_target(args.target)] if args.target else campaign.targets
        corpus = campaign.corpus()
        reports = {}
        for target in targets:
            items = [i for i in corpus if i.target == target]
            if not items:
                continue
            folder = to if len(targets) == 1 else to / _safe(target)
            reports[target] = cmin_target(campaign, target, items, folder, edges_only=args.edges_only,
                                          afl_binary=args.afl_binary, oracle=args.oracle)
    except CampaignDirError as exc:
        print(f"symfence cmin: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if not reports:
        print(f"symfence cmin: {campaign.root} has no corpus entries", file=sys.stderr)
        return EXIT_NOTHING
    for target, r in reports.items():
        unit = "edges" if args.edges_only else "tuples"
        left = f"; left out: {r['crashed']} crashing, {r['hung']} hanging" if r["crashed"] or r["hung"] \
            else ""
        print(f"{target}: {r['entries']} corpus entries -> {r['kept']} kept"
              f" ({r['bytes_kept']} of {r['bytes_in']}"
              f" bytes), {r[unit]} {unit} ({r['edges']} edges) kept{left}")
    print(f"written to {to}/")
    return EXIT_OK if any(r["kept"] for r in reports.values()) else EXIT_NOTHING
