"""Recovery benchmark: time from a worker's death (or freeze) to its work being re-dispatched,
and what CANCEL saves by aborting a running concolic task instead of letting it finish.

- ULFM (Open MPI venv, `--with-ft ulfm`): a worker is SIGKILLed after 200 commits.
- Heartbeats (MPICH): a worker is frozen with SIGSTOP; heartbeat 0.1 s, lost after 0.5 s.
- Abort: a slow target run is cancelled 0.5 s in (a dispatch deadline); we time `abort()`,
  the next task's round trip on the replaced child, and the CPU the full run would have spent.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import tempfile
import threading
import time
from pathlib import Path

from bench.common import save
from tests.mpi_helpers import OMPI_MPIEXEC, OMPI_PYTHON, read_committed, run_campaign, synthetic_cfg


def _events(out: Path) -> list[dict]:
    return [json.loads(l) for l in (out / "logs" / "coordinator.jsonl").read_text().splitlines()]


def _pid(out: Path, rank: int) -> int | None:
    try:
        return next(e["pid"] for e in _events(out) if e["event"] == "worker.ready" and e["worker"] == rank)
    except (OSError, StopIteration, json.JSONDecodeError):
        return None


def worker_loss(tmp: Path, mode: str) -> tuple[float, float, int]:
    """(kill -> worker.lost, kill -> first re-dispatch, dispatches requeued) in seconds."""
    out = tmp / "out"
    cfg = synthetic_cfg(synthetic={"seeds": 3000, "task_ms": 5.0}, dispatch={"depth": 4},
                        workers={"heartbeat_s": 0.1, "lost_after_s": 0.5 if mode == "heartbeat" else 30.0})
    killed_at: list[float] = []

    def killer() -> None:
        while True:
            pid = _pid(out, 2)
            if pid and read_committed(out) >= 200:
                killed_at.append(time.time())
                os.kill(pid, signal.SIGKILL if mode == "ulfm" else signal.SIGSTOP)
                if mode == "heartbeat":
                    time.sleep(1.5)
                    os.kill(pid, signal.SIGCONT)
                return
            time.sleep(0.01)

    threading.Thread(target=killer, daemon=True).start()
    if mode == "ulfm":
        run = run_campaign(tmp, cfg, ranks=4, out=out, mpiexec=OMPI_MPIEXEC, python=OMPI_PYTHON,
                           mpiexec_args=["--with-ft", "ulfm", "--oversubscribe", "--bind-to", "none"],
                           env={"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
                                "OMPI_MCA_pml": "ob1", "OMPI_MCA_btl": "self,sm"})
    else:
        run = run_campaign(tmp, cfg, ranks=4, out=out)
    if run.code != 0:
        raise SystemExit(f"{mode} run failed:\n{run.stderr[-2000:]}")
    events = _events(out)
    lost = next(e for e in events if e["event"] == "worker.lost")
    redispatch = next(e for e in events if e["event"] == "task.redispatched")
    return lost["ts"] - killed_at[0], redispatch["ts"] - killed_at[0], lost["requeued"]


def abort_cost() -> dict[str, float]:
    from symfence.worker.executors.base import Task
    from symfence.worker.executors.concolic import ConcolicExecutor

    opts = {"exec_timeout_s": 60.0}
    slow = Task("0" * 64, "1" * 64, b"\x01", "bench.slow_target:target", 0, opts)
    quick = Task("0" * 64, "2" * 64, b"\x00", "examples.checksum:target", 0, {})
    with ConcolicExecutor() as ex:
        ex.start(quick)
        while ex.wait(0.5) is None:
            pass  # warm: child started, engine loaded
        t0 = time.monotonic()
        ex.start(slow)
        while ex.wait(0.5) is None:
            pass
        full_s = time.monotonic() - t0
        ex.start(slow)
        ex.wait(0.5)  # the deadline passes half a second in
        t1 = time.monotonic()
        ex.abort()
        abort_s = time.monotonic() - t1
        ex.start(quick)
        while ex.wait(0.05) is None:
            pass
        next_s = time.monotonic() - t1
    return {"full_task_s": full_s, "abort_s": abort_s, "next_task_after_abort_s": next_s,
            "cpu_saved_s": full_s - 0.5 - abort_s}


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=3)
    args = p.parse_args(argv)
    rows = []
    modes = ["heartbeat"] + (["ulfm"] if OMPI_MPIEXEC else [])
    raw: dict[str, list] = {}
    for mode in modes:
        samples = []
        for i in range(args.repeat):
            with tempfile.TemporaryDirectory() as tmp:
                samples.append(worker_loss(Path(tmp), mode))
        raw[mode] = samples
        detect = statistics.median(s[0] for s in samples)
        redispatch = statistics.median(s[1] for s in samples)
        label = {"heartbeat": "MPICH, frozen worker (heartbeat 0.1 s, lost after 0.5 s)",
                 "ulfm": "Open MPI --with-ft ulfm, SIGKILLed worker"}[mode]
        rows.append([label, f"{1000 * detect:.0f} ms", f"{1000 * redispatch:.0f} ms",
                     statistics.median(s[2] for s in samples)])
    print(save("recovery", ["worker loss", "kill -> worker.lost", "kill -> first re-dispatch",
                            "dispatches requeued"], rows, {"samples": raw, "repeat": args.repeat}))
    a = abort_cost()
    print()
    print(save("abort", ["full slow task", "abort()", "next task done after abort", "CPU saved per cancelled task"],
               [[f"{a['full_task_s']:.2f} s", f"{1000 * a['abort_s']:.1f} ms", f"{1000 * a['next_task_after_abort_s']:.0f} ms",
                 f"{a['cpu_saved_s']:.2f} s"]], a))


if __name__ == "__main__":
    main()
