"""Queue files still owed when a run ends are not waited for (issue 31): their entries are durable
in the journal; the end of the run writes what it can in a short budget, says how many it left,
the tools read the journal, and a --resume writes the rest, each file holding its entry."""

from __future__ import annotations

import subprocess
import sys

import pytest

from symfence.coordinator.journal import Journal
from tests.mpi_helpers import ROOT, run_campaign, synthetic_cfg
from tests.test_mpi_lazy_queue import durable, queue_files

pytestmark = pytest.mark.mpi

SEEDS = 2000


def test_owed_queue_files_are_left_to_the_journal_and_a_resume_writes_them(tmp_path):
    # max_results ends the run long before the writer thread has written 2,000 seeds' files; with
    # a budget of 0 s at the end, the files it owes then are all left.
    cfg = synthetic_cfg(synthetic={"seeds": SEEDS, "task_ms": 0.0}, campaign={"max_results": 20})
    out = tmp_path / "out"
    run = run_campaign(tmp_path, cfg, ranks=3, out=out, env={"SYMFENCE_OWED_FILES_S": "0"})
    assert run.code == 0, run.explain()
    entries, files = durable(out), queue_files(out)
    assert len(entries) == SEEDS and len(files) < SEEDS
    assert all(entries[q] == sha for q, sha in files.items())  # every file written holds its entry
    assert f"symfence: {SEEDS - len(files)} queue/ files not written" in run.stderr, run.explain()
    journal = Journal.read_only(out / "journal.sqlite")
    try:
        assert journal.runs()[-1].clean  # a clean end: nothing owed is lost
    finally:
        journal.close()
    status = subprocess.run([sys.executable, "-m", "symfence", "status", str(out)], cwd=ROOT,
                            capture_output=True, text=True, timeout=60)
    assert status.returncode == 0 and "ended cleanly" in status.stdout, status.stdout + status.stderr

    resumed = run_campaign(tmp_path, cfg, ranks=3, out=out, extra_args=["--resume"],
                           env={"SYMFENCE_OWED_FILES_S": "inf"})
    assert resumed.code == 0, resumed.explain()
    assert queue_files(out) == durable(out) and len(durable(out)) == SEEDS
    assert "queue/ files not written" not in resumed.stderr
