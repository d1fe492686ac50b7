"""A command that follows SymCC's environment contract with TritonDSE underneath, so the SymCC
adapter runs (and is tested) on machines without a SymCC build.

    python -m symfence.worker.native.symcc_tritondse TARGET [ARG ...]

Like a SymCC-built TARGET: reads the input from ``SYMCC_INPUT_FILE`` (else stdin), writes each
new input to ``SYMCC_OUTPUT_DIR`` as ``000000``, ``000001``, ... (the directory must exist),
skips branches whose AFL edge is already set in ``SYMCC_AFL_COVERAGE_MAP`` and sets the edges
it ran, and ends the way the program ended on that input (its exit code or its signal).
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

MAP_BYTES = 1 << 16


def main(argv: list[str]) -> int:
    if not argv:
        print("usage: symcc_tritondse TARGET [ARG ...]", file=sys.stderr)
        return 2
    from symfence.worker.native.base import NativeError, NativeOptions, RunKind
    from symfence.worker.native.tritondse_engine import TritonDseEngine, edge_index

    input_file = os.environ.get("SYMCC_INPUT_FILE")
    data = Path(input_file).read_bytes() if input_file else sys.stdin.buffer.read()
    out_dir = Path(os.environ.get("SYMCC_OUTPUT_DIR", "/tmp/output"))
    if not out_dir.is_dir():
        print(f"symcc_tritondse: SYMCC_OUTPUT_DIR {out_dir} does not exist", file=sys.stderr)
        return 2
    map_path = os.environ.get("SYMCC_AFL_COVERAGE_MAP")
    covered = bytearray(MAP_BYTES)
    if map_path and os.path.exists(map_path):
        covered[:] = Path(map_path).read_bytes()[:MAP_BYTES].ljust(MAP_BYTES, b"\0")
    try:
        engine = TritonDseEngine(argv[0], NativeOptions())
        run = engine.explore(data, 0, skip_site=lambda src, dst: bool(covered[edge_index(src, dst)]))
    except NativeError as exc:
        print(f"symcc_tritondse: {exc}", file=sys.stderr)
        return 3
    for i, cand in enumerate(run.candidates):
        tmp = out_dir / f".{i:06d}"
        tmp.write_bytes(cand.data)
        os.replace(tmp, out_dir / f"{i:06d}")
    if map_path:
        for index in run.own.trace:
            covered[index] = 1
        tmp_map = f"{map_path}.tmp"
        Path(tmp_map).write_bytes(bytes(covered))
        os.replace(tmp_map, map_path)
    if run.own.kind is RunKind.CRASH and run.own.signal:
        sys.stdout.flush()
        signal.signal(run.own.signal, signal.SIG_DFL)
        os.kill(os.getpid(), run.own.signal)
    if run.own.kind is RunKind.HANG:
        signal.pause()  # like the real program: never returns (the caller's time-out ends it)
    return run.own.exit_code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
