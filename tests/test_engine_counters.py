"""The engine counters' fuzzer_stats rows (coordinator/engine_report.py), without MPI."""

from __future__ import annotations

from symfence.coordinator.engine_report import EngineCounters


def test_a_native_campaign_shows_only_the_counters_its_engine_computes() -> None:
    """TritonDSE and SymCC compute no implicit branches, concretisations, divergences or false
    findings: those rows read 0 in every native campaign, which said "none" where nothing was
    counted (a C library's bytes read through lookup tables are concretised, uncounted)."""
    native = EngineCounters()
    native.add("build/yaml", {"branches": 36, "queries": 30, "sat": 20, "unsat": 10, "solver_timeout": 0,
                              "emulation_cut": 1})
    rows = dict(native.items())
    assert rows["engine_branches"] == 36 and rows["engine_emulation_cut"] == 1
    assert not {"engine_false_findings", "engine_divergences", "engine_concretisations",
                "engine_implicit_branches", "engine_unknown"} & set(rows)

    python = EngineCounters()
    python.add("pkg:target", {"branches": 3, "implicit_branches": 0, "concretisations": 0})
    rows = dict(python.items())
    assert rows["engine_false_findings"] == 0 and rows["engine_divergences"] == 0 and rows["engine_sat"] == 0
    assert EngineCounters().items() == []  # no engine result yet: no rows
