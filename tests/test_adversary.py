"""Issue 10: a hostile rank (tests/adversary.py) beside a real coordinator and honest workers.

One real `mpiexec` job (MPMD: coordinator + 2 honest workers + the adversary) runs every attack
class; a second, honest-only job measured the same way gives the honest commit rate to compare.
For each class: the counters equal what was sent, nothing injected commits, the honest workers
keep committing, and the run ends clean.
"""

from __future__ import annotations

import argparse
import collections
import io
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable

import pytest

from symfence.coordinator.journal import Journal
from symfence.coordinator.logtail import run_logs
from tests.mpi_helpers import MPIEXEC, ROOT, Run, logged, stop_when, synthetic_cfg, toml_dump

pytestmark = pytest.mark.mpi

# The attacked job stops (Ctrl-C) AFTER_BAN_S after the adversary's ban, which ends its last attack
# (about 6 s in); honest ranks must keep committing after it, in a phase long enough to be checked
# (>= 2 s). DURATION_S is only a cap (it ran 16 s: 10 s of it after the ban).
DURATION_S = 40.0
AFTER_BAN_S = 4.0
# The honest-only job gives a commit rate (per second of run time) and a peak RSS to compare
# with: a shorter run measures both (the seeds are all loaded at start), in 10 s less.
BASELINE_S = 6.0


def _cfg(duration_s: float = DURATION_S) -> dict:
    return synthetic_cfg(
        campaign={"duration_s": duration_s},
        synthetic={"seeds": 8000, "task_ms": 5.0, "candidates": 1},  # work for the whole 16 s
        dispatch={"depth": 2, "deadline_s": 1.5, "max_attempts": 5, "drain_timeout_s": 5, "stop_timeout_s": 5},
        workers={"heartbeat_s": 0.2, "lost_after_s": 30},
        limits={"max_message_bytes": 1 << 20},
        peers={"ban_garbage": 400, "suspend_s": 120},
        stats={"interval_s": 0.5},
    )


def _launch(tmp_path, cfg, *, honest: int, adversary: bool, timeout_s: float = 90,
            on_start: Callable[[subprocess.Popen], None] | None = None) -> tuple[Run, dict | None]:
    out = tmp_path / "out"
    config = tmp_path / "campaign.toml"
    config.write_text(toml_dump(cfg))
    report = tmp_path / "adversary.json"
    cmd = [MPIEXEC, "-n", str(honest + 1), sys.executable, "-m", "symfence.coordinator", "--config", str(config),
           "--out", str(out), "--no-status"]
    if adversary:
        cmd += [":", "-n", "1", sys.executable, str(ROOT / "tests" / "adversary.py"), str(report)]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    if on_start is not None:
        on_start(proc)
    try:
        stdout, stderr = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        stdout, stderr = proc.communicate()
        raise AssertionError(f"job hung\nstdout:\n{stdout[-3000:]}\nstderr:\n{stderr[-3000:]}")
    run = Run(proc.returncode, stdout, stderr, out)
    return run, (json.loads(report.read_text()) if adversary and report.exists() else None)


def _honest_rate(s: dict) -> float:
    return (int(s.get("committed_rank_1", 0)) + int(s.get("committed_rank_2", 0))) / max(float(s["run_time"]), 1.0)


@pytest.fixture(scope="module")
def baseline(tmp_path_factory):
    run, _ = _launch(tmp_path_factory.mktemp("baseline"), _cfg(BASELINE_S), honest=2, adversary=False)
    assert run.code == 0, run.explain()
    return run


@pytest.fixture(scope="module")
def attacked(tmp_path_factory):
    folder = tmp_path_factory.mktemp("attacked")

    def banned_long_enough() -> bool:
        banned = logged(folder / "out", "worker.banned")
        return bool(banned) and time.time() - float(banned[0]["ts"]) >= AFTER_BAN_S

    run, report = _launch(folder, _cfg(), honest=2, adversary=True,
                          on_start=stop_when(banned_long_enough, DURATION_S))
    assert run.code == 0, f"{run.stdout[-3000:]}\n{run.stderr[-5000:]}"
    assert report is not None, "the adversary wrote no report"
    return run, report


def test_every_attack_is_counted_exactly_and_nothing_injected_commits(attacked):
    run, rep = attacked
    s, sent = run.stats(), collections.Counter(rep["sent"])
    events = run.events()
    rogue = collections.Counter(e["reason"] for e in events if e["event"] == "result.quarantined" and e["source_rank"] == 3)
    honest = collections.Counter(e["reason"] for e in events if e["event"] == "result.quarantined" and e["source_rank"] != 3)

    def total(why: str) -> int:
        return sum(n for kind, n in sent.items() if rep["reason"].get(kind) == why)

    assert rogue["malformed"] == total("malformed") > 0
    assert rogue["incompatible"] == total("incompatible") > 0
    assert rogue["missing"] == total("missing") > 0
    assert rogue["mismatched"] == total("mismatched") == int(s["quarantined_mismatched"]) > 0
    assert rogue["duplicate"] == total("duplicate") > 0
    assert rogue["expired"] == len(rep["withheld"]) == sent["late"] > 0
    # Invented tokens are stale while the rank holds a dispatch, unowned once it holds none,
    # and counted `banned` (undecoded) once the rank is banned.
    invented = sent["stale_or_unowned"] + sent["flood"] + sent["flood_4096_candidates"]
    assert rogue["stale"] + rogue["unowned"] + int(s["quarantined_banned"]) == invented
    assert int(s["quarantined_banned"]) > 0 and rogue["unowned"] > 0
    # Honest workers quarantine nothing but, on a loaded machine, an occasional late result.
    assert set(honest) <= {"expired"}
    rogue_results = sum(n for kind, n in sent.items() if rep["reason"].get(kind) not in
                        (None, "control_rejected", "side_dropped", "ignored"))
    assert int(s["quarantined_results"]) == rogue_results - sent["genuine"] + sum(honest.values())
    assert int(s["results_received"]) == int(s["committed"]) + int(s["quarantined_results"])

    # CONTROL, unknown tags, oversized frames, the side channel: counted, never raised.
    assert int(s["control_rejected"]) == total("control_rejected") > 0
    assert int(s["mpi_oversized_frames"]) == sent["oversized_2mib"] + sent["oversized_64mib"] + sent["control_oversized"]
    assert int(s["mpi_side_frames_dropped"]) == sent["side_channel"]
    assert int(s["control_banned"]) >= 1  # its heartbeats and STOP_ACK after the ban

    # Of the adversary's results only its one genuine answer per WORK committed, and its
    # over-claims were cut to what the work allows.
    assert int(s["committed_rank_3"]) == sent["genuine"]
    assert int(s["triage_rejected_over_work"]) == sent["claim_2000_candidates"] * 1999
    assert int(s["triage_rejected_coverage_cap"]) == sent["claim_all_edges"] > 0
    assert int(s["edges_found"]) <= 4096  # honest synthetic traces live in 4,096 edges; 65,536 were claimed
    assert int(s["claims_unconfirmed"]) == sent["claim_crash_status"] + sent["claim_crash_candidates"] > 0
    assert int(s["claims_confirmed"]) == 0 and int(s["saved_crashes"]) == 0
    assert not list((run.out / "crashes").glob("id:*"))
    kept = [p for p in (run.out / "unconfirmed").glob("id:*") if p.suffix != ".txt"]  # apart, bounded
    assert 0 < len(kept) <= 64 and all("claimed: crash by rank 3" in p.with_name(p.name + ".txt").read_text()
                                       for p in kept)
    unconfirmed = [e for e in events if e["event"] == "finding.unconfirmed"]
    assert {e["claimed_by"] for e in unconfirmed} == {3} and all(e["rerun_by"] in (1, 2) for e in unconfirmed)

    # Every corpus entry records the rank it came from: all of them honest.
    journal = Journal.read_only(run.out / "journal.sqlite")
    try:
        prov = journal.provenance()
        entries = list(journal.iter_corpus())
        children = [e for e in entries if e.origin != "seed"]
        assert children and {prov[("queue", e.queue_id)][0] for e in children} <= {1, 2}
        assert journal.runs()[-1].clean
    finally:
        journal.close()


def test_slow_rank_is_suspended_and_its_work_retried_elsewhere(attacked):
    run, rep = attacked
    s, events = run.stats(), run.events()
    assert int(s["work_failed"]) == 0
    suspended = [e for e in events if e["event"] == "worker.suspended"]
    assert [e["worker"] for e in suspended] == [3]
    expired_here = {e["token"]: e["work_id"] for e in events if e["event"] == "task.expired" and e["worker"] == 3}
    assert set(expired_here) == {t[:16] for t in rep["withheld"]}
    retries = [e for e in events if e["event"] == "task.redispatched" and e["work_id"] in set(expired_here.values())]
    assert retries and all(e["worker"] != 3 for e in retries)


def test_garbage_flood_bans_the_rank_and_honest_workers_keep_committing(attacked, baseline):
    run, rep = attacked
    s, events = run.stats(), run.events()
    banned = [e for e in events if e["event"] == "worker.banned"]
    assert [e["worker"] for e in banned] == [3] and int(s["workers_banned"]) == 1
    assert not [e for e in events if e["event"] == "worker.lost"]
    # Honest ranks committed in every phase of the attack that lasted a full stats interval.
    start = float(s["start_time"])
    lines = (run.out / "plot_data").read_text().splitlines()
    columns = [c.strip() for c in lines[0].lstrip("# ").split(",")]
    rows = [dict(zip(columns, (x.strip() for x in line.split(",")))) for line in lines[1:] if line.strip()]
    plot = [(float(r["relative_time"]), float(r["committed"])) for r in rows]
    for name, (t0, t1) in rep["phases"].items():
        a, b = rep["t0"] + t0 - start, rep["t0"] + t1 - start
        inside = [c for t, c in plot if a <= t <= b]
        if b - a >= 2.0 and len(inside) >= 2:
            assert inside[-1] > inside[0], f"no commit during phase {name}"
    attacked_rate, base_rate = _honest_rate(s), _honest_rate(baseline.stats())
    print(f"\nhonest commits/s: attacked {attacked_rate:.0f}, honest-only {base_rate:.0f}"
          f" ({attacked_rate / base_rate:.2f}x)")
    assert int(s["committed_rank_1"]) > 0 and int(s["committed_rank_2"]) > 0
    # The coordinator never held an oversized frame: its peak memory stays near the honest run's.
    assert int(s["coordinator_max_rss_kb"]) < int(baseline.stats()["coordinator_max_rss_kb"]) + 48 * 1024
    assert "VIOLATED" not in run.stdout and run.stdout.count("[ok]") == 2
    assert not [e for e in events if e["event"] in ("campaign.stop_ack_missing", "campaign.ticker_failed")]


def test_logs_escape_worker_supplied_text(attacked):
    run, _ = attacked
    out = io.StringIO()
    args = argparse.Namespace(outdir=str(run.out), follow=False, event=None, reason=None, rank=None, json=False)
    assert run_logs(args, out) == 0
    text = out.getvalue()
    n_events = sum(1 for p in (run.out / "logs").glob("*.jsonl") for l in p.read_text().splitlines() if l.strip())
    assert text.count("\n") == n_events  # no forged line
    assert "\x1b" not in text and "\x07" not in text and "\u202e" not in text
    assert "\\x1b" in text and '\\x0a{"event":"campaign.finished","reason":"forged"' in text
    assert not any(line.startswith('{"event"') for line in text.splitlines())
