"""The coordinator core driven with frames only (no MPI, no event loop, no threads): frames in, effects out.

Each test builds a `Core` over a real journal (its in-memory mirror; a `Flush` effect is carried
out here by `journal.flush()`, as the shell's writer thread would), says HELLO from two worker
ranks with real CONTROL frames, starts dispatching and answers the WORKs it sent with RESULT
frames encoded by the worker's own codec.
"""

from __future__ import annotations

import ast
from dataclasses import replace
from pathlib import Path

import pytest
import structlog.testing

from symfence.coordinator.config import parse
from symfence.coordinator.core import Core
from symfence.coordinator.effects import Flush, HostReport, Log, Minimized, Quarantined, Send, Stop
from symfence.coordinator.journal import Journal, NewEntry, WorkState
from symfence.coordinator.outputs import OutputDir
from symfence.coordinator.scheduler import WorkItem
from symfence.coordinator.triage import Triage
from symfence.coordinator.workkinds import CONTINUED_REASON, MAX_CONTINUATIONS, continuation
from symfence.protocol.codec import decode_control, decode_work_frame, encode, encode_batch
from symfence.protocol.coverage import pack_trace
from symfence.protocol.ids import DispatchToken, Rank, WorkId, sha256_hex, work_id_for
from symfence.protocol.messages import RERUN_BOUND, Control, ControlKind, Cost, Result, Status, Tag, Work
from symfence.protocol.reasons import Reason

ROOT = Path(__file__).resolve().parent.parent
IO = {"mpi4py", "asyncio", "structlog", "uvloop", "sqlite3", "threading", "socket", "os", "shutil", "pathlib",
      "subprocess", "time"}
CORE = ("coordinator/core.py", "coordinator/effects.py", "coordinator/confirm.py",
        "coordinator/membership.py", "coordinator/workkinds.py")


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _core(tmp_path: Path, *, seeds: int = 12, depth: int = 2, max_batch: int = 8, deadline_s: float = 0.0,
          batch_ops: int = 1, ban_garbage: float = 200.0,
          triage_base: str = "synthetic") -> tuple[Core, Journal, Clock]:
    cfg = parse({"campaign": {"executor": "synthetic", "duration_s": 0}, "mpi": {"max_batch": max_batch},
                 "dispatch": {"depth": depth, "deadline_s": deadline_s},
                 "synthetic": {"seeds": seeds, "task_ms": 0}, "journal": {"batch_ops": batch_ops},
                 "limits": {"max_refused_share": 1.0}, "peers": {"ban_garbage": ban_garbage}})
    clock = Clock()
    out = OutputDir(tmp_path / "out")
    journal = Journal.open(out.root / "journal.sqlite", resume=False, batch_ops=batch_ops, clock=clock)
    triage = Triage(out, journal, base_executor=triage_base, base_options={})  # "concolic": it minimizes
    core = Core(cfg, journal, triage, world_size=3, token_key=b"k" * 32, clock=clock)
    journal.begin_run(core.minter.epoch.hex())
    _add_seeds(core, journal, range(seeds))
    journal.flush()
    return core, journal, clock


def _add_seeds(core: Core, journal: Journal, numbers: range) -> None:
    """Journal seeds b"seed-N" for N in `numbers` and queue them in the core, as seeding.py does."""
    entries = []
    for i in numbers:
        data = b"seed-%d" % i
        sha = sha256_hex(data)
        wid = work_id_for("synthetic", "synthetic", sha, 0, core.options)
        entries.append(NewEntry(sha256=sha, data=data, bound=0, parent=None, origin="seed", new_bits=0,
                                found_s=0.0, work_id=wid, target="synthetic"))
    core.seeded(journal.add_seeds(entries))


def _hello(core: Core, rank: int, max_batch: int = 8) -> list:
    frame = encode(Control(ControlKind.HELLO, info={"max_batch": max_batch, "host": "h", "pid": 1}))
    return core.receive([(Rank(rank), Tag.CONTROL, frame, 0)])


def _works(effects: list) -> dict[int, list[list[Work]]]:
    """The WORK frames among `effects`, per rank: a list of frames, each a list of WORKs."""
    out: dict[int, list[list[Work]]] = {}
    for e in effects:
        if isinstance(e, Send) and e.tag == Tag.WORK:
            out.setdefault(e.rank, []).append(decode_work_frame(e.frame))
    return out


def _answer(w: Work, **kw) -> Result:
    return Result(w.token, w.work_id, Status.OK, cost=Cost(0.001, 0.001, 0.0, 1), cov_version=w.cov_version,
                  trace=pack_trace({hash(w.data) % 1000 + 1: 1}), **kw)


def _started(tmp_path: Path, **kw) -> tuple[Core, Journal, Clock, dict[int, list[Work]]]:
    core, journal, clock = _core(tmp_path, **kw)
    for r in (1, 2):
        effects = _hello(core, r)
        setup = [decode_control(e.frame) for e in effects if isinstance(e, Send)]
        assert [c.kind for c in setup] == [ControlKind.SETUP] and setup[0].info["rank"] == r
        assert any(isinstance(e, HostReport) and e.kind == "hello" for e in effects)
    effects = core.start()
    first = _works(effects)
    assert _apply_flush(core.tick(clock.now), journal) == 1  # the first dispatches' leases, one write
    assert sorted(first) == [1, 2] and all(len(frames) == 1 for frames in first.values())  # one frame each
    return core, journal, clock, {r: frames[0] for r, frames in first.items()}


def _apply_flush(effects: list, journal: Journal) -> int:
    flushes = [e for e in effects if isinstance(e, Flush)]
    for _ in flushes:
        journal.flush()
    return len(flushes)


def _state(core: Core, journal: Journal) -> tuple:
    """What a result must not change when it is quarantined."""
    return (core.stats.committed, len(core.inflight), sorted(core.inflight.tokens_of(Rank(1))),
            sorted(core.inflight.tokens_of(Rank(2))), journal.unflushed_ops, journal.snapshot().done,
            bytes(core.coverage.seen))


@pytest.mark.parametrize("name", CORE)
def test_the_core_imports_no_io(name):
    tree = ast.parse((ROOT / name).read_text())
    names = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    names |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert not names & IO, f"{name} imports {sorted(names & IO)}"


def test_a_current_result_commits_journals_and_refills_its_slot(tmp_path):
    core, journal, _, works = _started(tmp_path)
    w = works[1][0]
    effects = core.receive([(Rank(1), Tag.RESULT, encode(_answer(w)), 0)])
    assert not [e for e in effects if isinstance(e, Quarantined)]
    refill = _works(effects)
    assert list(refill) == [1] and len(refill[1]) == 1 and len(refill[1][0]) == 1  # one WORK, one frame
    assert refill[1][0][0].token not in {x.token for x in works[1]}  # a new dispatch under a new token
    assert core.stats.committed == 1 and w.token not in core.inflight
    assert not _apply_flush(effects, journal)  # the group commit is the tick's ...
    assert _apply_flush(core.tick(core.clock()), journal) == 1  # ... one write
    assert journal.snapshot().done == 1  # the journal row is durable after the one write
    assert core.coverage.seen.count(0) < len(core.coverage.seen)  # its trace reached the map


@pytest.mark.parametrize("case", ["stale", "duplicate", "misrouted", "unowned", "mismatched", "malformed"])
def test_a_result_the_fence_refuses_is_quarantined_with_its_reason_and_changes_nothing(tmp_path, case):
    core, journal, _, works = _started(tmp_path)
    source, frame = Rank(1), b""
    if case == "duplicate":  # the same result twice: the first commits
        first = encode(_answer(works[1][0]))
        _apply_flush(core.receive([(source, Tag.RESULT, first, 0)]) + core.tick(core.clock()), journal)
        frame = first
    elif case == "stale":  # a token this epoch never issued
        frame = encode(Result(DispatchToken("ab" * 32), works[1][0].work_id, Status.OK))
    elif case == "misrouted":  # rank 2's token, sent by rank 1
        frame = encode(_answer(works[2][0]))
    elif case == "unowned":  # a rank with nothing in flight sends a token it never had
        core.halt()  # nothing is refilled from now on
        for w in works[2]:
            answer = encode(_answer(w))
            _apply_flush(core.receive([(Rank(2), Tag.RESULT, answer, 0)]) + core.tick(core.clock()), journal)
        assert not core.inflight.tokens_of(Rank(2))
        source, frame = Rank(2), encode(Result(DispatchToken("cd" * 32), WorkId("ef" * 32), Status.OK))
    elif case == "mismatched":  # the right token with another work id
        frame = encode(Result(works[1][0].token, WorkId("12" * 32), Status.OK))
    else:
        frame = b"\xc1 not msgpack"
    before = _state(core, journal)
    effects = core.receive([(source, Tag.RESULT, frame, 0)])
    (q,) = [e for e in effects if isinstance(e, Quarantined)]
    assert q.reason is Reason(case) and q.source == source
    assert not _works(effects) and not [e for e in effects if isinstance(e, Flush)]
    assert _state(core, journal) == before
    assert core.stats.quarantine[Reason(case)] == 1


def test_a_frame_of_n_results_is_one_journal_write_and_one_refill_frame(tmp_path):
    core, journal, _, works = _started(tmp_path, depth=4)
    n = len(works[1])
    assert n == 4
    frame = encode_batch("results", [encode(_answer(w)) for w in works[1]])
    effects = core.receive([(Rank(1), Tag.RESULT, frame, 0)])
    assert core.stats.committed == n
    refill = _works(effects)
    assert list(refill) == [1] and len(refill[1]) == 1 and len(refill[1][0]) == n  # n WORKs in ONE frame
    assert not _apply_flush(effects, journal)
    assert _apply_flush(core.tick(core.clock()), journal) == 1  # ONE group commit for the n results
    assert journal.snapshot().done == n


def test_an_expired_dispatch_is_revoked_cancelled_and_its_work_goes_elsewhere(tmp_path):
    core, journal, clock, works = _started(tmp_path, depth=1, deadline_s=5.0, seeds=4)
    (w1,), (w2,) = works[1], works[2]
    assert core.receive([]) == []  # nothing received: nothing happens
    effects = []
    for _ in range(12):  # both deadlines pass, ticked as the shell's ticker does (a gap would be a pause)
        clock.now += 0.5
        effects += core.tick(clock.now)
    cancels = [decode_control(e.frame) for e in effects if isinstance(e, Send) and e.tag == Tag.CONTROL]
    assert any(c.kind is ControlKind.CANCEL and w1.token in c.tokens for c in cancels)
    assert any(isinstance(e, Log) and e.event == "task.expired" for e in effects)
    assert core.stats.expired == 2 and w1.token not in core.inflight and w2.token not in core.inflight
    assert not _works(effects)  # the revoked dispatches still take their slots (depth 1) ...
    late = core.receive([(Rank(1), Tag.RESULT, encode(_answer(w1)), 0)])  # ... until the late answer
    assert [e.reason for e in late if isinstance(e, Quarantined)] == [Reason.EXPIRED]
    (retry,) = _works(late)[1][0]  # rank 1 is free again: it gets rank 2's expired work, attempt 2
    assert retry.work_id == w2.work_id and retry.attempt == 2
    assert core.stats.committed == 0 and journal.snapshot().done == 0


def test_work_is_not_exhausted_while_seeds_are_still_to_be_journaled(tmp_path):
    """The shell journals the seeds past `campaign.seed_first` while dispatch runs: the queue may
    run dry before they come (coordinator/seeding.py); then the core waits and `refill` sends
    the ones that came."""
    core, journal, clock, works = _started(tmp_path, seeds=2, depth=1)
    core.seeds_pending = True
    effects = core.receive([(Rank(r), Tag.RESULT, encode(_answer(ws[0])), 0) for r, ws in works.items()])
    assert not [e for e in effects if isinstance(e, Stop)] and not _works(effects)
    assert not [e for e in core.tick(clock.now + 1) if isinstance(e, Stop)]
    _add_seeds(core, journal, range(2, 5))
    core.seeds_pending = False
    more = _works(core.refill())
    assert sorted(more) == [1, 2] and sum(len(f[0]) for f in more.values()) == 2  # depth 1: one each
    assert not [e for e in core.tick(clock.now + 1) if isinstance(e, Stop)]  # one seed still queued


def test_the_last_result_of_exhausted_work_stops_the_campaign(tmp_path):
    core, journal, _, works = _started(tmp_path, seeds=2, depth=1)
    effects = core.receive([(Rank(r), Tag.RESULT, encode(_answer(ws[0])), 0) for r, ws in works.items()])
    assert [e.reason for e in effects if isinstance(e, Stop)] == ["work exhausted"]
    assert core.stats.committed == 2 and not _works(effects)


@pytest.mark.parametrize("kind", [ControlKind.STOP_ACK, ControlKind.YIELD, ControlKind.CANCEL])
def test_control_frames_a_rank_should_not_send_are_refused_and_counted(tmp_path, kind):
    core, _, _, _ = _started(tmp_path)
    effects = core.receive([(Rank(1), Tag.CONTROL, encode(Control(kind)), 0)])
    assert [e.event for e in effects if isinstance(e, Log)] == ["control.unexpected"]
    assert core.stats.control_rejected == 1 and not core.stop_acks


def test_the_drain_asks_every_rank_with_work_in_flight_to_answer_early(tmp_path):
    """At the end of a campaign, YIELD goes to each rank that holds dispatches (their fuzz turns
    and engine tasks answer with what they have, committed in the drain), and nothing new is
    dispatched; a rank with nothing in flight is not asked."""
    core, _, _, works = _started(tmp_path, seeds=4, depth=2)  # every seed in flight, two per rank
    for w in works[2]:
        assert not _works(core.receive([(Rank(2), Tag.RESULT, encode(_answer(w)), 0)]))  # nothing left
    assert not core.inflight.tokens_of(Rank(2)) and len(core.inflight.tokens_of(Rank(1))) == 2
    core.halt()
    effects = core.drain()
    sent = [(e.rank, decode_control(e.frame).kind)
            for e in effects if isinstance(e, Send) and e.tag == Tag.CONTROL]
    assert sent == [(1, ControlKind.YIELD)] and not _works(effects)


def test_a_rank_sending_garbage_is_banned_its_work_is_requeued_and_it_is_heard_no_more(tmp_path):
    core, journal, _, works = _started(tmp_path, ban_garbage=3.0)
    effects: list = []
    for _ in range(4):  # 4 undecodable frames score 4 > 3
        effects += core.receive([(Rank(1), Tag.RESULT, b"\xc1 garbage", 0)])
    assert [e.reason for e in effects if isinstance(e, Quarantined)] == [Reason.MALFORMED] * 4
    assert [e.fields["worker"] for e in effects if isinstance(e, Log) and e.event == "worker.banned"] == [1]
    assert not core.inflight.tokens_of(Rank(1)) and not _works(effects).get(1)  # revoked, nothing new to it
    answered = encode_batch("results", [encode(_answer(w)) for w in works[1]])
    _apply_flush(core.tick(core.clock()), journal)  # the requeues of its work, written
    before = _state(core, journal)
    late = core.receive([(Rank(1), Tag.RESULT, answered, 0)]) + core.tick(core.clock())  # counted only
    assert not [e for e in late if isinstance(e, (Quarantined, Flush)) or isinstance(e, Send) and e.rank == 1]
    assert _state(core, journal) == before
    assert core.stats.quarantine[Reason.BANNED] == 1
    assert all(journal.work_item(w.work_id).state is WorkState.PENDING for w in works[1])  # requeued
    assert core.stats.lost == len(works[1])
    for w in works[2]:  # rank 2 goes on: committed and refilled
        effects = core.receive([(Rank(2), Tag.RESULT, encode(_answer(w)), 0)])
        assert list(_works(effects)) == [2]
    assert core.stats.committed == len(works[2])


def test_a_heartbeat_that_does_not_list_a_received_work_revokes_it_as_lost(tmp_path):
    core, journal, _, works = _started(tmp_path)
    held = [w.token for w in works[1][1:]]  # the first WORK arrived (2 received) but is not held
    beat = encode(Control(ControlKind.HEARTBEAT, tuple(held), {"work_received": len(works[1])}))
    effects = core.receive([(Rank(1), Tag.CONTROL, beat, 0)])
    assert [e.fields["token"] for e in effects if isinstance(e, Log) and e.event == "task.lost"] \
        == [works[1][0].token[:16]]
    assert works[1][0].token not in core.inflight and core.stats.lost == 1
    (refill,) = _works(effects)[1]  # its slot is dispatched again: other work (the lost item avoids rank 1)
    assert len(refill) == 1 and refill[0].work_id != works[1][0].work_id
    assert journal.work_item(works[1][0].work_id).state is WorkState.PENDING  # requeued, not lost


def test_the_shared_stores_answers_apply_a_committed_result_and_refuse_a_stale_one(tmp_path):
    """A result parked for the campaign store's group commit (issue 29) is applied only through
    `Core.store_settled`, after the store answered: the committed one like a local commit, the
    refused one not at all (its dispatch ends as refused, its work pending again, `stale_lease`)."""
    core, journal, clock, works = _started(tmp_path)
    ok, late = works[1][0], works[1][1]
    before = _state(core, journal)
    effects = core.store_settled([(Rank(1), _answer(ok), None), (Rank(1), _answer(late), "lease_expired")])
    quarantined = [e for e in effects if isinstance(e, Quarantined)]
    got = [(q.reason, q.token, q.work_id) for q in quarantined]
    assert got == [(Reason.STALE_LEASE, late.token, late.work_id)]
    assert "lease_expired" in quarantined[0].detail
    assert core.stats.committed == before[0] + 1 and core.stats.refused == 1
    assert core.stats.snapshot().quarantined[Reason.STALE_LEASE.value] == 1
    assert ok.token not in core.inflight and late.token not in core.inflight
    assert core.peers.peer(Rank(1)).garbage == 0  # a late lease is not the worker's fault
    later = core.tick(clock.now)
    assert _apply_flush(later, journal) == 1
    assert journal.work_item(ok.work_id).state is WorkState.DONE
    assert journal.work_item(late.work_id).state is WorkState.PENDING  # back to pending, nothing applied
    refill = [w for frame in _works(effects + later).get(1, []) for w in frame]
    assert len(refill) == 2 and {w.work_id for w in refill}.isdisjoint({ok.work_id, late.work_id})


def _crash(w: Work, where: str) -> Result:
    detail = f'Traceback (most recent call last):\n  File "t.py", line 3, in {where}\nValueError: planted\n'
    return Result(w.token, w.work_id, Status.CRASH, cost=Cost(0.001, 0.001, 0.0, 1),
                  cov_version=w.cov_version, trace=pack_trace({hash(w.data) % 1000 + 1: 1}), error=detail)


def test_a_claimed_crash_is_rerun_on_a_full_rank_beyond_its_depth_one_at_a_time(tmp_path):
    """A find is confirmed at once: its re-run goes to another rank even when that rank's slots
    are all taken (by fuzz turns, in a hybrid campaign), as one slot beyond its depth, marked as
    a re-run (RERUN_BOUND: the worker runs it first and ends its fuzz turn early for it); a
    second claim meanwhile waits for a free slot, as before."""
    core, journal, _, works = _started(tmp_path, depth=2)
    assert core.inflight.occupied(Rank(2)) == 2  # rank 2 is full
    effects = core.receive([(Rank(1), Tag.RESULT, encode(_crash(works[1][0], "first")), 0)])
    sent = _works(effects)
    reruns = [w for frames in sent.get(2, []) for w in frames]
    assert [w.bound for w in reruns] == [RERUN_BOUND], sent  # the claimant (rank 1) is not asked
    assert core.inflight.occupied(Rank(2)) == 3
    assert all(w.bound < RERUN_BOUND for frames in sent.get(1, []) for w in frames)
    effects = core.receive([(Rank(1), Tag.RESULT, encode(_crash(works[1][1], "second")), 0)])
    assert 2 not in _works(effects) and core.inflight.occupied(Rank(2)) == 3  # one re-run beyond, no more
    assert len(core.claims.queue) == 1
    # The first re-run agrees: the finding is saved, and the waiting claim takes the freed slot.
    effects = core.receive([(Rank(2), Tag.RESULT, encode(_crash(reruns[0], "first")), 0)])
    again = [w for frames in _works(effects).get(2, []) for w in frames]
    assert [w.bound for w in again] == [RERUN_BOUND] and core.claims.confirmed == 1
    assert core.inflight.occupied(Rank(2)) == 3 and not len(core.claims.queue)


def test_a_claim_its_rerun_does_not_agree_with_is_kept_apart_once_per_identity(tmp_path, monkeypatch):
    """A crash that needs the state earlier inputs left does not happen again alone: not a finding
    (nothing is journaled on the claimer's word), but its input and traceback are kept apart for
    the user, once per identity and at most MAX_UNCONFIRMED_SAVED in a run (a flood of false
    claims costs that many files)."""
    from symfence.coordinator import confirm
    from symfence.coordinator.effects import SaveUnconfirmed

    monkeypatch.setattr(confirm, "MAX_UNCONFIRMED_SAVED", 2)
    core, journal, _, works = _started(tmp_path, seeds=12, depth=3)
    kept: list[SaveUnconfirmed] = []
    rank1 = list(works[1])
    for where in ("stateful", "stateful", "other", "third"):
        effects = core.receive([(Rank(1), Tag.RESULT, encode(_crash(rank1.pop(0), where)), 0)])
        sent = _works(effects)
        rank1 += [w for frames in sent.get(1, []) for w in frames]
        rerun = next(w for frames in sent.get(2, []) for w in frames if w.bound == RERUN_BOUND)
        effects = core.receive([(Rank(2), Tag.RESULT, encode(_answer(rerun)), 0)])  # ran clean alone
        rank1 += [w for frames in _works(effects).get(1, []) for w in frames]
        kept += [e for e in effects if isinstance(e, SaveUnconfirmed)]
    assert core.claims.unconfirmed == 4 and core.claims.confirmed == 0
    assert [(e.number, e.kind, e.claimed_by, e.rerun_by, e.rerun_status) for e in kept] == [
        (0, "crash", 1, 2, "ok"), (1, "crash", 1, 2, "ok")]  # "stateful" once, "other", then the cap
    assert "in stateful" in kept[0].detail and "in other" in kept[1].detail
    assert not list(journal.iter_findings())  # nothing journaled on the claimer's word


def test_a_rank_on_probation_gets_no_rerun_beyond_its_depth(tmp_path):
    core, journal, _, works = _started(tmp_path, depth=2)
    core.peers.capacity = lambda rank, depth: 1 if rank == 2 else depth  # rank 2: probation (one slot)
    effects = core.receive([(Rank(1), Tag.RESULT, encode(_crash(works[1][0], "first")), 0)])
    assert 2 not in _works(effects) and len(core.claims.queue) == 1


def test_a_result_cut_short_commits_its_finds_and_its_item_runs_on_from_where_it_stopped(tmp_path):
    """An engine task cut short (a re-run waited on its worker, or the drain) answers with
    ``resume_at``: what it found is committed, and its item goes back pending, dispatched again
    with that bound, until a run ends on its own; then the campaign's work is exhausted."""
    core, journal, _, works = _started(tmp_path, seeds=2, depth=1)
    w = works[1][0]
    effects = core.receive([(Rank(1), Tag.RESULT, encode(_answer(w, resume_at=5)), 0)])
    again = [x for frames in _works(effects).get(1, []) for x in frames]
    assert [(x.work_id, x.bound) for x in again] == [(w.work_id, 5)] and again[0].token != w.token
    assert core.stats.committed == 1 and core.stats.continued == 1
    _apply_flush(core.tick(core.clock()), journal)
    assert journal.snapshot().done == 0  # pending again, then leased to its continuation
    assert journal.work_item(w.work_id).reason == CONTINUED_REASON
    # A hostile or confused rank's resume_at below the item's bound never goes back before it.
    effects = core.receive([(Rank(1), Tag.RESULT, encode(_answer(again[0], resume_at=2)), 0)])
    third = [x for frames in _works(effects).get(1, []) for x in frames]
    assert [(x.work_id, x.bound) for x in third] == [(w.work_id, 5)]
    effects = core.receive([(Rank(1), Tag.RESULT, encode(_answer(third[0])), 0)])  # ran to its end
    effects += core.receive([(Rank(2), Tag.RESULT, encode(_answer(works[2][0])), 0)])
    assert [e.reason for e in effects if isinstance(e, Stop)] == ["work exhausted"]
    _apply_flush(core.tick(core.clock()), journal)
    assert journal.snapshot().done == 2 and core.stats.continued == 2


def test_an_item_cut_short_over_and_over_is_done_after_the_cap(tmp_path):
    core, journal, _, works = _started(tmp_path, seeds=2, depth=1)
    assert not _works(core.receive([(Rank(2), Tag.RESULT, encode(_answer(works[2][0])), 0)]))  # nothing left
    rank, w = 1, works[1][0]
    for n in range(MAX_CONTINUATIONS + 1):
        effects = core.receive([(Rank(rank), Tag.RESULT, encode(_answer(w, resume_at=n)), 0)])
        nxt = [x for frames in _works(effects).get(rank, []) for x in frames]
        if n < MAX_CONTINUATIONS:
            assert [x.bound for x in nxt] == [n]
            w = nxt[0]
    assert not nxt and [e.reason for e in effects if isinstance(e, Stop)] == ["work exhausted"]
    assert core.stats.continued == MAX_CONTINUATIONS and core.stats.continuations_dropped == 1


def test_only_an_ok_result_of_a_local_campaign_continues():
    item = WorkItem(WorkId("a" * 64), b"x", "s" * 64, "t", bound=3)
    ok = Result(DispatchToken("b" * 64), item.work_id, Status.OK, resume_at=7)
    assert continuation(item, ok, shared=False) == 7
    assert continuation(item, replace(ok, resume_at=1), shared=False) == 3  # never before its own bound
    assert continuation(item, replace(ok, resume_at=None), shared=False) is None
    assert continuation(item, replace(ok, status=Status.CRASH), shared=False) is None  # a claim, not a cut
    assert continuation(item, ok, shared=True) is None  # the store's item is done with its commit
    assert continuation(replace(item, continued=MAX_CONTINUATIONS), ok, shared=False) is None


def test_every_task_error_is_logged_as_task_error_a_minimizations_too(tmp_path):
    """The summary's hint for task errors is `symfence logs OUT --event task.error`: each error
    is that event, with its kind (a failed minimization was only `finding.minimize_failed`)."""
    core, journal, _, works = _started(tmp_path, depth=2, triage_base="concolic")
    effects = core.receive([(Rank(1), Tag.RESULT, encode(_crash(works[1][0], "first")), 0)])
    rerun = next(w for frames in _works(effects).get(2, []) for w in frames if w.bound == RERUN_BOUND)
    core.receive([(Rank(2), Tag.RESULT, encode(_crash(rerun, "first")), 0)])  # agrees: minimization owed
    effects = core.receive([(Rank(1), Tag.RESULT, encode(_answer(works[1][1])), 0)])  # a slot frees on rank 1
    minimize = next(w for frames in _works(effects).get(1, []) for w in frames if w.executor == "minimize")
    failed = Result(minimize.token, minimize.work_id, Status.ERROR, cost=Cost(0.001, 0.001, 0.0, 1),
                    cov_version=minimize.cov_version, error="the minimizer died (exit -11)")
    effects = core.receive([(Rank(1), Tag.RESULT, encode(failed), 0)])
    logged = [e.fields for e in effects if isinstance(e, Log) and e.event == "task.error"]
    assert [(f["kind"], f["error"]) for f in logged] == [("minimize", "the minimizer died (exit -11)")]


def test_a_minimization_that_does_not_reproduce_is_no_task_error(tmp_path):
    """The minimizer answers that the saved input does not reproduce (a flaky finding): not a
    task error of the summary, one `finding.flaky` warning, the finding kept as its own minimum."""
    core, journal, _, works = _started(tmp_path, depth=2, triage_base="concolic")
    effects = core.receive([(Rank(1), Tag.RESULT, encode(_crash(works[1][0], "first")), 0)])
    rerun = next(w for frames in _works(effects).get(2, []) for w in frames if w.bound == RERUN_BOUND)
    core.receive([(Rank(2), Tag.RESULT, encode(_crash(rerun, "first")), 0)])
    effects = core.receive([(Rank(1), Tag.RESULT, encode(_answer(works[1][1])), 0)])
    minimize = next(w for frames in _works(effects).get(1, []) for w in frames if w.executor == "minimize")
    answer = Result(minimize.token, minimize.work_id, Status.OK, cost=Cost(0.001, 0.001, 0.0, 1),
                    cov_version=minimize.cov_version, stats={"not_reproduced": 1})
    effects = core.receive([(Rank(1), Tag.RESULT, encode(answer), 0)])
    assert not [e for e in effects if isinstance(e, Log) and e.event == "task.error"]
    assert core.stats.task_errors == 0
    (done,) = [e for e in effects if isinstance(e, Minimized)]
    with structlog.testing.capture_logs() as logs:
        core.triage.done(done.item, done.result, done.source, done.found_s)
    assert [e["event"] for e in logs if e["log_level"] == "warning"] == ["finding.flaky"]
    assert core.triage.stats_items()["minimize_not_reproduced"] == 1
