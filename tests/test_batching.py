"""Batched frames: several results (or WORKs) in one frame, each still fenced by its own token.

The wire (protocol/codec.py): a batch's items are single frames byte for byte; a fault of the
batch is one verdict, a fault of one item is that item's alone. The fence (protocol/fence.py)
judges the items lazily, so a token repeated in one batch is a duplicate. The coordinator
(coordinator/core.py) commits or quarantines each, in order, and loses none. The worker (worker/sender.py,
worker/loop.py) holds finished results only while the coordinator need not hear sooner. A real
MPI job ends the file: a hand-written rank answers every WORK frame with one batch that mixes
genuine, stale, duplicate, malformed and incompatible results.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path

import msgpack
import pytest

from bench.bench_loop import offline_campaign
from symfence.coordinator.campaign import Campaign
from symfence.coordinator.config import ConfigError, parse
from symfence.coordinator.journal import Journal
from symfence.coordinator.pump import Inbound
from symfence.protocol.codec import (
    LocalProtocolError,
    RemoteProtocolError,
    decode_result,
    decode_result_frame,
    decode_work_frame,
    encode,
    encode_batch,
    result_to_map,
)
from symfence.protocol.fence import classify_frame
from symfence.protocol.ids import DispatchToken, Rank, WorkId, sha256_hex
from symfence.protocol.messages import Cost, Result, Status, Tag, Work
from symfence.protocol.reasons import Reason
from symfence.protocol.rules import MAX_BATCH, Limits
from symfence.worker.loop import Worker
from symfence.worker.sender import ResultSender
from tests.mpi_helpers import MPIEXEC, ROOT, Run, synthetic_cfg, toml_dump


def _tok() -> str:
    return secrets.token_hex(32)


def _result(token: str | None = None, work_id: str | None = None, **kw) -> Result:
    return Result(DispatchToken(token or _tok()), WorkId(work_id or _tok()), Status.OK,
                  cost=Cost(0.001, 0.001, 0.0, 1), **kw)


def _item(**changes) -> bytes:
    m = result_to_map(_result())
    m.update(changes)
    return msgpack.packb(m, use_bin_type=True)


# ------------------------------------------------------------------------------------- the wire


def test_a_batch_is_its_items_frames_and_decodes_to_them_in_order():
    results = [_result() for _ in range(5)]
    frames = [encode(r) for r in results]
    batch = encode_batch("results", frames)
    obj = msgpack.unpackb(batch, raw=False)
    assert obj["kind"] == "results" and obj["v"] == 1
    assert [msgpack.packb(i, use_bin_type=True) for i in obj["items"]] == frames  # byte for byte
    assert decode_result_frame(batch) == results
    assert decode_result_frame(frames[0]) == [results[0]]  # a single frame is a batch of one


def test_a_bad_item_is_its_own_error_and_leaves_the_others():
    good = [_result() for _ in range(3)]
    hinted = _tok()
    items = [encode(good[0]), _item(status="bogus", token=hinted), encode(good[1]),
             msgpack.packb(42), _item(v=2), _item(v="1"), encode(good[2])]
    out = decode_result_frame(encode_batch("results", items))
    assert [o for o in out if isinstance(o, Result)] == good
    errors = [(i, o.reason) for i, o in enumerate(out) if isinstance(o, RemoteProtocolError)]
    assert errors == [(1, Reason.MALFORMED), (3, Reason.MALFORMED), (4, Reason.INCOMPATIBLE),
                      (5, Reason.MALFORMED)]
    assert out[1].token == hinted  # the item's token is kept for the log line


@pytest.mark.parametrize("frame", [
    msgpack.packb({"v": 1, "kind": "results", "items": []}),
    msgpack.packb({"v": 1, "kind": "results", "items": {"a": 1}}),
    msgpack.packb({"v": 1, "kind": "results"}),
    msgpack.packb({"v": 1, "kind": "results", "items": [1] * (MAX_BATCH + 1)}),
])
def test_a_fault_of_the_batch_itself_is_one_error(frame):
    with pytest.raises(RemoteProtocolError) as exc:
        decode_result_frame(frame)
    assert exc.value.reason is Reason.MALFORMED


def test_a_batch_is_no_single_result_and_the_encoder_keeps_the_rules():
    batch = encode_batch("results", [encode(_result()), encode(_result())])
    with pytest.raises(RemoteProtocolError):
        decode_result(batch)  # the single-result decoder refuses a batch
    with pytest.raises(LocalProtocolError):
        encode_batch("results", [])
    with pytest.raises(LocalProtocolError):
        encode_batch("results", [encode(_result())] * (MAX_BATCH + 1))
    small = Limits(max_message_bytes=2048)
    with pytest.raises(LocalProtocolError):
        encode_batch("results", [encode(_result())] * 20, small)


def test_works_batch_round_trip():
    works = [Work(DispatchToken(_tok()), WorkId(_tok()), b"x" * i, sha256_hex(b"x" * i), "synthetic", "t", i,
                  {"task_ms": 1.0}) for i in range(4)]
    assert decode_work_frame(encode_batch("works", [encode(w) for w in works])) == works


def test_max_batch_is_checked_by_the_config():
    assert parse({"campaign": {"executor": "synthetic"}})["mpi.max_batch"] == 32
    with pytest.raises(ConfigError, match="mpi.max_batch"):
        parse({"campaign": {"executor": "synthetic"}, "mpi": {"max_batch": MAX_BATCH + 1}})
    with pytest.raises(ConfigError, match="mpi.max_batch"):
        parse({"campaign": {"executor": "synthetic"}, "mpi": {"max_batch": 0}})


# ------------------------------------------------------------------------------------- the fence


class _View:
    """The fence's view of a dispatch table: tokens in flight on a rank; committing moves a
    token to `committed` (what the coordinator does between two verdicts)."""

    def __init__(self, inflight: dict[str, tuple[int, str]]) -> None:
        self.inflight = dict(inflight)
        self.committed: set[str] = set()
        self.banned_ranks: set[int] = set()

    def owner(self, token):
        return self.inflight[token][0] if token in self.inflight else None

    def work_id_of(self, token):
        return self.inflight[token][1] if token in self.inflight else None

    def recently_committed(self, token):
        return token in self.committed

    def revoked(self, token):
        return False

    def in_flight_count(self, rank):
        return sum(1 for r, _ in self.inflight.values() if r == rank)

    def banned(self, rank):
        return rank in self.banned_ranks

    def commit(self, token):
        del self.inflight[token]
        self.committed.add(token)


def test_the_fence_judges_each_item_after_the_one_before_is_applied():
    a, b, other = (_tok(), _tok()), (_tok(), _tok()), (_tok(), _tok())
    view = _View({a[0]: (1, a[1]), b[0]: (1, b[1]), other[0]: (2, other[1])})
    items = [encode(_result()),  # stale: never issued, the rank has dispatches in flight
             encode(_result(*a)), encode(_result(*a)),  # current, then its repeat: duplicate
             _item(status="bogus"),  # malformed
             encode(_result(other[0], other[1])),  # another rank's token: misrouted
             encode(_result(b[0], _tok())),  # b's token with another work_id: mismatched
             encode(_result(*b))]  # still current: the mismatched item did not commit it
    reasons = []
    for verdict in classify_frame(encode_batch("results", items), Rank(1), view):
        reasons.append(verdict.reason)
        if verdict.reason is Reason.CURRENT:
            view.commit(verdict.result.token)
    assert reasons == [Reason.STALE, Reason.CURRENT, Reason.DUPLICATE, Reason.MALFORMED, Reason.MISROUTED,
                       Reason.MISMATCHED, Reason.CURRENT]


def test_items_after_a_ban_are_banned_and_a_banned_rank_is_not_decoded():
    view = _View({})
    frame = encode_batch("results", [encode(_result()) for _ in range(3)])
    verdicts = classify_frame(frame, Rank(1), view)
    assert next(verdicts).reason is Reason.UNOWNED
    view.banned_ranks.add(1)  # the coordinator banned it for what the first cost it
    assert [v.reason for v in verdicts] == [Reason.BANNED, Reason.BANNED]
    assert [v.reason for v in classify_frame(b"\xc1 not even msgpack", Rank(1), view)] == [Reason.BANNED]


# ------------------------------------------------------------------------------------- the coordinator


async def _campaign(tmp_path: Path, depth: int, max_batch: int) -> Campaign:
    cfg = parse({"campaign": {"executor": "synthetic", "duration_s": 0}, "mpi": {"max_batch": max_batch},
                 "dispatch": {"depth": depth}, "synthetic": {"seeds": 40, "task_ms": 0},
                 "limits": {"max_refused_share": 1.0}})
    # 2 workers, each offering max_batch in its HELLO (our workers: MAX_BATCH)
    c, _ = offline_campaign(cfg, tmp_path / "out", workers=2, max_batch=max_batch)
    return c


def _works_sent(c: Campaign, rank: int) -> list[Work]:
    works = [w for dest, tag, frame in c.pump.out if dest == rank and tag == Tag.WORK
             for w in decode_work_frame(frame)]
    c.pump.out = [m for m in c.pump.out if m[0] != rank]
    return works


async def test_the_coordinator_commits_and_quarantines_each_item_of_a_mixed_batch(tmp_path):
    c = await _campaign(tmp_path, depth=4, max_batch=8)
    frames = [f for dest, tag, f in c.pump.out if dest == 1 and tag == Tag.WORK]
    assert len(frames) == 1, "the first fill sends rank 1 its 4 WORKs in one frame"
    works = _works_sent(c, 1)
    assert len(works) == 4
    answers = [encode(_result(w.token, w.work_id)) for w in works]
    items = [encode(_result()),  # stale
             answers[0], answers[0],  # current, duplicate
             _item(status="bogus"), msgpack.packb([1, 2]), _item(v=7),  # malformed, malformed, incompatible
             *answers[1:]]
    c._on_batch([Inbound(1, Tag.RESULT, encode_batch("results", items))])
    s = c.stats
    assert s.committed == 4
    assert s.results_received == len(items)
    q = c.stats.quarantine
    assert (q[Reason.STALE], q[Reason.DUPLICATE], q[Reason.MALFORMED], q[Reason.INCOMPATIBLE]) == (1, 1, 2, 1)
    assert q.total == len(items) - 4  # none lost: every item committed or counted
    assert all(ok for _, ok in s.conservation(len(c.inflight)))
    refill = _works_sent(c, 1)
    assert len(refill) == 4  # its 4 slots were refilled, in one frame again
    c.journal.close()


async def test_max_batch_1_sends_one_work_per_frame(tmp_path):
    c = await _campaign(tmp_path, depth=4, max_batch=1)
    frames = [f for dest, tag, f in c.pump.out if dest == 1 and tag == Tag.WORK]
    assert len(frames) == 4 and all(len(decode_work_frame(f)) == 1 for f in frames)
    c.journal.close()


# ------------------------------------------------------------------------------------- the worker's sender


def test_held_results_go_in_batches_of_at_most_max_batch_in_order():
    out: list[bytes] = []
    sender = ResultSender(out.append)
    sender.max_batch = 3
    results = [_result() for _ in range(7)]
    for r in results[:5]:
        sender.hold(r.token, r)
    assert len(out) == 1  # the 4th result flushed the full batch of 3 first
    sender.flush()
    sender.send(results[5].token, results[5])  # at once, after nothing held
    sender.hold(results[6].token, results[6])
    sender.flush()
    got = [r for frame in out for r in decode_result_frame(frame)]
    assert got == results
    assert (sender.sent, sender.frames) == (7, 4)


def test_held_results_never_exceed_the_message_size():
    out: list[bytes] = []
    limits = Limits(max_message_bytes=64 << 10)
    sender = ResultSender(out.append, limits)
    sender.max_batch = MAX_BATCH
    big = [_result(error="e" * 20_000) for _ in range(6)]
    for r in big:
        sender.hold(r.token, r)
    sender.flush()
    assert len(out) == 2 and all(len(f) <= limits.max_message_bytes for f in out)  # 3 of ~20 KB fit in 64 KiB
    assert [r.token for f in out for r in decode_result_frame(f, limits)] == [r.token for r in big]


# ------------------------------------------------------------------------------------- a real job

pytest_mpi = pytest.mark.mpi


@pytest_mpi
def test_a_rank_sending_mixed_batches_loses_nothing_and_gets_nothing_past_the_fence(tmp_path):
    """coordinator + 1 honest worker + the batch rank (tests/batch_rank.py) at depth 4: every
    seed is committed exactly once, every junk item is counted under its reason, the honest
    worker really batched."""
    seeds = 600
    cfg = synthetic_cfg(synthetic={"seeds": seeds, "task_ms": 0.5}, dispatch={"depth": 4},
                        mpi={"max_batch": 8, "hold_ms": 5.0}, peers={"ban_garbage": 0},
                        limits={"max_refused_share": 1.0})
    out, config, report = tmp_path / "out", tmp_path / "campaign.toml", tmp_path / "batch_rank.json"
    config.write_text(toml_dump(cfg))
    cmd = [MPIEXEC, "-n", "2", sys.executable, "-m", "symfence.coordinator", "--config", str(config),
           "--out", str(out), "--no-status",
           ":", "-n", "1", sys.executable, str(ROOT / "tests" / "batch_rank.py"), str(report)]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        stdout, stderr = proc.communicate(timeout=90)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        stdout, stderr = proc.communicate()
        raise AssertionError(f"job hung\n{stdout[-3000:]}\n{stderr[-3000:]}") from None
    run = Run(proc.returncode, stdout, stderr, out)
    assert run.code == 0, run.explain()
    sent = json.loads(report.read_text())
    s = run.stats()
    assert int(s["committed"]) == seeds
    assert sent["genuine"] > 0 and sent["batched_work_frames"] > 0  # it got WORK batches and answered
    assert int(s["committed_rank_2"]) == sent["genuine"]
    for reason in ("stale", "duplicate", "malformed", "incompatible"):
        assert int(s[f"quarantined_{reason}"]) == sent[reason], reason
    assert "VIOLATED" not in run.stdout
    journal = Journal.read_only(out / "journal.sqlite")
    assert journal.snapshot().done == seeds  # each seed's work done once, none lost
    journal.close()
    finished = [e for e in run.worker_events() if e["event"] == "worker.finished"]
    assert len(finished) == 1 and finished[0]["results_sent"] == int(s["committed_rank_1"])
    assert finished[0]["result_frames"] < finished[0]["results_sent"]  # the honest worker batched


# ------------------------------------------------------------------------------------- the worker's loop


class _Endpoint:
    """A worker's MPI side without MPI: rank 0 keeps `depth` no-op WORKs in flight (refilled as
    results arrive, in one frame per refill) and records every frame the worker sends."""

    rank = 1

    def __init__(self, depth: int, total: int) -> None:
        self.depth, self.total, self.issued = depth, total, 0
        self.inbox: list[tuple[int, int, bytes]] = []
        self.frames: list[tuple[int, bytes]] = []
        self.results: list[Result] = []
        self.options = {"task_ms": 0.0}
        self.in_transit: list[tuple[int, int, bytes]] = []

    def poll(self, source: int = 0, limit: int = 64) -> list[tuple[int, int, bytes]]:
        out, self.inbox = self.inbox[:limit], self.inbox[limit:]
        self.inbox += self.in_transit  # a refill arrives one poll after the results it answers
        self.in_transit = []
        return out

    def send(self, dest: int, tag: int, frame: bytes) -> None:
        self.frames.append((tag, frame))
        if tag == Tag.RESULT:
            got = [r for r in decode_result_frame(frame) if isinstance(r, Result)]
            self.results += got
            self.refill(len(got))

    def refill(self, n: int) -> None:
        frames = []
        for _ in range(min(n, self.total - self.issued)):
            data = secrets.token_bytes(8)
            self.issued += 1
            work = Work(DispatchToken(_tok()), WorkId(_tok()), data, sha256_hex(data), "synthetic", "t", 0,
                        self.options)
            frames.append(encode(work))
        if frames:
            frame = frames[0] if len(frames) == 1 else encode_batch("works", frames)
            self.in_transit.append((0, Tag.WORK, frame))

    def flush(self, timeout_s: float = 5.0) -> bool:
        return True


def _serve(depth: int, max_batch: int, total: int = 200) -> _Endpoint:
    ep = _Endpoint(depth, total)
    w = Worker(ep, ep, lambda path, rank: None)
    w.sender.max_batch, w.hold_s, w.heartbeat_s = max_batch, 1.0, 3600.0
    ep.refill(depth)
    ep.inbox, ep.in_transit = ep.in_transit, []
    until = time.monotonic() + 30
    while len(ep.results) < total and time.monotonic() < until:
        w.stopping = False
        w._receive()
        if w.running is None and w.queue:
            w._start(w.queue.popleft())
        w._flush_held(float("inf"))
        if w.running is not None and (outcome := w._wait(0.01)) is not None:
            w._finish(outcome)
    assert len(ep.results) == total, "every WORK answered"
    return ep


@pytest.mark.parametrize("depth, max_batch, batched", [(8, 32, True), (4, 32, True), (2, 32, False),
                                                       (8, 1, False)])
def test_the_worker_holds_results_only_while_another_dispatch_runs(depth, max_batch, batched):
    ep = _serve(depth, max_batch)
    result_frames = [f for tag, f in ep.frames if tag == Tag.RESULT]
    sizes = [len(decode_result_frame(f)) for f in result_frames]
    share = max(1, min(depth // 2, max_batch))
    assert max(sizes) <= share  # never more than half the depth held
    assert (len(result_frames) < len(ep.results)) is batched
    # With no-op tasks and refills as they are asked for, nearly every frame is full: a result
    # is not sent alone because few dispatches wait queued (that made 1.3 per frame at depth 4).
    assert sum(sizes) / len(sizes) >= 0.9 * share, sizes


def test_checked_options_are_checked_once_frozen_and_encode_as_a_plain_map():
    from symfence.protocol.codec import checked_options

    opts = checked_options({"task_ms": 1.0, "name": "x"})
    with pytest.raises(TypeError):
        opts["task_ms"] = 2.0
    with pytest.raises(LocalProtocolError, match="'bad'"):
        checked_options({"bad": [1, 2]})
    data = b"abc"
    work = Work(DispatchToken(_tok()), WorkId(_tok()), data, sha256_hex(data), "synthetic", "t", 0, opts)
    assert encode(work) == encode(Work(work.token, work.work_id, data, work.sha256, "synthetic", "t", 0,
                                       dict(opts)))
