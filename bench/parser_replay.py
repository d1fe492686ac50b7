"""One yardstick for every fuzzer's output: replay a corpus under coverage.py, count lines, name exceptions.

``python -m bench.parser_replay TARGET MODULES START_TS FILE...`` (or ``@LISTING``) (run in a fresh process by
bench.bench_parsers, one per run) prints one JSON object: lines covered per module file and in
total, the statements coverage.py finds in those files, and every distinct unexpected exception
(signature = exception type + innermost frame) with the earliest file that raised it and that
file's time (its mtime minus ``START_TS``: when the fuzzer wrote it). The measurement itself is
``symfence.tools.linecov.measure`` (the same one ``symfence coverage`` reports), with
``REPLAY_TIMEOUT_S`` per input; files are replayed oldest first, so the file credited with an
exception is the first one written.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from symfence.tools.linecov import measure, module_files, signature  # noqa: F401 - the bench's names

REPLAY_TIMEOUT_S = 5.0  # under coverage.py a run is slower than the fuzzers' 1 s limit


def replay(spec: str, modules: list[str], start_ts: float, paths: list[Path]) -> dict:
    paths = sorted(paths, key=lambda p: (p.stat().st_mtime, p.name))
    result = measure(spec, modules, ((str(p), p.read_bytes()) for p in paths), REPLAY_TIMEOUT_S)
    mtime = {str(p): p.stat().st_mtime for p in paths}
    found = {sig: {"file": name, "found_s": mtime[name] - start_ts}
             for sig, name in result["exceptions"].items()}
    return {**result, "exceptions": dict(sorted(found.items(), key=lambda kv: kv[1]["found_s"]))}


def main() -> None:
    spec, modules, start_ts, *files = sys.argv[1:]
    if len(files) == 1 and files[0].startswith("@"):  # a file listing one path per line
        files = [line for line in Path(files[0][1:]).read_text().splitlines() if line]
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 1000))
    print(json.dumps(replay(spec, modules.split(","), float(start_ts), [Path(f) for f in files])))


if __name__ == "__main__":
    main()
