"""A rank that never acknowledges STOP, under real mpiexec, several times in a row: every run
ends with exit 6 (RANKS_LOST), the summary on stdout, `campaign.abort_hung` in the log, and the
journal's run row ended and clean (rank 0's own state is complete: the rank's dispatches were
revoked). The rank (tests/stop_mute_rank.py) keeps sending heartbeats, so it is alive, not lost,
when STOP goes out. The same ending without MPI, many more times: tests/test_stop_end_sequence.py."""

from __future__ import annotations

import sys

import pytest

from symfence.coordinator.failure import ExitCode
from symfence.coordinator.journal import Journal
from tests.mpi_helpers import ROOT, run_campaign, synthetic_cfg

pytestmark = [pytest.mark.mpi, pytest.mark.heavy]  # three real mpiexec jobs in a row

RUNS = 3


def test_a_rank_that_never_answers_stop_ends_with_the_summary_and_a_clean_run_row(tmp_path):
    cfg = synthetic_cfg(campaign={"duration_s": 0.5}, synthetic={"seeds": 200, "task_ms": 1.0},
                        dispatch={"depth": 2, "drain_timeout_s": 0.3, "stop_timeout_s": 0.3},
                        workers={"heartbeat_s": 0.1, "lost_after_s": 30.0})
    mute = [":", "-n", "1", sys.executable, str(ROOT / "tests" / "stop_mute_rank.py")]
    for i in range(RUNS):
        out = tmp_path / f"out{i}"
        run = run_campaign(tmp_path, cfg, ranks=2, out=out, extra_args=mute, timeout_s=60,
                           env={"SYMFENCE_FINALIZE_TIMEOUT_S": "5"})
        assert run.code == ExitCode.RANKS_LOST, (i, run.explain())
        assert "campaign finished: duration reached" in run.stdout, (i, run.explain())
        assert "VIOLATED" not in run.stdout and f"outputs: {out}/" in run.stdout
        events = run.events()
        assert [e["ranks"] for e in events if e["event"] == "campaign.stop_ack_missing"] == [[2]]
        abort = [e for e in events if e["event"] == "campaign.abort_hung"]
        assert abort and abort[0]["ranks"] == [2] and abort[0]["exit_code"] == ExitCode.RANKS_LOST
        journal = Journal.read_only(out / "journal.sqlite")
        try:
            last = journal.runs()[-1]
            assert last.ended is not None and last.clean, (i, last)
            assert journal.snapshot().leased == 0  # the mute rank's dispatches were revoked and requeued
        finally:
            journal.close()
