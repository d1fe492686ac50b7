"""`symfence plot`: charts by column name, extra (per-stage) columns picked up, one-line errors."""

from __future__ import annotations

import subprocess
import sys

from symfence.coordinator.afl import AFL_PLOT_COLUMNS, SYMFENCE_PLOT_COLUMNS
from symfence.coordinator.plot import plot_campaign


def test_per_stage_columns_get_one_chart_per_metric(tmp_path):
    header = [*AFL_PLOT_COLUMNS, *SYMFENCE_PLOT_COLUMNS, "fuzz_execs", "concolic_execs", "fuzz_edges_first"]
    rows = []
    for t in range(5):
        afl = [t, 0, t, 10 + t, 3, 0, "0.01%", 1, 0, 2, "100.00", 100 * t, 7 + t]
        rows.append(", ".join(map(str, [*afl, t, 0, 1, 0, 0, "5.00", 50 * t, 20 * t, t])))
    (tmp_path / "plot_data").write_text("# " + ", ".join(header) + "\n" + "\n".join(rows) + "\n")
    names = {p.name for p in plot_campaign(tmp_path)}
    assert {"coverage.png", "findings.png", "stages_execs.png", "stages_edges_first.png"} <= names
    assert (tmp_path / "plots" / "stages_execs.png").stat().st_size > 2000


def test_plot_of_a_folder_without_plot_data_is_one_line_exit_1(tmp_path):
    r = subprocess.run([sys.executable, "-m", "symfence", "plot", str(tmp_path)], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 1 and r.stderr.count("\n") == 1 and "no plot_data" in r.stderr
