"""The lease state machine (coordinator/journal/leases.py) on its own: no SQLite, no journal.

Every move is checked against the one transition table: a legal move lands where the table
says, an illegal one raises LeaseError (or, for a move fenced by a dispatch token that does not
hold the lease, answers False) and leaves every row exactly as it was.
"""

from __future__ import annotations

import ast
import copy
from pathlib import Path

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, initialize, invariant, rule

from symfence.coordinator.journal import RECOVERY_REASON, RETRY_REASON, TRANSITIONS, LeaseError, Leases, Move
from symfence.coordinator.journal import WorkState as S
from symfence.protocol.messages import Status

ROOT = Path(__file__).resolve().parent.parent
TOKEN, OTHER = "a" * 64, "b" * 64


def test_the_table_is_the_documented_lifecycle():
    assert {s: dict(moves) for s, moves in TRANSITIONS.items()} == {
        S.PENDING: {Move.LEASE: S.LEASED},
        S.LEASED: {Move.COMMIT: S.DONE, Move.REQUEUE: S.PENDING, Move.FAIL: S.FAILED, Move.VOID: S.PENDING},
        S.DONE: {},
        S.FAILED: {Move.RETRY: S.PENDING},
    }
    with pytest.raises(TypeError):
        TRANSITIONS[S.DONE][Move.RETRY] = S.PENDING  # type: ignore[index]


def _in_state(state: S) -> Leases:
    """A Leases with work item "w" brought to `state` by legal moves."""
    leases = Leases()
    leases.add("w", 0)
    if state is not S.PENDING:
        leases.lease("w", TOKEN)
    if state is S.DONE:
        assert leases.commit("w", TOKEN, Status.OK)
    if state is S.FAILED:
        assert leases.fail("w", TOKEN, "out of attempts")
    return leases


def _state_of(leases: Leases) -> tuple:
    return {w: copy.copy(r) for w, r in leases.items()}, {s: leases.count(s) for s in S}


@pytest.mark.parametrize("state", list(S))
def test_lease_of_anything_but_a_pending_item_raises_and_changes_nothing(state):
    leases = _in_state(state)
    leases.take_changed()
    before = _state_of(leases)
    if state is S.PENDING:
        assert leases.lease("w", TOKEN) == 1
        return
    with pytest.raises(LeaseError, match=f"cannot lease work w: it is {state.value}"):
        leases.lease("w", OTHER)
    assert _state_of(leases) == before and leases.take_changed() == set()


def test_a_move_of_an_unknown_item_raises():
    leases = Leases()
    with pytest.raises(LeaseError, match="unknown work"):
        leases.lease("nope", TOKEN)
    assert not leases.commit("nope", TOKEN, Status.OK)  # fenced: no lease, a stale result
    with pytest.raises(LeaseError):
        leases.add("w", 0) or leases.add("w", 1)


@pytest.mark.parametrize("state", list(S))
@pytest.mark.parametrize("move", ["commit", "requeue", "fail"])
def test_a_token_that_does_not_hold_the_lease_moves_nothing(state, move):
    leases = _in_state(state)
    leases.take_changed()
    before = _state_of(leases)
    call = {"commit": lambda t: leases.commit("w", t, Status.OK),
            "requeue": lambda t: leases.requeue("w", t, "cancelled", charge=False),
            "fail": lambda t: leases.fail("w", t, "out of attempts")}[move]
    assert call(OTHER) is False
    assert _state_of(leases) == before and leases.take_changed() == set()
    assert call(TOKEN) is (state is S.LEASED)


def test_only_the_lease_table_changes_a_work_items_state():
    """In the journal package, `.state` of a row is assigned in Leases._move alone, and rows
    are made only as new pending items (Leases.add) or loaded from the store (recovery.load)."""
    assigns, builds = [], []
    for path in sorted((ROOT / "coordinator" / "journal").glob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        for fn in ast.walk(tree):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(fn):
                targets = node.targets if isinstance(node, ast.Assign) else \
                    [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else []
                if any(isinstance(t, ast.Attribute) and t.attr == "state" for t in targets):
                    assigns.append((path.name, fn.name))
                if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "LeaseRow":
                    builds.append((path.name, fn.name))
    assert assigns == [("leases.py", "_move")]
    assert sorted(set(builds)) == [("leases.py", "add"), ("recovery.py", "_load_rows")]


class LeaseMachine(RuleBasedStateMachine):
    """Random sequences of moves on a few items, each checked against a model that follows
    TRANSITIONS (and only it) for where the item goes."""

    items = Bundle("items")

    @initialize()
    def start(self):
        self.leases = Leases()
        self.model: dict[str, dict] = {}  # work id -> state, token, attempts, reason, status
        self.changed: set[str] = set()
        self.tokens = 0

    def _target(self, work_id: str, move: Move) -> S | None:
        return TRANSITIONS[self.model[work_id]["state"]].get(move)

    def _expect_unchanged(self, before) -> None:
        assert _state_of(self.leases) == before

    @rule(target=items)
    def add(self):
        work_id = f"{len(self.model):064x}"
        self.leases.add(work_id, len(self.model))
        self.model[work_id] = dict(state=S.PENDING, token=None, attempts=0, reason="", status=None)
        self.changed.add(work_id)
        return work_id

    @rule(work_id=items)
    def lease(self, work_id):
        before = _state_of(self.leases)
        self.tokens += 1
        token = f"{self.tokens:064x}"
        new = self._target(work_id, Move.LEASE)
        if new is None:
            with pytest.raises(LeaseError):
                self.leases.lease(work_id, token)
            self._expect_unchanged(before)
            return
        m = self.model[work_id]
        assert self.leases.lease(work_id, token) == m["attempts"] + 1
        m.update(state=new, token=token)
        self.changed.add(work_id)

    def _token_for(self, work_id: str, right: bool) -> str:
        held = self.model[work_id]["token"]
        return held if right and held is not None else "f" * 64

    @rule(work_id=items, right=st.booleans(), status=st.sampled_from(list(Status)))
    def commit(self, work_id, right, status):
        token = self._token_for(work_id, right)
        self._fenced(work_id, token, Move.COMMIT, lambda: self.leases.commit(work_id, token, status),
                     token=None, status=status)

    @rule(work_id=items, right=st.booleans(), charge=st.booleans())
    def requeue(self, work_id, right, charge):
        token = self._token_for(work_id, right)
        m = self.model[work_id]
        self._fenced(work_id, token, Move.REQUEUE,
                     lambda: self.leases.requeue(work_id, token, "expired", charge=charge),
                     token=None, reason="expired", attempts=m["attempts"] + charge)

    @rule(work_id=items, right=st.booleans())
    def fail(self, work_id, right):
        token = self._token_for(work_id, right)
        m = self.model[work_id]
        self._fenced(work_id, token, Move.FAIL, lambda: self.leases.fail(work_id, token, "out"),
                     token=None, reason="out", attempts=m["attempts"] + 1)

    def _fenced(self, work_id, held, move, call, **after) -> None:
        m = self.model[work_id]
        holds = m["state"] is S.LEASED and m["token"] == held
        before = _state_of(self.leases)
        if not holds:
            assert call() is False
            self._expect_unchanged(before)
            return
        new = self._target(work_id, move)
        assert new is not None  # the table allows every fenced move out of leased
        assert call() is True
        m.update(state=new, **after)
        self.changed.add(work_id)

    @rule()
    def retry_failed(self):
        moved = [w for w in self.model if self._target(w, Move.RETRY) is not None]
        assert self.leases.retry_failed() == len(moved)
        for w in moved:
            self.model[w].update(state=self._target(w, Move.RETRY), attempts=0, reason=RETRY_REASON)
        self.changed.update(moved)

    @rule()
    def void_leases(self):
        moved = [w for w in self.model if self._target(w, Move.VOID) is not None]
        assert self.leases.void_leases() == len(moved)
        for w in moved:
            self.model[w].update(state=self._target(w, Move.VOID), token=None, reason=RECOVERY_REASON)
        self.changed.update(moved)

    @rule()
    def take_changed(self):
        assert self.leases.take_changed() == self.changed
        self.changed = set()

    @invariant()
    def rows_match_the_model(self):
        for work_id, m in self.model.items():
            row = self.leases.get(work_id)
            assert (row.state, row.token, row.attempts, row.reason, row.status) == (
                m["state"], m["token"], m["attempts"], m["reason"], m["status"])
            assert (row.state is S.LEASED) == (row.token is not None)
            assert (row.state is S.DONE) == (row.status is not None)
        for state in S:
            assert self.leases.count(state) == sum(m["state"] is state for m in self.model.values())


LeaseMachine.TestCase.settings = settings(max_examples=150, stateful_step_count=40, deadline=None)
test_random_moves_follow_the_table = LeaseMachine.TestCase
