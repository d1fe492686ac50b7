"""`symfence logs` and `symfence status` on the output of a real campaign with faults."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.mpi_helpers import ROOT, run_campaign, synthetic_cfg

pytestmark = pytest.mark.mpi


@pytest.fixture(scope="module")
def faulty_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("clitools")
    cfg = synthetic_cfg(synthetic={"seeds": 60}, faults={"enabled": True, "seed": 5, "stale": 0.2, "missing": 0.2})
    run = run_campaign(tmp, cfg, ranks=3)
    assert run.code == 0, run.explain()
    return run


def symfence(*args):
    return subprocess.run([sys.executable, "-c", "import sys; from symfence.coordinator.cli import main; sys.exit(main())",
                           *args], cwd=ROOT, capture_output=True, text=True, timeout=60)


def test_logs_filters_quarantine_events_by_reason(faulty_run):
    s = faulty_run.stats()
    r = symfence("logs", str(faulty_run.out), "--event", "result.quarantined", "--reason", "stale")
    assert r.returncode == 0
    lines = r.stdout.splitlines()
    assert len(lines) == int(s["quarantined_stale"]) > 0
    assert all("result.quarantined" in l and "reason=stale" in l for l in lines)

    r = symfence("logs", str(faulty_run.out), "--event", "result.quarantined", "--json")
    events = [json.loads(l) for l in r.stdout.splitlines()]
    assert len(events) == int(s["quarantined_results"])
    assert {e["reason"] for e in events} == {"stale", "missing"}

    r = symfence("logs", str(faulty_run.out), "--rank", "1", "--event", "fault.injected", "--json")
    assert r.stdout and all(json.loads(l)["rank"] == 1 for l in r.stdout.splitlines())


def test_status_reports_journal_and_counters(faulty_run):
    r = symfence("status", str(faulty_run.out))
    assert r.returncode == 0, r.stderr
    s = faulty_run.stats()
    assert "0 pending, 0 leased, 60 done, 0 failed" in r.stdout
    assert "ended cleanly" in r.stdout
    assert "quarantined_stale" in r.stdout and s["quarantined_stale"] in r.stdout
    r = symfence("status", str(faulty_run.out / "nope"))
    assert r.returncode == 1 and r.stderr.count("\n") == 1
