"""The AFL++ sync importer: each queue entry read once and only once afl-fuzz finished writing
it, the cursor contiguous and rebuilt from origins, and a restarted afl-fuzz (renumbered queue)
read as a new session. No MPI, no AFL++: files are written the way afl-fuzz writes them."""

from __future__ import annotations

import os
import random
import subprocess
import sys
import time
from pathlib import Path

from symfence.coordinator.aflsync import SkipReason, SyncExporter, SyncImporter


class Clock:
    """One fake time for both of the importer's clocks (monotonic and wall)."""

    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def write_entry(queue: Path, eid: int, data: bytes, *, at: float, tail: str = ",src:000000,op:havoc") -> Path:
    path = queue / f"id:{eid:06d}{tail}"
    path.write_bytes(data)
    os.utime(path, (at, at))
    return path


def importer(sync: Path, clock: Clock, **kw) -> SyncImporter:
    return SyncImporter(sync, "symfence", max_bytes=64, settle_s=1.0, gap_timeout_s=10.0,
                        clock=clock, wall=clock, **kw)


def imported(imp: SyncImporter) -> list[tuple[str, int, bytes]]:
    return [(i.instance, i.entry_id, i.data) for i in imp.poll()]


def test_an_entry_is_read_only_once_settled_and_never_partly(tmp_path):
    clock = Clock()
    queue = tmp_path / "afl" / "queue"
    queue.mkdir(parents=True)
    imp = importer(tmp_path, clock)
    path = write_entry(queue, 0, b"", at=clock.now)  # afl-fuzz has created it, not written it
    assert imported(imp) == []
    clock.now += 0.5
    path.write_bytes(b"ab")  # a first part
    os.utime(path, (clock.now, clock.now))
    assert imported(imp) == []  # changed since the last poll, and fresh
    clock.now += 0.5
    path.write_bytes(b"abcd")
    os.utime(path, (clock.now, clock.now))
    assert imported(imp) == []
    clock.now += 0.5
    assert imported(imp) == []  # unchanged, but for less than settle_s
    clock.now += 0.5
    assert imported(imp) == [("afl", 0, b"abcd")]  # unchanged for settle_s
    assert imported(imp) == []  # never twice
    write_entry(queue, 1, b"old", at=clock.now - 5)  # written long ago (e.g. before a --resume)
    assert imported(imp) == [("afl", 1, b"old")]  # settled at first sight
    assert imp.next_id == {"afl": 2}


def test_a_missing_id_stops_the_cursor_until_it_is_back_or_gone_for_good(tmp_path):
    clock = Clock()
    queue = tmp_path / "afl" / "queue"
    queue.mkdir(parents=True)
    imp = importer(tmp_path, clock)
    old = clock.now - 5
    for eid in (0, 2, 3):
        write_entry(queue, eid, bytes([eid + 1]), at=old)
    # id 1 is being rewritten by a trim (unlink, create, write): nothing past it is read yet
    assert imported(imp) == [("afl", 0, b"\x01")]
    clock.now += 0.5
    write_entry(queue, 1, b"\x02trimmed", at=clock.now)
    assert imported(imp) == []  # back, but fresh
    clock.now += 1.0
    assert imported(imp) == [("afl", 1, b"\x02trimmed"), ("afl", 2, b"\x03"), ("afl", 3, b"\x04")]
    # an id that stays missing is skipped once gap_timeout_s has passed, the rest is not held up
    write_entry(queue, 5, b"\x06", at=old)
    assert imported(imp) == []
    clock.now += 9.9
    assert imported(imp) == []
    clock.now += 0.2
    assert imported(imp) == [("afl", 5, b"\x06")]
    assert imp.skipped[SkipReason.VANISHED] == 1


def test_skips_our_own_copies_empty_and_oversized_entries(tmp_path):
    clock = Clock()
    queue = tmp_path / "afl" / "queue"
    queue.mkdir(parents=True)
    (tmp_path / "symfence" / "queue").mkdir(parents=True)
    write_entry(tmp_path / "symfence" / "queue", 0, b"ours", at=clock.now - 100, tail=",orig:seed,qid:000000")
    write_entry(queue, 0, b"ours", at=clock.now - 100, tail=",sync:symfence,src:000000,+cov")
    write_entry(queue, 1, b"", at=clock.now - 100)
    write_entry(queue, 2, b"x" * 65, at=clock.now - 100)
    write_entry(queue, 3, b"fine", at=clock.now - 100)
    imp = importer(tmp_path, clock)
    assert imported(imp) == [("afl", 3, b"fine")]
    assert imp.skipped == {SkipReason.OURS: 1, SkipReason.EMPTY: 1, SkipReason.TOO_LARGE: 1}


def test_cursor_and_session_come_back_from_the_journal_origins(tmp_path):
    clock = Clock()
    queue = tmp_path / "afl" / "queue"
    queue.mkdir(parents=True)
    for eid in range(6):
        write_entry(queue, eid, bytes([eid + 1]), at=clock.now - 5)
    imp = importer(tmp_path, clock)
    imp.remember(["seed", "sync:afl:000001", "sync:afl:000003", "sync:afl@2:000001", "sync:other:000009"])
    assert imp.session == {"afl": 2, "other": 0}
    assert imported(imp) == [("afl@2", 2, b"\x03"), ("afl@2", 3, b"\x04"), ("afl@2", 4, b"\x05"),
                             ("afl@2", 5, b"\x06")]


def test_a_restarted_afl_fuzz_is_a_new_session(tmp_path):
    """afl-fuzz started again on its directory replaces queue/ and renumbers the old entries."""
    clock = Clock()
    inst = tmp_path / "afl"
    (inst / "queue").mkdir(parents=True)
    for eid, data in enumerate([b"a", b"b", b"c"]):
        write_entry(inst / "queue", eid, data, at=clock.now - 5)
    imp = importer(tmp_path, clock)
    assert [i[2] for i in imported(imp)] == [b"a", b"b", b"c"]
    imp.watch("afl")  # what AflSide does before starting afl-fuzz again
    os.rename(inst / "queue", inst / "_resume")  # AFL_AUTORESUME
    (inst / "queue").mkdir()
    for eid, data in enumerate([b"c", b"b", b"a", b"new"]):
        write_entry(inst / "queue", eid, data, at=clock.now - 2, tail=",time:0,execs:0,orig:x")
    got = imported(imp)
    assert [(t, e) for t, e, _ in got] == [("afl@1", 0), ("afl@1", 1), ("afl@1", 2), ("afl@1", 3)]
    assert {f"sync:{t}:{e:06d}" for t, e, _ in got}.isdisjoint({"sync:afl:000000", "sync:afl:000001"})
    # a later --resume (a new importer) continues the session from the counters and the origins,
    # also when the session imported nothing new (every entry already in the corpus)
    for origins in (["sync:afl:000002", *(f"sync:{t}:{e:06d}" for t, e, _ in got)], ["sync:afl:000002"]):
        again = importer(tmp_path, clock)
        again.restore(imp.state())
        again.remember(origins)
        assert again.tag("afl") == "afl@1"
    assert [e for _, e, _ in imported(again)] == [0, 1, 2, 3]
    # afl-fuzz started again while symfence was not running: seen from the saved directory
    later = importer(tmp_path, clock)
    later.restore(imp.state())
    os.rename(inst / "queue", inst / "_resume2")
    (inst / "queue").mkdir()
    write_entry(inst / "queue", 0, b"c", at=clock.now - 2)
    assert imported(later) == [("afl@2", 0, b"c")]
    assert later.state()["afl_sync_session:afl"] == 2


WRITER = r"""
import os, sys, time, random
queue, count, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rng = random.Random(seed)
def name(i):
    return os.path.join(queue, "id:%06d,src:000000,op:havoc" % i)
def write(i, data):  # afl-fuzz: open(O_CREAT|O_EXCL), write, close; here in two writes
    fd = os.open(name(i), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.write(fd, data[: len(data) // 2]); time.sleep(rng.random() * 0.002); os.write(fd, data[len(data) // 2:])
    os.close(fd)
for i in range(count):
    write(i, (b"%06d" % i) * 40)
    if i and rng.random() < 0.5:  # trim an earlier entry: unlink, create, write
        j = rng.randrange(i)
        os.unlink(name(j)); time.sleep(rng.random() * 0.002)
        write(j, (b"%06d" % j) * rng.randrange(1, 20))
"""


def test_a_concurrent_writer_never_yields_partial_missing_or_repeated_entries(tmp_path):
    """Real clocks, a real process writing and trimming entries while the importer polls."""
    queue = tmp_path / "afl" / "queue"
    queue.mkdir(parents=True)
    imp = SyncImporter(tmp_path, "symfence", max_bytes=4096, settle_s=1.0, gap_timeout_s=60)
    count = 300
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(queue), str(count), str(random.randrange(1 << 30))])
    got = []
    deadline = time.monotonic() + 60
    while (writer.poll() is None or imp.next_id.get("afl", 0) < count) and time.monotonic() < deadline:
        got.extend(imp.poll())
        time.sleep(0.01)
    writer.wait(timeout=10)
    assert writer.returncode == 0
    ids = [i.entry_id for i in got]
    assert ids == list(range(count))  # every entry, in order, once
    for i in got:  # a whole version of the entry: never empty, never cut short
        unit = b"%06d" % i.entry_id
        assert i.data and len(i.data) % len(unit) == 0 and i.data == unit * (len(i.data) // len(unit))
        assert len(i.data) in (240, *range(6, 120, 6))


def test_exported_ids_are_contiguous_and_continue_after_a_restart(tmp_path):
    from dataclasses import dataclass

    @dataclass(frozen=True)
    class Entry:
        queue_id: int
        data: bytes
        parent: int | None
        origin: str

    entries = [Entry(0, b"s", None, "seed"), Entry(1, b"t", 0, "engine"), Entry(2, b"u", None, "sync:afl:000000"),
               Entry(3, b"v", 1, "engine")]
    exp = SyncExporter(tmp_path, "symfence")
    assert exp.export(entries[:2]) == 2
    again = SyncExporter(tmp_path, "symfence")  # a --resume: state from the directory itself
    assert again.export(entries) == 1
    names = sorted(p.name for p in (tmp_path / "symfence" / "queue").iterdir())
    assert names == ["id:000000,orig:seed,qid:000000", "id:000001,src:000000,op:symfence,qid:000001",
                     "id:000002,src:000001,op:symfence,qid:000003"]
