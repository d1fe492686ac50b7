"""Every fault type injected into a real 5-rank run is classified exactly, and none commits."""

from __future__ import annotations

import collections

import pytest

from symfence.coordinator.config import FAULT_KINDS
from tests.mpi_helpers import run_campaign, synthetic_cfg
from symfence.worker.faults import BUG_FAULTS, EXPECTED_REASON, WORK_FAULTS

pytestmark = pytest.mark.mpi


def test_every_fault_is_classified_exactly(tmp_path):
    seeds = 400
    faults = {"enabled": True, "seed": 7, **{kind: 0.05 for kind in FAULT_KINDS
                                                   if kind not in WORK_FAULTS + BUG_FAULTS}}
    cfg = synthetic_cfg(synthetic={"seeds": seeds, "candidates": 1}, faults=faults,
                        limits={"max_message_bytes": 65536}, dispatch={"depth": 4, "deadline_s": 1.0, "max_attempts": 10},
                        # Classification is what this test checks: workers that inject faults on
                        # purpose are not banned or suspended here (tests/test_adversary.py is).
                        peers={"ban_garbage": 0, "expiry_strikes": 0})
    run = run_campaign(tmp_path, cfg, ranks=5, timeout_s=180)
    assert run.code == 0, run.explain()
    s = run.stats()

    injected = collections.Counter(e["kind"] for e in run.worker_events() if e["event"] == "fault.injected")
    assert set(injected) == set(FAULT_KINDS) - set(WORK_FAULTS) - set(BUG_FAULTS), \
        f"some fault kinds never fired: {injected}"
    expected = collections.Counter()
    for kind, n in injected.items():
        expected[EXPECTED_REASON[kind]] += n
    for reason in ("malformed", "incompatible", "missing", "misrouted", "duplicate", "expired", "unowned", "stale"):
        assert int(s[f"quarantined_{reason}"]) == expected[reason], (reason, s, injected)
    assert int(s["quarantined_results"]) == sum(injected.values())

    # No fault committed; every genuine result (including the misused tokens' owners) did:
    # every dispatch committed except those whose result was withheld as `late` (revoked at
    # their deadline, then retried), and every result beyond the committed ones was a fault.
    committed = int(s["committed"])
    assert committed >= seeds
    assert int(s["expired"]) == injected["late"]
    assert int(s["dispatched"]) == committed + injected["late"]
    assert int(s["work_failed"]) == 0
    assert int(s["results_received"]) == committed + sum(injected.values())
    assert "VIOLATED" not in run.stdout and run.stdout.count("[ok]") == 2

    # The workers' own totals (STOP_ACK) agree with their logs.
    acked = collections.Counter()
    for e in run.worker_events():
        if e["event"] == "worker.finished":
            acked.update(e["faults"] or {})
    assert acked == injected

    # One result.quarantined event per quarantine, each naming its reason.
    events = [e for e in run.events() if e["event"] == "result.quarantined"]
    assert collections.Counter(e["reason"] for e in events) == +expected
    misrouted = [e for e in events if e["reason"] == "misrouted"]
    assert all(e["owner_rank"] not in (None, e["source_rank"]) for e in misrouted)


def test_lost_work_messages_are_repaired_by_heartbeats(tmp_path):
    # Workers forget some WORKs as if the messages were lost; each heartbeat says how many
    # WORKs arrived and which tokens are held, so the coordinator revokes exactly those.
    seeds = 150
    # max_attempts 10: with 3, one of 150 items is dropped three times in a row in ~14% of runs.
    cfg = synthetic_cfg(synthetic={"seeds": seeds, "task_ms": 2.0}, workers={"heartbeat_s": 0.1},
                        dispatch={"max_attempts": 10},
                        faults={"enabled": True, "seed": 11, "drop_work": 0.1})
    run = run_campaign(tmp_path, cfg, ranks=3)
    assert run.code == 0, run.explain()
    s = run.stats()
    dropped = [e for e in run.worker_events() if e["event"] == "fault.injected"]
    assert dropped and all(e["kind"] == "drop_work" for e in dropped)
    assert int(s["lost"]) == len(dropped)
    assert int(s["committed"]) == seeds and int(s["dispatched"]) == seeds + len(dropped)
    assert int(s["quarantined_results"]) == 0
    repaired = {e["token"] for e in run.events() if e["event"] == "task.lost"}
    assert repaired == {e["token"] for e in dropped}
    assert "VIOLATED" not in run.stdout
