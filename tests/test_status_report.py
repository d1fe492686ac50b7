"""`symfence status`: counts from a journal the test builds, quarantine lines from fuzzer_stats."""

from __future__ import annotations

import os

from pathlib import Path

import pytest

from symfence.coordinator.journal import FindingKind, Journal, NewEntry, NewFinding
from symfence.coordinator.status_report import StatusError, render_status
from symfence.protocol.ids import derive_token, sha256_hex, work_id_for

EPOCH = bytes(range(32))


def entry(data: bytes) -> NewEntry:
    sha = sha256_hex(data)
    return NewEntry(data, sha, work_id_for("test", "t", sha, 0, {}), target="t")


def finding(kind: FindingKind, data: bytes) -> NewFinding:
    return NewFinding(kind, data, sha256_hex(data), target="t", detail="Traceback ...")


def fields(report: str) -> dict[str, str]:
    out = {}
    for line in report.splitlines():
        key, _, value = line.partition(" : ")
        out[key.strip()] = value.strip()
    return out


def build_campaign(out: Path, *, end: bool) -> Journal:
    """6 seeds: 2 done (one found a crash and a hang), 1 failed, 1 leased, 2 pending."""
    j = Journal.open(out / "journal.sqlite", resume=False)
    j.begin_run("ab" * 32)
    seeds = j.add_seeds([entry(bytes([i])) for i in range(6)])
    for n, seed in enumerate(seeds[:4]):
        j.lease(seed.work_id, derive_token(EPOCH, 1, n))
    j.commit(seeds[0].work_id, derive_token(EPOCH, 1, 0), status="ok")
    j.commit(seeds[1].work_id, derive_token(EPOCH, 1, 1), status="crash")
    j.add_findings(seeds[1].work_id, [finding(FindingKind.CRASH, b"boom"), finding(FindingKind.HANG, b"zzz")])
    j.fail(seeds[2].work_id, derive_token(EPOCH, 1, 2), "3 attempts")
    j.flush()
    if end:
        j.end_run(clean=True)
    return j


STATS = """\
start_time            : 1700000000
corpus_count          : 6
quarantined_results   : 7
quarantined_malformed : 2
quarantined_duplicate : 5
saved_crashes         : 1
"""


def test_counts_come_from_the_journal_and_quarantine_from_fuzzer_stats(tmp_path):
    build_campaign(tmp_path, end=True).close()
    (tmp_path / "fuzzer_stats").write_text(STATS)
    report = render_status(tmp_path)
    got = fields(report)
    assert got["work"] == "2 pending, 1 leased, 2 done, 1 failed (6 total)"
    assert got["corpus"] == "6 entries"
    assert (got["crashes"], got["hangs"], got["runs"]) == ("1", "1", "1")
    assert "ended cleanly" in got["last run"]
    quarantine = [
        line.split(" : ")[0].strip() for line in report.splitlines() if "quarantined_" in line
    ]
    assert quarantine == ["quarantined_results", "quarantined_malformed", "quarantined_duplicate"]
    assert (got["quarantined_results"], got["quarantined_duplicate"]) == ("7", "5")
    assert "start_time" not in got and "saved_crashes" not in got


def test_a_run_that_did_not_end_is_reported_and_a_live_journal_can_be_read(tmp_path):
    live = build_campaign(tmp_path, end=False)
    live.add_seeds([entry(b"unflushed")])
    got = fields(render_status(tmp_path))
    assert f"running now (pid {os.getpid()})" in got["last run"]  # the lock is held
    assert got["corpus"] == "6 entries"  # the last flush, not the coordinator's memory
    assert got["quarantine"].startswith("unknown")
    live.close()  # like a kill: the lock is released and the run has no end
    got = fields(render_status(tmp_path))
    assert got["corpus"] == "7 entries"
    assert "killed or crashed" in got["last run"] and "running" not in got["last run"]


def test_a_run_that_ended_badly_is_reported(tmp_path):
    j = build_campaign(tmp_path, end=False)
    j.end_run(clean=False)
    j.close()
    assert "NOT cleanly" in fields(render_status(tmp_path))["last run"]


def test_no_runs_yet(tmp_path):
    Journal.open(tmp_path / "journal.sqlite", resume=False).close()
    got = fields(render_status(tmp_path))
    assert got["last run"] == "none recorded" and got["work"].startswith("0 pending")


def test_a_directory_without_a_journal_is_a_one_line_error(tmp_path):
    (tmp_path / "fuzzer_stats").write_text(STATS)
    for outdir in (tmp_path, tmp_path / "missing"):
        with pytest.raises(StatusError) as info:
            render_status(outdir)
        message = str(info.value)
        assert str(outdir) in message and "journal" in message and "\n" not in message


def test_a_file_that_is_not_a_journal_is_a_one_line_error(tmp_path):
    (tmp_path / "journal.sqlite").write_bytes(b"garbage" * 1000)
    with pytest.raises(StatusError) as info:
        render_status(tmp_path)
    assert "\n" not in str(info.value)
