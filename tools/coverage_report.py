"""`symfence coverage OUT --html DIR`: a line-coverage report of the code under test over the corpus.

Python targets: the corpus (``queue/``) and the saved crashes are replayed, in a fresh process,
by the benchmarks' own yardstick (``symfence.tools.linecov``: coverage.py over the harness's
``MODULES``, else the target's module), so the covered-lines figure is the one the benchmarks
report; coverage.py writes the HTML (``DIR/index.html``) and JSON (``DIR/coverage.json``)
reports of that same measurement, and ``DIR/symfence-coverage.json`` holds the figure. Per input
the campaign's time limit applies times the tracer's slack (``worker.executors.traced``).

Native targets: a ``--coverage`` build of the target (``--gcov-binary``, e.g. ``cc --coverage -O0
-g -o tlv.cov tlv.c``) runs every input once in a fresh process (its ``.gcda`` counters are reset
first, so the report counts this corpus only), then ``gcovr`` writes ``DIR/index.html`` (with a
page per source file) and ``DIR/coverage-summary.json``. A crashing or hanging run writes no
counters (the process dies before its exit handlers), so only inputs that end count.

A campaign with several targets gets one folder per target (``--target`` picks one). Exit
status: 0 written, 1 the measurement failed, 2 usage (no campaign, no such target, no build).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from symfence.tools.campaign_dir import CampaignDir, CampaignDirError, SavedInput

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
SUMMARY = "symfence-coverage.json"


class MeasureError(Exception):
    """The measurement itself failed (the target raised at import, gcovr failed), one line."""


def _inputs(campaign: CampaignDir, target: str) -> list[SavedInput]:
    """What the benchmarks replay of a campaign: its corpus and its crashes (not its hangs)."""
    return [i for i in campaign.corpus() + campaign.findings() if i.target == target and i.kind != "hang"]


def _write_inputs(items: list[SavedInput], folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for item in items:
        path = folder / f"{item.kind}-{item.ident:06d}"
        path.write_bytes(item.data)
        paths.append(str(path))
    listing = folder / "listing.txt"
    listing.write_text("\n".join(paths))
    return listing


def python_report(campaign: CampaignDir, target: str, items: list[SavedInput], html: Path,
                  modules: list[str]) -> dict:
    from symfence.protocol.childenv import child_env
    from symfence.worker.executors.traced import TRACE_SLACK

    def linecov(*args: str) -> str:
        proc = subprocess.run([sys.executable, "-m", "symfence.tools.linecov", *args], capture_output=True,
                              text=True, env=child_env(), stdin=subprocess.DEVNULL)
        if proc.returncode != 0:
            why = (proc.stderr.strip().splitlines() or [f"exit status {proc.returncode}"])[-1]
            raise MeasureError(f"target {target}: the coverage replay failed: {why}")
        return proc.stdout.strip().splitlines()[-1]

    # The default modules are found by importing the target: in a process of their own, so the
    # measuring one imports it under coverage.py (its module-level lines count, as in the bench).
    modules = modules or json.loads(linecov("--modules-of", target))
    with tempfile.TemporaryDirectory(prefix="symfence-coverage-") as tmp:
        listing = _write_inputs(items, Path(tmp))
        html.mkdir(parents=True, exist_ok=True)
        result = json.loads(linecov(target, repr(campaign.timeout_s * TRACE_SLACK), str(listing),
                                    "--modules", ",".join(modules), "--html", str(html),
                                    "--json", str(html / "coverage.json")))
    result["exceptions"] = len(result["exceptions"])
    (html / SUMMARY).write_text(json.dumps(result, indent=1) + "\n")
    return result


def native_report(campaign: CampaignDir, target: str, items: list[SavedInput], html: Path,
                  binary: str, source_root: Path) -> dict:
    from symfence.protocol.options import NativeOptions
    from symfence.worker.native.plain import run_plain

    build = Path(binary).resolve()
    if not build.is_file():
        raise CampaignDirError(f"--gcov-binary: {binary} does not exist")
    objects = build.parent
    if not any(objects.glob("*.gcno")):
        raise CampaignDirError(f"--gcov-binary: no .gcno file beside {binary}: build it with cc --coverage")
    for stale in objects.glob("*.gcda"):
        stale.unlink()
    opts = NativeOptions.from_mapping(campaign.cfg["native.options"])
    for item in items:
        run_plain(str(build), item.data, input_mode=opts.input, timeout_s=campaign.timeout_s,
                  mem_limit_mb=opts.target_mem_limit_mb)
    html.mkdir(parents=True, exist_ok=True)
    summary = html / "coverage-summary.json"
    cmd = [sys.executable, "-m", "gcovr", "--root", str(source_root),
           "--html-details", str(html / "index.html"),
           "--json-summary", str(summary), "--json-summary-pretty", str(objects)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    except OSError as exc:
        raise MeasureError(f"cannot run gcovr: {exc}") from None
    if proc.returncode != 0 or not summary.is_file():
        why = (proc.stderr.strip().splitlines() or [f"exit status {proc.returncode}"])[-1]
        raise MeasureError(f"gcovr failed: {why} (pip install gcovr; it runs the gcov of your compiler)")
    data = json.loads(summary.read_text())
    result = {"target": target, "inputs": len(items), "lines": data["line_covered"],
              "statements": data["line_total"],
              "per_file": {f["filename"]: f["line_covered"] for f in data["files"] if f["line_covered"]}}
    (html / SUMMARY).write_text(json.dumps(result, indent=1) + "\n")
    return result


def _safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", text.replace(":", "."))[:80]


def run_coverage(args) -> int:  # noqa: ANN001 - argparse.Namespace
    html = Path(args.html)
    try:
        campaign = CampaignDir.open(args.outdir)
        if campaign.python is campaign.native:
            raise CampaignDirError(f"{campaign.root}: a {campaign.executor} campaign has no code under test")
        if campaign.native and not args.gcov_binary:
            raise CampaignDirError("--gcov-binary: a native campaign's report needs a --coverage build of the"
                                   " target (cc --coverage -O0 -g -o T.cov T.c)")
        targets = [campaign.check_target(args.target)] if args.target else campaign.targets
        if campaign.native and len(targets) > 1:
            raise CampaignDirError("--target: a --gcov-binary is the build of one target; name it")
        results = {}
        for target in targets:
            folder = html if len(targets) == 1 else html / _safe(target)
            items = _inputs(campaign, target)
            if campaign.native:
                results[target] = native_report(campaign, target, items, folder, args.gcov_binary,
                                                Path(args.source_root or ".").resolve())
            else:
                modules = [m for m in (args.modules or "").split(",") if m]
                results[target] = python_report(campaign, target, items, folder, modules)
            results[target]["report"] = str(folder / "index.html")
    except CampaignDirError as exc:
        print(f"symfence coverage: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except MeasureError as exc:
        print(f"symfence coverage: {exc}", file=sys.stderr)
        return EXIT_FAILED
    for target, r in results.items():
        share = f" ({100 * r['lines'] / r['statements']:.1f}%)" if r["statements"] else ""
        print(f"{target}: {r['lines']} of {r['statements']} lines covered{share} by {r['inputs']} inputs;"
              f" report: {r['report']}")
    return EXIT_OK

