"""Minimization benchmark: each demo and example crash, padded with noise, minimized by symfence's
minimizer (worker/triage/minimize_child.py) and, on the native examples, by afl-tmin alone.

    python -m bench.bench_minimize          (table on stdout, JSON in bench/results/minimize.json)

No MPI: the minimizer a worker runs for a minimization task, called directly.
"""

from __future__ import annotations

import json
import random
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"


def _noise(n: int, seed: int) -> bytes:
    return random.Random(seed).randbytes(n)


def _checksum_crash() -> bytes:
    payload = b"X" + (0x1337).to_bytes(2, "little") + b"\x01"
    return (sum(payload) & 0xFFFF).to_bytes(2, "big") + payload


@dataclass(frozen=True)
class Case:
    name: str
    target: str  # "module:function", or a native example's name (built by examples/native/build.py)
    data: bytes  # a crashing input: the bug's trigger followed by noise the bug does not need
    minimal: int  # the smallest crashing input's size, by reading the target
    native: bool = False


CASES = (
    Case("magic_header", "examples.magic_header:target", b"SYMF\x03\xef\xbe!" + _noise(200, 1), 8),
    # checksum: the payload sum must match, so the noise goes into a second, ignored copy
    Case("checksum", "examples.checksum:target", _checksum_crash() + b"\x00" * 120, 6),
    Case("tlv", "examples.tlv:target", b"\x01\x06\x02\x04\x0b\xad\xf0\x0d" + _noise(150, 2), 8),
    Case("record (native)", "record", b"SFRC" + (0xC0FFEE42).to_bytes(4, "little") + bytes([2, 0x99])
         + b"!x" + _noise(120, 3), 12, native=True),
    Case("tlv (native)", "tlv", b"C\x08C\x06I\x04\x0b\xad\xf0\x0d" + b"\x00" * 100, 10, native=True),
)


def run_minimizer(case: Case, binary_dir: Path | None, budget_s: float = 60.0) -> dict:
    from symfence.worker.triage.minimize_child import run_spec

    target = str(binary_dir / case.target) if case.native else case.target
    spec = {"target": target, "kind": "crash", "identity": "", "data": case.data.hex(), "budget_s": budget_s,
            "executor": "native" if case.native else "concolic",
            "options": {"exec_timeout_s": 1.0, "input": "stdin"} if case.native else {"exec_timeout_s": 1.0}}
    t0 = time.monotonic()
    result = run_spec(spec)
    return {**result, "wall_s": time.monotonic() - t0}


def run_afl_tmin(case: Case, binary_dir: Path) -> dict | None:
    tool = shutil.which("afl-tmin")
    afl = binary_dir / f"{case.target}.afl"
    if tool is None or not afl.exists():
        return None
    with tempfile.TemporaryDirectory() as tmp:
        src, dst = Path(tmp) / "in", Path(tmp) / "out"
        src.write_bytes(case.data)
        t0 = time.monotonic()
        subprocess.run([tool, "-i", str(src), "-o", str(dst), "-t", "1000", "--", str(afl)], capture_output=True,
                       timeout=120, env={"AFL_SKIP_CPUFREQ": "1", "AFL_NO_AFFINITY": "1", "PATH": "/usr/bin:/bin"})
        return {"size": len(dst.read_bytes()) if dst.exists() else None, "wall_s": time.monotonic() - t0}


def main() -> int:
    sys.path.insert(0, str(ROOT))
    from examples.native.build import build

    binary_dir = Path(tempfile.mkdtemp(prefix="symfence-bench-min-"))
    build(binary_dir, afl=shutil.which("afl-cc") is not None)
    rows = []
    for case in CASES:
        ours = run_minimizer(case, binary_dir)
        tmin = run_afl_tmin(case, binary_dir) if case.native else None
        size = len(bytes.fromhex(ours["data"])) if "data" in ours else None
        rows.append({"case": case.name, "original": len(case.data), "minimal": case.minimal, "minimized": size,
                     "wall_s": round(ours["wall_s"], 2), "execs": ours.get("execs"), "used_afl_tmin": ours.get("afl_tmin"),
                     "identity": ours.get("identity"), "afl_tmin_size": tmin and tmin["size"],
                     "afl_tmin_wall_s": tmin and round(tmin["wall_s"], 2), "error": ours.get("error")})
    head = f"{'case':<18} {'original':>8} {'minimal':>7} {'symfence':>8} {'time_s':>7} {'execs':>6} {'afl-tmin':>8} {'time_s':>7}"
    print(head)
    for r in rows:
        print(f"{r['case']:<18} {r['original']:>8} {r['minimal']:>7} {str(r['minimized']):>8} {r['wall_s']:>7} "
              f"{str(r['execs']):>6} {str(r['afl_tmin_size'] or '-'):>8} {str(r['afl_tmin_wall_s'] or '-'):>7}")
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "minimize.json").write_text(json.dumps({"when": time.strftime("%Y-%m-%d %H:%M:%S"), "rows": rows},
                                                      indent=2))
    shutil.rmtree(binary_dir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
