"""The long-lived fuzz process under real mpiexec: each worker starts it once for the campaign,
and its turn reports are fenced like any result (the fault injector sends stale and duplicate
frames beside every genuine report: each is quarantined under its counted reason, none commits)."""

from __future__ import annotations

import collections

import pytest

from symfence.coordinator.stats import read_stats
from symfence.worker.faults import EXPECTED_REASON
from tests.mpi_helpers import crash_files, run_campaign, stop_when

pytestmark = [pytest.mark.mpi, pytest.mark.heavy]  # a fuzzing campaign: both cores busy


def test_turn_reports_are_fenced_and_the_process_starts_once(tmp_path):
    cfg = {
        "campaign": {"executor": "fuzz", "targets": ["tests.hybrid_targets:shallow"], "duration_s": 8},
        "dispatch": {"depth": 2, "drain_timeout_s": 20, "stop_timeout_s": 10},
        "workers": {"heartbeat_s": 0.5, "lost_after_s": 60},
        "fuzz": {"slice_s": 1.0, "exec_timeout_s": 0.5},
        "stats": {"interval_s": 0.5},
        "faults": {"enabled": True, "seed": 5, "stale": 0.5, "duplicate": 0.5},
        "peers": {"ban_garbage": 0, "expiry_strikes": 0},
    }
    out = tmp_path / "out"

    def seen() -> bool:  # each kind quarantined, several turns committed, the crash saved: stop (8 s at most)
        stats = read_stats(out / "fuzzer_stats")
        reasons = (EXPECTED_REASON[kind] for kind in ("stale", "duplicate"))
        return (all(int(stats.get(f"quarantined_{reason}", 0)) > 0 for reason in reasons)
                and int(stats.get("committed", 0)) >= 6 and bool(crash_files(out, "ShallowBug")))

    run = run_campaign(tmp_path, cfg, ranks=3, timeout_s=120, on_start=stop_when(seen))
    assert run.code == 0, run.explain()
    s = run.stats()
    injected = collections.Counter(e["kind"] for e in run.worker_events() if e["event"] == "fault.injected")
    assert injected["stale"] and injected["duplicate"], injected
    for kind in ("stale", "duplicate"):
        assert int(s[f"quarantined_{EXPECTED_REASON[kind]}"]) == injected[kind], (kind, s)
    assert int(s["quarantined_results"]) == sum(injected.values())
    committed = int(s["committed"])
    assert committed >= 4 and int(s["results_received"]) == committed + sum(injected.values())
    assert int(s["fuzz_execs"]) > 0
    # One process per worker for the whole campaign (its turns were many).
    started = [e for e in run.worker_events() if e["event"] == "fuzz.started"]
    assert len(started) == 2 and len({e["pid"] for e in started}) == 2, started
    assert "VIOLATED" not in run.stdout
    crashes = list((run.out / "crashes").iterdir())
    assert len(crashes) == 1 and "ShallowBug" in crashes[0].name  # found once, though the process goes on
