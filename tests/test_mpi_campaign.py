"""Real mpiexec campaigns with 3 and 5 ranks at depth 1, 2 and 4 (synthetic executor)."""

from __future__ import annotations

import pytest

from tests.mpi_helpers import run_campaign, synthetic_cfg

pytestmark = pytest.mark.mpi


@pytest.mark.parametrize("ranks", [3, 5])
@pytest.mark.parametrize("depth", [1, 2, 4])
def test_campaign_runs_every_seed_once_and_conserves(tmp_path, ranks, depth):
    seeds = 150
    run = run_campaign(tmp_path, synthetic_cfg(dispatch={"depth": depth}, synthetic={"seeds": seeds}), ranks=ranks)
    assert run.code == 0, run.explain()
    s = run.stats()
    assert int(s["committed"]) == seeds
    assert int(s["dispatched"]) == seeds
    assert int(s["results_received"]) == seeds
    assert int(s["quarantined_results"]) == 0
    assert int(s["in_flight"]) == 0
    assert int(s["dispatch_depth"]) == depth
    assert "work exhausted" in run.stdout
    assert "VIOLATED" not in run.stdout and run.stdout.count("[ok]") == 2
    # Every worker took part and said goodbye, and none ever held more than `depth` dispatches.
    for rank in range(1, ranks):
        assert float(s[f"utilisation_rank_{rank}"]) > 0
    stopped = sorted(e["worker"] for e in run.events() if e["event"] == "worker.stopped")
    assert stopped == list(range(1, ranks))
    finished = [e for e in run.worker_events() if e["event"] == "worker.finished"]
    assert len(finished) == ranks - 1
    assert sum(e["results_sent"] for e in finished) == seeds
    assert all(e["max_held"] <= depth for e in finished)
    if depth > 1:
        assert max(e["max_held"] for e in finished) > 1  # the pipeline really was used
