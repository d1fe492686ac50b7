"""Engine counters reach fuzzer_stats, plot_data and `symfence status`; a target the input leaves through C is warned about."""

from __future__ import annotations

import pytest

from symfence.coordinator.status_report import render_status
from tests.mpi_helpers import run_campaign

pytestmark = [pytest.mark.mpi, pytest.mark.heavy]


def test_engine_counters_and_the_no_branch_warning(tmp_path):
    cfg = {
        "campaign": {"executor": "concolic", "duration_s": 60, "ranks": 2,
                     "targets": ["examples.constructs.listed_module:target",
                                 "examples.constructs._leaves_through_c:target"]},
        "dispatch": {"depth": 2},
        "stats": {"interval_s": 0.2},
        "concolic": {"instrument": ["email.quoprimime"], "options": {"max_candidates": 16}},
    }
    run = run_campaign(tmp_path, cfg, ranks=2, timeout_s=150)
    assert run.code == 0, run.explain()
    s = run.stats()
    assert int(s["saved_crashes"]) == 1  # listed_module's Found, through email.quoprimime
    assert int(s["engine_branches"]) > 0 and int(s["engine_sat"]) > 0
    assert int(s["engine_concretised_c_zlib.decompress"]) >= 1
    assert int(s["engine_false_findings"]) == 0
    plot = (run.out / "plot_data").read_text().splitlines()
    header = [c.strip() for c in plot[0].lstrip("# ").split(",")]
    last = [c.strip() for c in plot[-1].split(",")]
    assert header[-3:] == ["engine_branches", "engine_concretisations", "engine_false_findings"]
    assert len(last) == len(header) and int(last[header.index("engine_branches")]) > 0
    warnings = [e for e in run.events() if e.get("event") == "target.no_symbolic_branches"]
    assert [(w["target"], w["left_via"]) for w in warnings] == [
        ("examples.constructs._leaves_through_c:target", "c_zlib.decompress")]
    status = render_status(run.out)
    assert "engine_branches" in status and "engine_concretised_c_zlib.decompress" in status
