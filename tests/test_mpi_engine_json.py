"""Under real mpiexec, the engine finds a bug behind ``json`` that needs a key and its values.

``examples/engine_only/fuzz_json_key.py`` (an OSS-Fuzz-form harness, stdlib only) raises on the
request ``{"cmd": ["run", 3]}``; the campaign starts from the sample request
``{"op": ["stop", 0]}`` (``examples/engine_only/seeds``). The engine runs json's Python scanner
(``json`` is imported under ``atheris.instrument_imports()``, so it is rewritten), replaces the
key and the string (another length: a splice) and solves the integer. The test stops the
campaign as soon as the crash file appears. Plain Atheris on the same harness and seed:
docs/engine.md.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.mpi_helpers import MPIEXEC, crash_files, run_campaign, stop_when_crash

pytestmark = [pytest.mark.mpi, pytest.mark.heavy,
              pytest.mark.skipif(MPIEXEC is None, reason="mpiexec not found")]

HARNESS = "examples.engine_only.fuzz_json_key:TestOneInput"
SEEDS = Path(__file__).resolve().parent.parent / "examples" / "engine_only" / "seeds"
BUDGET_S = 60.0


def test_engine_finds_the_json_command_and_the_campaign_stops_on_it(tmp_path: Path) -> None:
    cfg = {
        "campaign": {"executor": "concolic", "targets": [HARNESS], "duration_s": BUDGET_S,
                     "seeds": str(SEEDS)},
        "dispatch": {"depth": 2, "deadline_s": 60, "drain_timeout_s": 20, "stop_timeout_s": 20},
        "stats": {"interval_s": 1.0},
        "concolic": {"options": {"exec_timeout_s": 1.0, "solver_timeout_ms": 500}},
    }
    out = tmp_path / "out"
    started = time.monotonic()
    run = run_campaign(tmp_path, cfg, ranks=3, timeout_s=BUDGET_S + 60,
                       on_start=stop_when_crash(out, "JsonCommandBug"))
    elapsed = time.monotonic() - started
    assert run.code == 0, run.stderr[-3000:]
    found = crash_files(run.out, "JsonCommandBug")
    assert found, f"not found in {elapsed:.0f} s:\n{run.stdout[-3000:]}"
    crash = next(e for e in run.events()
                 if e["event"] == "finding.crash" and "JsonCommandBug" in e["identity"])
    assert crash["found_s"] <= BUDGET_S
    print(f"found after {crash['found_s']:.1f} s of campaign, {elapsed:.1f} s in all")
    from examples.engine_only.fuzz_json_key import JsonCommandBug, TestOneInput

    with pytest.raises(JsonCommandBug):  # the plain harness agrees
        TestOneInput(found[0].read_bytes())
