"""bench_compare's goals table: each goal met or missed by what the run measured, or why not measured."""

from __future__ import annotations

from bench.bench_compare import CPU_GOAL_US, goals


def _compare(cpu_us: float, rps: float) -> dict:
    return {"symfence_d4": {"coord_cpu_us_per_result": cpu_us, "window_results_per_sec": rps},
            "pool": {"results_per_sec": 5000.0}, "farm_d4": {"results_per_sec": 200_000.0}}


def _row(rows: list, start: str) -> list:
    return next(r for r in rows if r[0].startswith(start))


def test_a_goal_is_met_or_missed_by_the_measured_figure():
    missed = goals({"compare": _compare(100.0, 10_000.0)}, {})
    cpu = _row(missed, "coordinator CPU per committed result")
    assert cpu[2] == "100.0 us" and cpu[3] == "MISSED"
    assert cpu[4].startswith(f"+{100 - CPU_GOAL_US:.1f}")
    assert _row(missed, "depth 4 vs MPIPoolExecutor")[3] == "MISSED"  # 2x < 5x
    assert _row(missed, "ranks one coordinator serves")[2] == "10,000"  # 1e6 / 100 us
    met = goals({"compare": _compare(20.0, 30_000.0)}, {})
    assert _row(met, "coordinator CPU per committed result")[3] == "met"
    assert _row(met, "depth 4 vs MPIPoolExecutor")[3] == "met"  # 6x


def test_a_goal_whose_section_did_not_run_says_so():
    rows = goals({"compare": "mpiexec not found"}, {})
    assert "not measured: mpiexec not found" in _row(rows, "coordinator CPU")[3]
    assert "not run" in _row(rows, "1 ms tasks at depth 2")[3]
    assert all(r[2] == "-" for r in rows)
