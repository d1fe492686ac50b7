"""Coordinator SIGKILLed at several points, then `--resume`: nothing lost, nothing done twice."""

from __future__ import annotations

import hashlib

import pytest

from symfence.coordinator.journal import Journal
from tests.mpi_helpers import ALL_OWED_FILES, run_campaign, synthetic_cfg

pytestmark = pytest.mark.mpi

# (failpoint, hit number): during dispatch, inside a commit, around group-commit flushes.
KILLS = [("commit", 40), ("flush.after", 4), ("dispatch", 150), ("flush.before", 6), ("commit", 90),
         ("flush.after", 2)]


def test_coordinator_killed_and_resumed_loses_nothing(tmp_path):
    seeds = 120
    cfg = synthetic_cfg(synthetic={"seeds": seeds, "task_ms": 2.0, "candidates": 1},
                        journal={"batch_ops": 64, "batch_ms": 20.0})
    out = tmp_path / "out"
    killed = 0
    for i, (point, n) in enumerate(KILLS):
        run = run_campaign(tmp_path, cfg, ranks=3, out=out, extra_args=["--resume"] if i else [],
                           env={"SYMFENCE_FAILPOINT": f"{point}:{n}"})
        if run.code != 0:
            killed += 1
            assert "campaign finished" not in run.stdout
        else:  # the campaign ended before reaching this failpoint
            break
    assert killed >= 5, f"only {killed} runs were killed"
    final = run_campaign(tmp_path, cfg, ranks=3, out=out, extra_args=["--resume"], env=ALL_OWED_FILES)
    assert final.code == 0, final.stderr[-3000:]
    assert "work exhausted" in final.stdout and "VIOLATED" not in final.stdout
    s = final.stats()
    assert int(s["journal_fence_rejected"]) == 0

    journal = Journal.read_only(out / "journal.sqlite")
    snap = journal.snapshot()
    corpus = list(journal.iter_corpus())
    # Every work item (seeds and the children they produced) finished exactly once.
    assert snap.pending == snap.leased == snap.failed == 0
    assert snap.done == snap.corpus == len(corpus) >= seeds
    assert sum(1 for e in corpus if e.origin == "seed") == seeds
    assert len({e.work_id for e in corpus}) == len(corpus)
    assert len({(e.target, e.sha256) for e in corpus}) == len(corpus)
    # Queue ids: 0..n-1, each exactly once on disk, each file holding its journal entry.
    assert [e.queue_id for e in corpus] == list(range(len(corpus)))
    files = {}
    for path in (out / "queue").iterdir():
        qid = int(path.name.split(",")[0].removeprefix("id:"))
        assert qid not in files, f"queue id {qid} reused"
        files[qid] = hashlib.sha256(path.read_bytes()).hexdigest()
    assert files == {e.queue_id: e.sha256 for e in corpus}
    runs = journal.runs()
    assert len(runs) == killed + 1 and runs[-1].clean and not any(r.clean for r in runs[:-1])
    journal.close()

    resumed = [e for e in final.events() if e["event"] == "campaign.resumed"]
    assert len(resumed) == killed


def test_ctrl_c_drains_stops_cleanly_and_resume_finishes(tmp_path):
    """SIGINT to the whole job (what a terminal's Ctrl-C does): the coordinator drains, stops
    the workers (which ignore the signal themselves) and writes everything; --resume finishes."""
    import os
    import signal
    import threading
    import time

    from tests.mpi_helpers import read_committed

    seeds = 2000
    cfg = synthetic_cfg(synthetic={"seeds": seeds, "task_ms": 2.0})
    out = tmp_path / "out"

    def interrupt(proc) -> None:
        def wait_and_signal() -> None:
            deadline = time.monotonic() + 60
            while read_committed(out) < 200 and time.monotonic() < deadline:
                time.sleep(0.02)
            os.killpg(proc.pid, signal.SIGINT)

        threading.Thread(target=wait_and_signal, daemon=True).start()

    run = run_campaign(tmp_path, cfg, ranks=3, out=out, on_start=interrupt)
    assert run.code == 0, run.explain()
    assert "campaign finished: signal SIGINT" in run.stdout and "VIOLATED" not in run.stdout
    first = int(run.stats()["committed"])
    assert 200 <= first < seeds
    journal = Journal.read_only(out / "journal.sqlite")
    assert journal.runs()[-1].clean and journal.snapshot().done == first
    journal.close()

    final = run_campaign(tmp_path, cfg, ranks=3, out=out, extra_args=["--resume"])
    assert final.code == 0, final.stderr[-3000:]
    assert "work exhausted" in final.stdout
    s = final.stats()
    # Counters carry over --resume: the whole campaign's, each item committed exactly once.
    assert int(s["committed"]) == seeds and int(s["results_received"]) >= seeds
    assert int(s["dispatched"]) == seeds + sum(int(s[k]) for k in ("expired", "cancelled", "lost", "voided"))
    journal = Journal.read_only(out / "journal.sqlite")
    assert journal.snapshot().done == seeds
    journal.close()
