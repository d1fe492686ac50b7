"""A damaged journal is refused with one line, never used: truncations, byte flips, rows edited
behind its back, an empty file; and `--retry-failed` / charged attempts at the journal level."""

from __future__ import annotations

import random
import shutil
import sqlite3
from pathlib import Path

import pytest

from symfence.coordinator.integrity import JournalDamagedError, JournalError
from symfence.coordinator.journal import FindingKind, Journal, NewEntry, NewFinding, WorkState
from symfence.protocol.ids import derive_token, sha256_hex, work_id_for

EPOCH = bytes(range(32))


def entry(data: bytes, parent: int | None = None) -> NewEntry:
    sha = sha256_hex(data)
    return NewEntry(data, sha, work_id_for("test", "t", sha, 0, {}), target="t", parent=parent,
                    origin="seed" if parent is None else "test", found_s=1.5)


def build(path: Path) -> None:
    """A journal with every kind of row: entries, work in each state, findings, coverage,
    counters, two runs."""
    j = Journal.open(path, resume=False)
    j.begin_run("aa" * 32)
    seeds = j.add_seeds([entry(bytes([i]) * 40) for i in range(60)])
    n = 0
    for i, seed in enumerate(seeds[:45]):
        n += 1
        tok = derive_token(EPOCH, 1, n)
        j.lease(seed.work_id, tok)
        if i % 9 == 0:
            j.fail(seed.work_id, tok, "expired after 1 attempts")
        elif i % 7 == 0:
            j.requeue(seed.work_id, tok, "expired", charge=True)
        else:
            finding = [NewFinding(FindingKind.CRASH, b"crash %d" % i, sha256_hex(b"crash %d" % i),
                                  target="t", detail="Traceback\nValueError: x")] if i % 5 == 0 else []
            j.commit(seed.work_id, tok, status="ok", new_entries=[entry(b"child %d" % i, seed.queue_id)])
            j.add_findings(seed.work_id, finding)
    j.save_coverage(bytes(range(256)) * 16)
    j.save_counters({"dispatched": 45, "committed": 33})
    j.end_run(clean=True)
    j.close()


def content(j: Journal) -> tuple:
    return (j.snapshot().corpus, j.snapshot().done, j.snapshot().failed, list(j.iter_corpus()),
            list(j.iter_findings()), j.coverage(), j.counters(),
            sorted((w, j.work_item(w)) for w in j.known_work_ids()))


@pytest.fixture(scope="module")
def original(tmp_path_factory) -> tuple[Path, tuple]:
    path = tmp_path_factory.mktemp("orig") / "journal.sqlite"
    build(path)
    j = Journal.read_only(path)
    expected = content(j)
    j.close()
    return path, expected


def reopen(path: Path) -> tuple | None:
    """Open as `--resume` does: the content, or None when refused (with a one-line reason)."""
    try:
        j = Journal.open(path, resume=True)
    except JournalError as exc:
        assert "\n" not in str(exc)
        return None
    try:
        got = content(j)
    finally:
        j.close()
    return got


def without_recovery(expected: tuple) -> tuple:
    return expected[:7]


def test_random_byte_flips_are_refused_or_harmless(original, tmp_path):
    """Every flipped byte either is refused, or hit bytes that hold no content (free space,
    unused header fields): the journal then loads exactly what was written. Never anything else."""
    path, expected = original
    size = path.stat().st_size
    rng = random.Random(11)
    refused = 0
    for trial in range(150):
        copy = tmp_path / f"flip{trial}" / "journal.sqlite"
        copy.parent.mkdir()
        shutil.copy(path, copy)
        raw = bytearray(copy.read_bytes())
        at = rng.randrange(size)
        raw[at] ^= rng.randrange(1, 256)
        copy.write_bytes(bytes(raw))
        got = reopen(copy)
        if got is None:
            refused += 1
        else:
            assert without_recovery(got) == without_recovery(expected), f"byte {at} changed the content silently"
    assert refused > 0


@pytest.mark.parametrize("keep", [0, 100, 4096, 0.5, 0.9])
def test_a_truncated_journal_is_refused(original, tmp_path, keep):
    path, _ = original
    copy = tmp_path / "journal.sqlite"
    data = path.read_bytes()
    copy.write_bytes(data[: int(len(data) * keep) if isinstance(keep, float) else keep])
    with pytest.raises(JournalDamagedError) as info:
        Journal.open(copy, resume=True)
    assert "symfence recover" in str(info.value) and "\n" not in str(info.value)
    with pytest.raises(JournalError):
        Journal.read_only(copy)


@pytest.mark.parametrize("sql", [
    "UPDATE corpus SET data = X'00' WHERE queue_id = 3",  # data no longer matches its sha256
    "UPDATE work SET attempts = attempts + 1 WHERE queue_id = 5",
    "UPDATE work SET state = 'done', status = 'ok' WHERE state = 'pending' AND queue_id < 60",
    "DELETE FROM findings WHERE finding_id = (SELECT MAX(finding_id) FROM findings)",
    "UPDATE counters SET value = 7 WHERE name = 'committed'",
    "UPDATE coverage SET map = X'00'",
    "UPDATE runs SET clean = 0",
    "DROP TABLE counters",
])
def test_rows_changed_behind_the_journals_back_are_refused(original, tmp_path, sql):
    path, _ = original
    copy = tmp_path / "journal.sqlite"
    shutil.copy(path, copy)
    raw = sqlite3.connect(copy)
    raw.execute(sql)
    raw.commit()
    raw.close()
    with pytest.raises(JournalDamagedError):
        Journal.open(copy, resume=True)


def test_an_empty_journal_is_refused_under_resume(tmp_path):
    path = tmp_path / "journal.sqlite"
    path.write_bytes(b"")
    with pytest.raises(JournalDamagedError, match="0 bytes"):
        Journal.open(path, resume=True)
    assert path.stat().st_size == 0
    sqlite3.connect(path).execute("CREATE TABLE x (y)").connection.close()
    with pytest.raises(JournalDamagedError, match="no symfence schema"):
        Journal.open(path, resume=True)


def test_voided_leases_are_not_charged_and_failed_work_can_be_retried(tmp_path):
    path = tmp_path / "journal.sqlite"
    j = Journal.open(path, resume=False)
    (seed,) = j.add_seeds([entry(b"deep")])
    for n in range(5):  # five coordinator restarts while it is leased
        j.lease(seed.work_id, derive_token(EPOCH, 1, n))
        j.flush()
        j._conn.close()
        j._conn = None
        j._lock.close()
        j = Journal.open(path, resume=True)
    assert j.work_item(seed.work_id).attempts == 0
    assert j.lease(seed.work_id, derive_token(EPOCH, 1, 9)) == 1
    assert j.fail(seed.work_id, derive_token(EPOCH, 1, 9), "expired after 1 attempts")
    j.close()
    j = Journal.open(path, resume=True)
    assert j.work_item(seed.work_id).state is WorkState.FAILED
    assert j.retry_failed() == 1
    j._conn.close()  # retried durably at once: a kill right after keeps it
    j._conn = None
    j._lock.close()
    j = Journal.open(path, resume=True)
    item = j.work_item(seed.work_id)
    assert (item.state, item.attempts) == (WorkState.PENDING, 0)
    assert [w.work_id for w in j.pending_work()] == [seed.work_id]
    j.close()
