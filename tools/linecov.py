"""The line-coverage yardstick: inputs replayed under coverage.py, the lines of the code under test covered.

One computation for every figure of "lines covered": the benchmarks (``bench/parser_replay.py``
over every fuzzer's output) and ``symfence coverage`` (a campaign's corpus, with an HTML and a
JSON report of the same ``coverage.Coverage`` object). The harness is imported with coverage.py
measuring the code under test's files (``modules``, a package counts all of its files; by
default a harness's ``MODULES`` list, else the target's own module), every input runs once (an
input still running after ``timeout_s`` is abandoned and counted as a hang; its lines up to then
count), and every distinct escaping exception (type + innermost frame) is named with the first
input that raised it. Run it in a fresh process: it imports the target.

    python -m symfence.tools.linecov TARGET TIMEOUT_S LISTING --modules M,.. [--html DIR] [--json FILE]
    python -m symfence.tools.linecov --modules-of TARGET

(LISTING: a file of input paths, one a line) prints the measurement as one JSON object; the
second form prints the default module list (it imports the target, so it is a process of its own).
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import signal
import sys
import traceback
from pathlib import Path
from typing import Iterable

from symfence.worker import atheris_compat, target_exit

import coverage
import coverage.exceptions


class ReplayTimeout(BaseException):
    """Raised by SIGALRM in a replay that overran its time limit."""


def signature(exc: BaseException) -> str:
    """Exception type + innermost frame (file:line in function): one bug, however it was reached."""
    frames = traceback.extract_tb(exc.__traceback__)
    where = f"{frames[-1].filename}:{frames[-1].lineno} in {frames[-1].name}" if frames else "?"
    return f"{type(exc).__module__}.{type(exc).__qualname__} @ {where}"


def default_modules(spec: str) -> list[str]:
    """The modules whose lines count for ``spec``: the harness's MODULES, else the target's own module."""
    module_name = spec.partition(":")[0]
    return list(getattr(importlib.import_module(module_name), "MODULES", (module_name,)))


def module_files(names: list[str]) -> list[str]:
    """The source files of the named modules; a package contributes every .py file below it."""
    files: list[str] = []
    for name in names:
        spec = importlib.util.find_spec(name)
        if spec is None or spec.origin is None:
            raise SystemExit(f"linecov: no source for module {name!r}")
        if spec.submodule_search_locations:
            for location in spec.submodule_search_locations:
                files += sorted(str(p) for p in Path(location).rglob("*.py"))
        else:
            files.append(spec.origin)
    return files


_armed = [False]  # inside the harness call: only there may the alarm interrupt


def _alarm(signum, frame):  # noqa: ANN001
    # The alarm repeats (a harness may swallow the first); one that lands after the call
    # returned or while the last one is handled must not escape the replay loop.
    if _armed[0]:
        raise ReplayTimeout()


def measure(spec: str, modules: list[str], inputs: Iterable[tuple[str, bytes]], timeout_s: float,
            *, html: Path | None = None, json_out: Path | None = None) -> dict:
    """Replay ``inputs`` (name, data), in order, on ``spec`` under coverage.py; see the module docstring.

    The target must not be imported yet (its module-level lines count). Returns lines covered
    per file and in total, the statements of those files, the hangs and ``exceptions``:
    signature -> the name of the first input raising it; ``not_python``: the package's ``.py``
    files that are not Python 3 source (left out of the count and the reports)."""
    files = module_files(modules)
    cov = coverage.Coverage(data_file=None, config_file=False, include=files)
    found: dict[str, str] = {}
    hangs = count = 0
    signal.signal(signal.SIGALRM, _alarm)
    atheris_compat.plain()  # a harness's libFuzzer-only calls (module-level Fuzz() too): no-ops
    target_exit.guard()  # an input that calls os._exit is an exception here, not the report's end
    cov.start()
    try:
        module_name, _, function_name = spec.partition(":")
        harness = getattr(importlib.import_module(module_name), function_name)
        for name, data in inputs:
            count += 1
            signal.setitimer(signal.ITIMER_REAL, timeout_s, 0.1)
            try:
                _armed[0] = True
                harness(data)
            except ReplayTimeout:
                hangs += 1
            except RecursionError as exc:
                found.setdefault(signature(exc), name)
            # Every escaping exception is a finding; a target's sys.exit or os._exit (target_exit.py)
            # too, which used to end the report.
            except (Exception, SystemExit, target_exit.TargetExited) as exc:  # noqa: BLE001
                found.setdefault(signature(exc), name)
            finally:
                _armed[0] = False
                signal.setitimer(signal.ITIMER_REAL, 0)
    finally:
        cov.stop()
    per_file = {}
    statements = 0
    measured, not_python = [], []
    for f in files:
        try:
            _, executable, _, missing, _ = cov.analysis2(f)
        except coverage.exceptions.NotPython:  # olefile ships a Python 2 olefile2.py: never run, no lines
            not_python.append(f)
            continue
        measured.append(f)
        statements += len(executable)
        if len(executable) > len(missing):
            per_file[f] = len(executable) - len(missing)
    if html is not None:
        cov.html_report(directory=str(html), include=measured, title=f"symfence coverage: {spec}")
    if json_out is not None:
        cov.json_report(outfile=str(json_out), include=measured)
    return {"target": spec, "modules": modules, "inputs": count, "hangs": hangs,
            "lines": sum(per_file.values()), "statements": statements, "per_file": per_file,
            "exceptions": found, "not_python": not_python}


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--modules-of"]:
        print(json.dumps(default_modules(argv[1])))
        return
    p = argparse.ArgumentParser(prog="python -m symfence.tools.linecov")
    p.add_argument("target")
    p.add_argument("timeout_s", type=float)
    p.add_argument("listing", help="a file of input paths, one a line")
    p.add_argument("--modules", required=True, help="comma-separated modules whose lines count")
    p.add_argument("--html")
    p.add_argument("--json")
    args = p.parse_args(argv)
    paths = [Path(line) for line in Path(args.listing).read_text().splitlines() if line]
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 1000))
    result = measure(args.target, [m for m in args.modules.split(",") if m],
                     ((str(p), p.read_bytes()) for p in paths), args.timeout_s,
                     html=Path(args.html) if args.html else None,
                     json_out=Path(args.json) if args.json else None)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
