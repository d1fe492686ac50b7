"""One yardstick for every fuzzer's output: replay a corpus under coverage.py, count lines, name exceptions.

``python -m bench.parser_replay TARGET MODULES START_TS FILE...`` (or ``@LISTING``) (run in a fresh process by
bench.bench_parsers, one per run) imports the harness with coverage.py measuring the parser's
own modules (``MODULES``, comma-separated: a package counts all of its files), runs the harness
on every file and prints one JSON object: lines covered per module file and in total, the
statements coverage.py finds in those files, and every distinct unexpected exception (signature
= exception type + innermost frame) with the earliest file that raised it and that file's time
(its mtime minus ``START_TS``: when the fuzzer wrote it). An input still running after
``REPLAY_TIMEOUT_S`` is abandoned and counted as a hang (coverage up to that point counts).
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import signal
import sys
import traceback
from pathlib import Path

import coverage

REPLAY_TIMEOUT_S = 5.0  # under coverage.py a run is slower than the fuzzers' 1 s limit


class ReplayTimeout(BaseException):
    """Raised by SIGALRM in a replay that overran REPLAY_TIMEOUT_S."""


def signature(exc: BaseException) -> str:
    """Exception type + innermost frame (file:line in function): one bug, however it was reached."""
    frames = traceback.extract_tb(exc.__traceback__)
    where = f"{frames[-1].filename}:{frames[-1].lineno} in {frames[-1].name}" if frames else "?"
    return f"{type(exc).__module__}.{type(exc).__qualname__} @ {where}"


def module_files(names: list[str]) -> list[str]:
    """The source files of the named modules; a package contributes every .py file below it."""
    files: list[str] = []
    for name in names:
        spec = importlib.util.find_spec(name)
        if spec is None or spec.origin is None:
            raise SystemExit(f"parser_replay: no source for module {name!r}")
        if spec.submodule_search_locations:
            for location in spec.submodule_search_locations:
                files += sorted(str(p) for p in Path(location).rglob("*.py"))
        else:
            files.append(spec.origin)
    return files


def _alarm(signum, frame):  # noqa: ANN001
    raise ReplayTimeout()


def replay(spec: str, modules: list[str], start_ts: float, paths: list[Path]) -> dict:
    files = module_files(modules)
    cov = coverage.Coverage(data_file=None, config_file=False, include=files)
    found: dict[str, dict] = {}
    hangs = 0
    signal.signal(signal.SIGALRM, _alarm)
    # Oldest first, so the file credited with an exception is the first one written.
    paths = sorted(paths, key=lambda p: (p.stat().st_mtime, p.name))
    cov.start()
    try:
        module_name, _, function_name = spec.partition(":")
        harness = getattr(importlib.import_module(module_name), function_name)
        for path in paths:
            data = path.read_bytes()
            signal.setitimer(signal.ITIMER_REAL, REPLAY_TIMEOUT_S, 0.1)
            try:
                harness(data)
            except ReplayTimeout:
                hangs += 1
            except RecursionError as exc:
                found.setdefault(signature(exc), {"file": str(path), "found_s": path.stat().st_mtime - start_ts})
            except Exception as exc:  # noqa: BLE001 (every escaping exception is a finding)
                found.setdefault(signature(exc), {"file": str(path), "found_s": path.stat().st_mtime - start_ts})
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
    finally:
        cov.stop()
    per_file = {}
    statements = 0
    for f in files:
        _, executable, _, missing, _ = cov.analysis2(f)
        statements += len(executable)
        if len(executable) > len(missing):
            per_file[f] = len(executable) - len(missing)
    return {"target": spec, "modules": modules, "inputs": len(paths), "hangs": hangs,
            "lines": sum(per_file.values()), "statements": statements, "per_file": per_file,
            "exceptions": dict(sorted(found.items(), key=lambda kv: kv[1]["found_s"]))}


def main() -> None:
    spec, modules, start_ts, *files = sys.argv[1:]
    if len(files) == 1 and files[0].startswith("@"):  # a file listing one path per line
        files = [line for line in Path(files[0][1:]).read_text().splitlines() if line]
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 1000))
    print(json.dumps(replay(spec, modules.split(","), float(start_ts), [Path(f) for f in files])))


if __name__ == "__main__":
    main()
