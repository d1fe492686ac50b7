"""Worker loss: its dispatches are revoked and requeued and the campaign still completes.

- Heartbeat path (any MPI, here MPICH): a worker is frozen with SIGSTOP, so it stops talking
  without dying; after `lost_after_s` it is lost, its work is requeued, and when it is thawed
  it is taken back (its stale work cancelled, its late results fenced as `expired`).
- ULFM path (Open MPI, `mpiexec --with-ft ulfm`): a worker is SIGKILLed; MPI reports the
  failure to the coordinator's pump, which loses the worker at once.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path

import pytest

from symfence.coordinator.journal import Journal
from tests.mpi_helpers import OMPI_MPIEXEC, OMPI_PYTHON, read_committed, run_campaign, synthetic_cfg

pytestmark = pytest.mark.mpi


def worker_pid(logs: Path, rank: int) -> int | None:
    path = logs / "coordinator.jsonl"
    if not path.exists():
        return None
    for line in path.read_text().splitlines():
        e = json.loads(line)
        if e["event"] == "worker.ready" and e["worker"] == rank:
            return e["pid"]
    return None


def when_committed(out: Path, rank: int, n: int, action, done: threading.Event) -> None:
    """Once the campaign has committed `n` results, call action(pid of worker `rank`)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not done.is_set():
        pid = worker_pid(out / "logs", rank)
        if pid and read_committed(out) >= n:
            action(pid)
            return
        time.sleep(0.05)


def check_complete(run, seeds: int) -> dict[str, str]:
    assert "campaign finished: work exhausted" in run.stdout, run.stderr[-3000:]
    assert "VIOLATED" not in run.stdout
    s = run.stats()
    assert int(s["lost"]) >= 1  # the lost rank held dispatches (depth 4)
    assert int(s["committed"]) == seeds
    assert int(s["dispatched"]) == seeds + int(s["lost"])
    assert [e["worker"] for e in run.events() if e["event"] == "worker.lost"] == [2]
    redispatched = [e for e in run.events() if e["event"] == "task.redispatched"]
    assert len(redispatched) == int(s["lost"])
    journal = Journal.read_only(run.out / "journal.sqlite")
    assert journal.snapshot().done == seeds
    journal.close()
    return s


def test_frozen_worker_is_lost_requeued_and_taken_back(tmp_path):
    seeds = 1200  # ~2.5 s of work: the campaign outlasts the freeze
    cfg = synthetic_cfg(synthetic={"seeds": seeds, "task_ms": 5.0},
                        workers={"heartbeat_s": 0.1, "lost_after_s": 0.5}, dispatch={"depth": 4})
    out = tmp_path / "out"

    def freeze_then_thaw(pid: int) -> None:
        os.kill(pid, signal.SIGSTOP)
        time.sleep(1.5)
        os.kill(pid, signal.SIGCONT)

    done = threading.Event()
    threading.Thread(target=when_committed, args=(out, 2, 40, freeze_then_thaw, done), daemon=True).start()
    run = run_campaign(tmp_path, cfg, ranks=4, out=out, timeout_s=120)
    done.set()
    assert run.code == 0, run.explain()
    s = check_complete(run, seeds)
    assert [e["worker"] for e in run.events() if e["event"] == "worker.returned"] == [2]
    assert int(s["workers_alive"]) == 3
    # Whatever the thawed worker still sent for its revoked dispatches was fenced, not committed.
    assert int(s["quarantined_results"]) == int(s["quarantined_expired"])


@pytest.mark.skipif(OMPI_MPIEXEC is None, reason="needs the Open MPI venv (.venv-ompi, made by `make test`)")
def test_killed_worker_reported_by_ulfm_loses_no_work(tmp_path):
    seeds = 300
    cfg = synthetic_cfg(synthetic={"seeds": seeds, "task_ms": 5.0},
                        workers={"heartbeat_s": 0.2, "lost_after_s": 30.0}, dispatch={"depth": 4})
    out = tmp_path / "out"
    done = threading.Event()
    kill = lambda pid: os.kill(pid, signal.SIGKILL)  # noqa: E731
    threading.Thread(target=when_committed, args=(out, 2, 40, kill, done), daemon=True).start()
    run = run_campaign(tmp_path, cfg, ranks=4, out=out, timeout_s=120, mpiexec=OMPI_MPIEXEC,
                       python=OMPI_PYTHON, mpiexec_args=["--with-ft", "ulfm", "--oversubscribe", "--bind-to", "none"],
                       env={"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
                            "OMPI_MCA_pml": "ob1", "OMPI_MCA_btl": "self,sm"})
    done.set()
    assert run.code == 0, run.explain()
    s = check_complete(run, seeds)
    lost = [e for e in run.events() if e["event"] == "worker.lost"]
    assert lost[0]["reason"] == "MPI reported the process failed"  # not the 30 s heartbeat limit
    assert int(s["workers_alive"]) == 2
