"""Issue 17 under real mpiexec: an honest worker's results on real code with long and non-ASCII
library names are all committed; and a worker that sends results the fence refuses (the
`buggy_result` fault, which stands for a bug in symfence) ends the campaign loudly, exit 5."""

from __future__ import annotations

import pytest

from symfence.coordinator.failure import ExitCode
from symfence.coordinator.stats import read_stats
from tests.mpi_helpers import run_campaign, stop_when, synthetic_cfg

pytestmark = pytest.mark.mpi

TARGET = "examples.longnames.target:target"


@pytest.mark.heavy
def test_hybrid_on_long_and_non_ascii_library_names_commits_every_result(tmp_path):
    """examples/longnames: its helper module's name (73 characters, non-ASCII) and function names
    (over 64, one with spaces) become the engine's concretisation counters. Before issue 17 every
    engine result naming them was refused `malformed` (`result.stats: keys must be ...`)."""
    seeds = tmp_path / "seeds"
    seeds.mkdir()
    (seeds / "a").write_bytes(b"LN\x03ABCxyz")
    (seeds / "b").write_bytes(b"LN\x02ABzz")
    cfg = {
        "campaign": {"targets": [TARGET], "duration_s": 8, "seeds": str(seeds)},  # the default: hybrid
        "dispatch": {"depth": 2, "drain_timeout_s": 20, "stop_timeout_s": 10},
        "workers": {"heartbeat_s": 0.5, "lost_after_s": 60},
        "fuzz": {"slice_s": 1.0, "exec_timeout_s": 0.5},
        "concolic": {"options": {"exec_timeout_s": 0.5, "max_candidates": 16}},
        "stats": {"interval_s": 0.5},
    }
    def named() -> bool:  # every long name made into a key, both stages ran: stop (8 s at most)
        stats = read_stats(tmp_path / "out" / "fuzzer_stats")
        return (sum(k.startswith("engine_concretised_c_langenprufung_beschleuniger") for k in stats) == 3
                and int(stats.get("committed", 0)) >= 4 and int(stats.get("fuzz_execs", 0)) > 0)

    run = run_campaign(tmp_path, cfg, ranks=3, timeout_s=150, on_start=stop_when(named))
    assert run.code == 0, run.explain()
    s = run.stats()
    refused = [e for e in run.events() if e["event"] == "result.quarantined"]
    assert int(s["quarantined_results"]) == 0, (s, refused[:2])
    assert int(s["committed"]) == int(s["results_received"]) >= 4
    assert int(s["concolic_execs"]) > 0 and int(s["fuzz_execs"]) > 0  # both stages ran and were credited
    assert "REFUSED" not in run.stdout + run.stderr
    # The three long names reached the engine report, each made into its own key (cut, hash suffix).
    made = [k for k in s if k.startswith("engine_concretised_c_langenprufung_beschleuniger")]
    assert len(made) == 3 and all("~" in k and len(k) == len("engine_") + 64 for k in made), s

def test_refused_results_of_an_honest_rank_end_the_campaign_loudly(tmp_path):
    """A rank that is not banned and whose results keep breaking the wire's rules is a bug in
    symfence: the reason is on the console at once (one event per rank and reason), the summary
    says how many, why and what to send, and the exit status is 5."""
    cfg = synthetic_cfg(
        campaign={"duration_s": 4},
        synthetic={"seeds": 400, "task_ms": 100.0},  # ~10 results/s per rank: under the ban threshold
        dispatch={"deadline_s": 1.0, "max_attempts": 3},
        faults={"enabled": True, "seed": 3, "buggy_result": 0.5})
    run = run_campaign(tmp_path, cfg, ranks=3, timeout_s=120)
    assert run.code == ExitCode.REFUSED == 5, run.explain()
    s = run.stats()
    assert int(s["workers_banned"]) == 0 and int(s["quarantined_malformed"]) > 0
    events = [e for e in run.events() if e["event"] == "worker.results_refused"]
    assert sorted(e["rank"] for e in events) == [1, 2], events  # once per rank and reason
    assert all(e["reason"] == "malformed" and "result.stats" in e["detail"] for e in events)
    assert "worker.results_refused" in run.stderr and "result.stats" in run.stderr  # on the console
    refused = [line for line in run.stdout.splitlines() if line.strip().startswith("REFUSED")]
    assert len(refused) == 2, run.stdout
    assert all("malformed" in line and "result.stats" in line for line in refused), run.stdout
    assert "this is a bug in symfence, please send us" in run.stdout
    assert "exit status 5" in run.stderr
