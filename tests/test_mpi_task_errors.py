"""Task errors during a run are counted and shown; a run whose every task errored exits non-zero."""

from __future__ import annotations

import pytest

from tests.mpi_helpers import run_campaign, synthetic_cfg

pytestmark = pytest.mark.mpi


def test_every_task_errored_exits_non_zero_and_says_so(tmp_path):
    r = run_campaign(tmp_path, synthetic_cfg(synthetic={"seeds": 12, "error_rate": 1.0}), ranks=2, timeout_s=90)
    assert r.code != 0, r.stdout
    assert "task errors 12" in r.stdout
    assert "EVERY task errored; first error: synthetic error (error_rate)" in r.stdout
    assert r.stats()["status_error"] == "12"


def test_some_task_errors_are_counted_and_the_run_succeeds(tmp_path):
    r = run_campaign(tmp_path, synthetic_cfg(synthetic={"seeds": 40, "error_rate": 0.5}), ranks=2, timeout_s=90)
    assert r.code == 0, r.stderr[-2000:]
    errors = int(r.stats()["status_error"])
    assert 0 < errors < 40
    assert f"{errors} of 40 tasks errored" in r.stdout
