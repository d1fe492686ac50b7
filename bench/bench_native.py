"""Native targets side by side in one run: executions/s on 1 and 2 workers, triage cost per
input (forkserver vs one afl-showmap per input), and time to each planted bug for symfence
alone, afl-fuzz alone and both together with the same wall-clock budget and core count.

    python -m bench.bench_native [--budget 60]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import tempfile
import time
import tomllib
from pathlib import Path

from bench.common import campaign, machine, save
from symfence.coordinator.aflsync import AFL_ENV  # the environment of the launched instances
from tests.mpi_helpers import ROOT

BUGS = {  # (target, kind): the planted bug
    ("record", "crash"): "RecordChecksumBug (SIGSEGV)",
    ("record", "hang"): "RecordLoopBug (hang)",
    ("tlv", "crash"): "TlvDepthBug (SIGABRT)",
}


def build() -> Path:
    import sys
    sys.path.insert(0, str(ROOT))
    from examples.native.build import build as build_examples

    out = Path(tempfile.mkdtemp(prefix="bench-native-"))
    build_examples(out)
    return out


def native_cfg(targets: list[str], budget: float, **afl) -> dict:
    cfg = tomllib.loads((ROOT / "configs" / "native.toml").read_text())
    cfg["campaign"]["targets"] = targets
    cfg["campaign"]["duration_s"] = budget
    cfg["stats"] = {"interval_s": 0.5}
    if afl:
        cfg["afl"] = afl
    return cfg


def symfence_finds(run, bins: Path) -> dict[tuple[str, str], float]:
    """(target, kind) -> seconds to the first finding, from the coordinator's finding events."""
    found: dict[tuple[str, str], float] = {}
    for e in run.events():
        if e.get("event") in ("finding.crash", "finding.hang"):
            key = (Path(e["target"]).name, e["event"].split(".")[1])
            found.setdefault(key, float(e["found_s"]))
    return found


def afl_finds(out: Path, name: str) -> dict[tuple[str, str], float]:
    """(target, kind) -> seconds, from afl-fuzz's crash/hang names (time:<ms since its start>)."""
    found: dict[tuple[str, str], float] = {}
    for inst in out.iterdir() if out.is_dir() else ():
        for kind, folder in (("crash", "crashes"), ("hang", "hangs")):
            for f in (inst / folder).glob("id:*"):
                m = re.search(r"time:(\d+)", f.name)
                if m:
                    t = int(m.group(1)) / 1000
                    found[(name, kind)] = min(found.get((name, kind), t), t)
    return found


def run_afl(binary: Path, name: str, budget: float, instances: int, tmp: Path) -> dict:
    seeds = tmp / f"seeds-{name}"
    seeds.mkdir(parents=True, exist_ok=True)
    (seeds / "zero").write_bytes(bytes(32))
    out = tmp / f"afl-{name}"
    env = {**os.environ, **AFL_ENV}
    procs = [subprocess.Popen(["afl-fuzz", "-S", f"a{i}", "-i", str(seeds), "-o", str(out), "-t", "1000",
                               "-V", str(int(budget)), "--", str(binary)], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for i in range(instances)]
    for p in procs:
        try:
            p.wait(timeout=budget + 30)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    execs = 0
    for inst in out.iterdir():
        stats = (inst / "fuzzer_stats").read_text() if (inst / "fuzzer_stats").exists() else ""
        m = re.search(r"execs_done\s*:\s*(\d+)", stats)
        execs += int(m.group(1)) if m else 0
    return {"found": afl_finds(out, name), "execs": execs}


def triage_cost(bins: Path, corpus: list[bytes]) -> list[list]:
    from symfence.worker.native.forkserver import ForkserverOracle
    from symfence.worker.native.showmap import ShowmapOracle

    rows = []
    for name in ("record", "tlv"):
        binary = str(bins / f"{name}.afl")
        fs, sm = ForkserverOracle(binary, exec_timeout_s=1.0), ShowmapOracle(binary, exec_timeout_s=1.0)
        try:
            inputs = [d for d in corpus if b"LOOP" not in d] * 3  # no hangs: they cost the time-out
            fs.run(inputs[0])  # start the forkserver outside the timing
            t0 = time.perf_counter()
            for d in inputs:
                fs.run(d)
            fs_ms = (time.perf_counter() - t0) / len(inputs) * 1000
            t0 = time.perf_counter()
            for d in inputs:
                sm.run(d)
            sm_ms = (time.perf_counter() - t0) / len(inputs) * 1000
            same = all(fs.run(d).trace == sm.run(d).trace for d in inputs[:50])
        finally:
            fs.close()
            sm.close()
        rows.append([f"{name}.afl", len(inputs), f"{fs_ms:.3f}", f"{sm_ms:.2f}", f"{sm_ms / fs_ms:.0f}x",
                     "yes" if same else "NO"])
    return rows


def fmt(found: dict, key: tuple[str, str], budget: float) -> str:
    return f"{found[key]:.1f} s" if key in found else f"not found in {budget:g} s"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--budget", type=float, default=60.0, help="seconds per configuration and target")
    args = p.parse_args()
    budget = args.budget
    if not shutil.which("afl-fuzz"):
        raise SystemExit("bench_native needs AFL++ (make afl)")
    bins = build()
    tmp = Path(tempfile.mkdtemp(prefix="bench-native-runs-"))
    targets = [str(bins / "record"), str(bins / "tlv")]

    # 1. executions/s, 1 vs 2 workers (forkserver oracle; the campaign ends when work is exhausted)
    speed_rows, corpus, solo = [], [], {}
    for ranks in (2, 3):
        t0 = time.monotonic()
        run = campaign(tmp / f"speed-{ranks}", native_cfg(targets, budget), ranks=ranks, timeout_s=budget + 120)
        wall = time.monotonic() - t0
        st = run.stats()
        execs = int(st.get("execs_done", 0))
        run_s = float(st.get("run_time", wall))
        found = symfence_finds(run, bins)
        if ranks == 3:
            solo = found
            corpus = [p.read_bytes() for p in (run.out / "queue").iterdir() if p.is_file()]
        speed_rows.append([f"{ranks - 1} worker(s) (ranks={ranks})", execs, f"{run_s:.1f}",
                           f"{execs / max(run_s, 1e-9):.1f}", int(st.get("corpus_count", 0)),
                           len(found), f"{wall:.1f}"])
    speed = save("native_speed", ["configuration", "execs", "campaign s", "execs/s", "corpus", "bugs found",
                                  "wall s (incl. start-up)"], speed_rows)

    # 2. triage cost per input
    triage = save("native_triage", ["AFL build", "inputs", "forkserver ms/input", "afl-showmap ms/input",
                                    "ratio", "identical maps"], triage_cost(bins, corpus))

    # 3. time to each planted bug: symfence alone (2 workers), afl-fuzz alone (2 instances),
    #    both (symfence 1 worker + 1 afl-fuzz -S through a sync dir); each per target, same budget.
    alone, both = {}, {}
    for t in targets:
        name = Path(t).name
        alone.update(run_afl(Path(f"{t}.afl"), name, budget, 2, tmp)["found"])
        sync = tmp / f"sync-{name}"
        run = campaign(tmp / f"both-{name}", native_cfg([t], budget, sync_dir=str(sync), launch=1,
                                                         import_interval_s=1.0), ranks=2, timeout_s=budget + 120)
        found = symfence_finds(run, bins)
        for key, s in afl_finds(sync, name).items():  # the launched instance's own finds count too
            found[key] = min(found.get(key, s), s)
        both.update(found)
    rows = [[bug, fmt(solo, key, budget), fmt(alone, key, budget), fmt(both, key, budget)]
            for key, bug in BUGS.items()]
    bugs = save("native_bugs", ["planted bug", "symfence alone (2 workers)", "afl-fuzz alone (2 instances)",
                                "both (1 worker + 1 afl-fuzz -S)"], rows, {"budget_s": budget})
    print(f"machine: {machine()}\n\n{speed}\n\n{triage}\n\n{bugs}")


if __name__ == "__main__":
    main()
