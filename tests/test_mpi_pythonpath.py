"""`campaign.pythonpath` under a plain `mpiexec` launch: rank 0 and every worker import from it."""

from __future__ import annotations

import textwrap

import pytest

from tests.mpi_helpers import run_campaign

pytestmark = pytest.mark.mpi


def test_a_target_found_only_through_campaign_pythonpath_runs_on_every_rank(tmp_path):
    """The target's folder is on no PYTHONPATH mpiexec passes on: rank 0 takes it from the config
    for its start-up check, the workers from SETUP (before, only `symfence run` set it, in the
    environment it launched mpiexec with: a cluster's own `mpirun` gave every task an import error)."""
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "sf_pythonpath_target.py").write_text(textwrap.dedent("""
        def target(data):
            if data[:2] == b"PP":
                raise ValueError("found through campaign.pythonpath")
    """))
    cfg = {"campaign": {"executor": "concolic", "targets": ["sf_pythonpath_target:target"],
                        "pythonpath": [str(lib)], "duration_s": 60},
           "dispatch": {"depth": 2}, "stats": {"interval_s": 0.2}}
    run = run_campaign(tmp_path, cfg, ranks=3, timeout_s=120)
    assert run.code == 0, run.explain()
    assert "task errors 0" in run.stdout and "work exhausted" in run.stdout, run.stdout[-2000:]
    assert [e for e in run.events() if e["event"] == "finding.crash"], run.stdout[-2000:]
