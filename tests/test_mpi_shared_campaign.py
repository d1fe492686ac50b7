"""Several coordinators, one campaign (issue 29): separate real mpiexec jobs share a SQLite store.

Each coordinator is the rank 0 of its own job (1 coordinator + 2 workers, synthetic tasks), all
joined to one campaign store in tmp_path; the store's checker runs after every test (every item
committed at most once, no commit under a lease that was not current, leases conserved). One
coordinator is killed (SIGKILL) or frozen (SIGSTOP past its leases) while the others go on.
The issue's 30 s kill scenario is scaled down to a campaign of a few seconds with 2 s leases.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from symfence.coordinator.shared import open_store
from symfence.coordinator.shared.checker import check
from symfence.coordinator.shared.records import EventKind
from tests.mpi_helpers import ROOT, logged, read_stat, synthetic_cfg
from tests.multi_helpers import Job, run_all, wait_for

pytestmark = [pytest.mark.mpi, pytest.mark.heavy]


def checked(store: str, items: int) -> Any:
    """The checker's verdict on the store after a run: no violation, every item done."""
    s = open_store(store, create=False)
    try:
        report = check(s.history(), s.items())
        status = {row.coordinator: row for row in s.status()}
        history = s.history()
    finally:
        s.close()
    assert report.ok, "\n".join(report.lines())
    assert report.items == items and report.complete, "\n".join(report.lines())
    return report, status, history


def cfg_for(items: int, task_ms: float, lease_s: float, store: str = "") -> dict[str, dict[str, Any]]:
    return synthetic_cfg(campaign={"duration_s": 25, "store": store},
                         synthetic={"seeds": items, "task_ms": task_ms}, store={"lease_s": lease_s})


def test_two_coordinators_share_one_campaign_each_item_committed_once(tmp_path: Path) -> None:
    items = 400
    store = f"sqlite:{tmp_path / 'campaign.db'}"
    cfg = cfg_for(items, 10.0, 5.0)
    keyed = cfg_for(items, 10.0, 5.0, store)  # the key, not the flag
    jobs = [Job(tmp_path, "c1", cfg, store), Job(tmp_path, "c2", keyed, None)]
    codes = run_all(jobs, 60)
    assert codes == [0, 0], "\n".join(job.explain() for job in jobs)
    report, status, _ = checked(store, items)
    mine = {job.out.name: read_stat(job.out, "committed") for job in jobs}
    assert sum(mine.values()) == items  # each applied locally exactly what the store committed
    assert all(n > 0 for n in mine.values()), mine  # both had a share
    assert sorted(row.committed for row in status.values()) == sorted(mine.values())
    for job in jobs:
        assert "work exhausted" in job.stdout, job.explain()
        assert read_stat(job.out, "quarantined_results") == 0, job.explain()
        assert "[ok] dispatched" in job.stdout and "VIOLATED" not in job.stdout
    # `symfence status` shows one row per coordinator with its share.
    shown = subprocess.run([sys.executable, "-m", "symfence", "status", str(jobs[0].out)], cwd=ROOT,
                           capture_output=True, text=True, timeout=60,
                           env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert shown.returncode == 0, shown.stderr
    rows = [line for line in shown.stdout.splitlines() if line.split()[:1] and line.split()[0] in status]
    assert len(rows) == 2 and all("%" in row for row in rows), shown.stdout


def test_a_killed_coordinators_leases_are_taken_over_and_the_campaign_ends(tmp_path: Path) -> None:
    items, lease_s = 450, 2.0
    store = f"sqlite:{tmp_path / 'campaign.db'}"
    cfg = cfg_for(items, 40.0, lease_s)
    jobs = [Job(tmp_path, f"c{i}", cfg, store) for i in (1, 2, 3)]
    victim = jobs[2]
    pid = wait_for(victim.pid, 40, jobs)
    # "A few seconds in": once every coordinator runs (start-up under load takes seconds) and
    # the victim has committed some results and holds leases.
    wait_for(lambda: all(read_stat(job.out, "committed") >= 10 for job in jobs), 30, jobs)
    os.kill(pid, signal.SIGKILL)
    killed_at = time.time()  # the SQLite store's clock
    codes = run_all(jobs, 60)
    assert codes[:2] == [0, 0], "\n".join(job.explain() for job in jobs)
    assert codes[2] != 0
    report, status, history = checked(store, items)
    name = next(iter(c for c in status if c.endswith("-c3")))
    taken = [e for e in history if e.kind is EventKind.EXPIRE and e.coordinator == name]
    assert taken, "the killed coordinator held no lease: kill it earlier"
    assert all(e.reason.startswith("taken over by") for e in taken)
    late = max(e.at for e in taken) - killed_at
    assert late <= lease_s + 1.0, f"its leases taken over {late:.2f} s after the kill (lease {lease_s} s)"
    survivors = [job for job in jobs[:2]]
    assert sum(read_stat(job.out, "committed") for job in survivors) + status[name].committed == items
    assert all("work exhausted" in job.stdout for job in survivors)


def test_a_frozen_coordinators_late_commits_are_refused_counted_and_not_applied(tmp_path: Path) -> None:
    items, lease_s, frozen_s = 400, 1.5, 4.0
    store = f"sqlite:{tmp_path / 'campaign.db'}"
    cfg = cfg_for(items, 30.0, lease_s)
    jobs = [Job(tmp_path, "c1", cfg, store), Job(tmp_path, "c2", cfg, store)]
    victim = jobs[1]
    pid = wait_for(victim.pid, 40, jobs)
    # Both run (else the victim could come back before the other started and take its own
    # expired leases again, refusing nothing), and the victim holds leases.
    wait_for(lambda: all(read_stat(job.out, "committed") >= 10 for job in jobs), 30, jobs)
    os.kill(pid, signal.SIGSTOP)
    try:
        time.sleep(frozen_s)  # past its leases: the other takes them over meanwhile
    finally:
        os.kill(pid, signal.SIGCONT)
    codes = run_all(jobs, 60)
    assert codes == [0, 0], "\n".join(job.explain() for job in jobs)
    report, status, _ = checked(store, items)
    name = next(iter(c for c in status if c.endswith("-c2")))
    refused = read_stat(victim.out, "quarantined_stale_lease")
    assert refused > 0, victim.explain()
    assert status[name].refused == refused  # each refusal counted here is one the store made
    assert read_stat(victim.out, "refused") == refused  # its dispatches ended as refused
    log = (victim.out / "logs" / "coordinator.jsonl").read_text().splitlines()
    quarantined = [e for e in map(json.loads, log) if e["event"] == "result.quarantined"]
    assert sum(e.get("reason") == "stale_lease" for e in quarantined) == refused
    # Nothing refused was applied: what each coordinator applied is what the store committed for it.
    mine = {job.out.name: read_stat(job.out, "committed") for job in jobs}
    assert mine["c2"] == status[name].committed and sum(mine.values()) == items, (mine, status)
    assert "[ok] results_received" in victim.stdout and "VIOLATED" not in victim.stdout, victim.explain()
    assert report.refusals  # the store's history holds the refusals


def test_without_a_store_nothing_of_the_store_is_touched(tmp_path: Path) -> None:
    """Without a store nothing of the store is touched: no store file, no store rows."""
    cfg = synthetic_cfg(synthetic={"seeds": 40})
    job = Job(tmp_path, "solo", cfg, None)
    assert run_all([job], 60) == [0], job.explain()
    assert not (job.out / "store.json").exists()
    assert read_stat(job.out, "committed") == 40


def test_a_coordinator_whose_name_registers_again_stops_committing_and_says_so(tmp_path: Path) -> None:
    """A second process under the same coordinator name takes a new epoch: the first one's epoch
    is dead, its leases void; it commits nothing more, says so on stderr and exits 3."""
    items = 300
    store = f"sqlite:{tmp_path / 'campaign.db'}"
    cfg = cfg_for(items, 30.0, 5.0)
    cfg["store"]["coordinator"] = "same-name"
    first = Job(tmp_path, "c1", cfg, store)
    wait_for(lambda: read_stat(first.out, "committed") >= 10, 40, [first])
    second = Job(tmp_path, "c2", cfg, store)
    codes = run_all([first, second], 60)
    assert codes == [3, 0], "\n".join(job.explain() for job in (first, second))
    assert "its epoch" in first.stderr and "is dead" in first.stderr, first.explain()
    assert logged(first.out, "store.epoch_dead"), first.explain()
    report, status, history = checked(store, items)
    assert list(status) == ["same-name"] and status["same-name"].registrations == 2
    # What the first applied is what the store committed under its epoch, nothing after.
    epochs = sorted({e.epoch for e in history if e.kind is EventKind.REGISTER})
    by_first = sum(1 for e in history if e.kind is EventKind.COMMIT and e.epoch == epochs[0])
    assert read_stat(first.out, "committed") == by_first
    assert by_first + read_stat(second.out, "committed") == items
