"""The live view: time since the last path/crash/hang, one line per target, solver, map density,
memory; quarantine and conservation only when non-zero or asked for."""

from __future__ import annotations

import re
import tomllib

import pytest

from symfence.coordinator.status_line import Snapshot, TargetLine, render, render_lines
from tests.mpi_helpers import ROOT, run_campaign


def _snap(**kw) -> Snapshot:
    base = dict(elapsed_s=75, execs_per_s=289, results_per_s=40, edges=47, queue=40, pending=3, crashes=3,
                hangs=0, in_flight=4, quarantined=0, workers=2)
    return Snapshot(**{**base, **kw})


def test_quarantine_and_conservation_only_when_non_zero_or_asked():
    assert not any("quarantined" in l for l in render_lines(_snap())) and "quarantined" not in render(_snap())
    shown = render_lines(_snap(quarantined=2, quarantine_reasons=(("stale", 2),)))
    assert shown[-1] == "  fence   quarantined 2 (stale 2)  conservation ok"
    assert "conservation VIOLATED" in render_lines(_snap(conservation_ok=False))[-1]
    assert "quarantined 0 (none)" in render_lines(_snap(show_quarantine=True))[-1]


def test_times_since_last_finds_and_one_line_per_target():
    lines = render_lines(_snap(since_path_s=2.4, since_crash_s=75, since_hang_s=None, ooms=1, targets=(
        TargetLine("a:target", 12, 14, 1, 0, 50, 0, 3.0), TargetLine("bb:target", 20, 22, 2, 0, 80, 2, None))))
    text = "\n".join(lines)
    assert "last new path 2s ago" in text and "crashes 3 (1 out of memory), last 1m15s ago" in text
    assert "hangs 0, last never" in text
    assert lines[-2] == "  a:target   corpus 12  edges 14  crashes 1  hangs 0  execs 50  last new path 3s ago"
    assert lines[-1].endswith("last new path never  errors 2")


@pytest.mark.mpi
def test_live_view_of_a_real_campaign_on_a_terminal(tmp_path):
    cfg = tomllib.loads((ROOT / "configs" / "concolic.toml").read_text())
    cfg["campaign"].pop("output")
    cfg["stats"] = {"interval_s": 0.1}
    cfg["workers"] = {"heartbeat_s": 0.1}
    r = run_campaign(tmp_path, cfg, ranks=3, env={"SYMFENCE_TTY": "1", "COLUMNS": "200"}, timeout_s=120,
                     no_status=False)
    assert r.code == 0, r.stderr[-2000:]
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", r.stdout)
    final = text[text.rindex("symfence ["):]
    for target in cfg["campaign"]["targets"]:
        assert re.search(rf"{re.escape(target)}\s+corpus \d+  edges [1-9]\d*  crashes 1 ", final), final
    assert re.search(r"map density 0\.\d\d%  last new path \d+s ago", final), final
    assert re.search(r"crashes 3, last \d+s ago  hangs 0, last never  task errors 0", final), final
    assert re.search(r"solver \d+\.\ds over [1-9]\d* queries, \d+ timed out", final), final
    assert re.search(r"memory: coordinator [1-9]\d* MB, workers [1-9]\d* MB", final), final
    assert "  fence   quarantined" not in final  # nothing quarantined, so the fence's counters stay out of the way


def test_task_errors_stand_out_in_both_views():
    assert "TASK ERRORS 7" in render(_snap(task_errors=7))
    assert "task errors 7" in render_lines(_snap(task_errors=7))[2]
