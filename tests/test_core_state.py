"""Issue 28's owned state, without MPI: the dispatch table's one record per token, the member table's
transitions (which the fence and peers.py read), and that these state modules are sans-IO."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from symfence.coordinator.inflight import InFlight, Revocation
from symfence.coordinator.members import TRANSITIONS, Event, Members, MemberState
from symfence.coordinator.peers import PeerPolicy, Peers, PeerState
from symfence.coordinator.scheduler import WorkItem
from symfence.protocol.codec import encode
from symfence.protocol.fence import classify_frame
from symfence.protocol.ids import DispatchToken, Rank, TokenMinter
from symfence.protocol.messages import Result, Status
from symfence.protocol.reasons import Reason

ROOT = Path(__file__).resolve().parent.parent
# The coordinator's state modules: plain state and pure decisions, no MPI, threads, files or logs.
SANS_IO = ("coordinator/members.py", "coordinator/inflight.py", "coordinator/peers.py",
           "coordinator/scheduler.py", "coordinator/verdict.py", "coordinator/engines.py")
IO = {"mpi4py", "asyncio", "structlog", "uvloop", "sqlite3", "threading", "socket", "os", "shutil", "pathlib"}


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module.split(".")[0])
    return names


@pytest.mark.parametrize("name", SANS_IO)
def test_the_state_modules_are_sans_io(name):
    bad = _imports(ROOT / name) & IO
    assert not bad, f"{name} imports {sorted(bad)}"


def _item(n: int) -> WorkItem:
    return WorkItem(f"{n:064x}", b"x", "0" * 64, "t")


def test_one_record_per_token_carries_the_leased_item_until_commit_or_revoke():
    minter, table = TokenMinter(b"\0" * 32), InFlight(window=8)
    a, b = minter.mint(Rank(1)), minter.mint(Rank(1))
    table.add(a, Rank(1), _item(1).work_id, 0.0, 5.0, _item(1))
    table.add(b, Rank(1), _item(2).work_id, 0.0, None, _item(2))
    assert table.get(a).item == _item(1) and table.get(a).rank == 1 and len(table) == 2
    with pytest.raises(ValueError):  # a token is never in flight twice (a minter bug, loud)
        table.add(a, Rank(2), _item(3).work_id, 0.0, None, _item(3))
    assert table.commit(a).item == _item(1)  # the commit gets the item from the record ...
    assert table.revoke(b, Revocation.EXPIRED).item == _item(2)  # ... and so does a revocation
    assert len(table) == 0 and table.recently_committed(a) and table.revoked(b)
    assert table.occupied(Rank(1)) == 1  # the expired one may still be held by its worker


def test_member_transitions_follow_the_table_and_refuse_the_rest():
    m = Members([Rank(1), Rank(2), Rank(3)])
    assert m.state(Rank(1)) is MemberState.NEW and not m.alive
    assert m.hello(Rank(1)) and not m.hello(Rank(1)) and m.alive == {1}
    assert m.lose(Rank(1)) and not m.lose(Rank(1)) and m.state(Rank(1)) is MemberState.LOST and not m.alive
    assert m.readmit(Rank(1)) and m.alive == {1}
    assert m.ban(Rank(1)) and not m.ban(Rank(1)) and m.banned(Rank(1)) and not m.alive
    assert not m.readmit(Rank(1)) and not m.hello(Rank(1))  # banned is for good
    assert m.fail(Rank(1)) and not m.banned(Rank(1)) and not m.fail(Rank(1))  # failed is terminal
    assert not m.ban(Rank(1)) and not m.hello(Rank(1))
    to = {MemberState.NEW: [], MemberState.ALIVE: [Event.HELLO], MemberState.LOST: [Event.HELLO, Event.LOSE],
          MemberState.BANNED: [Event.BAN], MemberState.FAILED: [Event.FAIL]}
    for state in MemberState:  # every move from every state, on a fresh table each
        for event in Event:
            t, r = Members([Rank(9)]), Rank(9)
            for e in to[state]:
                assert t._move(r, e)
            after = TRANSITIONS.get((state, event))
            assert t._move(r, event) == (after is not None)
            assert t.state(r) is (after or state)  # a move the table does not list changes nothing
            assert (r in t.alive) == (t.state(r) is MemberState.ALIVE)
            assert t.banned(r) == (t.state(r) is MemberState.BANNED)


def test_lost_ranks_get_one_heartbeat_and_silence_is_judged_on_alive_ranks_only():
    m = Members([Rank(1), Rank(2)])
    m.hello(Rank(1)), m.hello(Rank(2))
    m.heard(Rank(1), 0.0), m.heard(Rank(2), 5.0)
    assert m.silent(6.0, limit_s=2.0) == [1]
    m.lose(Rank(1))
    assert m.beat_targets(set()) == [1, 2] and m.beat_targets(set()) == [2]  # the lost one once
    m.readmit(Rank(1))
    assert m.beat_targets({2}) == [1]  # beaten as alive ...
    m.lose(Rank(1))
    assert m.beat_targets({2}) == [1] and m.beat_targets({2}) == []  # ... lost again: once more
    m.postpone(10.0)
    assert m.silent(16.0, limit_s=2.0) == []


def test_the_ban_has_one_owner_that_the_fence_and_the_peers_read():
    members = Members([Rank(1), Rank(2)])
    peers = Peers(PeerPolicy(), clock=lambda: 0.0, members=members)
    table = InFlight(window=8, banned=members.banned)
    members.hello(Rank(1))
    token = DispatchToken("a" * 64)
    frame = encode(Result(token, "b" * 64, Status.OK))
    assert [v.reason for v in classify_frame(frame, Rank(1), table)] == [Reason.UNOWNED]
    assert peers.ban(Rank(1)) and not peers.ban(Rank(1)) and peers.banned_total == 1
    assert members.state(Rank(1)) is MemberState.BANNED and peers.state(Rank(1)) is PeerState.BANNED
    assert [v.reason for v in classify_frame(frame, Rank(1), table)] == [Reason.BANNED]
    assert peers.capacity(Rank(1), 4) == 0 and peers.capacity(Rank(2), 4) == 4
    members.fail(Rank(2))
    assert not peers.ban(Rank(2))  # a failed rank cannot be banned (it never comes back anyway)
