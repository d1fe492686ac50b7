"""Per-dispatch deadlines: revoke, CANCEL and requeue; late results are quarantined as expired."""

from __future__ import annotations

import collections

import pytest

from symfence.coordinator.journal import Journal
from tests.mpi_helpers import run_campaign, synthetic_cfg

pytestmark = pytest.mark.mpi


def test_late_result_is_quarantined_expired_and_the_retry_commits(tmp_path):
    # Workers withhold some genuine results until their token is revoked (a result delayed past
    # its deadline); the coordinator must quarantine each as `expired` and commit the retry.
    seeds = 40
    cfg = synthetic_cfg(
        synthetic={"seeds": seeds, "task_ms": 2.0},
        dispatch={"depth": 2, "deadline_s": 0.4, "max_attempts": 10},
        faults={"enabled": True, "seed": 3, "late": 0.25},
    )
    run = run_campaign(tmp_path, cfg, ranks=3)
    assert run.code == 0, run.explain()
    s = run.stats()
    late = [e for e in run.worker_events() if e["event"] == "fault.injected"]
    assert late, "the injector never withheld a result"
    assert int(s["quarantined_expired"]) == len(late) == int(s["quarantined_results"])
    # Every withheld result expired; a slow start can expire a few genuine dispatches too.
    assert int(s["expired"]) >= len(late)
    assert int(s["committed"]) == seeds
    assert int(s["dispatched"]) == seeds + int(s["expired"])
    assert "VIOLATED" not in run.stdout

    events = run.events()
    expired_tokens = {e["token"] for e in events if e["event"] == "task.expired"}
    quarantined = [e for e in events if e["event"] == "result.quarantined"]
    assert {e["token"] for e in quarantined} == {e["token"] for e in late} <= expired_tokens
    journal = Journal.read_only(run.out / "journal.sqlite")
    retried = collections.Counter(e["work_id"] for e in quarantined)
    for work_id, n in retried.items():
        item = journal.work_item(work_id)
        assert item.state.value == "done" and item.attempts >= n  # each expiry was charged
    assert journal.snapshot().done == seeds
    journal.close()


def test_stuck_dispatch_is_revoked_cancelled_and_retried(tmp_path):
    # One worker stuck 1.5 s in a call that cannot see a CANCEL; deadline 0.6 s. Attempt 1
    # expires at 0.6 s, but the worker still holds it: attempt 2 is not queued behind the stuck
    # call (where its own deadline would run out) but sent once the worker shows it let go of
    # attempt 1 (its heartbeat right after the CANCEL, or the late result), and commits.
    cfg = synthetic_cfg(
        synthetic={"seeds": 1, "task_ms": 5.0, "first_attempt_ms": 1500.0},
        dispatch={"depth": 1, "deadline_s": 0.6, "max_attempts": 3},
    )
    run = run_campaign(tmp_path, cfg, ranks=2)
    assert run.code == 0, run.explain()
    s = run.stats()
    assert int(s["expired"]) == 1
    assert int(s["committed"]) == 1 and int(s["dispatched"]) == 2
    # Whatever of the revoked attempt still answered was fenced as expired, nothing else.
    assert int(s["quarantined_results"]) == int(s["quarantined_expired"]) <= 1
    assert int(s["slots_freed_by_heartbeat"]) + int(s["slots_freed_by_result"]) == 1
    assert int(s["slots_held_revoked"]) == 0
    assert "VIOLATED" not in run.stdout
    finished = [e for e in run.worker_events() if e["event"] == "worker.finished"][0]
    assert finished["max_held"] == 1  # never a second dispatch beside the stuck one
    journal = Journal.read_only(run.out / "journal.sqlite")
    (entry,) = journal.iter_corpus()
    assert journal.work_item(entry.work_id).attempts == 1  # only the stuck attempt was charged
    journal.close()


def test_work_fails_after_max_attempts(tmp_path):
    cfg = synthetic_cfg(
        synthetic={"seeds": 2, "task_ms": 5.0, "first_attempt_ms": 700.0},
        dispatch={"depth": 1, "deadline_s": 0.3, "max_attempts": 1},
    )
    run = run_campaign(tmp_path, cfg, ranks=2)
    assert run.code == 0, run.explain()
    s = run.stats()
    assert int(s["work_failed"]) == 2 and int(s["committed"]) == 0
    assert "VIOLATED" not in run.stdout
    failed = [e for e in run.events() if e["event"] == "task.failed"]
    assert len(failed) == 2
