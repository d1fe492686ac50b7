"""The journal: compare-and-set leases, id assignment, group commit, recovery after SIGKILL."""

from __future__ import annotations

import copy
import fcntl
import gc
import multiprocessing
import os
import random
import shutil
import signal
import sqlite3
import tempfile
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from symfence.coordinator.journal import (
    RECOVERY_REASON,
    FindingKind,
    Journal,
    JournalError,
    JournalExistsError,
    JournalLockedError,
    JournalNotFoundError,
    JournalReadOnlyError,
    LeaseError,
    NewEntry,
    NewFinding,
    WorkState,
)
from symfence.protocol.ids import TokenMinter, derive_token, sha256_hex, work_id_for
from symfence.protocol.messages import Status
from tests.examples_budget import examples

EPOCH = bytes(range(32))


def entry(
    data: bytes, *, parent: int | None = None, origin: str = "seed", target: str = "t"
) -> NewEntry:
    sha = sha256_hex(data)
    work_id = work_id_for("test", target, sha, 0, {})
    return NewEntry(data, sha, work_id, target=target, parent=parent, origin=origin)


def finding(kind: FindingKind, data: bytes, detail: str = "", target: str = "t") -> NewFinding:
    return NewFinding(kind, data, sha256_hex(data), target=target, detail=detail)


def token(n: int) -> str:
    return derive_token(EPOCH, 1, n)


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "out" / "journal.sqlite"


@pytest.fixture
def journal(path: Path):
    j = Journal.open(path, resume=False)
    yield j
    j.close()


def test_a_new_journal_is_created_and_an_existing_one_needs_resume(path):
    j = Journal.open(path, resume=False)
    assert j.recovery.previous_clean is None and j.recovery.next_queue_id == 0
    j.add_seeds([entry(b"a")])
    j.close()
    with pytest.raises(JournalExistsError) as info:
        Journal.open(path, resume=False)
    assert "--resume" in str(info.value) and "\n" not in str(info.value)
    j = Journal.open(path, resume=True)
    assert j.next_queue_id == 1
    j.close()


def test_a_second_writer_is_locked_out(journal, path):
    with pytest.raises(JournalLockedError):
        Journal.open(path, resume=True)
    journal.close()
    Journal.open(path, resume=True).close()


def test_seeds_get_contiguous_ids_and_known_ones_are_skipped(journal):
    added = journal.add_seeds([entry(b"a"), entry(b"b"), entry(b"a")])
    assert [(e.queue_id, e.data) for e in added] == [(0, b"a"), (1, b"b")]
    assert journal.add_seeds([entry(b"b"), entry(b"c")])[0].queue_id == 2
    assert [w.data for w in journal.pending_work()] == [b"a", b"b", b"c"]
    assert journal.known_inputs() == {("t", sha256_hex(d)) for d in (b"a", b"b", b"c")}
    assert journal.has_input("t", sha256_hex(b"a")) and not journal.has_input("u", sha256_hex(b"a"))
    assert journal.known_work_ids() == {entry(d).work_id for d in (b"a", b"b", b"c")}


def test_bad_entries_are_refused_before_anything_changes():
    with pytest.raises(ValueError):
        NewEntry(b"a", sha256_hex(b"b"), entry(b"a").work_id)
    with pytest.raises(ValueError):
        NewEntry(b"a", sha256_hex(b"a"), "not-a-work-id")
    with pytest.raises(ValueError):
        NewEntry(b"a", sha256_hex(b"a"), entry(b"a").work_id, new_bits=3)


def test_commit_is_compare_and_set_on_the_lease_token(journal):
    (seed,) = journal.add_seeds([entry(b"a")])
    wid = seed.work_id
    assert journal.lease(wid, token(1)) == 1
    before = (journal.work_item(wid), journal.snapshot())
    wrong = journal.commit(wid, token(2), status=Status.OK, new_entries=[entry(b"x", parent=0)])
    assert wrong is None
    assert (journal.work_item(wid), journal.snapshot()) == before
    receipt = journal.commit(wid, token(1), status="crash", new_entries=[entry(b"x", parent=0)])
    assert receipt is not None and receipt.status is Status.CRASH
    item = journal.work_item(wid)
    assert (item.state, item.token, item.status) == (WorkState.DONE, None, Status.CRASH)
    assert item.attempts == 0  # a commit charges nothing: only work-caused revocations count
    assert journal.commit(wid, token(1), status="ok") is None  # done is done
    with pytest.raises(LeaseError):
        journal.lease(wid, token(3))
    with pytest.raises(LeaseError):
        journal.lease("f" * 64, token(3))


def test_requeue_and_fail_only_with_the_current_token(journal):
    (seed,) = journal.add_seeds([entry(b"a")])
    wid = seed.work_id
    journal.lease(wid, token(1))
    assert not journal.requeue(wid, token(9), "timeout", charge=True)
    assert journal.requeue(wid, token(1), "timeout", charge=True)
    item = journal.work_item(wid)
    assert (item.state, item.token, item.attempts) == (WorkState.PENDING, None, 1)
    assert item.reason == "timeout"
    assert not journal.requeue(wid, token(1), "again")  # not leased any more
    assert journal.lease(wid, token(2)) == 2
    assert journal.requeue(wid, token(2), "cancelled")  # not charged
    assert journal.work_item(wid).attempts == 1
    assert journal.lease(wid, token(2)) == 2
    assert not journal.fail(wid, token(1), "stale token")
    assert journal.commit(wid, token(1), status="ok") is None
    assert journal.fail(wid, token(2), "too many attempts")
    assert journal.work_item(wid).state is WorkState.FAILED
    assert journal.commit(wid, token(2), status="ok") is None
    counts = journal.snapshot()
    assert (counts.pending, counts.leased, counts.done, counts.failed) == (0, 0, 0, 1)


def test_commit_assigns_queue_and_finding_ids_and_skips_known_ones(journal):
    seeds = journal.add_seeds([entry(b"a"), entry(b"b")])
    journal.lease(seeds[0].work_id, token(1))
    receipt = journal.commit(
        seeds[0].work_id, token(1), status="crash",
        new_entries=[
            entry(b"c", parent=0, origin="concolic"), entry(b"b"), entry(b"c"), entry(b"d"),
        ],
    )
    found = journal.add_findings(seeds[0].work_id, [  # once a re-run confirmed them
        finding(FindingKind.CRASH, b"a", "Traceback"),
        finding(FindingKind.CRASH, b"a"),  # skipped: already known
        finding(FindingKind.HANG, b"a"),  # the same input may be a crash and a hang
        finding(FindingKind.HANG, b"h"),
    ])
    assert [(e.queue_id, e.data, e.parent, e.origin) for e in receipt.entries] == [
        (2, b"c", 0, "concolic"), (3, b"d", None, "seed"),
    ]
    assert receipt.skipped_entries == 2
    assert [(f.kind, f.finding_id, f.data) for f in found] == [
        (FindingKind.CRASH, 0, b"a"), (FindingKind.HANG, 0, b"a"), (FindingKind.HANG, 1, b"h"),
    ]
    assert all(f.work_id == seeds[0].work_id for f in found)
    snap = journal.snapshot()
    assert (snap.corpus, snap.crashes, snap.hangs, snap.pending, snap.done) == (4, 1, 2, 3, 1)


def test_inputs_and_findings_are_distinct_per_target(journal):
    a_t, a_u = journal.add_seeds([entry(b"a", target="t"), entry(b"a", target="u")])
    assert (a_t.queue_id, a_t.target, a_u.queue_id, a_u.target) == (0, "t", 1, "u")
    assert a_t.work_id != a_u.work_id
    journal.lease(a_t.work_id, token(1))
    assert journal.commit(a_t.work_id, token(1), status="crash") is not None
    found = journal.add_findings(a_t.work_id, [finding(FindingKind.CRASH, b"a", target="t"),
                                               finding(FindingKind.CRASH, b"a", target="u")])
    assert [(f.finding_id, f.target) for f in found] == [(0, "t"), (1, "u")]
    assert [(w.queue_id, w.target) for w in journal.pending_work()] == [(1, "u")]


def test_an_invalid_commit_changes_nothing(journal):
    (seed,) = journal.add_seeds([entry(b"a")])
    journal.lease(seed.work_id, token(1))
    before = (journal.work_item(seed.work_id), journal.snapshot())
    with pytest.raises(ValueError):
        journal.commit(seed.work_id, token(1), status="exploded")
    with pytest.raises(ValueError):
        journal.commit(seed.work_id, token(1), status="ok", new_entries=[entry(b"b", parent=7)])
    assert (journal.work_item(seed.work_id), journal.snapshot()) == before


def test_flush_returns_exactly_what_became_durable(journal, path):
    seeds = journal.add_seeds([entry(b"a"), entry(b"b")])
    first = journal.flush()
    assert first.entries == tuple(seeds) and first.findings == () and first.ops == 2
    journal.lease(seeds[0].work_id, token(1))
    receipt = journal.commit(seeds[0].work_id, token(1), status="ok", new_entries=[entry(b"c", parent=0)])
    found = tuple(journal.add_findings(seeds[0].work_id, [finding(FindingKind.CRASH, b"a")]))
    ro = Journal.read_only(path)
    assert ro.snapshot().corpus == 2 and ro.snapshot().crashes == 0  # not flushed yet
    ro.close()
    second = journal.flush()
    assert second.entries == receipt.entries and second.findings == found
    assert journal.flush().entries == () and journal.unflushed_ops == 0
    ro = Journal.read_only(path)
    assert list(ro.iter_corpus()) == [*seeds, *receipt.entries]
    assert list(ro.iter_findings()) == list(found)
    assert ro.work_item(seeds[0].work_id) == journal.work_item(seeds[0].work_id)
    ro.close()


def test_a_flush_is_due_by_batch_size_or_age(path):
    now = [100.0]
    j = Journal.open(path, resume=False, batch_ops=3, batch_ms=20.0, clock=lambda: now[0])
    assert not j.needs_flush() and j.flush_delay_s() is None
    j.add_seeds([entry(b"a")])
    assert not j.needs_flush() and j.flush_delay_s() == pytest.approx(0.020)
    now[0] += 0.015
    j.save_counters({"x": 1})
    assert not j.needs_flush() and j.flush_delay_s() == pytest.approx(0.005)  # age of the oldest op
    now[0] += 0.005
    assert j.needs_flush()
    j.flush()
    assert not j.needs_flush()
    j.add_seeds([entry(b"b"), entry(b"c")])
    assert not j.needs_flush()
    j.save_coverage(b"\0" * 4)
    assert j.needs_flush() and j.flush_delay_s() == 0.0
    j.close()


def test_coverage_counters_and_runs_survive_a_restart(path):
    j = Journal.open(path, resume=False)
    assert j.coverage() is None and j.counters() == {}
    j.begin_run("aa" * 32)
    j.save_coverage(b"\1\2\3")
    j.save_counters({"dispatched": 5, "committed": 4})
    j.save_counters({"dispatched": 6})  # latest only
    j.end_run(clean=True)
    j.close()
    j = Journal.open(path, resume=True)
    assert j.coverage() == b"\1\2\3" and j.counters() == {"dispatched": 6}
    assert j.recovery.previous_clean is True
    assert j.begin_run("bb" * 32).run == 2
    j.close()  # no end_run: the run did not end cleanly
    j = Journal.open(path, resume=True)
    assert j.recovery.previous_run.run == 2 and j.recovery.previous_clean is False
    assert [r.epoch for r in j.runs()] == ["aa" * 32, "bb" * 32]
    j.close()


def test_resume_requeues_leases_and_keeps_done_and_attempts(path):
    j = Journal.open(path, resume=False)
    j.begin_run("aa" * 32)
    a, b, c = j.add_seeds([entry(b"a"), entry(b"b"), entry(b"c")])
    j.lease(a.work_id, token(1))
    j.commit(a.work_id, token(1), status="ok")
    j.lease(b.work_id, token(2))
    j.close()
    j = Journal.open(path, resume=True)
    report = j.recovery
    assert (report.requeued, report.pending, report.done, report.failed) == (1, 2, 1, 0)
    assert report.next_queue_id == 3 and report.previous_clean is False
    item = j.work_item(b.work_id)
    assert (item.state, item.token, item.attempts, item.reason) == (
        WorkState.PENDING, None, 0, RECOVERY_REASON,  # a voided lease is not charged
    )
    assert [(w.work_id, w.attempts) for w in j.pending_work()] == [(b.work_id, 0), (c.work_id, 0)]
    assert j.commit(b.work_id, token(2), status="ok") is None  # the old lease is void
    j.close()
    ro = Journal.read_only(path)  # recovery itself was made durable
    assert ro.snapshot().leased == 0
    ro.close()


def test_read_only_sees_the_last_flush_and_never_writes(journal, path):
    (seed,) = journal.add_seeds([entry(b"a")])
    journal.lease(seed.work_id, token(1))
    journal.flush()
    journal.add_seeds([entry(b"b")])  # unflushed
    database = path.read_bytes()
    ro = Journal.read_only(path)
    snap = ro.snapshot()
    assert (snap.corpus, snap.pending, snap.leased) == (1, 0, 1)  # no recovery
    assert ro.work_item(seed.work_id).token == token(1)
    for mutate in (
        lambda: ro.add_seeds([entry(b"c")]),
        lambda: ro.lease(seed.work_id, token(2)),
        lambda: ro.commit(seed.work_id, token(1), status="ok"),
        lambda: ro.flush(),
        lambda: ro.begin_run("00" * 32),
    ):
        with pytest.raises(JournalReadOnlyError):
            mutate()
    journal.flush()
    assert ro.snapshot().corpus == 1 and len(list(ro.iter_corpus())) == 1  # one snapshot
    ro.close()
    assert path.read_bytes() == database
    assert journal.work_item(seed.work_id).state is WorkState.LEASED


def test_read_only_reports_missing_or_foreign_files(tmp_path):
    with pytest.raises(JournalNotFoundError):
        Journal.read_only(tmp_path / "journal.sqlite")
    (tmp_path / "junk.sqlite").write_bytes(b"not a database at all" * 100)
    with pytest.raises(JournalError):
        Journal.read_only(tmp_path / "junk.sqlite")
    other = tmp_path / "other.sqlite"
    sqlite3.connect(other).execute("CREATE TABLE t (x)").connection.close()
    with pytest.raises(JournalError, match="not a symfence journal"):
        Journal.read_only(other)


def test_a_failed_flush_keeps_its_buffer_for_the_next_one(journal, path):
    journal.add_seeds([entry(b"a")])
    blocker = sqlite3.connect(path, timeout=0)
    blocker.execute("BEGIN IMMEDIATE")  # holds the write lock
    journal._conn.execute("PRAGMA busy_timeout = 0")
    with pytest.raises(JournalError, match="cannot write"):
        journal.flush()
    blocker.rollback()
    blocker.close()
    assert journal.unflushed_ops == 1
    assert [e.data for e in journal.flush().entries] == [b"a"]


def test_a_corrupt_journal_is_refused_on_open(path):
    j = Journal.open(path, resume=False)
    j.add_seeds([entry(b"a"), entry(b"b")])
    j.close()
    raw = sqlite3.connect(path)
    raw.execute("UPDATE corpus SET sha256 = (SELECT sha256 FROM corpus WHERE queue_id = 0)")
    raw.commit()
    raw.close()
    with pytest.raises(JournalError, match="damaged"):
        Journal.open(path, resume=True)
    with pytest.raises(JournalError, match="damaged"):
        Journal.read_only(path)
    with open(path.with_name(path.name + ".lock"), "ab") as lock:  # the failed opens let go of it
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)


# --- crashes --------------------------------------------------------------------------------


def _fork() -> multiprocessing.context.ForkContext:
    return multiprocessing.get_context("fork")


def _write_then_wait(path: str, ready) -> None:
    j = Journal.open(path, resume=True)
    seeds = j.add_seeds([entry(bytes([i])) for i in range(5)])
    j.flush()
    j.add_seeds([entry(b"lost 1"), entry(b"lost 2")])
    j.lease(seeds[0].work_id, token(1))
    j.commit(seeds[0].work_id, token(1), status="ok", new_entries=[entry(b"lost 3", parent=0)])
    ready.set()
    time.sleep(60)


def test_unflushed_changes_die_with_the_process_and_ids_continue(path):
    ready = _fork().Event()
    child = _fork().Process(target=_write_then_wait, args=(str(path), ready))
    child.start()
    assert ready.wait(20)
    os.kill(child.pid, signal.SIGKILL)
    child.join()
    j = Journal.open(path, resume=True)
    snap = j.snapshot()
    assert (snap.corpus, snap.pending, snap.done, j.recovery.requeued) == (5, 5, 0, 0)
    assert j.add_seeds([entry(b"next")])[0].queue_id == 5
    j.close()


def _churn(path: str, seed: int, log_path: str) -> None:
    """Lease, commit, requeue, fail and flush at random until killed; log what flushes returned."""
    rng = random.Random(seed)
    log = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    j = Journal.open(path, resume=True, batch_ops=rng.choice([1, 5, 40]), batch_ms=2.0)
    j.begin_run(os.urandom(32).hex())
    if j.next_queue_id == 0:
        j.add_seeds([entry(bytes([i])) for i in range(16)])
    pending = [w.work_id for w in j.pending_work()]
    leased: dict[str, str] = {}
    minter = TokenMinter(os.urandom(32))
    done: list[str] = []
    while pending or leased:
        if pending and (not leased or rng.random() < 0.5):
            work_id = pending.pop(rng.randrange(len(pending)))
            leased[work_id] = minter.mint(1)
            j.lease(work_id, leased[work_id])
        else:
            work_id = rng.choice(list(leased))
            tok = leased.pop(work_id)
            roll = rng.random()
            if roll < 0.1:
                assert j.requeue(work_id, tok, "deadline")
                pending.append(work_id)
            elif roll < 0.15:
                assert j.fail(work_id, tok, "attempts")
            else:
                parent = j.work_item(work_id).queue_id
                children = [
                    entry(rng.randbytes(2), parent=parent, origin="churn")
                    for _ in range(rng.randint(1, 2))
                ]
                crash = [finding(FindingKind.CRASH, rng.randbytes(1))] if rng.random() < 0.2 else []
                receipt = j.commit(work_id, tok, status="ok", new_entries=children)
                j.add_findings(work_id, crash)
                pending.extend(e.work_id for e in receipt.entries)
                done.append(work_id)
        if j.needs_flush():
            flushed = j.flush()
            for e in flushed.entries:
                os.write(log, f"E {e.queue_id} {e.sha256}\n".encode())
            for work_id in done:
                os.write(log, f"D {work_id}\n".encode())
            done = []
    time.sleep(60)  # out of work (unlikely): wait for the kill


@dataclass
class Durable:
    corpus: list[str] = field(default_factory=list)  # sha256 by queue id
    done: dict[str, int] = field(default_factory=dict)  # work_id -> attempts


def _check_durable_invariants(path: Path, previous: Durable, log_path: Path) -> Durable:
    ro = Journal.read_only(path)
    try:
        corpus = list(ro.iter_corpus())
        assert [e.queue_id for e in corpus] == list(range(len(corpus)))  # no gaps
        assert ro.known_work_ids() == {e.work_id for e in corpus}  # one work item per entry
        for e in corpus:
            assert ro.work_item(e.work_id).queue_id == e.queue_id
        by_kind: dict[FindingKind, list[int]] = {kind: [] for kind in FindingKind}
        for f in ro.iter_findings():
            by_kind[f.kind].append(f.finding_id)
        assert all(ids == list(range(len(ids))) for ids in by_kind.values())
        now = Durable([e.sha256 for e in corpus])
        for work_id in ro.known_work_ids():
            item = ro.work_item(work_id)
            assert (item.token is not None) == (item.state is WorkState.LEASED)
            if item.state is WorkState.DONE:
                now.done[work_id] = item.attempts
    finally:
        ro.close()
    # What was durable stays exactly as it was: done is never re-run, ids are never reused.
    assert now.corpus[: len(previous.corpus)] == previous.corpus
    assert all(now.done.get(w) == attempts for w, attempts in previous.done.items())
    # Every flush the child saw return is in the database.
    for line in log_path.read_text().splitlines():
        kind, *rest = line.split()
        if kind == "E" and len(rest) == 2:
            assert now.corpus[int(rest[0])] == rest[1]
        elif kind == "D" and len(rest) == 1:
            assert rest[0] in now.done
    return now


def test_sigkill_at_random_points_keeps_the_journal_exact(tmp_path):
    path = tmp_path / "journal.sqlite"
    log_path = tmp_path / "flushes.log"
    rng = random.Random(20240601)
    durable = Durable()
    for round_number in range(8):
        args = (str(path), rng.randrange(2**32), str(log_path))
        child = _fork().Process(target=_churn, args=args)
        child.start()
        time.sleep(rng.uniform(0.15, 0.4))
        os.kill(child.pid, signal.SIGKILL)
        child.join()
        assert child.exitcode == -signal.SIGKILL, f"child died by itself in round {round_number}"
        ro = Journal.read_only(path)
        leased = ro.snapshot().leased
        ro.close()
        durable = _check_durable_invariants(path, durable, log_path)
        j = Journal.open(path, resume=True)
        assert j.recovery.requeued == leased and j.snapshot().leased == 0
        assert j.recovery.previous_clean is False
        assert j.recovery.next_queue_id == len(durable.corpus)
        j.close()
    assert len(durable.corpus) > 100 and len(durable.done) > 50  # the children did real work


# --- the mirror against a model -------------------------------------------------------------


@dataclass
class Model:
    """What the journal should hold: work states, and corpus and crash hashes in id order."""

    work: dict[str, tuple[WorkState, str | None, int]] = field(default_factory=dict)
    corpus: list[str] = field(default_factory=list)
    findings: dict[FindingKind, list[str]] = field(
        default_factory=lambda: {kind: [] for kind in FindingKind}
    )

    def add(self, e: NewEntry) -> None:
        if e.sha256 not in self.corpus and e.work_id not in self.work:
            self.corpus.append(e.sha256)
            self.work[e.work_id] = (WorkState.PENDING, None, 0)

    def recover(self) -> int:
        leased = [w for w, (state, _, _) in self.work.items() if state is WorkState.LEASED]
        for w in leased:
            self.work[w] = (WorkState.PENDING, None, self.work[w][2])
        return len(leased)

    def with_state(self, state: WorkState) -> list[str]:
        return sorted(w for w, (s, _, _) in self.work.items() if s is state)


small_bytes = st.binary(max_size=2)


class JournalMachine(RuleBasedStateMachine):
    """Random operations, flushes, crashes and restarts; the journal always equals the model."""

    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="journal-model-"))
        self.path = self.dir / "journal.sqlite"
        self.journal = Journal.open(self.path, resume=False, batch_ops=10**9)
        self.model = Model()
        self.durable = Model()
        self.issued = 0

    def teardown(self) -> None:
        if self.journal is not None:
            self.journal.close()
        shutil.rmtree(self.dir)

    def _token(self) -> str:
        self.issued += 1
        return token(self.issued)

    def _pick_token(self, work_id: str, right: bool) -> str:
        current = self.model.work[work_id][1]
        return current if right else self._token()

    @rule(datas=st.lists(small_bytes, max_size=3))
    def add_seeds(self, datas):
        entries = [entry(d) for d in datas]
        before = len(self.model.corpus)
        for e in entries:
            self.model.add(e)
        added = self.journal.add_seeds(entries)
        assert [e.queue_id for e in added] == list(range(before, len(self.model.corpus)))

    @precondition(lambda self: self.model.with_state(WorkState.PENDING))
    @rule(data=st.data())
    def lease(self, data):
        work_id = data.draw(st.sampled_from(self.model.with_state(WorkState.PENDING)))
        tok = self._token()
        attempts = self.model.work[work_id][2]
        assert self.journal.lease(work_id, tok) == attempts + 1
        self.model.work[work_id] = (WorkState.LEASED, tok, attempts)

    @precondition(lambda self: self.model.with_state(WorkState.LEASED))
    @rule(data=st.data(), right=st.booleans(), children=st.lists(small_bytes, max_size=3),
          crash=st.none() | small_bytes)
    def commit(self, data, right, children, crash):
        work_id = data.draw(st.sampled_from(self.model.with_state(WorkState.LEASED)))
        tok = self._pick_token(work_id, right)
        entries = [entry(d, parent=0, origin="model") for d in children]
        findings = [] if crash is None else [finding(FindingKind.CRASH, crash)]
        receipt = self.journal.commit(work_id, tok, status="ok", new_entries=entries)
        if not right:
            assert receipt is None
            return
        self.journal.add_findings(work_id, findings)
        before = len(self.model.corpus)
        for e in entries:
            self.model.add(e)
        assert [e.queue_id for e in receipt.entries] == list(range(before, len(self.model.corpus)))
        crashes = self.model.findings[FindingKind.CRASH]
        if crash is not None and sha256_hex(crash) not in crashes:
            crashes.append(sha256_hex(crash))
        self.model.work[work_id] = (WorkState.DONE, None, self.model.work[work_id][2])

    @precondition(lambda self: self.model.with_state(WorkState.LEASED))
    @rule(data=st.data(), right=st.booleans(), to_failed=st.booleans(), charge=st.booleans())
    def release(self, data, right, to_failed, charge):
        work_id = data.draw(st.sampled_from(self.model.with_state(WorkState.LEASED)))
        tok = self._pick_token(work_id, right)
        if to_failed:
            assert self.journal.fail(work_id, tok, "test") is right
        else:
            assert self.journal.requeue(work_id, tok, "test", charge=charge) is right
        if right:
            state = WorkState.FAILED if to_failed else WorkState.PENDING
            charged = to_failed or charge
            self.model.work[work_id] = (state, None, self.model.work[work_id][2] + charged)

    @rule()
    def retry_failed(self):
        failed = self.model.with_state(WorkState.FAILED)
        assert self.journal.retry_failed() == len(failed)
        for work_id in failed:
            self.model.work[work_id] = (WorkState.PENDING, None, 0)
        if failed:  # retry_failed flushes
            self.durable = copy.deepcopy(self.model)

    @rule()
    def flush(self):
        receipt = self.journal.flush()
        assert [e.sha256 for e in receipt.entries] == self.model.corpus[len(self.durable.corpus):]
        durable_crashes = len(self.durable.findings[FindingKind.CRASH])
        crashes = self.model.findings[FindingKind.CRASH]
        assert [f.sha256 for f in receipt.findings] == crashes[durable_crashes:]
        self.durable = copy.deepcopy(self.model)
        ro = Journal.read_only(self.path)
        try:
            self._assert_matches(ro, self.model)
        finally:
            ro.close()

    @rule()
    def crash(self):
        """The process dies: nothing unflushed survives (a dropped journal closes unflushed)."""
        self.journal = None
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ResourceWarning)
            gc.collect()
        self._reopen(copy.deepcopy(self.durable))

    @rule()
    def clean_restart(self):
        self.journal.close()
        self._reopen(self.model)

    def _reopen(self, survivor: Model) -> None:
        self.journal = Journal.open(self.path, resume=True, batch_ops=10**9)
        assert self.journal.recovery.requeued == survivor.recover()
        self.model = survivor
        self.durable = copy.deepcopy(survivor)

    @invariant()
    def journal_equals_model(self):
        self._assert_matches(self.journal, self.model)

    @staticmethod
    def _assert_matches(journal: Journal, model: Model) -> None:
        assert journal.known_work_ids() == set(model.work)
        for work_id, (state, tok, attempts) in model.work.items():
            item = journal.work_item(work_id)
            assert (item.state, item.token, item.attempts) == (state, tok, attempts)
        assert journal.known_inputs() == {("t", sha) for sha in model.corpus}
        snap = journal.snapshot()
        assert snap.corpus == len(model.corpus)
        assert snap.crashes == len(model.findings[FindingKind.CRASH])
        for state in WorkState:
            assert getattr(snap, state.value) == len(model.with_state(state))
        assert [w.work_id for w in journal.pending_work()] == [
            w for w, _ in sorted(
                ((w, journal.work_item(w).queue_id) for w in model.with_state(WorkState.PENDING)),
                key=lambda pair: pair[1],
            )
        ]


TestJournalModel = JournalMachine.TestCase
TestJournalModel.settings = settings(max_examples=examples(40), stateful_step_count=25, deadline=None)
